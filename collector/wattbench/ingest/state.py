"""The collector's status file, `<state dir>/collector-<id>.json`.

`wattbench status` reads it, and a restarted collector resumes its per-device accounting from it, and
its bridged plugs' numbering (`plugs`, saved in the same snapshot as the accounting).
It is replaced atomically (write a temporary file, then rename), so a reader or a restart never sees
half a file.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .validate import dumps

log = logging.getLogger("wattbench.cli.collect")

STATE_VERSION = 1


def state_path(state_dir: str | Path, collector_id: str) -> Path:
    return Path(state_dir) / f"collector-{collector_id}.json"


class StateFile:
    def __init__(self, state_dir: str | Path, collector_id: str) -> None:
        self.collector_id = collector_id
        self.path = state_path(state_dir, collector_id)

    def accounts(self) -> dict[str, Any] | None:
        """The accounting saved by this collector id, or None when there is none to resume from
        (no file, an unreadable one, another format version or another collector's)."""
        return self._section("accounts")

    def plugs(self) -> dict[str, Any] | None:
        """The bridged plugs' state saved with that accounting (bridge.Bridge.state()), or None."""
        return self._section("plugs")

    def _section(self, name: str) -> dict[str, Any] | None:
        try:
            doc = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(doc, dict):
            return None
        if doc.get("state_version") != STATE_VERSION or doc.get("id") != self.collector_id:
            return None
        section = doc.get(name) or {}
        return section if isinstance(section, dict) else None

    def write(self, body: Mapping[str, Any]) -> None:
        """Replace the file with body under the version, id and process header. A failure is logged,
        not raised: the status file is a report and a resume point, never a reason to stop ingesting."""
        doc = {"state_version": STATE_VERSION, "id": self.collector_id, "pid": os.getpid(), **body}
        tmp = self.path.with_suffix(".tmp")
        try:
            tmp.write_bytes(dumps(doc))
            os.replace(tmp, self.path)
        except OSError as exc:
            log.warning("cannot write the status file %s: %s", self.path, exc)
