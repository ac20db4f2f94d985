"""Fixtures for the firmware tests: the MicroPython WebAssembly runner, the firmware paths, and the
firmware compiled for MicroPython's unix port."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from wattbench_devkit import unix
from wattbench_devkit.mpy import micropython_available, run_micropython


@pytest.fixture
def mpy() -> Callable[..., list[Any]]:
    """run_micropython, or a clean skip when node or the npm package is missing."""
    reason = micropython_available()
    if reason:
        pytest.skip(reason)
    return run_micropython


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The firmware and the port shim as .mpy files for the unix-port interpreter (its MICROPYPATH).
    Skipped where the interpreter cannot run here; in CI, sources without a built interpreter fail."""
    reason = unix.unix_available()
    if reason:
        if os.environ.get("CI") and unix.SOURCE.is_dir():
            pytest.fail(reason)
        pytest.skip(reason)
    return unix.compile_lib(tmp_path_factory.mktemp("upy-lib"))
