"""The code base stays ruff clean."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _ruff() -> list[str]:
    if shutil.which("ruff"):
        return ["ruff"]
    pytest.importorskip("ruff")
    return [sys.executable, "-m", "ruff"]


def test_ruff_check_is_clean() -> None:
    out = subprocess.run([*_ruff(), "check", "--no-cache", "."], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
