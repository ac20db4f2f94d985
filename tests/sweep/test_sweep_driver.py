"""The driver walks a plan and publishes valid phase events; Ctrl-C ends a run cleanly."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sweep_synth import MemoryStore

from wattbench.core import contract
from wattbench.core.evaluate import evaluate
from wattbench.core.plan import (
    Phase,
    Timing,
    calibrated_rate,
    concurrency_plan,
    level_name,
    parse_levels,
    specpower_plan,
)
from wattbench.sweep.driver import Driver, new_run_id
from wattbench.sweep.publish import Fanout, MemorySink, StoreSink
from wattbench.workloads.base import WorkloadDefaults

FAST = Timing(pre_s=0.05, measure_s=0.2, post_s=0.05, gap_s=0.02)


class CountingWorkload(WorkloadDefaults):
    """Completes ops at a fixed rate while running (calibration: 1000/s, paced: the rate asked for),
    computed from the clock so tests do not depend on scheduling."""

    name = "counting"
    window = "fixed"
    overrun_s = 0.0
    ops_unit = "ops"
    calibrates = True

    def __init__(self, interrupt_in: str | None = None) -> None:
        self.rate = 0.0
        self.t0 = time.monotonic()
        self.base = 0.0
        self.phases: list[tuple[str, float | None]] = []
        self.interrupt_in = interrupt_in
        self.closed = 0
        self.opened = 0
        self._mark = 0

    def _now_total(self) -> float:
        return self.base + self.rate * (time.monotonic() - self.t0)

    def _set(self, rate: float) -> None:
        self.base = self._now_total()
        self.t0 = time.monotonic()
        self.rate = rate

    def open(self) -> None:
        self.opened += 1

    def start_phase(self, phase: Phase, rate: float | None) -> None:
        self.phases.append((phase.name, rate))
        self._set(1000.0 if rate is None else rate)

    def start_measure(self) -> None:
        if self.phases[-1][0] == self.interrupt_in:
            raise KeyboardInterrupt
        self._mark = self.completed()

    def measure_done(self) -> bool:
        return False

    def end_measure(self) -> int:
        return self.completed() - self._mark

    def end_phase(self) -> None:
        self._set(0.0)

    def completed(self) -> int:
        return int(self._now_total())

    def close(self) -> None:
        self.closed += 1


def test_plan_defaults_are_specpower() -> None:
    plan = specpower_plan()
    assert [p.name for p in plan.phases] == [
        "cal1", "cal2", "cal3", "l100", "l90", "l80", "l70", "l60", "l50", "l40", "l30", "l20", "l10", "idle",
    ]  # fmt: skip
    t = plan.phases[0].timing
    assert (t.pre_s, t.measure_s, t.post_s, t.gap_s) == (30, 240, 30, 10)
    assert plan.duration_s() == 14 * 300 + 13 * 10  # about 72 minutes
    assert next(p.name for p in plan.scored) == "l100"
    with pytest.raises(ValueError):
        specpower_plan(calibrations=2)
    with pytest.raises(ValueError):
        specpower_plan(calibrations=11)
    assert len(specpower_plan(calibrations=10).calibrations) == 10
    assert parse_levels("100,50%,25") == (1.0, 0.5, 0.25)
    assert parse_levels("1.0,50%,0.25") == (1.0, 0.5, 0.25)
    # Unmarked entries above 1 are percentages, up to 1 fractions: a list with both is read two ways,
    # and "10,5,1" ran 10 %, 5 % and 100 %.
    for mixed in ("10,5,1", "100,75,0.5", "100,50%,0.25"):
        with pytest.raises(ValueError, match="mixes percentages and fractions"):
            parse_levels(mixed)
    assert level_name(0.125) == "l12.5"
    with pytest.raises(ValueError):
        parse_levels("120")
    offs = specpower_plan(timing=Timing(1, 2, 3, 4)).offsets()
    assert offs[1][1:] == (10.0, 11.0, 13.0, 16.0)
    assert calibrated_rate([5.0]) == 5.0


def test_driver_publishes_every_boundary() -> None:
    sink = MemorySink()
    plan = specpower_plan(timing=FAST)
    wl = CountingWorkload()
    record = Driver("run-1", plan, wl, sink, channels=["bench/psu"]).run()
    ev = sink.events
    assert ev == record.events
    assert len(ev) == 1 + 14 * 4 + 1
    assert [e["n"] for e in ev] == list(range(len(ev)))
    assert (
        ev[0]["event"] == "run_start"
        and ev[0]["channels"] == ["bench/psu"]
        and ev[0]["workload"] == "counting"
    )
    # the system under test, as found on this machine (validated with the event by MemorySink)
    assert ev[0]["sut"]["cores"] == os.cpu_count() and ev[0]["sut"].get("kernel")
    assert ev[-1]["event"] == "run_end"
    assert all(a["t"] <= b["t"] for a, b in itertools.pairwise(ev))
    for e in ev:
        contract.validate_phase(e)
    per_phase = [e["event"] for e in ev if e["phase"] == "l50"]
    assert per_phase == ["phase_start", "measure_start", "measure_end", "phase_end"]
    assert record.calibrated == pytest.approx(1000.0, rel=0.05)
    rates = dict(wl.phases)
    assert rates["cal1"] is None and rates["idle"] == 0.0
    assert rates["l70"] == pytest.approx(0.7 * record.calibrated)
    l70 = next(e for e in ev if e["phase"] == "l70" and e["event"] == "phase_start")
    assert l70["target"] == 0.7 and l70["rate"] == pytest.approx(0.7 * record.calibrated)
    assert wl.opened == 1 and wl.closed == 1
    assert record.interrupted is None


def test_a_calibration_interval_without_ops_stops_the_run() -> None:
    """One calibration interval that completed nothing (a workload that printed no count) made the
    calibrated throughput the mean of 0 and the other's, and the 100 % level then read 199.9 %."""

    class SilentInCal2(CountingWorkload):
        def end_measure(self) -> int:
            ops = super().end_measure()
            return 0 if self.phases[-1][0] == "cal2" else ops

    record = Driver("run-0", specpower_plan(timing=FAST), SilentInCal2(), MemorySink()).run()
    assert record.interrupted == (
        "workload failed during cal2: cal2 measured no completed ops: the workload did no work"
    )
    assert record.calibrated is None


