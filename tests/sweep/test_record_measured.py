"""A run records what was measured: the workload's command line with its secrets redacted, the host's
load average at its start and end, and a simulated meter said as such, in the result, the JSON report,
the HTML page and the terminal. The HTML charts leave headroom on every axis inside a visible frame,
and a suite's page says what was measured and marks a rehearsal."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from sweep_synth import RUN, T0, MemoryStore, specpower_phases, sweep_events, trace

import wattbench_schema
from wattbench.core import contract
from wattbench.core import suite as su
from wattbench.core.align import ChannelSpec
from wattbench.core.evaluate import evaluate
from wattbench.core.plan import Timing, specpower_plan
from wattbench.meterinfo import simulated_kinds
from wattbench.report import html as page
from wattbench.report.compare import render_suite_html, suite_renderables
from wattbench.report.jsonreport import report_dict
from wattbench.report.table import render_evaluation
from wattbench.sweep.driver import Driver
from wattbench.sweep.publish import MemorySink
from wattbench.sweep.scoring import ScoringOptions, score_run
from wattbench.sweep.sut import load_average, redact_command
from wattbench.workloads import make_workload

FAST = Timing(pre_s=0.05, measure_s=0.3, post_s=0.05, gap_s=0.0)


@pytest.mark.parametrize(
    ("line", "recorded"),
    [
        ("./bench.sh {load} --duration {duration}", "./bench.sh {load} --duration {duration}"),
        ("./run --password hunter2 --rate {rate}", "./run --password *** --rate {rate}"),
        ("./run --api-key=abc123 -v", "./run --api-key=*** -v"),
        ("DB_PASS=hunter2 MY_TOKEN=t0k ./run", "DB_PASS=*** MY_TOKEN=*** ./run"),
        ("./run -secret s3cr3t", "./run -secret ***"),
        ("curl https://bob:pw@db.example/x", "curl https://***@db.example/x"),
        ("psql 'postgres://bob:pw@db/x' -c 'select 1'", "psql 'postgres://***@db/x' -c 'select 1'"),
        ('sh -c "./run --auth-token t0k {level}"', 'sh -c "./run --auth-token *** {level}"'),
        ("./run --keyfile=/etc/k.pem", "./run --keyfile=***"),
    ],
)
def test_the_redaction_rule(line: str, recorded: str) -> None:
    assert redact_command(line) == recorded


def test_a_long_command_line_is_cut_to_the_contract() -> None:
    text = redact_command("x" * 900)
    assert text is not None and len(text) == 500
    assert redact_command("   ") is None and redact_command(None) is None


def test_the_load_average_is_a_number_in_range() -> None:
    load = load_average()
    assert isinstance(load, float) and 0.0 <= load <= 1e6
    # the same figure `uptime` and the busy-machine warning read, to two places
    assert abs(load - os.getloadavg()[0]) < 1.0


def _loads(*values: float) -> Iterator[tuple[float, float, float]]:
    for v in values:
        yield (v, 0.0, 0.0)


def test_a_command_workload_run_records_its_redacted_command_line(monkeypatch: pytest.MonkeyPatch) -> None:
    template = (
        "env DB_PASSWORD=hunter2 sh -c 'i=0; while :; do i=$((i+50)); echo ops=$i; sleep 0.02; done' "
        "https://bob:pw@db.example/x --api-key abc123 {level}"
    )
    wl = make_workload("command", {"run": template})
    loads = _loads(0.5, 3.25)
    monkeypatch.setattr(os, "getloadavg", lambda: next(loads))
    plan = specpower_plan(levels=(1.0,), idle=False, timing=FAST)
    sink = MemorySink()
    record = Driver(RUN, plan, wl, sink).run()
    assert record.interrupted is None, record.interrupted
    start = record.events[0]
    assert (
        start["load"] == 0.5 and record.events[-1]["event"] == "run_end" and record.events[-1]["load"] == 3.25
    )
    ev = evaluate(RUN, record.events, None, [])
    result = contract.validate_result(ev.result)
    assert result["workload"] == "command"
    assert result["command"] == (
        "env DB_PASSWORD=*** sh -c 'i=0; while :; do i=$((i+50)); echo ops=$i; sleep 0.02; done' "
        "https://***@db.example/x --api-key *** {level}"
    )
    assert "hunter2" not in str(result) and "abc123" not in str(result) and "pw@" not in str(result)
    assert result["load"] == {"start": 0.5, "end": 3.25}
    # The report and the page say it; `report` scoring the stored run again keeps it (from the events).
    doc = report_dict(ev)
    assert doc["measured"]["command"] == result["command"] and doc["measured"]["load"] == result["load"]
    text = render_evaluation(ev)
    assert "env DB_PASSWORD=*** sh -c" in text and "hunter2" not in text and "abc123" not in text
    html = page.render_html(ev)
    assert "DB_PASSWORD=***" in html and "hunter2" not in html
    assert "0.50 at the start, 3.25 at the end" in html
    store = MemoryStore()
    for e in record.events:
        store.write_phase(e)
    again = score_run(store, RUN, ScoringOptions())
    assert again.result["command"] == result["command"] and again.result["load"] == result["load"]


def test_a_run_with_an_abort_records_the_load_at_the_abort() -> None:
    events = sweep_events(specpower_phases())
    events[0]["load"] = 1.5
    events[-1] = {**events[-1], "event": "run_abort", "reason": "stopped", "load": 0.25}
    for e in events:
        contract.validate_phase(e)
    result = evaluate(RUN, events, None, []).result
    assert result["load"] == {"start": 1.5, "end": 0.25}


def test_a_workload_that_runs_no_program_records_no_command_line() -> None:
    assert make_workload("builtin", {}).command_line() is None
    assert make_workload("command", {"run": "./x {load}"}).command_line() == "./x {load}"
    assert make_workload("concurrency", {"job": "./job {copy}"}).command_line() == "./job {copy}"


def _sim_run(meter: str) -> Any:
    events = sweep_events(specpower_phases())
    events[0]["sut"] = {"cores": 2}
    store = MemoryStore()
    store.add_series(trace("sim-01", "p0", T0, events[-1]["t"], 10, lambda t: np.full(t.shape, 250.0)))
    return evaluate(
        RUN,
        events,
        store.series,
        [ChannelSpec("sim-01", "p0", hz=10, meter=meter, simulated=meter in simulated_kinds())],
        {},
    )


def test_a_meter_folder_says_whether_its_power_is_simulated() -> None:
    """The simulated meters say so in their own folders (analyzer.json), so no list of meter kinds in
    the collector names them; the channel's metadata carries the kind, and the sweep marks it."""
    from wattbench.sweep.channels import KnownRole, with_meta

    assert "sim" in simulated_kinds() and "wt300" not in simulated_kinds()
    spec = with_meta(ChannelSpec("sim-01", "p0"), KnownRole("power", meter="sim"))
    assert (
        spec.simulated and not with_meta(ChannelSpec("b", "p"), KnownRole("power", meter="wt300")).simulated
    )


