"""Alignment on synthetic traces whose integrals are known in closed form."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sweep_synth import T0, SeriesFetch, make_series, sweep_events, trace

from wattbench.core import align as al

W0 = T0 + 1000
W1 = T0 + 11000  # a 10 s window
MID = (W0 + W1) / 2
WIN = al.Window("l50", "target", W0, W1, target=0.5)


def odd_trace(t: np.ndarray) -> np.ndarray:
    """200 W plus a ramp and a sine, both odd about the window's middle: over the window the exact
    integral is 200 W x 10 s, and a uniform sample set symmetric about the middle averages to 200 W."""
    x = t - MID
    return 200.0 + 0.004 * x + 30.0 * np.sin(2 * math.pi * x / 1700.0)


def test_analytic_mean_and_edge_samples_excluded() -> None:
    s = trace("a", "psu1", T0, T0 + 12000, 10, odd_trace)
    # Samples exactly on the window edges get absurd values: included, they would ruin the mean.
    s.values["W"][s.t_ms == W0] = 1e6
    s.values["W"][s.t_ms == W1] = 1e6
    cw = al.channel_window(s, al.ChannelSpec("a", "psu1", hz=10), WIN)
    assert cw.n == 99  # 1100 .. 10900: the samples at 1000 and 11000 are on the edges
    exact = (200.0 * 10.0) / 10.0  # integral over the window / duration
    assert cw.mean == pytest.approx(exact, rel=1e-12)
    assert cw.gaps == []
    assert cw.flagged == 0
    assert cw.max_interval_ms == pytest.approx(100.0)


def test_energy_of_a_constant_power_window_is_exact() -> None:
    s = trace("a", "psu1", T0, T0 + 12000, 10, lambda t: np.full(t.shape, 360.0))
    wp = al.align([WIN], [al.ChannelSpec("a", "psu1", hz=10)], SeriesFetch([s]))[0]
    assert wp.watts == 360.0
    assert al.window_energy_wh(wp.watts, WIN) == pytest.approx(1.0)  # 360 W for 10 s = 1 Wh


def step_trace(true_offset_ms: float):  # type: ignore[no-untyped-def]
    """Device clock runs true_offset_ms ahead: 100 W inside the true window, 500 W outside."""

    def fn(t_dev: np.ndarray) -> np.ndarray:
        t_true = t_dev - true_offset_ms
        return np.where((t_true > W0) & (t_true < W1), 100.0, 500.0)

    return fn


@pytest.mark.parametrize("offset", [250.0, -380.0, 612.0])
def test_clock_offset_is_corrected(offset: float) -> None:
    s = trace("dev-a", "psu1", T0 - 2000, T0 + 14000, 10, step_trace(offset))
    spec = al.ChannelSpec("dev-a", "psu1", hz=10)
    fetch = SeriesFetch([s])
    corrected = al.align([WIN], [spec], fetch, {"dev-a": offset})[0]
    assert corrected.watts == pytest.approx(100.0, abs=1e-12)
    naive = al.align([WIN], [spec], fetch, {})[0]
    assert naive.watts > 100.0 + 1.0  # without the correction, ramp samples leak in


def test_offset_correction_keeps_strict_edges() -> None:
    """Device 300 ms ahead: the samples at device time W0+300 and W1+300 sit exactly on the edges."""
    s = trace("a", "p", T0, T0 + 13000, 10, lambda t: np.full(t.shape, 50.0))
    cw = al.channel_window(s, al.ChannelSpec("a", "p", hz=10), WIN, offset_ms=300.0)
    assert cw.n == 99


def test_gap_is_reported_not_interpolated() -> None:
    s = trace("a", "psu1", T0, T0 + 12000, 10, odd_trace)
    keep = ~((s.t_ms > T0 + 3000) & (s.t_ms < T0 + 3500))  # drops 3100..3400: four readings
    s = make_series("a", "psu1", s.t_ms[keep], W=s.values["W"][keep])
    cw = al.channel_window(s, al.ChannelSpec("a", "psu1", hz=10), WIN)
    assert cw.n == 95
    assert len(cw.gaps) == 1
    g = cw.gaps[0]
    assert (g.kind, g.start_ms, g.end_ms, g.missing) == ("hole", T0 + 3000, T0 + 3500, 4)
    inside = (s.t_ms > W0) & (s.t_ms < W1)
    assert cw.mean == pytest.approx(
        float(s.values["W"][inside].mean()), rel=1e-12
    )  # plain mean of what exists


def test_flagged_reads_are_holes() -> None:
    s = trace("a", "psu1", T0, T0 + 12000, 10, lambda t: np.full(t.shape, 80.0))
    w = s.values["W"]
    flags = s.flags.copy()
    bad = np.isin(s.t_ms, [T0 + 5000, T0 + 5100])
    w[bad] = np.nan
    flags[bad] = 1
    s = make_series("a", "psu1", s.t_ms, W=w, flags=flags)
    cw = al.channel_window(s, al.ChannelSpec("a", "psu1"), WIN)  # nominal spacing from the data
    assert cw.flagged == 2 and cw.n == 97
    assert cw.mean == 80.0
    assert [(g.kind, g.missing) for g in cw.gaps] == [("hole", 2)]
    assert cw.nominal_ms == pytest.approx(100.0)


def test_window_with_no_samples() -> None:
    s = trace("a", "psu1", T0, T0 + 900, 10, lambda t: np.full(t.shape, 80.0))  # all before the window
    cw = al.channel_window(s, al.ChannelSpec("a", "psu1", hz=10), WIN)
    assert cw.n == 0 and math.isnan(cw.mean)
    assert [(g.kind, g.missing) for g in cw.gaps] == [("empty", 100)]
    wp = al.WindowPower(WIN, [cw])
    assert math.isnan(wp.watts)
    assert wp.samples == 0


def test_edge_gap() -> None:
    s = trace("a", "p", T0 + 1400, T0 + 12000, 10, lambda t: np.full(t.shape, 80.0))
    cw = al.channel_window(s, al.ChannelSpec("a", "p", hz=10), WIN)
    assert [(g.kind, g.start_ms, g.end_ms, g.missing) for g in cw.gaps] == [("edge", W0, T0 + 1400, 3)]


def test_multi_node_sums_channels_per_node() -> None:
    specs = [
        al.ChannelSpec("rack", "n1a", node="n1", hz=10),
        al.ChannelSpec("rack", "n1b", node="n1", hz=10),
        al.ChannelSpec("rack", "n2a", node="n2", hz=1),
        al.ChannelSpec("other", "psu", node="n2", hz=2),
        al.ChannelSpec("env", "inlet", role="inlet"),
    ]
    series = [
        trace("rack", "n1a", T0, T0 + 12000, 10, lambda t: np.full(t.shape, 110.0)),
        trace("rack", "n1b", T0, T0 + 12000, 10, odd_trace),
        trace("rack", "n2a", T0 + 500, T0 + 12000, 1, lambda t: np.full(t.shape, 90.0)),
        trace("other", "psu", T0, T0 + 12000, 2, lambda t: np.full(t.shape, 45.5)),
        make_series("env", "inlet", [T0 + 2000, T0 + 6000, T0 + 10000], T=[22.0, 23.0, 24.0]),
    ]
    wp = al.align([WIN], specs, SeriesFetch(series))[0]
    assert wp.node_watts == {"n1": pytest.approx(310.0), "n2": pytest.approx(135.5)}
    assert wp.watts == pytest.approx(445.5)
    assert wp.inlet_c == pytest.approx(23.0)
    assert wp.gaps == []


def test_missing_channel_makes_node_power_unknown() -> None:
    specs = [al.ChannelSpec("a", "psu1", node="n", hz=10), al.ChannelSpec("a", "psu2", node="n", hz=10)]
    series = [trace("a", "psu1", T0, T0 + 12000, 10, lambda t: np.full(t.shape, 100.0))]
    wp = al.align([WIN], specs, SeriesFetch(series))[0]
    assert math.isnan(wp.node_watts["n"]) and math.isnan(wp.watts)
    assert [g.kind for g in wp.gaps] == ["empty"]


def test_uncertainty_is_power_weighted() -> None:
    specs = [
        al.ChannelSpec("a", "p1", hz=10),
        al.ChannelSpec("a", "p2", hz=10),
        al.ChannelSpec("a", "p3", hz=10),
    ]
    series = [
        trace("a", "p1", T0, T0 + 12000, 10, lambda t: np.full(t.shape, 300.0), u=0.005),
        trace("a", "p2", T0, T0 + 12000, 10, lambda t: np.full(t.shape, 100.0), u=0.02),
        trace("a", "p3", T0, T0 + 12000, 10, lambda t: np.full(t.shape, 100.0)),  # reports no u
    ]
    wp = al.align([WIN], specs, SeriesFetch(series))[0]
    assert wp.uncertainty == pytest.approx((0.005 * 300 + 0.02 * 100) / 400)


def test_windows_from_events_and_one_fetch_per_channel() -> None:
    phases = [("cal1", "calibration", None, 100), ("l100", "target", 1.0, 90), ("idle", "idle", 0.0, 0)]
    events = sweep_events(phases, measure_ms=10000)
    wins = al.windows_from_events(events)
    assert [(w.phase, w.kind, w.target, w.ops, w.duration_s) for w in wins] == [
        ("cal1", "calibration", None, 100, 10.0),
        ("l100", "target", 1.0, 90, 10.0),
        ("idle", "idle", 0.0, 0, 10.0),
    ]
    s = trace("a", "p", T0, T0 + 60000, 10, lambda t: np.full(t.shape, 1.0))
    fetch = SeriesFetch([s])
    al.align(wins, [al.ChannelSpec("a", "p")], fetch)
    assert len(fetch.calls) == 1


def test_interrupted_window_is_not_a_window() -> None:
    phases = [("cal1", "calibration", None, 100), ("cal2", "calibration", None, 100)]
    events = sweep_events(phases, abort_after="cal2")
    assert [w.phase for w in al.windows_from_events(events)] == ["cal1"]


@settings(max_examples=200, deadline=None)
@given(
    times=st.lists(st.integers(0, 20_000), min_size=0, max_size=300, unique=True),
    start=st.integers(-1000, 21_000),
    length=st.integers(1, 15_000),
    offset=st.floats(-2000, 2000, allow_nan=False),
    nan_every=st.integers(0, 7),
)
def test_strict_window_matches_brute_force(
    times: list[int], start: int, length: int, offset: float, nan_every: int
) -> None:
    t = np.array(sorted(times), dtype=np.int64) + T0
    w = np.sin(t / 997.0) * 50 + 100
    if nan_every:
        w[::nan_every] = np.nan
    s = make_series("d", "c", t, W=w)
    win = al.Window("x", "target", T0 + start, T0 + start + length)
    cw = al.channel_window(s, al.ChannelSpec("d", "c", hz=10), win, offset_ms=offset)
    tc = t - offset
    inside = (tc > win.start_ms) & (tc < win.end_ms)
    good = inside & np.isfinite(w)
    assert cw.n == int(good.sum()) and cw.flagged == int((inside & ~np.isfinite(w)).sum())
    if cw.n:
        assert cw.mean == pytest.approx(float(w[good].mean()), rel=1e-12)
        # gaps and samples tile the window: no stretch longer than the limit is left unreported
        edges = np.concatenate(([win.start_ms], tc[good], [win.end_ms]))
        long = int((np.diff(edges) > 150.0).sum())
        assert len(cw.gaps) == long
    else:
        assert math.isnan(cw.mean) and [g.kind for g in cw.gaps] == ["empty"]


def test_auto_ranging_and_clock_steps_inside_a_window_fail_it() -> None:
    from wattbench.core import compliance as cp

    s = trace("a", "psu1", T0, T0 + 12000, 10, lambda t: np.full(t.shape, 80.0))
    flags = s.flags.copy()
    flags[np.isin(s.t_ms, [T0 + 3000])] = 64  # range_change, strictly inside
    flags[np.isin(s.t_ms, [T0 + 6000, T0 + 6100])] = 8  # clock_step, strictly inside
    flags[np.isin(s.t_ms, [T0 + 20000])] = 64  # outside the window: no effect
    s = make_series("a", "psu1", s.t_ms, W=s.values["W"], flags=flags)
    cw = al.channel_window(s, al.ChannelSpec("a", "psu1"), WIN)
    assert (cw.range_changes, cw.clock_steps) == (1, 2)
    assert cw.mean == 80.0, "flagged values are still measurements; the check says what happened"
    check = cp.check_stable(al.WindowPower(WIN, [cw]))
    assert not check.ok and "auto-ranged" in check.reason and "clock stepped" in check.reason

    clean = al.channel_window(
        trace("a", "psu1", T0, T0 + 12000, 10, lambda t: t * 0 + 80.0), al.ChannelSpec("a", "psu1"), WIN
    )
    assert cp.check_stable(al.WindowPower(WIN, [clean])).ok
