"""firmware/manifest.py, for users who freeze the package into their own MicroPython image, names every
module a board runs (the ones `wattbench flash` copies) and nothing else."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from wattbench.cli import flash

MANIFEST = Path(__file__).resolve().parents[2] / "firmware" / "manifest.py"


def test_manifest_names_every_module_a_board_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, dict[str, Any]]] = []

    def package(path: str, **kw: Any) -> None:
        calls.append((path, kw))

    # MicroPython's manifest tool runs a manifest from its own folder; the driver folders are found there.
    monkeypatch.chdir(MANIFEST.parent)
    exec(compile(MANIFEST.read_text(), str(MANIFEST), "exec"), {"package": package})
    assert len(calls) == 1
    path, kw = calls[0]
    assert path == "wattbench_fw" and kw.get("opt") == 2
    want = {p.relative_to(flash.PACKAGE).as_posix() for p in flash.firmware_files()}
    assert sorted(kw["files"]) == sorted(want)
    assert "host.py" not in kw["files"]
    for f in kw["files"]:
        assert (MANIFEST.parent / "wattbench_fw" / f).is_file(), f
