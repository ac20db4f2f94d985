"""One scoring of a stored run (sweep/scoring.py): the sweep right after its run and `wattbench report`
later give the same evaluation of the same run on the embedded store, and the scoring options a result
records read back to the options it was scored with."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sweep_synth import RUN, T0, specpower_phases, sweep_events, trace

from wattbench.cli import report as report_cli
from wattbench.cli.scoring import add_scoring_arguments
from wattbench.core import contract
from wattbench.core.align import ChannelSpec
from wattbench.core.evaluate import Evaluation
from wattbench.core.plan import Timing, specpower_plan
from wattbench.store import open_store
from wattbench.store.base import Store
from wattbench.sweep.driver import RunRecord
from wattbench.sweep.scoring import ScoringOptions, score_run
from wattbench.sweep.session import SweepSetup, score_record

META = {
    "v": 1,
    "dev": "bench",
    "fw": "0.1.0",
    "board": "host",
    "channels": [
        {"c": "psu", "meter": "sim", "q": ["W"], "hz": 10, "role": "power"},
        {"c": "inlet", "meter": "ds18b20", "q": ["T"], "hz": 1, "role": "inlet"},
    ],
}


def _add(store: Store, s: Any) -> None:
    rows = []
    for i in range(len(s)):
        row: dict[str, Any] = {"s": int(s.seq[i]), "t": int(s.t_ms[i]), "c": s.ch}
        row.update({k: float(v[i]) for k, v in s.values.items()})
        rows.append(row)
    store.write_samples(s.dev, rows)


def _sqlite_run(tmp_path: Path, inlet_c: float = 22.5) -> tuple[Store, list[dict[str, Any]]]:
    """A finished sweep on the embedded store, as the sweep and the collector leave it: its events
    (naming the channels it bound), the appliance's metadata, its samples and the collector's clock
    estimates, the device 400 ms behind (beyond the deadband, so alignment shifts by it)."""
    events = sweep_events(specpower_phases())
    events[0]["channels"] = ["bench/psu", "bench/inlet"]
    store = open_store(str(tmp_path / "run.sqlite"))
    for e in events:
        contract.validate_phase(e)
        store.write_phase(e)
    store.write_meta(META, T0 - 1000)
    end = events[-1]["t"]
    _add(
        store,
        trace("bench", "psu", T0 - 400, end - 400, 10, lambda t: 150 + 20 * np.sin(t / 3000.0), u=0.004),
    )
    inlet = trace("bench", "inlet", T0 - 400, end - 400, 1, lambda t: np.full(t.shape, inlet_c))
    inlet.values["T"] = inlet.values.pop("W")
    _add(store, inlet)
    for t in range(T0, end + 60_000, 30_000):
        store.write_health("coll", "bench", {"offset_ms": 400.0}, t)
    store.flush()
    return store, events


def _swept(store: Store, events: list[dict[str, Any]], options: ScoringOptions) -> Evaluation:
    """The run scored as `wattbench sweep` scores it once the driver is done, the result stored."""
    plan = specpower_plan(timing=Timing(2, 10, 2, 1))
    record = RunRecord(RUN, [dict(e) for e in events], planned=[p.name for p in plan.scored])
    setup = SweepSetup(run=RUN, plan=plan, workload=None, store=store, scoring=options, wait_data_s=1.0)
    bound = [ChannelSpec("bench", "psu"), ChannelSpec("bench", "inlet", role="inlet")]
    evaluation, _specs, complete = score_record(setup, record, bound)
    assert complete
    store.write_result(evaluation.result)
    store.flush()
    return evaluation


def _reported(store: Store, argv: list[str]) -> Evaluation:
    parser = argparse.ArgumentParser()
    report_cli.add_arguments(parser)
    loaded = report_cli.load(parser.parse_args(argv), store)
    assert not isinstance(loaded, str), loaded
    return loaded[0]


def _same(a: Evaluation, b: Evaluation) -> None:
    assert a.result == b.result
    assert repr(a.levels) == repr(b.levels)  # repr: a level without power has NaN watts
    assert a.checks == b.checks
    assert a.channels == b.channels
    assert a.offsets_ms == b.offsets_ms and a.measured_offsets_ms == b.measured_offsets_ms
    assert {k: (t.stretches, t.steps) for k, t in a.clock.items()} == {
        k: (t.stretches, t.steps) for k, t in b.clock.items()
    }
    assert (a.calibrated, a.calibration, a.calibration_missing) == (
        b.calibrated,
        b.calibration,
        b.calibration_missing,
    )


def test_the_sweep_and_the_report_score_a_stored_run_alike(tmp_path: Path) -> None:
    """The result the sweep stores is the one `report --rescore` computes again: the report keeps the
    options the run was scored with. It used to score with the defaults (failing the inlet check the
    sweep had waived), and the sweep stamped the result with the time of scoring."""
    store, events = _sqlite_run(tmp_path, inlet_c=15.0)  # a cold room: below the default minimum
    options = ScoringOptions(min_inlet=10.0, load_tolerance=0.05)
    try:
        swept = _swept(store, events, options)
        contract.validate_result(swept.result)
        assert swept.result["options"] == {"--min-inlet": 10.0, "--load-tolerance": 0.05}
        assert swept.result["t"] == events[-1]["t"]
        assert swept.offsets_ms == {"bench": -400.0} and swept.valid
        _same(_reported(store, [RUN, "--rescore"]), swept)
        # shown as stored, it has the same clock figures as the scoring it comes from
        shown = _reported(store, [RUN])
        assert shown.result == swept.result
        assert repr(shown.clock) == repr(swept.clock) and shown.offsets_ms == swept.offsets_ms
        assert shown.channels == swept.channels
    finally:
        store.close()


def test_an_option_given_to_a_rescore_replaces_only_its_own(tmp_path: Path) -> None:
    store, events = _sqlite_run(tmp_path, inlet_c=15.0)
    try:
        _swept(store, events, ScoringOptions(min_inlet=10.0))
        again = _reported(store, [RUN, "--rescore", "--max-skew", "300"])
        assert again.result["options"] == {"--min-inlet": 10.0, "--max-skew": 300.0}
        assert not again.valid  # 400 ms of clock skew is beyond 300
        assert all(c.ok for c in again.checks if c.name != "clock_skew")
    finally:
        store.close()


def test_a_report_scoring_a_run_first_scores_it_as_score_run_does(tmp_path: Path) -> None:
    """A run of the user's own script (no stored result): the report's scoring is score_run's."""
    store, _ = _sqlite_run(tmp_path)
    try:
        reported = _reported(store, [RUN, "--no-inlet-required"])
        _same(reported, score_run(store, RUN, ScoringOptions(no_inlet_required=True)))
    finally:
        store.close()


