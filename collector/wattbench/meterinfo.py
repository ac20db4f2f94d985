"""What each meter kind says of itself beyond its driver, read from its folder's analyzer.json
(firmware/wattbench_fw/meters/<kind>/): its ranges and accuracy as an analyzer has them, the datasheet
they come from, and whether its power is simulated. A meter is its folder and one row of the
firmware's table; this file lives in the folder too, so no list of meter kinds grows elsewhere. The
file is package data the host reads; `wattbench flash` deploys only the drivers' code, so a board
never holds it."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from wattbench_fw.meters import KINDS


@cache
def meter_info(kind: str) -> dict[str, Any]:
    """The kind's analyzer.json; {} for a kind without one (a sensor, or an unknown kind)."""
    if kind not in KINDS:
        return {}
    try:
        text = (resources.files("wattbench_fw.meters") / kind / "analyzer.json").read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        return {}
    doc = json.loads(text)
    return doc if isinstance(doc, dict) else {}


def simulated_kinds() -> frozenset[str]:
    """The meter kinds whose power is modelled, not measured."""
    return frozenset(k for k in KINDS if meter_info(k).get("simulated"))


def described_kinds() -> tuple[str, ...]:
    """The meter kinds that have an analyzer.json."""
    return tuple(k for k in KINDS if meter_info(k))
