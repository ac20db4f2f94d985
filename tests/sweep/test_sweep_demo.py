"""`wattbench demo` end to end, with windows of a second: embedded broker, host-mode appliance,
collector into the embedded store, all 14 phases, the table and the HTML report."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(300)


def test_demo_runs_everything(tmp_path: Path) -> None:
    pytest.importorskip("wattbench_fw.host")
    html = tmp_path / "demo.html"
    store = tmp_path / "demo.sqlite"
    temp = tmp_path / "temp"  # the demo's own temporary folders
    temp.mkdir()
    proc = subprocess.run(
        [
            sys.executable, "-m", "wattbench.cli", "demo", "--quiet",
            "--measure", "1", "--pre", "0.5", "--post", "0.2", "--gap", "0.1",
            "--html", str(html), "--store", str(store),
        ],
        capture_output=True,
        text=True,
        timeout=280,
        cwd=tmp_path,
        env=dict(os.environ, TMPDIR=str(temp)),
    )  # fmt: skip
    # 0 valid, 1 invalid, as for `wattbench sweep`.
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "Target Load" in out and "Active Idle" in out and "∑ops / ∑power = " in out
    # Valid or not (1 s windows on a shared machine may well not be), the run ends with one line that
    # says which, and why not.
    (result_line,) = [ln for ln in out.splitlines() if ln.startswith("demo result: ")]
    # A valid demo says which standard its measurement meets: 1 s windows are no EE HPC WG level (a
    # core phase is at least a minute) and not SPEC-comparable.
    assert result_line == (
        "demo result: VALID as no EE HPC WG level, not SPEC-comparable"
        if proc.returncode == 0
        else result_line
    )
    assert proc.returncode == 0 or result_line.startswith("demo result: INVALID: ")
    if "INVALID" in result_line:
        assert " failed" in result_line, result_line
    # the last line is one line to copy, not wrapped at 80 columns when stdout is no terminal
    assert out.splitlines()[-1].endswith(f"; re-render with: wattbench report {run_of(out)} --store {store}")
    page = html.read_text()
    assert page.startswith("<!doctype html>") and "<svg" in page and "Compliance" in page

    db = sqlite3.connect(store)
    (run,) = db.execute("SELECT DISTINCT run FROM wb_phase").fetchone()
    phases = {p for (p,) in db.execute("SELECT DISTINCT phase FROM wb_phase WHERE phase != 'run'")}
    assert len(phases) == 14
    (doc,) = db.execute("SELECT doc FROM wb_result WHERE run = ? AND phase = 'overall'", (run,)).fetchone()
    result = json.loads(doc)
    assert [lv["phase"] for lv in result["levels"]][-1] == "idle"
    assert len(result["levels"]) == 11  # every level has power: the collector stored the samples
    assert db.execute("SELECT COUNT(*) FROM wb_sample").fetchone()[0] > 40  # 2 Hz through a 37 s run
    # The store was the user's: the collector's state and spool and the appliance's flash are gone.
    assert list(temp.iterdir()) == []


def run_of(out: str) -> str:
    """The run id the demo names in its last line."""
    return out.split("re-render with: wattbench report ", 1)[1].split()[0]


def test_the_demo_meter_rides_out_a_stall_of_its_process(tmp_path: Path) -> None:
    """The demo's meter shares the machine it measures: at 10 Hz a stall of the demo process by 0.18 s
    (a hypervisor taking the core) missed a reading, and a run whose every level held failed no_gaps."""
    pytest.importorskip("wattbench_fw.host")
    from wattbench.cli.demo import appliance_config
    from wattbench_fw.sampler import Channel, Sampler

    class Clock:
        now = 0

        def __call__(self) -> int:
            return self.now

        def utc_us(self, mono: int) -> int:
            return 1_763_709_600_000_000 + mono

        def sample_flags(self) -> int:
            return 0

    class Seq:
        next = 0

        def take(self) -> int:
            self.next += 1
            return self.next - 1

    class Meter:
        def setup(self) -> None:
            pass

        def read(self) -> tuple[dict[str, float], int]:
            return {"W": 100.0}, 0

    (ch_cfg,) = appliance_config(tmp_path, "127.0.0.1:1883")["channels"]
    t = Clock()
    ch = Channel(ch_cfg["c"], Meter(), ch_cfg["hz"], 1)
    sampler = Sampler([ch], Seq(), t, t)
    sampler.start()
    rows = sampler.poll()
    for _ in range(20):
        t.now = ch.next_due + 300_000  # woken a third of a second late, every slot
        rows += sampler.poll()
    assert ch.missed_slots == 0 and all("f" not in r for r in rows), rows


def test_the_demo_runs_on_a_broker_it_is_given(tmp_path: Path, mosquitto: Any) -> None:
    """`--broker` puts the whole chain on the user's Mosquitto instead of the embedded broker: the
    given broker is checked once before anything starts, then carries the samples and phase events."""
    pytest.importorskip("wattbench_fw.host")
    store = tmp_path / "demo.sqlite"
    proc = subprocess.run(
        [
            sys.executable, "-m", "wattbench.cli", "demo", "--quiet", "--broker", mosquitto.url,
            "--measure", "1", "--pre", "0.5", "--post", "0.2", "--gap", "0.1",
            "--html", str(tmp_path / "demo.html"), "--store", str(store),
        ],
        capture_output=True,
        text=True,
        timeout=280,
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"broker: {mosquitto.url}" in proc.stdout.splitlines()
    assert any(ln.startswith("demo result: ") for ln in proc.stdout.splitlines())
    db = sqlite3.connect(store)
    assert db.execute("SELECT COUNT(DISTINCT phase) FROM wb_phase WHERE phase != 'run'").fetchone()[0] == 14