def test_scoring_options_round_trip_through_a_stored_result(tmp_path: Path) -> None:
    store, _ = _sqlite_run(tmp_path)
    options = ScoringOptions(
        channel=("bench/psu",),
        inlet=("bench/inlet",),
        clock_offset=("bench=380",),
        load_tolerance=0.05,
        load_mode="points",
        no_inlet_required=True,
        max_uncertainty=0.01,
        require="eehpc-l1",
        max_skew=500.0,
        system_nodes=2,
        price=12000.0,
        tariff=0.3,
        years=5.0,
    )
    try:
        store.write_result(score_run(store, RUN, options).result)
        store.flush()
        stored = store.result(RUN)
        assert stored is not None
        contract.validate_result(stored)
        assert ScoringOptions.from_result(stored) == options
        assert ScoringOptions.from_record(options.record()) == options
    finally:
        store.close()
    assert ScoringOptions.from_result({"run": RUN}) == ScoringOptions()  # stored before options were


def test_the_command_line_defaults_are_the_scoring_options_defaults() -> None:
    parser = argparse.ArgumentParser()
    add_scoring_arguments(parser)
    parsed = parser.parse_args([])
    assert set(vars(parsed)) == {f for f in ScoringOptions.__dataclass_fields__}
    assert ScoringOptions.from_args(parsed) == ScoringOptions()
    given = parser.parse_args(["--channel", "a/b", "--no-inlet-required", "--load-tolerance", "0.05"])
    assert ScoringOptions.from_args(given).record() == {
        "--channel": ["a/b"],
        "--no-inlet-required": True,
        "--load-tolerance": 0.05,
    }


