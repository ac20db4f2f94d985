"""The standard a run's measurement meets (core/conformance.py): SPECpower/SERT's analyzer rules and
EE HPC WG Levels 1 to 3, each reached and each refused with its reason, a BMC-measured run stated as
Level 1 and not SPEC-comparable instead of failing, --require turning the statement into a check, and
the statement in the terminal, JSON and HTML reports."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from sweep_synth import RUN, SeriesFetch, sweep_events, trace

from wattbench.core import compliance as cp
from wattbench.core import conformance as cf
from wattbench.core import contract
from wattbench.core.align import ChannelSpec
from wattbench.core.evaluate import evaluate
from wattbench.report.html import render_html
from wattbench.report.jsonreport import report_dict
from wattbench.report.table import render_evaluation

T0 = 1_767_225_600_000  # 2026-01-01
ANALYZER = ChannelSpec(
    "bench", "psu", hz=10, meter="wt300", acc=0.005, quantities=("W", "V", "A", "PF", "Wh")
)


def _phases(measure_s: float, loads: range = range(100, 0, -10)) -> list[tuple[str, str, float | None, int]]:
    cal = int(3000 * measure_s)
    out: list[tuple[str, str, float | None, int]] = [(f"cal{i}", "calibration", None, cal) for i in (1, 2, 3)]
    for pct in loads:
        out.append((f"l{pct}", "target", pct / 100, round(3000 * pct / 100 * measure_s)))
    out.append(("idle", "idle", 0.0, 0))
    return out


def _run(
    specs: list[ChannelSpec],
    measure_s: float = 240.0,
    idle: bool = True,
    limits: cp.Limits | None = None,
    loads: range = range(100, 0, -10),
) -> Any:
    phases = _phases(measure_s, loads)
    if not idle:
        phases = phases[:-1]
    events = sweep_events(phases, t0=T0, measure_ms=int(measure_s * 1000))
    end = events[-1]["t"]
    series = [
        trace(s.dev, s.ch, T0, end, s.hz or 1.0, lambda t: 100.0 + 0.001 * (t - T0) / 1000.0) for s in specs
    ]
    # No inlet probe in these runs: the inlet check is not what they are about.
    limits = replace(limits or cp.Limits(), require_inlet=False)
    return evaluate(RUN, events, SeriesFetch(series), specs, {}, limits=limits, now_ms=end + 1000)


def test_an_analyzer_on_240_s_windows_meets_spec_and_level_3() -> None:
    ev = _run([ANALYZER])
    st = ev.result["standard"]
    assert st == {
        "spec": True,
        "eehpc_level": 3,
        "acc": pytest.approx(0.005),
        "statement": "EE HPC WG Level 3 (1 %); SPEC-comparable measurement (analyzer ≤ 1 %, 1/s, 240 s windows)",
    }
    assert ev.valid


def test_target_loads_run_upward_are_not_spec_comparable() -> None:
    """SPECpower runs its target loads from 100 % down; the same loads run upward meet a machine in
    another thermal state, and the measurement says so (the run itself stays valid)."""
    ev = _run([ANALYZER], loads=range(10, 101, 10))
    st = ev.result["standard"]
    assert st["spec"] is False and ev.valid
    assert (
        "target loads ran upward (10 % first); SPECpower runs them from the highest down" in st["statement"]
    )


def test_without_an_energy_counter_it_is_level_2() -> None:
    ev = _run([replace(ANALYZER, quantities=("W", "V", "A", "PF"))])
    st = ev.result["standard"]
    assert st["eehpc_level"] == 2 and st["spec"]
    assert "not Level 3: bench/psu integrate no energy (no Wh counter)" in st["statement"]


def test_a_2_percent_meter_is_level_2_and_not_spec_comparable() -> None:
    ev = _run([replace(ANALYZER, acc=0.015)])
    st = ev.result["standard"]
    assert (st["eehpc_level"], st["spec"]) == (2, False)
    assert "not Level 3: combined accuracy 1.50 % above 1.00 %" in st["statement"]
    assert "not SPEC-comparable: accuracy 1.50 % above 1.00 %" in st["statement"]
    assert ev.valid  # stated, not failed


def test_a_bmc_is_level_1_not_spec_comparable_and_the_run_stays_valid() -> None:
    bmc = ChannelSpec("srv1-bmc", "dcmi", hz=1, meter="ipmi", acc=0.05, upd=1.0, quantities=("W",))
    ev = _run([bmc])
    st = ev.result["standard"]
    assert (st["eehpc_level"], st["spec"]) == (1, False)
    assert "not Level 2: combined accuracy 5.00 % above 2.00 %" in st["statement"]
    assert "srv1-bmc/dcmi measure fewer than two of V, A and PF" in st["statement"]
    assert ev.valid
    assert "VALID as EE HPC WG Level 1, not SPEC-comparable" in render_evaluation(ev)


def test_no_level_for_a_meter_worse_than_5_percent_or_of_unknown_accuracy() -> None:
    st = _run([replace(ANALYZER, acc=0.08)]).result["standard"]
    assert st["eehpc_level"] == 0 and "not Level 1: combined accuracy 8.00 % above 5.00 %" in st["statement"]
    st = _run([replace(ANALYZER, acc=None)]).result["standard"]
    assert st["eehpc_level"] == 0 and not st["spec"]
    assert "the accuracy of bench/psu is not known" in st["statement"]


def test_short_windows_slow_updates_and_no_idle_each_cost_their_level() -> None:
    st = _run([ANALYZER], measure_s=10.0).result["standard"]
    assert st["eehpc_level"] == 0 and "windows of 10 s, shorter than 60 s" in st["statement"]
    assert "windows of 10 s, SPECpower's are 240 s" in st["statement"]
    slow = replace(ANALYZER, upd=30.0)  # a plug that updates every 30 s, polled at 10 Hz
    st = _run([slow], measure_s=240.0).result["standard"]
    assert st["eehpc_level"] == 0 and "a reading every 30 s, fewer than one a second" in st["statement"]
    st = _run([ANALYZER], idle=False).result["standard"]
    assert st["eehpc_level"] == 1 and "not Level 2: idle power not measured" in st["statement"]


def test_several_meters_combine_by_root_sum_of_squares_and_each_must_be_within_3_percent() -> None:
    a = replace(ANALYZER, ch="psu1", acc=0.025)
    b = replace(ANALYZER, ch="psu2", acc=0.025)
    st = _run([a, b]).result["standard"]
    # Two equal 2.5 % meters on equal power: 2.5 % / sqrt(2) = 1.77 %, within Level 2.
    assert st["acc"] == pytest.approx(0.025 / np.sqrt(2))
    assert st["eehpc_level"] == 2
    c = replace(ANALYZER, ch="psu2", acc=0.04)
    st = _run([replace(a, acc=0.01), c]).result["standard"]
    assert st["eehpc_level"] == 0 and "bench/psu2 above 3.00 % each" in st["statement"]


def test_require_turns_the_statement_into_a_check() -> None:
    bmc = ChannelSpec("srv1-bmc", "dcmi", hz=1, meter="ipmi", acc=0.05, quantities=("W",))
    ev = _run([bmc], limits=cp.Limits(require="eehpc-l1"))
    assert ev.valid and any(c.name == "standard" and c.ok for c in ev.checks)
    ev = _run([bmc], limits=cp.Limits(require="spec"))
    (c,) = [c for c in ev.checks if c.name == "standard"]
    assert not ev.valid and not c.ok
    assert c.reason.startswith("required spec; measured as EE HPC WG Level 1, not SPEC-comparable (")
    with pytest.raises(ValueError, match="require must be one of"):
        cp.Limits(require="gold")


BMC = ChannelSpec("srv1-bmc", "dcmi", hz=1, meter="ipmi", acc=0.05, upd=1.0, quantities=("W",))


@pytest.mark.parametrize(
    ("spec", "level", "badge", "acc_shown"),
    [
        (ANALYZER, 3, "VALID as EE HPC WG Level 3, SPEC-comparable", "0.5 %"),
        (replace(ANALYZER, acc=0.015), 2, "VALID as EE HPC WG Level 2, not SPEC-comparable", "1.5 %"),
        (BMC, 1, "VALID as EE HPC WG Level 1, not SPEC-comparable", "5 %"),
        (replace(ANALYZER, acc=0.08), 0, "VALID as no EE HPC WG level, not SPEC-comparable", "8 %"),
    ],
    ids=["level3-spec", "level2", "level1-bmc", "none"],
)
def test_the_statement_is_in_every_report(spec: ChannelSpec, level: int, badge: str, acc_shown: str) -> None:
    ev = _run([spec])
    text = render_evaluation(ev, width=300)
    assert badge in text and "standard" in text
    assert acc_shown in text  # the channel's accuracy beside what was summed
    doc = report_dict(ev, detail=False)
    contract.validate("report", doc)
    assert doc["result"]["standard"]["eehpc_level"] == level
    first = doc["result"]["standard"]["statement"].split(";")[0]
    assert first in text
    page = render_html(ev)
    assert badge in page and first in page


def test_a_statement_of_a_channel_without_metadata_uses_the_samples_u() -> None:
    spec = ChannelSpec("bench", "psu", hz=10)
    classes = cf.classify([spec], [])
    assert classes[0].acc is None  # nothing seen, nothing made up


# ---------------------------------------------------------------------------- share of the system metered
@pytest.mark.parametrize(
    ("cov", "level1", "level2", "level3"),
    [
        # the whole system: every level's share
        (cf.Coverage(4, 4, 800.0), True, True, True),
        # 40 kW measured is enough for Level 1 whatever the share, and no more
        (cf.Coverage(1000, 100, 40_000.0), True, False, False),
        (cf.Coverage(1000, 100, 39_999.0), True, False, False),  # 100 nodes, 10 %, 2 kW: still Level 1
        (cf.Coverage(1000, 99, 39_999.0), False, False, False),  # under a tenth, under 40 kW
        # small systems: 15 nodes is the floor; fewer than 15 nodes means all of them
        (cf.Coverage(100, 15, 15 * 200.0), True, False, False),  # 15 nodes, 3 kW: L1; L2 needs 10 kW
        (cf.Coverage(100, 14, 14 * 200.0), False, False, False),
        (cf.Coverage(100, 15, 1_999.0), False, False, False),  # 15 nodes but under 2 kW
        (cf.Coverage(10, 9, 9 * 500.0), False, False, False),  # 15 > 10 nodes: the whole system
        # Level 2: the largest of an eighth, 10 kW and 15 nodes
        (cf.Coverage(200, 25, 10_000.0), True, True, False),
        (cf.Coverage(200, 24, 10_000.0), True, False, False),  # an eighth of 200 is 25
        (cf.Coverage(200, 25, 9_999.0), True, False, False),
        (cf.Coverage(80, 15, 10_000.0), True, True, False),  # an eighth of 80 is 10: 15 nodes rule
    ],
)
def test_the_share_metered_at_each_level_edge(
    cov: cf.Coverage, level1: bool, level2: bool, level3: bool
) -> None:
    assert (cf.coverage_reasons(1, cov) == []) is level1
    assert (cf.coverage_reasons(2, cov) == []) is level2
    assert (cf.coverage_reasons(3, cov) == []) is level3


def test_the_statement_names_the_share_metered_when_the_system_size_is_given() -> None:
    """Two nodes of a 20-node system metered with analyzers: every other rule of Level 3 is met, and the
    statement says the share is why it is no level at all; without --system-nodes the share is not judged."""
    a = ChannelSpec(
        "n1", "psu", hz=10, meter="wt300", acc=0.005, quantities=("W", "V", "A", "PF", "Wh"), node="n1"
    )
    b = ChannelSpec(
        "n2", "psu", hz=10, meter="wt300", acc=0.005, quantities=("W", "V", "A", "PF", "Wh"), node="n2"
    )
    assert _run([a, b]).result["standard"]["eehpc_level"] == 3
    ev = _run([a, b], limits=cp.Limits(system_nodes=20))
    st = ev.result["standard"]
    assert st["eehpc_level"] == 0
    assert "2 of 20 nodes metered" in st["statement"] and "Level 1 needs 15 nodes and 2 kW" in st["statement"]
    assert _run([a, b], limits=cp.Limits(system_nodes=2)).result["standard"]["eehpc_level"] == 3
    with pytest.raises(ValueError, match="system_nodes"):
        cp.Limits(system_nodes=0)
