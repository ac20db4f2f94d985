"""The demo's busy-machine warning counts what other processes do as the run begins: not the load
average, which still carries a run that ended a minute ago, and not the demo's own broker, collector,
appliance and workers."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from wattbench.cli import demo
from wattbench.sweep import cpuuse

BUSY_LOOP = [sys.executable, "-c", "while True: pass"]


def _measure_elsewhere(window_s: float) -> float:
    """other_cpu_use as a process that is no parent of the test's children sees it."""
    code = f"from wattbench.sweep.cpuuse import other_cpu_use; print(other_cpu_use({window_s}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    return float(out.stdout)


def test_a_busy_process_of_another_session_counts() -> None:
    busy = subprocess.Popen(BUSY_LOOP, start_new_session=True)
    try:
        time.sleep(0.3)
        # It keeps about one core busy; on a machine shared with other work it may get a bit less.
        assert _measure_elsewhere(1.5) >= 0.5
    finally:
        busy.kill()
        busy.wait()


def test_this_process_and_its_children_are_not_others() -> None:
    busy = subprocess.Popen(BUSY_LOOP)
    try:
        time.sleep(0.3)
        t0, c0 = time.monotonic(), cpuuse.tree_cpu_s()
        time.sleep(1.5)
        ours = (cpuuse.tree_cpu_s() - c0) / (time.monotonic() - t0)
    finally:
        busy.kill()
        busy.wait()
    # The child's time is this tree's, so other_cpu_use takes it off the machine's. (On a machine
    # shared with other sessions the child may get only a share of a core, hence the low bound.)
    assert ours >= 0.1


def test_the_load_average_of_a_finished_run_does_not_make_the_machine_busy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A demo started right after another read the previous run's decaying load average as a busy
    machine and warned that it may well be INVALID."""
    monkeypatch.setattr(os, "getloadavg", lambda: (1.9, 1.4, 0.8))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(demo, "other_cpu_use", lambda window_s: 0.03)
    assert demo.machine_note() is None
    monkeypatch.setattr(demo, "other_cpu_use", lambda window_s: 1.2)
    note = demo.machine_note()
    assert note is not None and "1.2 of its 2 cores" in note