def test_a_simulated_meter_is_said_in_the_result_json_html_and_terminal() -> None:
    ev = _sim_run("sim")
    assert contract.validate_result(ev.result)["simulated_meter"] is True
    doc = report_dict(ev)
    errors = [e.message for e in wattbench_schema.jsonschema_validator("report").iter_errors(doc)]
    assert errors == []
    assert doc["measured"]["simulated_meter"] is True
    html = page.render_html(ev)
    header = html[: html.index("<h2>Result</h2>")]
    assert "simulated meter" in header and "CPU use" in header
    assert "simulated meter" in render_evaluation(ev)

    real = _sim_run("wt300")
    assert "simulated_meter" not in real.result and "simulated_meter" not in report_dict(real)["measured"]
    assert "simulated meter" not in page.render_html(real) and "simulated meter" not in render_evaluation(
        real
    )


# ---------------------------------------------------------------------------------------- charts
def _capture(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    figs: list[Any] = []
    monkeypatch.setattr(page, "figure_svg", lambda fig: figs.append(fig) or "<svg></svg>")
    return figs


def _headroom(lim: tuple[float, float], data: tuple[float, float]) -> tuple[float | None, float]:
    """(share of room below the data, None when the axis starts at 0 under data >= 0; share above)."""
    (l0, l1), (d0, d1) = lim, data
    from_zero = l0 == 0 and d0 >= 0
    base = 0.0 if from_zero else d0
    span = d1 - base if d1 - base > 1e-9 else abs(d1)
    below = None if from_zero else (d0 - l0) / span
    return below, (l1 - d1) / span


def _assert_headroom(lim: tuple[float, float], data: tuple[float, float]) -> None:
    below, above = _headroom(lim, data)
    assert 0.05 <= above <= 0.10, (lim, data)
    assert below is None or 0.05 <= below <= 0.10, (lim, data)


def _assert_framed(ax: Any) -> None:
    assert all(s.get_visible() and s.get_linewidth() > 0 for s in ax.spines.values())


def test_the_specpower_chart_has_headroom_on_every_axis(monkeypatch: pytest.MonkeyPatch) -> None:
    figs = _capture(monkeypatch)
    ev = _sim_run("sim")  # flat 250 W: the power line would sit on the frame
    page.specpower_chart(ev.levels)
    ax, ax2 = figs[0].axes
    ratios = [0.0 if lv.kind == "idle" else lv.ratio for lv in ev.levels if lv.has_power]
    _assert_headroom(ax.get_ylim(), (0.0, max(ratios)))
    _assert_headroom(ax2.get_ylim(), (0.0, 250.0))
    n = len(ratios)
    _assert_headroom(ax.get_xlim(), (-0.4, n - 1 + 0.4))
    _assert_framed(ax)
    _assert_framed(ax2)


def test_the_concurrency_chart_has_headroom_on_every_axis(monkeypatch: pytest.MonkeyPatch) -> None:
    from wattbench.core.score import LevelScore, concurrency_figures

    levels = [
        LevelScore(f"c{c}", "concurrency", None, ops=10.0 * c, W=100.0 + 10 * c, duration_s=10.0, copies=c)
        for c in (1, 2, 4)
    ]
    figs = _capture(monkeypatch)
    page.concurrency_chart(levels)
    ax, ax2 = figs[0].axes
    rel = [concurrency_figures(levels)[lv.phase][0] for lv in levels]
    energy = [concurrency_figures(levels)[lv.phase][1] for lv in levels]
    _assert_headroom(ax.get_ylim(), (0.0, max(rel)))
    _assert_headroom(ax2.get_ylim(), (0.0, max(energy)))
    _assert_headroom(ax.get_xlim(), (-0.4, len(levels) - 1 + 0.4))
    _assert_framed(ax)


def test_a_flat_power_trace_does_not_sit_on_the_frame(monkeypatch: pytest.MonkeyPatch) -> None:
    ev = _sim_run("sim")
    events = sweep_events(specpower_phases())
    store = MemoryStore()
    store.add_series(trace("sim-01", "p0", T0, events[-1]["t"], 10, lambda t: np.full(t.shape, 250.0)))
    figs = _capture(monkeypatch)
    page.traces_chart(ev.levels, events, store.series, ev.channels, {})
    axes = [a for a in figs[0].axes if a.get_visible()]
    assert axes
    _assert_headroom(axes[0].get_ylim(), (250.0, 250.0))
    spans = page.phase_spans(events)
    for ax, lv in zip(axes, [lv for lv in ev.levels if lv.phase in spans], strict=True):
        p0, m0, _m1, p1 = spans[lv.phase]
        _assert_headroom(ax.get_xlim(), ((p0 - m0) / 1000.0, (p1 - m0) / 1000.0))
        _assert_framed(ax)


# ------------------------------------------------------------------------------------------ suite
def _suite_doc(measure_s: float, simulated: bool = True) -> dict[str, Any]:
    events = sweep_events(specpower_phases(measure_s=measure_s), measure_ms=int(measure_s * 1000))
    events[0].update(host="sut-01", sut={"cpu": "Example CPU", "cores": 2}, load=0.4)
    events[-1]["load"] = 1.9
    result = evaluate(RUN, events, None, []).result
    if simulated:
        result["simulated_meter"] = True
    worklet = su.WorkletResult("sha256", "cpu", "hashes", result)
    measured = su.suite_measured([(events, result)])
    doc = su.suite_document("mini", RUN, T0, [worklet], measured=measured)
    errors = [e.message for e in wattbench_schema.jsonschema_validator("suite").iter_errors(doc)]
    assert errors == []
    return doc


def test_a_short_window_suite_page_says_what_was_measured_under_a_rehearsal_banner() -> None:
    doc = _suite_doc(10.0)
    m = doc["measured"]
    assert m["rehearsal"] is True and m["shortest_window_s"] == 10.0 and m["host"] == "sut-01"
    assert m["load"] == {"start": 0.4, "end": 1.9} and m["simulated_meter"] is True
    html = render_suite_html(doc)
    assert "<h2>What was measured</h2>" in html
    banner = html.index('class="badge rehearsal">REHEARSAL')
    assert banner < html.index("<table>"), "the banner heads the page"
    for text in ("Example CPU", "0.40 at the start, 1.90 at the end", "simulated meter", "shortest 10 s"):
        assert text in html, text
    from rich.console import Console

    console = Console(width=200, record=True)
    for r in suite_renderables(doc):
        console.print(r)
    text = console.export_text()
    assert "What was measured" in text and "REHEARSAL" in text


def test_a_suite_with_specpower_windows_is_no_rehearsal() -> None:
    doc = _suite_doc(240.0, simulated=False)
    assert doc["measured"]["rehearsal"] is False
    html = render_suite_html(doc)
    assert "<h2>What was measured</h2>" in html and "REHEARSAL" not in html
    assert "simulated meter" not in html