def test_interrupt_gives_a_partial_invalid_result() -> None:
    sink = MemorySink()
    store = MemoryStore()
    wl = CountingWorkload(interrupt_in="l70")
    plan = specpower_plan(timing=FAST)
    record = Driver("run-2", plan, wl, Fanout([sink, StoreSink(store)])).run()
    assert record.interrupted == "interrupted by operator during l70"
    assert sink.events[-1]["event"] == "run_abort" and sink.events[-1]["reason"] == record.interrupted
    assert wl.closed >= 1
    assert store.phases("run-2") == sink.events
    ev = evaluate("run-2", record.events, None, [], planned=record.planned, interrupted=record.interrupted)
    contract.validate_result(ev.result)
    assert ev.result["partial"] is True and ev.result["valid"] is False


@pytest.mark.parametrize("stopped_in", ["cal2", "cal3"])
def test_a_sweep_stopped_in_calibration_claims_no_calibrated_throughput(stopped_in: str) -> None:
    """The calibrated throughput is the mean of the last two planned calibration intervals. Stopped before
    cal3 completed, the intervals measured are the first ones, which run low: the partial result has
    no calibrated throughput, and the report says why."""
    from wattbench.report.table import render_evaluation
    from wattbench.sweep.session import SweepSetup, run_sweep

    plan = specpower_plan(timing=FAST)
    setup = SweepSetup(run="run-cal", plan=plan, workload=CountingWorkload(interrupt_in=stopped_in))
    ev = run_sweep(setup).evaluation
    contract.validate_result(ev.result)
    assert ev.result["partial"] is True and ev.result["valid"] is False
    assert ev.calibrated is None and "calibrated" not in ev.result, ev.result
    text = render_evaluation(ev)
    assert f"no calibrated throughput: the run stopped before {stopped_in} completed" in text, text


def test_a_sweep_stopped_after_calibration_keeps_its_calibrated_throughput() -> None:
    from wattbench.sweep.session import SweepSetup, run_sweep

    plan = specpower_plan(timing=FAST)
    setup = SweepSetup(run="run-cal", plan=plan, workload=CountingWorkload(interrupt_in="l100"))
    ev = run_sweep(setup).evaluation
    assert ev.result["calibrated"] == pytest.approx(1000.0, rel=0.05)
    assert ev.result["calibrated"] == pytest.approx(sum(r for _, r in ev.calibration[1:]) / 2)


