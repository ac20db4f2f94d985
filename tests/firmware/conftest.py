"""Fixtures for the firmware tests: the MicroPython WebAssembly runner and the firmware paths."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from mpy import micropython_available, run_micropython  # noqa: E402


@pytest.fixture
def mpy() -> Callable[..., list[Any]]:
    """run_micropython, or a clean skip when node or the npm package is missing."""
    reason = micropython_available()
    if reason:
        pytest.skip(reason)
    return run_micropython
