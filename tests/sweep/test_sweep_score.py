"""Score, compliance and the assembled result on synthetic runs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sweep_synth import RUN, T0, SeriesFetch, specpower_phases, sweep_events, trace

from wattbench.core import align as al
from wattbench.core import compliance as cp
from wattbench.core import contract
from wattbench.core import score as sc
from wattbench.core.evaluate import evaluate, levels_from_result, result_level
from wattbench.core.plan import calibrated_rate


def test_overall_ratio_counts_idle_in_the_denominator_only() -> None:
    ops = [720000, 648000, 576000, 504000, 432000, 360000, 288000, 216000, 144000, 72000]
    watts = [250, 235, 220, 205, 190, 175, 160, 145, 130, 115, 100]
    assert sc.overall_ratio(ops, watts) == pytest.approx(3960000 / 1925)
    assert sc.overall_ratio([10.0], [5.0, 5.0]) == 1.0
    with pytest.raises(ValueError):
        sc.overall_ratio([1.0], [])
    with pytest.raises(ValueError):
        sc.overall_ratio([1.0], [0.0])


def test_summary_and_cost() -> None:
    levels = [
        sc.LevelScore("l100", "target", 1.0, ops=1000.0, W=200.0, duration_s=3600.0),
        sc.LevelScore("l50", "target", 0.5, ops=500.0, W=150.0, duration_s=3600.0),
        sc.LevelScore("idle", "idle", 0.0, ops=0.0, W=100.0, duration_s=3600.0),
    ]
    s = sc.summarize(levels, cost=sc.CostInputs(price=1000.0, tariff_kwh=0.25, years=2.0))
    assert s.overall == pytest.approx(1500 / 450)
    assert (s.peak_ops, s.peak_W, s.idle_W) == (1000.0, 200.0, 100.0)
    assert s.energy_Wh == pytest.approx(450.0)
    assert s.cost == pytest.approx(0.45 * 0.25)
    mean_w, mean_ops = 450 / 3, 1500 / 3
    lifetime_cost = mean_w / 1000 * sc.HOURS_PER_YEAR * 2 * 0.25
    assert s.lifetime_energy_cost == pytest.approx(lifetime_cost)
    assert s.ops_per_dollar == pytest.approx(mean_ops * sc.HOURS_PER_YEAR * 3600 * 2 / (1000 + lifetime_cost))
    assert sc.summarize(levels).cost is None


def test_concurrency_figures() -> None:
    levels = [
        sc.LevelScore("c1", "concurrency", None, ops=0.5, W=100.0, copies=1),
        sc.LevelScore("c2", "concurrency", None, ops=0.9, W=150.0, copies=2),
    ]
    figs = sc.concurrency_figures(levels)
    assert figs["c1"] == (1.0, 200.0)
    assert figs["c2"][0] == pytest.approx(1.8) and figs["c2"][1] == pytest.approx(150 / 0.9)


def test_calibrated_rate_uses_last_two() -> None:
    assert calibrated_rate([10.0, 20.0, 30.0]) == 25.0
    assert calibrated_rate([10.0, 20.0, 30.0, 40.0], 3) == 30.0


@pytest.mark.parametrize(
    ("actual", "mode", "ok"),
    [
        (0.495, "relative", True),
        (0.489, "relative", False),
        (0.489, "points", True),
        (0.475, "points", False),
    ],
)
def test_load_check(actual: float, mode: str, ok: bool) -> None:
    lv = sc.LevelScore("l50", "target", 0.5, ops=1.0, W=1.0, actual=actual)
    c = cp.check_load(lv, cp.Limits(load_mode=mode))
    assert c is not None and c.ok is ok and c.phase == "l50"
    assert "target 50.00%" in c.reason


def _wp(hz: float, duration_ms: int = 240_000, **extra: object) -> al.WindowPower:
    w = al.Window("l10", "target", T0, T0 + duration_ms, target=0.1)
    s = trace("a", "p", T0 - 5000, T0 + duration_ms + 5000, hz, lambda t: np.full(t.shape, 100.0), **extra)
    # The 1 Hz grid here sits exactly on the window edges: 239 samples strictly inside 240 s.
    return al.align([w], [al.ChannelSpec("a", "p", hz=hz)], SeriesFetch([s]))[0]


def test_sample_rate_check() -> None:
    one_hz = _wp(1.0)
    assert one_hz.samples == 239
    assert cp.check_sample_rate(one_hz, cp.Limits()).ok
    half = _wp(0.5)
    c = cp.check_sample_rate(half, cp.Limits())
    assert not c.ok and "a/p 0.50/s" in c.reason
    assert cp.check_gaps(half).ok  # regular 2 s spacing is no gap at its own nominal rate


def test_uncertainty_check_only_where_reported_and_asked() -> None:
    one = cp.Limits(max_uncertainty=0.01)
    assert cp.check_uncertainty(_wp(1.0), one) is None
    assert cp.check_uncertainty(_wp(1.0, u=0.005), one).ok  # type: ignore[union-attr]
    c = cp.check_uncertainty(_wp(1.0, u=0.015), one)
    assert c is not None and not c.ok and "1.50%" in c.reason
    # Without a limit the standard statement judges the accuracy (core/conformance.py), not a check.
    assert cp.check_uncertainty(_wp(1.0, u=0.015), cp.Limits()) is None


def test_inlet_and_skew_checks() -> None:
    w = al.Window("idle", "idle", T0, T0 + 10_000)
    inlet = al.ChannelSpec("e", "inlet", role="inlet")
    for temp, ok in ((19.9, False), (20.0, True), (26.0, True)):
        s = trace("e", "inlet", T0, T0 + 10_000, 1, lambda t, v=temp: np.full(t.shape, v))
        s.values["T"] = s.values.pop("W")
        wp = al.align([w], [inlet], SeriesFetch([s]))[0]
        assert cp.check_inlet(wp, cp.Limits()).ok is ok  # type: ignore[union-attr]
    none = al.WindowPower(w, [])
    assert not cp.check_inlet(none, cp.Limits()).ok  # type: ignore[union-attr]
    assert cp.check_inlet(none, cp.Limits(require_inlet=False)) is None
    assert cp.check_skew({"a": 120.0, "b": -399.0}, cp.Limits()).ok
    bad = cp.check_skew({"a": 120.0, "b": -401.0}, cp.Limits())
    assert not bad.ok and "b -401 ms" in bad.reason


def test_fit_keeps_failures() -> None:
    checks = [cp.Check("x", True)] * 300 + [cp.Check("y", False, "bad", "l10")]
    out = cp.fit(checks)
    assert len(out) == 2 and out[0] == cp.Check("y", False, "bad", "l10") and out[1].ok


def _run(offset: float = 0.0, gap: bool = False, abort: str | None = None, deadband: float = 0.0):  # type: ignore[no-untyped-def]
    """A full synthetic sweep: power = 100 W + 150 W x load, inlet 23 C, meter u = 0.5 %."""
    phases = specpower_phases()
    events = sweep_events(phases, abort_after=abort)
    wins = {w.phase: w for w in al.windows_from_events(events)}

    def power(t_dev: np.ndarray) -> np.ndarray:
        t = t_dev - offset
        out = np.full(t.shape, 100.0)
        for w in wins.values():
            load = 1.0 if w.kind == "calibration" else (w.target or 0.0)
            out[(t > w.start_ms - 1500) & (t < w.end_ms + 1500)] = 100.0 + 150.0 * load
        return out

    end = max(e["t"] for e in events)
    s = trace("bench", "psu", T0 - 1000, end + 1000, 10, power, u=0.005)
    if gap:
        w = wins["l40"]
        keep = ~((s.t_ms > w.start_ms + 3000) & (s.t_ms < w.start_ms + 4000))
        s = type(s)(
            s.dev, s.ch, s.t_ms[keep], s.seq[keep], s.flags[keep], {k: v[keep] for k, v in s.values.items()}
        )
    inlet = trace("bench", "inlet", T0 - 1000, end + 1000, 1, lambda t: np.full(t.shape, 23.0))
    inlet.values["T"] = inlet.values.pop("W")
    specs = [al.ChannelSpec("bench", "psu", hz=10), al.ChannelSpec("bench", "inlet", role="inlet", hz=1)]
    return evaluate(
        RUN, events, SeriesFetch([s, inlet]), specs, offsets_ms={"bench": offset}, now_ms=T0 + 10**6
    )


def test_full_synthetic_run_scores_exactly() -> None:
    ev = _run()
    contract.validate_result(ev.result)
    assert ev.calibrated == pytest.approx(3000.0)
    assert ev.valid, [c for c in ev.checks if not c.ok]
    rows = {r["phase"]: r for r in ev.result["levels"]}
    assert list(rows) == [f"l{p}" for p in range(100, 0, -10)] + ["idle"]
    for p in range(100, 0, -10):
        r = rows[f"l{p}"]
        assert r["W"] == pytest.approx(100 + 1.5 * p)
        assert r["ops"] == pytest.approx(30 * p)
        assert r["actual"] == pytest.approx(p / 100)
        assert r["Wh"] == pytest.approx((100 + 1.5 * p) * 10 / 3600)
        assert r["inlet_C"] == 23.0 and r["u"] == pytest.approx(0.005) and r["gaps"] == 0
        assert r["samples"] == 99
    assert rows["idle"]["W"] == 100.0 and rows["idle"]["ratio"] == 0.0
    expected = sum(30 * p for p in range(10, 101, 10)) / (
        sum(100 + 1.5 * p for p in range(10, 101, 10)) + 100
    )
    assert ev.result["overall"] == pytest.approx(expected)
    assert ev.result["summary"]["peak_ops"] == pytest.approx(3000.0)
    assert ev.result["summary"]["idle_W"] == 100.0
    back = levels_from_result(ev.result)
    assert [lv.phase for lv in back] == list(rows)
    assert back[0].duration_s == pytest.approx(10.0)


def test_skewed_device_is_corrected_but_flagged() -> None:
    ev = _run(offset=650.0)
    rows = {r["phase"]: r for r in ev.result["levels"]}
    assert rows["l50"]["W"] == pytest.approx(175.0)  # corrected: no ramp sample leaks in
    skew = [c for c in ev.checks if c.name == "clock_skew"]
    assert len(skew) == 1 and not skew[0].ok
    assert not ev.valid


def test_small_estimates_are_checked_but_not_shifted_by() -> None:
    ev = _run(offset=650.0, deadband=250.0)
    assert ev.offsets_ms == {"bench": 650.0} and ev.result["levels"][5]["W"] == pytest.approx(175.0)
    ev = _run(offset=0.0, deadband=250.0)
    ev2 = evaluate(RUN, ev.events, None, [], offsets_ms={"bench": 180.0}, deadband_ms=250.0)
    assert ev2.offsets_ms == {} and ev2.measured_offsets_ms == {"bench": 180.0}
    assert next(c for c in ev2.checks if c.name == "clock_skew").ok


def test_gap_makes_the_run_invalid_and_is_named() -> None:
    ev = _run(gap=True)
    contract.validate_result(ev.result)
    bad = [c for c in ev.checks if not c.ok]
    assert [(c.name, c.phase) for c in bad] == [("no_gaps", "l40")]
    assert "bench/psu hole" in bad[0].reason and "(9 missing)" in bad[0].reason
    row = next(r for r in ev.result["levels"] if r["phase"] == "l40")
    assert row["gaps"] == 1 and row["samples"] == 90
    assert ev.result["valid"] is False


def test_interrupted_run_is_partial_and_invalid() -> None:
    ev = _run(abort="l70")
    contract.validate_result(ev.result)
    assert ev.result["partial"] is True and ev.result["valid"] is False
    assert [r["phase"] for r in ev.result["levels"]] == ["l100", "l90", "l80"]
    complete = next(c for c in ev.checks if c.name == "complete")
    assert not complete.ok and complete.reason == "interrupted during l70"


@pytest.mark.parametrize("stopped_in", ["cal2", "cal3"])
def test_a_stored_run_stopped_in_calibration_has_no_calibrated_throughput(stopped_in: str) -> None:
    """Scored from its events alone (report, --rescore): cal1 runs at 90 % of the others, so the mean of
    the intervals that completed would be low. The plan is not stored; calibration counts as over only
    once a later phase started or the run ended."""
    ev = _run(abort=stopped_in)
    contract.validate_result(ev.result)
    assert ev.calibrated is None and "calibrated" not in ev.result, ev.result
    assert ev.calibration_missing == "the run stopped during calibration"


def test_a_run_stopped_after_calibration_is_calibrated_on_the_last_two_intervals() -> None:
    ev = _run(abort="l70")
    assert ev.result["calibrated"] == pytest.approx(3000.0)  # cal2 and cal3; cal1 ran at 2700
    assert ev.calibration_missing is None


def test_no_store_gives_ops_only() -> None:
    events = sweep_events(specpower_phases())
    ev = evaluate(RUN, events, None, [], now_ms=T0)
    contract.validate_result(ev.result)
    assert ev.result["levels"] == [] and not ev.valid
    assert math.isnan(ev.levels[0].W) and ev.levels[0].ops == pytest.approx(3000.0)


def test_calibration_spread_is_over_the_intervals_used() -> None:
    from wattbench.core.plan import calibration_spread

    assert calibration_spread([50.0, 90.0, 110.0]) == pytest.approx(0.2)  # last two: (110-90)/100
    assert calibration_spread([50.0, 90.0, 110.0], 3) == pytest.approx(60.0 / (250.0 / 3))
    assert calibration_spread([100.0]) is None  # one interval says nothing about steadiness
    assert calibration_spread([]) is None


def test_a_level_short_of_its_target_names_the_arrivals_it_did_not_serve() -> None:
    # 97,200 ops served in 10 s and 2,700 arrivals not: the machine fell behind by 2.7 % of them.
    lv = sc.LevelScore(
        "l100",
        "target",
        1.0,
        ops=9_720.0,
        W=1.0,
        duration_s=10.0,
        ops_count=97_200,
        actual=0.972,
        unserved=2_700,
    )
    c = cp.check_load(lv, cp.Limits())
    assert c is not None and not c.ok
    assert c.reason.endswith("; 2.7% of its arrivals were not served in the window: the machine fell behind")
    # Within the tolerance, or above the target, the count says nothing worth a reason.
    ok = cp.check_load(
        sc.LevelScore("l100", "target", 1.0, ops=1.0, W=1.0, duration_s=10.0, actual=0.99, unserved=5),
        cp.Limits(),
    )
    assert ok is not None and ok.ok and "served" not in ok.reason
    over = sc.LevelScore("l50", "target", 0.5, ops=1.0, W=1.0, duration_s=10.0, actual=0.53, unserved=3)
    over_check = cp.check_load(over, cp.Limits())
    assert over_check is not None and "served" not in over_check.reason
    # A stored result keeps the count, so a re-score says the same.
    row = result_level(lv)
    assert row["unserved"] == 2_700
    assert levels_from_result({"levels": [row]})[0].unserved == 2_700


def test_a_failed_load_says_when_the_machine_was_not_steady_in_calibration() -> None:
    lv = sc.LevelScore("l100", "target", 1.0, ops=1.0, W=1.0, actual=0.87)
    unsteady = cp.check_load(lv, cp.Limits(), calibration_spread=0.183)
    assert unsteady is not None and not unsteady.ok
    assert "calibration intervals differed by 18.3%" in unsteady.reason
    steady = cp.check_load(lv, cp.Limits(), calibration_spread=0.004)
    assert steady is not None and not steady.ok and "calibration" not in steady.reason
    passed = sc.LevelScore("l90", "target", 0.9, ops=1.0, W=1.0, actual=0.9)
    ok = cp.check_load(passed, cp.Limits(), calibration_spread=0.183)
    assert ok is not None and ok.ok and "calibration" not in ok.reason
