"""The built-in workload's pacing when a worker falls behind: the backlog of a stall before a window is
not worked off inside the window, and a worker far behind drops arrivals instead of bursting to catch
up. Only upper bounds are asserted: a busy machine may make the worker slower, never faster."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from wattbench.sweep.plan import Phase, Timing
from wattbench.workloads.builtin import workers as builtin_workers
from wattbench.workloads.builtin.workers import BuiltinWorkload

RATE = 400.0  # arrivals/s for one worker: a small part of a core, so it keeps up when it runs
L50 = Phase("l50", "target", Timing(pre_s=0.1, measure_s=1.0, post_s=0.1, gap_s=0.0), target=0.5)


@pytest.fixture
def paced() -> Iterator[tuple[BuiltinWorkload, int]]:
    wl = BuiltinWorkload(workers=1)
    wl.open()
    try:
        wl.start_phase(L50, RATE)
        time.sleep(0.3)
        yield wl, wl._procs[0].pid
    finally:
        wl.close()


def _most(seconds: float) -> float:
    """The most a Poisson count at RATE over `seconds` plausibly reaches (mean + 6 sigma, + 2)."""
    mean = RATE * seconds
    return mean + 6 * math.sqrt(mean) + 2


def test_a_stall_before_the_window_is_not_worked_off_inside_it(paced: tuple[BuiltinWorkload, int]) -> None:
    wl, pid = paced
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(1.0)  # about RATE arrivals fall due and wait
        t0 = time.monotonic()
        wl.start_measure()
    finally:
        os.kill(pid, signal.SIGCONT)
    time.sleep(1.0)
    ops = wl.end_measure()
    window = time.monotonic() - t0
    assert ops <= _most(window), f"{ops} ops in a {window:.2f} s window at {RATE:g}/s"


def test_a_worker_far_behind_drops_arrivals_instead_of_bursting(paced: tuple[BuiltinWorkload, int]) -> None:
    wl, pid = paced
    t0 = time.monotonic()
    wl.start_measure()
    time.sleep(0.5)
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(1.5)
    finally:
        os.kill(pid, signal.SIGCONT)
    time.sleep(0.5)
    ops = wl.end_measure()
    window = time.monotonic() - t0
    # At most MAX_LAG_S of the stopped time is made up; the rest of its arrivals are dropped.
    kept = window - 1.5 + builtin_workers.MAX_LAG_S
    assert ops <= _most(kept), f"{ops} ops; without the stall's dropped arrivals at most {_most(kept):.0f}"


def test_workers_can_run_at_lower_priority() -> None:
    wl = BuiltinWorkload(workers=2, nice=5)
    wl.open()
    try:
        base = os.getpriority(os.PRIO_PROCESS, 0)
        assert [os.getpriority(os.PRIO_PROCESS, p.pid) for p in wl._procs] == [min(base + 5, 19)] * 2
    finally:
        wl.close()


def test_the_one_core_job_does_not_burst_after_a_stall_either() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "wattbench.workloads.builtin", "--seconds", "3", "--rate", f"{RATE:g}"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    try:
        first = proc.stdout.readline()  # pacing has begun
        assert first.startswith("ops="), first
        os.kill(proc.pid, signal.SIGSTOP)
        time.sleep(1.2)
        os.kill(proc.pid, signal.SIGCONT)
        out = proc.stdout.read()
    finally:
        proc.kill()
        proc.wait(10)
    ops = int(out.strip().splitlines()[-1].removeprefix("ops="))
    kept = 3.0 - 1.2 + builtin_workers.MAX_LAG_S
    assert ops <= _most(kept), f"{ops} ops; without the stall's dropped arrivals at most {_most(kept):.0f}"
