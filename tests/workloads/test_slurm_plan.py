"""The pure parts of a cluster sweep: levels as fractions of the cluster, the nodes a window's jobs ran
on, the split of a level's power between busy and idle nodes, and which appliances a cluster sums."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from wattbench.core.align import windows_from_events
from wattbench.core.plan import DEFAULT_CLUSTER_LEVELS, jobs_per_level, parse_fractions
from wattbench.core.score import LevelScore, node_split
from wattbench.sweep.channels import Survey, bind_from_survey


def test_the_seed_levels_on_eight_nodes_are_one_two_four_six_and_eight_jobs() -> None:
    assert jobs_per_level(parse_fractions(DEFAULT_CLUSTER_LEVELS), 8) == (1, 2, 4, 6, 8)


def test_small_clusters_round_halves_up_and_sweep_a_repeated_count_once() -> None:
    fr = parse_fractions(DEFAULT_CLUSTER_LEVELS)
    assert jobs_per_level(fr, 2) == (1, 2)  # 1/8 and 1/4 of 2 nodes are both one job
    assert jobs_per_level(fr, 4) == (1, 2, 3, 4)  # 1/8 of 4 is 0.5: one job, never none
    assert jobs_per_level(fr, 256) == (32, 64, 128, 192, 256)
    assert jobs_per_level((Fraction(1, 3),), 3) == (1,)


@pytest.mark.parametrize("bad", ["0", "1.5", "-1/8", "x", "1/0", ""])
def test_a_fraction_outside_the_cluster_is_refused_with_its_text(bad: str) -> None:
    with pytest.raises(ValueError, match="fraction"):
        parse_fractions(bad)


def _events(jobs: list[dict] | None) -> list[dict]:
    end = {"v": 1, "run": "r", "n": 2, "t": 5000, "event": "measure_end", "phase": "c2", "ops": 2}
    if jobs is not None:
        end["jobs"] = jobs
    return [
        {
            "v": 1,
            "run": "r",
            "n": 0,
            "t": 0,
            "event": "phase_start",
            "phase": "c2",
            "kind": "concurrency",
            "copies": 2,
        },
        {"v": 1, "run": "r", "n": 1, "t": 1000, "event": "measure_start", "phase": "c2"},
        end,
    ]


def test_a_window_knows_the_nodes_its_jobs_ran_on_from_the_scheduler_records() -> None:
    jobs = [
        {"id": "7", "state": "COMPLETED", "nodes": ["n2", "n1"]},
        {"id": "8", "state": "COMPLETED", "nodes": ["n1"]},
    ]
    (w,) = windows_from_events(_events(jobs))
    assert w.busy == ("n1", "n2") and w.copies == 2
    (w,) = windows_from_events(_events(None))
    assert w.busy is None  # a concurrency run on one host has no records: nothing is claimed


def test_a_level_splits_its_power_between_busy_and_idle_nodes() -> None:
    lv = LevelScore(
        "c1",
        "concurrency",
        None,
        0.1,
        390.0,
        copies=1,
        node_W={"n1": 250.0, "n2": 70.0, "n3": 70.0},
        busy=("n1",),
    )
    split = node_split(lv)
    assert split is not None
    assert (split.busy, split.busy_metered, split.busy_W, split.idle, split.idle_W) == (1, 1, 250.0, 2, 140.0)
    # a busy node without a meter is counted busy, not metered
    lv2 = LevelScore("c2", "concurrency", None, 0.1, 70.0, copies=2, node_W={"n3": 70.0}, busy=("n1", "n2"))
    s2 = node_split(lv2)
    assert s2 is not None and (s2.busy, s2.busy_metered, s2.idle) == (2, 0, 1)
    assert node_split(LevelScore("l100", "target", 1.0, 1.0, 1.0)) is None
    assert math.isclose(lv.W, split.busy_W + split.idle_W)


def _meta(dev: str, node: str | None, role: str = "power") -> dict:
    ch = {"c": "psu", "role": role}
    if node:
        ch["node"] = node
    return {"dev": dev, "channels": [ch]}


def test_a_cluster_sums_every_node_appliance_and_names_the_nodes_not_metered() -> None:
    s = Survey(
        metas={
            "n1": _meta("n1", None),
            "bench-b": _meta("bench-b", "n2"),
            "n3": _meta("n3", None),
            "other": _meta("other", "web1"),
        },
        states={"n1": "online", "bench-b": "online", "n3": "offline", "other": "online"},
        publishing={("n1", "psu"), ("bench-b", "psu"), ("other", "psu")},
        listened_s=5,
    )
    choice = bind_from_survey(s, ["n1", "n2", "n3", "n4"])
    assert sorted((c.key, c.node_name) for c in choice.specs) == [("bench-b/psu", "n2"), ("n1/psu", "n1")]
    notes = " | ".join(choice.notes)
    assert "n3: offline, not taken" in notes
    assert "other: meters no node of the cluster" in notes
    assert "not metered: n3, n4 (2 of 4 nodes" in notes
    # without a node set, two live appliances are still ambiguous
    with pytest.raises(ValueError, match="appliances are online"):
        bind_from_survey(s)
