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


# ---------------------------------------------------------------------------- the suite's result
T = 1_795_600_000_000


def result_of(r: WorkletRun, valid: bool = True, partial: bool = False, idle_w: float | None = None) -> dict:
    """A worklet's result message as its sweep would publish it."""
    levels = [
        {"phase": iv.phase, "kind": "target", "target": 1.0 / (i + 1), "ops": iv.ops_per_s, "W": iv.watts,
         "Wh": iv.watts * 240 / 3600}
        for i, iv in enumerate(r.intervals)
    ]  # fmt: skip
    if idle_w is not None:
        levels.append({"phase": "idle", "kind": "idle", "target": 0.0, "ops": 0.0, "W": idle_w})
    out = {"v": 1, "run": f"s1-{r.name}", "t": 1, "valid": valid, "overall": 1.0, "levels": levels,
           "checks": [{"name": "complete", "ok": valid, **({} if valid else {"reason": "level l1 missing"})}],
           "calibrated": r.calibrated, "workload": f"worklet-{r.name}-v1"}  # fmt: skip
    if partial:
        out["partial"] = True
    return out


def finished(runs: list[WorkletRun], **kw: object) -> list:
    from wattbench.core.suite import WorkletResult

    return [
        WorkletResult(r.name, r.group, "ops", result_of(r, idle_w=60.0 if i == 0 else None, **kw))  # type: ignore[arg-type]
        for i, r in enumerate(runs)
    ]


def _valid_suite(doc: dict) -> None:
    import wattbench_schema

    errors = [e.message for e in wattbench_schema.jsonschema_validator("suite").iter_errors(doc)]
    assert errors == []


def test_the_suite_result_scores_itself_exactly_one_and_is_labelled() -> None:
    from wattbench.core.suite import suite_document

    doc = suite_document("four", "s1", T, finished(REFERENCE))
    _valid_suite(doc)
    assert doc["score"]["value"] == 1.0 and doc["valid"] and doc["complete"]
    assert doc["idle_W"] == 60.0
    assert "not comparable with published SERT scores" in doc["label"]
    by_hand = math.sqrt((1.0 / 200.0) * (0.5 / 150.0))
    (compress,) = [w for w in doc["worklets"] if w["name"] == "compress"]
    assert compress["efficiency"] == pytest.approx(by_hand, rel=1e-12)
    assert compress["overall"] == pytest.approx(1500.0 / 350.0, rel=1e-12)
    assert compress["levels"][0]["window_s"] == pytest.approx(240.0)


def test_a_suite_against_a_reference_suite_result() -> None:
    from wattbench.core.suite import suite_document

    ref = suite_document("four", "s0", T, finished(REFERENCE))
    faster = [
        WorkletRun(r.name, r.group, 2 * r.calibrated, tuple(Interval(i.phase, 2 * i.ops_per_s, i.watts) for i in r.intervals))
        for r in REFERENCE
    ]  # fmt: skip
    doc = suite_document("four", "s1", T, finished(faster), reference=ref)
    _valid_suite(doc)
    assert doc["score"]["value"] == pytest.approx(2.0, rel=1e-12)
    assert doc["score"]["reference"] == "four run s0"


def test_an_interrupted_suite_keeps_its_finished_worklets() -> None:
    """Two of four worklets finished, the third was interrupted: the two are kept with their
    efficiencies, the third is listed as interrupted and not scored, the score is partial, and the
    suite is not valid."""
    from wattbench.core.suite import suite_document

    done = finished(REFERENCE[:2])
    third = finished([REFERENCE[2]], partial=True)[0]
    doc = suite_document("four", "s1", T, [*done, third], interrupted="interrupted by operator during l1")
    _valid_suite(doc)
    assert [w["name"] for w in doc["worklets"]] == ["compress", "sha256", "flood"]
    assert doc["worklets"][2]["partial"] and "efficiency" not in doc["worklets"][2]
    assert doc["score"]["partial"] and doc["score"]["missing_groups"] == ["memory", "storage"]
    assert not doc["complete"] and not doc["valid"] and doc["interrupted"].startswith("interrupted")
    assert doc["score"]["value"] == 1.0  # against itself, over what finished


def test_an_invalid_worklet_makes_the_suite_not_valid_and_says_why() -> None:
    from wattbench.core.suite import WorkletResult, suite_document

    rs = finished(REFERENCE)
    rs[3] = WorkletResult("random", "storage", "ops", result_of(REFERENCE[3], valid=False))
    doc = suite_document("four", "s1", T, rs)
    _valid_suite(doc)
    assert not doc["valid"] and doc["complete"]
    assert doc["worklets"][3]["failed"] == ["complete: level l1 missing"]


def test_a_reference_without_the_worklet_is_refused_not_guessed() -> None:
    from wattbench.core.suite import suite_document

    ref = suite_document("two", "s0", T, finished(REFERENCE[:2]))
    doc = suite_document("four", "s1", T, finished(REFERENCE), reference=ref)
    _valid_suite(doc)
    assert "score" not in doc and "flood" in doc["score_refused"] and not doc["valid"]
