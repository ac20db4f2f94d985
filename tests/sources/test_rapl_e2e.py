"""RAPL end to end: a powercap-shaped tree whose package counter rises at a known rate (and wraps
mid-run), read by the real host-mode appliance beside a simulated wall meter, published through real
Mosquitto, stored by the collector in the embedded store and scored by a short sweep.

The component channel is never summed into server power: the sweep sums the wall meter only and says
why it left the package out. Named with `wattbench report --channel`, the package is scored, each
level equal to the counter's rate within 0.1 %, and the report says it is component power and claims
no measurement standard."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .e2e import sweep_with

pytestmark = [pytest.mark.services, pytest.mark.timeout(300)]

DEV = "rapl-e2e"
PKG_W = 47.5
WALL_W = 150.0
RANGE_UJ = 262143328850


# The counter is a named pipe served by a process of its own, so that its value is computed while the
# meter reads it, as a CPU's counter is when sysfs is read. As a plain file rewritten every half
# millisecond it was as stale as its writer was late, and the suite's other workers delayed the writer
# by tens of ms even at a real-time priority (CI: l50 0.7 % high); a late writer now only widens the
# meter's clock bracket around the read, which the meter sees and reads again. Each value is padded to
# 64 bytes, what the meter reads at most, so that a read ends without waiting for the writer to close.
# The writer then waits for the reader to close before it serves the next one: a value left in the pipe
# for a reader that opened meanwhile would be stale again.
COUNTER = """
import fcntl, os, select, struct, sys, termios, time
try:
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
except (AttributeError, PermissionError, OSError):
    pass
fifo, start_uj, watts, top = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
t0 = time.monotonic()

def unread(fd):
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\\0" * 4))[0]

print("ready", flush=True)
while True:
    fd = os.open(fifo, os.O_WRONLY)  # waits for a reader
    gone = select.poll()
    gone.register(fd, 0)  # POLLERR only: no reader left
    try:
        while True:
            uj = (start_uj + round(watts * 1e6 * (time.monotonic() - t0))) % (top + 1)
            os.write(fd, str(uj).ljust(63).encode() + b"\\n")
            left = False
            while unread(fd) and not left:
                left = bool(gone.poll(1))
            # Taken: the reader closes next. One still there after 20 ms opened after it and is waiting.
            if left or gone.poll(20):
                break
    except BrokenPipeError:
        pass
    finally:
        os.close(fd)
"""


class Counter:
    """energy_uj as a CPU gives it: PKG_W joules a second since start_uj, wrapping at the range, the
    value taken at the moment it is read."""

    def __init__(self, zone: Path, start_uj: int) -> None:
        fifo = zone / "energy_uj"
        os.mkfifo(fifo)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", COUNTER, str(fifo), str(start_uj), str(PKG_W), str(RANGE_UJ)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline() == "ready\n"

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


def test_rapl_package_power_end_to_end(tmp_path: Path, mosquitto: Any) -> None:
    from wattbench.core import contract

    zone = tmp_path / "powercap" / "intel-rapl:0"
    zone.mkdir(parents=True)
    (zone / "name").write_text("package-0\n")
    (zone / "max_energy_range_uj").write_text(f"{RANGE_UJ}\n")
    # About 8 s from the top of the range: the counter wraps during the run.
    counter = Counter(zone, RANGE_UJ - round(PKG_W * 8e6))
    pkg = {
        "c": "pkg0",
        "meter": "rapl",
        "hz": 10,
        "role": "component",
        "node": "node1",
        "opts": {"root": str(zone.parent), "domain": "intel-rapl:0"},
    }
    try:
        # The appliance stays a thread of this process here: run as a process of its own beside
        # stress-ng this test passed 5 of 8 (single package readings up to 49 % off), in a thread 8 of 8
        # (docs/testing.md). Not explained yet.
        run = sweep_with(tmp_path, mosquitto, DEV, [pkg], sim_watts=WALL_W, in_process=True)
    finally:
        counter.stop()
    outcome, notes = run.outcome, run.notes

    # Unnamed, the sweep sums the wall meter only and says why the package is left out.
    ev = outcome.evaluation
    assert [s.key for s in outcome.channels] == [f"{DEV}/sim"]
    assert any(f"{DEV}/pkg0: role component, not summed" in n for n in notes), notes
    for row in ev.result["levels"]:
        assert row["W"] == pytest.approx(WALL_W, rel=1e-3), row["phase"]

    # Named, the package alone is scored: every level is the counter's rate.
    p = run.report("--channel", f"{DEV}/pkg0", "--json")
    assert "Traceback" not in p.stderr, p.stderr
    # The sweep stored its result; naming another channel scores the run again rather than showing it.
    assert "--channel" in p.stderr and "scored again" in p.stderr
    doc = json.loads(p.stdout)
    contract.validate("report", doc)
    result = doc["result"]
    assert [(c["dev"], c["ch"], c["role"]) for c in result["channels"]] == [(DEV, "pkg0", "component")]
    levels = {r["phase"]: r for r in result["levels"]}
    assert set(levels) == {"l100", "l50", "idle"}
    for phase, row in levels.items():
        assert row["W"] == pytest.approx(PKG_W, rel=1e-3), phase
        assert row["samples"] >= 25  # 10 Hz over a 3 s window
    st = result["standard"]
    assert st["eehpc_level"] == 0 and not st["spec"]
    assert f"{DEV}/pkg0 measure a component, not wall power" in st["statement"]

    text = run.report("--channel", f"{DEV}/pkg0").stdout
    assert "component (summed: named; not wall power)" in text
