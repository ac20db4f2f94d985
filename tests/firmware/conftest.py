"""Fixtures for the firmware tests: the MicroPython WebAssembly runner and the firmware paths."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from wattbench_devkit.mpy import micropython_available, run_micropython


@pytest.fixture
def mpy() -> Callable[..., list[Any]]:
    """run_micropython, or a clean skip when node or the npm package is missing."""
    reason = micropython_available()
    if reason:
        pytest.skip(reason)
    return run_micropython
