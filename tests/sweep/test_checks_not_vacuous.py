"""Checks and limits that must not pass vacuously: a window too short to hold the required readings,
and limits or plan options outside their meaningful range, refused where they are built."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sweep_synth import T0, SeriesFetch, trace

from wattbench.core import align as al
from wattbench.core import compliance as cp
from wattbench.core.plan import calibrated_rate, specpower_plan


def _window(duration_ms: int, hz: float, first_ms: int | None = None) -> al.WindowPower:
    """A window of duration_ms with readings at hz; first_ms is where the first reading falls, so a
    short window can be placed between two readings."""
    w = al.Window("l10", "target", T0, T0 + duration_ms, target=0.1)
    start = T0 - 5000 if first_ms is None else T0 + first_ms
    s = trace("a", "p", start, T0 + duration_ms + 5000, hz, lambda t: np.full(t.shape, 100.0))
    return al.align([w], [al.ChannelSpec("a", "p", hz=hz)], SeriesFetch([s]))[0]


def test_one_second_window_without_a_reading_fails() -> None:
    wp = _window(1000, 1.0, first_ms=1000)  # readings at the window's end and after: none inside
    assert wp.power[0].n == 0
    c = cp.check_sample_rate(wp, cp.Limits())
    assert not c.ok
    assert "a/p" in c.reason and "0 readings" in c.reason


@pytest.mark.parametrize("duration_ms", [400, 1000, 1500])
def test_short_window_needs_at_least_one_reading(duration_ms: int) -> None:
    empty = _window(duration_ms, 1.0, first_ms=duration_ms + 100)
    assert empty.power[0].n == 0
    assert not cp.check_sample_rate(empty, cp.Limits()).ok
    one = _window(duration_ms, 1.0, first_ms=duration_ms // 2)
    assert one.power[0].n == 1
    assert cp.check_sample_rate(one, cp.Limits()).ok


def test_every_whole_second_still_allows_the_edge_sample() -> None:
    # 1 Hz readings exactly on both edges of a 240 s window: 239 strictly inside, a compliant meter
    wp = _window(240_000, 1.0)
    assert wp.power[0].n == 239
    assert cp.check_sample_rate(wp, cp.Limits()).ok
    assert not cp.check_sample_rate(_window(240_000, 0.9), cp.Limits()).ok


@pytest.mark.parametrize(
    ("field", "value", "fragment"),
    [
        ("load_tolerance", -1.0, "load_tolerance"),
        ("load_tolerance", 0.0, "load_tolerance"),
        ("load_tolerance", 1.0, "load_tolerance"),
        ("load_tolerance", math.nan, "load_tolerance"),
        ("min_rate_hz", 0.0, "min_rate_hz"),
        ("min_rate_hz", -1.0, "min_rate_hz"),
        ("min_rate_hz", math.inf, "min_rate_hz"),
        ("max_uncertainty", 0.0, "max_uncertainty"),
        ("max_uncertainty", -0.01, "max_uncertainty"),
        ("max_uncertainty", 1.0, "max_uncertainty"),
        ("max_skew_ms", 0.0, "max_skew_ms"),
        ("max_skew_ms", -400.0, "max_skew_ms"),
        ("max_skew_ms", math.inf, "max_skew_ms"),
        ("min_inlet_c", -math.inf, "min_inlet_c"),
        ("min_inlet_c", math.nan, "min_inlet_c"),
        ("min_inlet_c", -300.0, "min_inlet_c"),
        ("min_inlet_c", 90.0, "min_inlet_c"),
    ],
)
def test_limits_out_of_range_are_refused(field: str, value: float, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        cp.Limits(**{field: value})


def test_limits_in_range_are_kept() -> None:
    lim = cp.Limits(load_tolerance=0.05, max_uncertainty=0.02, max_skew_ms=800.0, min_inlet_c=18.0)
    assert (lim.load_tolerance, lim.max_uncertainty, lim.max_skew_ms) == (0.05, 0.02, 800.0)
    cp.Limits(load_mode="points", load_tolerance=0.02)


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"calibrations": 3, "calibration_use": 5}, "calibration_use"),
        ({"calibrations": 10, "calibration_use": 11}, "calibration_use"),
        ({"calibrations": 3, "calibration_use": 0}, "calibration_use"),
        ({"calibrations": 3, "calibration_use": -1}, "calibration_use"),
        ({"calibrations": 2}, "3..10"),
        ({"calibrations": 11}, "3..10"),
        ({"calibrations": 3.5}, "whole number"),
        ({"calibrations": True}, "whole number"),
        ({"calibrations": 3, "calibration_use": 1.5}, "whole number"),
        ({"levels": (1.0, 1.5)}, r"\(0, 1\]"),
        ({"levels": (1.0, -0.5)}, r"\(0, 1\]"),
        ({"levels": (1.0, 0.5, 0.5)}, "repeat"),
    ],
)
def test_plan_options_out_of_range_are_refused(kwargs: dict[str, object], fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        specpower_plan(**kwargs)  # type: ignore[arg-type]


def test_calibration_use_is_kept_as_given() -> None:
    assert specpower_plan(calibrations=3, calibration_use=3).calibration_use == 3
    assert specpower_plan(calibrations=5, calibration_use=4).calibration_use == 4


def test_calibrated_rate_refuses_zero_intervals() -> None:
    # values[-0:] is the whole list: 0 must not quietly mean "all of them"
    with pytest.raises(ValueError, match="use_last"):
        calibrated_rate([10.0, 20.0, 30.0], 0)