def test_a_limit_the_core_refuses_is_refused_when_the_options_are_built() -> None:
    from wattbench.core import FieldError

    with pytest.raises(FieldError):
        ScoringOptions(load_tolerance=1.5)


@pytest.mark.parametrize(
    ("shift_ms", "channels", "fails"),
    [
        (60_000, ["bench/psu"], True),  # a second sweep on the same meter, a minute into this one
        (-60_000, ["bench/inlet", "bench/psu"], True),  # one that started first
        (60_000, ["other/psu"], False),  # another bench's meter at the same time: a lab of several
        (10_000_000, ["bench/psu"], False),  # the same meter, hours later
    ],
    ids=["same-meter", "same-meter-started-first", "other-meter", "later"],
)
def test_a_run_beside_another_on_its_meter_is_invalid(
    tmp_path: Path, shift_ms: int, channels: list[str], fails: bool
) -> None:
    """Two sweeps at once on one power channel were both scored, the first VALID though its watts held
    the second's load: each run's watts are the meter's only when no other run drove it meanwhile."""
    store, _ = _sqlite_run(tmp_path)
    other = sweep_events(specpower_phases(), t0=T0 + shift_ms, run="par-b")
    other[0]["channels"] = channels
    for e in other:
        contract.validate_phase(e)
        store.write_phase(e)
    store.flush()
    evaluation = score_run(store, RUN, ScoringOptions())
    failed = {c.name: c.reason for c in evaluation.checks if not c.ok}
    if fails:
        assert "exclusive" in failed and not evaluation.valid, failed
        assert "run par-b" in failed["exclusive"] and "bench/psu" in failed["exclusive"], failed
    else:
        assert "exclusive" not in failed, failed


@pytest.mark.parametrize(
    ("ago_s", "ended", "channels", "refused"),
    [
        (5, False, ["bench/psu"], True),  # a sweep on the meter now
        (5, True, ["bench/psu"], False),  # one that has ended
        (5, False, ["other/psu"], False),  # another bench's meter
        (3600, False, ["bench/psu"], False),  # killed an hour ago, without its end
    ],
    ids=["running", "ended", "other-meter", "long-dead"],
)
def test_a_sweep_is_refused_before_its_first_phase_while_another_drives_its_meter(
    tmp_path: Path, ago_s: int, ended: bool, channels: list[str], refused: bool
) -> None:
    """The exclusive check fails both runs at their end; a sweep that can see the other one in the
    store is told before it starts, so that neither hour is spent."""
    import time

    from wattbench.sweep.channels import ChannelError, Choice
    from wattbench.sweep.session import check_meter_free

    store = open_store(str(tmp_path / "s.sqlite"))
    t0 = int(time.time() * 1000) - ago_s * 1000 - 40_000
    events = sweep_events(specpower_phases()[:3], t0=t0, run="par-a")
    events[0]["channels"] = channels
    for e in events if ended else [e for e in events if e["event"] != "run_end"]:
        store.write_phase(e)
    store.flush()
    setup = SweepSetup(run="par-b", plan=None, workload=None, store=store)
    choice = Choice(specs=[ChannelSpec("bench", "psu")])
    if refused:
        with pytest.raises(ChannelError, match=r"^channel bench/psu: run par-a is driving it"):
            check_meter_free(setup, choice)
    else:
        check_meter_free(setup, choice)
