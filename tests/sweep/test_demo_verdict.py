"""The demo's last word on a run: one line, naming every failed check with where and by how much."""

from __future__ import annotations

import argparse
from pathlib import Path
from types import SimpleNamespace

import pytest

from wattbench.cli.demo import busy_note as demo_busy
from wattbench.cli.demo import verdict
from wattbench.core.compliance import Check
from wattbench.core.score import LevelScore


def _evaluation(valid: bool, checks: list[Check]) -> SimpleNamespace:
    levels = [
        LevelScore("l100", "target", 1.0, 10_800.0, 250.0, actual=0.772),
        LevelScore("l60", "target", 0.6, 8_400.0, 200.0, actual=0.6),
        LevelScore("idle", "idle", 0.0, 0.0, 60.0),
    ]
    return SimpleNamespace(valid=valid, levels=levels, checks=checks, result={"valid": valid}, calibration=[])


def test_valid_run() -> None:
    assert verdict(_evaluation(True, [Check("complete", True, "11 levels measured")])) == "VALID"
    ev = _evaluation(True, [Check("complete", True, "11 levels measured")])
    ev.result["standard"] = {"spec": False, "eehpc_level": 1, "statement": "..."}
    assert verdict(ev) == "VALID as EE HPC WG Level 1, not SPEC-comparable"


def test_invalid_run_names_each_failed_check_with_its_figure_on_one_line() -> None:
    checks = [
        Check("complete", True, "11 levels measured"),
        Check("load_within_2pct", False, "actual 77.20% vs target 100.00% (-22.80% of target)", "l100"),
        Check("load_within_2pct", True, "actual 60.00%", "l60"),
        Check("no_gaps", False, "demo-sim/sim hole 0.20s\n(1 missing)", "l60"),
        Check("sample_rate", False, "below 1/s: demo-sim/sim 0.00/s", "idle"),
        Check("clock_skew", False, "above 400 ms: demo-sim +512 ms"),
    ]
    line = verdict(_evaluation(False, checks))
    assert "\n" not in line
    assert line == (
        "INVALID: load_within_2pct failed at 100 % (77.2 % of calibrated); "
        "no_gaps failed at 60 % (demo-sim/sim hole 0.20s (1 missing)); "
        "sample_rate failed at active idle (below 1/s: demo-sim/sim 0.00/s); "
        "clock_skew failed (above 400 ms: demo-sim +512 ms)"
    )


def test_a_workload_that_cannot_run_exits_4_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("wattbench_fw.host")
    from wattbench.cli import demo
    from wattbench.workloads.base import WorkloadError
    from wattbench.workloads.builtin.workers import BuiltinWorkload

    def fail(self: BuiltinWorkload) -> None:
        raise WorkloadError("worker wattbench-builtin-0 did not start (exit code 1)")

    monkeypatch.setattr(BuiltinWorkload, "open", fail)
    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    args = parser.parse_args(
        ["--quiet", "--html", str(tmp_path / "d.html"), "--store", str(tmp_path / "d.sqlite")]
    )
    assert demo.run(args) == 4  # the workload could not run; not 130, which is Ctrl-C
    out = capsys.readouterr().out
    # Nothing was measured: the reason, and no report of an empty run.
    assert (
        "demo: workload failed during run: worker wattbench-builtin-0 did not start (exit code 1) "
        "(before the first measurement window: no run stored)\n" in out
    )
    assert "demo result" not in out and not (tmp_path / "d.html").exists()


def test_a_busy_machine_is_named_before_the_run() -> None:
    assert demo_busy(0.05, 2) is None and demo_busy(0.2, 2) is None and demo_busy(1.5, 16) is None
    note = demo_busy(0.9, 2)
    assert note is not None and "0.9 of its 2 cores" in note and "INVALID" in note


def test_an_unsteady_calibration_is_named_once_as_the_likely_cause() -> None:
    checks = [
        Check(
            "load_within_2pct",
            False,
            "actual 77.20% vs target 100.00% (-22.80% of target, limit ±2%); calibration intervals "
            "differed by 18.3%",
            "l100",
        ),
    ]
    ev = _evaluation(False, checks)
    ev.calibration = [("cal1", 9000.0), ("cal2", 9800.0), ("cal3", 11_800.0)]
    line = verdict(ev)
    assert line.startswith("INVALID: load_within_2pct failed at 100 % (77.2 % of calibrated); ")
    assert line.endswith(
        "this machine's throughput differed by 18.5 % between the calibration intervals used, "
        "so its levels cannot be held within ±2 % reliably"
    )


def test_a_level_that_fell_behind_says_how_much_it_did_not_serve() -> None:
    checks = [Check("load_within_2pct", False, "actual 97.20% vs target 100.00%", "l100")]
    ev = _evaluation(False, checks)
    # 9,720 ops/s over 10 s served, 270 arrivals not: 2.7 % of the level's 9,990 arrivals.
    ev.levels[0] = LevelScore(
        "l100", "target", 1.0, 9_720.0, 250.0, duration_s=10.0, ops_count=97_200, actual=0.972, unserved=2_700
    )
    assert verdict(ev) == (
        "INVALID: load_within_2pct failed at 100 % (97.2 % of calibrated, 2.7 % of its arrivals not served: "
        "the machine fell behind)"
    )


def test_a_missed_load_names_the_time_the_hypervisor_took() -> None:
    """Steal (a virtual machine's cores given to others) made demos INVALID on a quiet guest, and the
    verdict named only the calibration spread, or nothing: the reader could not tell the host from
    the tool."""
    checks = [Check("load_within_2pct", False, "actual 94.20% vs target 100.00%", "l100")]
    ev = _evaluation(False, checks)
    line = verdict(ev, steal=0.47)
    assert line.endswith(
        "the hypervisor gave 0.47 of this virtual machine's cores to others on average during the run "
        "(steal), so its speed was not its own"
    ), line
    assert "steal" not in verdict(ev, steal=0.02)
    ok = _evaluation(False, [Check("inlet_temp", False, "no inlet sensor", None)])
    assert "steal" not in verdict(ok, steal=0.47)
