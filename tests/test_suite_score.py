"""The SERT-style suite score (core/suite.py), against figures computed by hand."""

from __future__ import annotations

import math

import pytest

from wattbench.core.suite import (
    WEIGHTS,
    Interval,
    SuiteError,
    WorkletRun,
    geometric_mean,
    suite_score,
    worklet_efficiency,
)


def run(name: str, group: str, calibrated: float, *levels: tuple[float, float]) -> WorkletRun:
    """levels: (ops/s, W) per interval."""
    return WorkletRun(
        name, group, calibrated, tuple(Interval(f"l{i}", o, w) for i, (o, w) in enumerate(levels))
    )


REFERENCE = [
    run("compress", "cpu", 1000.0, (1000.0, 200.0), (500.0, 150.0)),
    run("sha256", "cpu", 4000.0, (4000.0, 220.0), (2000.0, 160.0)),
    run("flood", "memory", 50.0, (50.0, 180.0), (25.0, 140.0)),
    run("random", "storage", 20000.0, (20000.0, 120.0), (10000.0, 110.0)),
]


def test_geometric_mean_by_hand() -> None:
    assert geometric_mean([4.0, 9.0]) == pytest.approx(6.0, rel=1e-15)
    assert geometric_mean([2.0, 8.0], [3.0, 1.0]) == pytest.approx(2.0 ** (3 / 4) * 8.0 ** (1 / 4), rel=1e-15)
    for bad in ([], [1.0, 0.0], [1.0, -2.0], [math.nan]):
        with pytest.raises(SuiteError):
            geometric_mean(bad)


def test_worklet_efficiency_by_hand() -> None:
    # intervals: (1000/1000)/200 = 0.005 and (500/1000)/150 = 1/300; geometric mean sqrt(0.005/300)
    assert worklet_efficiency(REFERENCE[0], 1000.0) == pytest.approx(math.sqrt(0.005 / 300), rel=1e-12)


def test_the_reference_against_itself_is_exactly_one() -> None:
    s = suite_score(REFERENCE, REFERENCE)
    assert s.score == 1.0
    assert not s.partial and s.weights == WEIGHTS
    assert "not comparable with published SERT scores" in s.notes[-1]


def test_a_run_twice_as_fast_at_the_same_power_scores_two() -> None:
    faster = [
        WorkletRun(
            r.name,
            r.group,
            2 * r.calibrated,
            tuple(Interval(i.phase, 2 * i.ops_per_s, i.watts) for i in r.intervals),
        )
        for r in REFERENCE
    ]
    assert suite_score(faster, REFERENCE).score == pytest.approx(2.0, rel=1e-12)


def test_the_weights_by_hand() -> None:
    # cpu twice as efficient (half the power), memory the same, storage half as efficient (double power):
    # 2^0.65 * 1^0.30 * 0.5^0.05 = 2^0.6
    def scaled(r: WorkletRun, power: float) -> WorkletRun:
        return WorkletRun(
            r.name,
            r.group,
            r.calibrated,
            tuple(Interval(i.phase, i.ops_per_s, i.watts * power) for i in r.intervals),
        )

    candidate = [
        scaled(REFERENCE[0], 0.5),
        scaled(REFERENCE[1], 0.5),
        REFERENCE[2],
        scaled(REFERENCE[3], 2.0),
    ]
    s = suite_score(candidate, REFERENCE)
    assert s.score == pytest.approx(2.0**0.6, rel=1e-12)
    assert s.groups["cpu"] == pytest.approx(2 * suite_score(REFERENCE, REFERENCE).groups["cpu"], rel=1e-12)


def test_a_missing_group_is_partial_with_renormalised_weights() -> None:
    storage_only = [REFERENCE[3]]
    s = suite_score(storage_only, REFERENCE)
    assert s.score == 1.0 and s.partial and s.missing_groups == ("cpu", "memory")
    assert s.weights == {"storage": 1.0}
    assert "partial: no cpu, memory" in s.notes[0]


@pytest.mark.parametrize(
    ("runs", "why"),
    [
        ([run("lu", "cpu", 10.0, (10.0, 100.0))], "the reference run has no such worklet"),
        ([run("compress", "gpu", 1000.0, (1000.0, 200.0))], "group 'gpu' has no weight"),
        ([run("compress", "cpu", 1000.0)], "no measured interval"),
        ([run("compress", "cpu", 1000.0, (1000.0, 0.0))], "power 0.0 W"),
        ([run("compress", "cpu", 1000.0, (0.0, 200.0))], "0.0 ops/s"),
        ([REFERENCE[0], REFERENCE[0]], "appears twice"),
        ([], "no worklet"),
    ],
)
def test_what_would_make_a_number_up_is_refused(runs: list[WorkletRun], why: str) -> None:
    with pytest.raises(SuiteError, match=why):
        suite_score(runs, REFERENCE)