def test_concurrency_plan_needs_no_calibration() -> None:
    plan = concurrency_plan((1, 2), timing=FAST)
    assert [(p.name, p.kind, p.copies) for p in plan.phases] == [
        ("c1", "concurrency", 1),
        ("c2", "concurrency", 2),
        ("idle", "idle", None),
    ]

    class Jobs(CountingWorkload):
        window = "until_done"
        overrun_s = 0.0
        calibrates = False

        def measure_done(self) -> bool:
            return True

        def end_measure(self) -> int:
            return 2 if self.phases[-1][0] == "c2" else (1 if self.phases[-1][0] == "c1" else 0)

    sink = MemorySink()
    Driver("run-3", plan, Jobs(), sink).run()
    ends = {e["phase"]: e for e in sink.events if e["event"] == "measure_end"}
    assert ends["c2"]["copies"] == 2 and ends["c2"]["ops"] == 2
    starts = {e["phase"]: e["t"] for e in sink.events if e["event"] == "measure_start"}
    assert ends["c2"]["t"] - starts["c2"] < 200  # closed as soon as the work was done
    assert ends["idle"]["t"] - starts["idle"] >= 190  # idle keeps its planned window


def test_run_id_is_valid() -> None:
    rid = new_run_id()
    contract.validate_phase(
        {"v": 1, "run": rid, "n": 0, "t": 1767225600000, "event": "run_start", "phase": "run"}
    )


@pytest.mark.timeout(180)
def test_ctrl_c_on_the_real_command(tmp_path: Path) -> None:
    """SIGINT to `wattbench sweep` mid-run: exit 130, the load stops, a partial invalid result is printed."""
    out = tmp_path / "result.json"
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "wattbench.cli", "sweep", "--quiet", "--workers", "1",
            "--pre", "0.2", "--measure", "1", "--post", "0.1", "--gap", "0",
            "--levels", "100,50,10", "--json-out", str(out), "--run", "ctrlc-test", "--ops-only",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )  # fmt: skip
    import psutil

    time.sleep(4.0)  # inside the target loads, after calibration
    children = psutil.Process(proc.pid).children(recursive=True)
    assert children, "the workload runs in worker processes"
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal would: the whole process group
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "INVALID" in stdout
    import json

    result = json.loads(out.read_text())
    contract.validate_result(result)
    assert result["partial"] is True and result["valid"] is False
    complete = next(c for c in result["checks"] if c["name"] == "complete")
    assert complete["reason"].startswith("interrupted by operator during")
    _gone, alive = psutil.wait_procs(children, timeout=5)
    assert not alive, "worker processes left running"


@pytest.mark.parametrize("stopped_in", ["cal1", "open"])
def test_a_run_that_ends_before_its_first_window_sends_nothing(stopped_in: str) -> None:
    """Stopped in cal1's ramp-up, or by a workload that cannot start: no window was measured, so
    nothing goes to the broker or the store (a run_start with nothing after it would be a run that
    `wattbench report latest` shows, empty); the record still says why it stopped."""
    from wattbench.workloads.base import WorkloadError

    class Failing(CountingWorkload):
        def open(self) -> None:
            if stopped_in == "open":
                raise WorkloadError("cannot start 'mybenchh': no such program")

    sink = MemorySink()
    wl = Failing(interrupt_in=stopped_in)
    record = Driver("run-none", specpower_plan(timing=FAST), wl, sink).run()
    assert sink.events == [] and sink.results == []
    assert not record.measured
    assert record.interrupted and record.interrupted.startswith(
        "interrupted by operator during cal1" if stopped_in == "cal1" else "workload failed during run"
    )
    assert wl.closed >= 1


def test_the_held_events_go_out_in_order_once_the_first_window_closes() -> None:
    sink = MemorySink()
    record = Driver(
        "run-cal2", specpower_plan(timing=FAST), CountingWorkload(interrupt_in="cal2"), sink
    ).run()
    assert record.measured
    assert sink.events == record.events
    assert [e["n"] for e in sink.events] == list(range(len(sink.events)))
    first = ["run_start", "phase_start", "measure_start", "measure_end"]
    assert [e["event"] for e in sink.events][:4] == first


def test_run_sweep_stores_and_publishes_nothing_for_a_run_without_a_window() -> None:
    from wattbench.sweep.session import NothingMeasured, SweepSetup, run_sweep

    sink = MemorySink()
    setup = SweepSetup(
        run="run-none",
        plan=specpower_plan(timing=FAST),
        workload=CountingWorkload(interrupt_in="cal1"),
        extra_sinks=[sink],
    )
    with pytest.raises(NothingMeasured, match="interrupted by operator during cal1") as caught:
        run_sweep(setup)
    assert caught.value.record.interrupted == "interrupted by operator during cal1"
    assert sink.events == [] and sink.results == []
