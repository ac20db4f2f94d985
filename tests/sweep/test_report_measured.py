"""The report says what was measured: the system under test, the calibration intervals, the phase timing
(a rehearsal when windows are shorter than SPECpower's 240 s), the inlet temperature or that it was
waived, units, and the failed checks first. `report --json` validates against its schema."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pytest
from sweep_synth import RUN, T0, MemoryStore, specpower_phases, sweep_events, trace

import wattbench_schema
from wattbench.cli import report as report_cli
from wattbench.core import contract
from wattbench.core.align import ChannelSpec
from wattbench.core.compliance import Limits
from wattbench.core.evaluate import evaluate
from wattbench.report.html import render_html
from wattbench.report.jsonreport import report_dict
from wattbench.report.table import render_evaluation

SUT = {
    "cpu": "Example CPU 9000 @ 3.0GHz",
    "cores": 16,
    "memory_MiB": 65536,
    "os": "Debian GNU/Linux 12 (bookworm)",
    "kernel": "6.1.0-26-amd64",
}


def _events(sut: dict | None = SUT, **kw: object) -> list[dict]:
    events = sweep_events(specpower_phases(), **kw)  # type: ignore[arg-type]
    events[0]["host"] = "sut-01"
    if sut is not None:
        events[0]["sut"] = dict(sut)
    for e in events:
        contract.validate_phase(e)
    return events


def _store(events: list[dict], inlet: bool = True) -> MemoryStore:
    store = MemoryStore()
    for e in events:
        store.write_phase(e)
    end = events[-1]["t"]
    store.add_series(trace("bench", "psu", T0, end, 10, lambda t: 150 + 20 * np.sin(t / 3000.0)))
    if inlet:
        s = trace("bench", "inlet", T0, end, 1, lambda t: np.full(t.shape, 22.5))
        s.values["T"] = s.values.pop("W")
        store.add_series(s)
    return store


SPECS = [ChannelSpec("bench", "psu", hz=10), ChannelSpec("bench", "inlet", role="inlet")]


def _report_json(store: MemoryStore, argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    parser = argparse.ArgumentParser()
    report_cli.add_arguments(parser)
    args = parser.parse_args(argv)
    loaded = report_cli.load(args, store)
    assert not isinstance(loaded, str), loaded
    return report_dict(loaded[0])


def _validate(name: str, doc: dict) -> None:
    v = wattbench_schema.jsonschema_validator(name)
    errors = [e.message for e in v.iter_errors(doc)]
    assert errors == []


def test_report_json_validates_against_its_schema(capsys: pytest.CaptureFixture[str]) -> None:
    events = _events()
    store = _store(events)
    # scored here: the detail section is present
    doc = _report_json(store, [RUN, "--channel", "bench/psu", "--inlet", "bench/inlet"], capsys)
    assert "detail" in doc
    _validate("report", doc)
    _validate("result", doc["result"])
    # read back from the store as it was scored
    ev = evaluate(RUN, events, store.series, SPECS, {}, now_ms=events[-1]["t"] + 1000)
    store.write_result(ev.result)
    doc = _report_json(store, [RUN], capsys)
    _validate("report", doc)
    assert doc["result"] == ev.result


def test_report_cli_json_output_validates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Through the command itself, on the embedded store: the printed text is the schema's document."""
    from wattbench.store import open_store

    path = tmp_path / "s.sqlite"
    events = _events()
    mem = _store(events)
    store = open_store(str(path))
    for e in events:
        store.write_phase(e)
    ev = evaluate(RUN, events, mem.series, SPECS, {}, now_ms=events[-1]["t"] + 1000)
    store.write_result(ev.result)
    store.flush()
    store.close()
    parser = argparse.ArgumentParser()
    report_cli.add_arguments(parser)
    code = report_cli.run(parser.parse_args([RUN, "--store", str(path), "--json"]))
    out = capsys.readouterr().out
    assert code == 0
    doc = wattbench_schema.strict_loads(out)
    _validate("report", doc)
    assert doc["result"]["overall"] == pytest.approx(ev.result["overall"])


def test_system_under_test_is_carried_and_shown(capsys: pytest.CaptureFixture[str]) -> None:
    events = _events()
    ev = evaluate(RUN, events, _store(events).series, SPECS, {})
    doc = report_dict(ev)
    assert doc["measured"]["sut"] == SUT and doc["measured"]["host"] == "sut-01"
    text = render_evaluation(ev)
    for value in ("sut-01", "Example CPU 9000", "16", "64 GiB", "Debian GNU/Linux 12", "6.1.0-26-amd64"):
        assert value in text, value
    page = render_html(ev)
    assert "Example CPU 9000" in page and "6.1.0-26-amd64" in page


def test_missing_system_facts_are_not_recorded() -> None:
    events = _events(sut={"cores": 4})
    ev = evaluate(RUN, events, _store(events).series, SPECS, {})
    text = render_evaluation(ev)
    assert "CPU model: not recorded" in text and "kernel: not recorded" in text and "cores: 4" in text
    assert "not recorded" in render_html(ev)
    assert report_dict(ev)["measured"]["sut"] == {"cores": 4}


def test_calibration_and_timing_are_shown_and_short_windows_are_a_rehearsal() -> None:
    events = _events()  # 10 s windows
    ev = evaluate(RUN, events, _store(events).series, SPECS, {})
    m = report_dict(ev)["measured"]
    assert [c["phase"] for c in m["calibration"]] == ["cal1", "cal2", "cal3"]
    assert m["calibration"][0]["ops_per_s"] == pytest.approx(2700.0)
    l50 = next(t for t in m["timing"] if t["phase"] == "l50")
    assert l50 == {"phase": "l50", "kind": "target", "ramp_up_s": 2.0, "measure_s": 10.0, "ramp_down_s": 2.0}
    assert m["rehearsal"] is True and m["shortest_window_s"] == 10.0
    text = render_evaluation(ev)
    assert "rehearsal, not a comparable result" in text and "cal1" in text and "2,700 ops/s" in text
    assert "rehearsal, not a comparable result" in render_html(ev)

    full = sweep_events(specpower_phases(cal_ops=720000, measure_s=240.0), measure_ms=240000)
    ev = evaluate(RUN, full, None, [], {})
    assert report_dict(ev)["measured"]["rehearsal"] is False
    assert "rehearsal" not in render_evaluation(ev)


def test_inlet_measured_missing_or_waived_is_said() -> None:
    events = _events()
    ev = evaluate(RUN, events, _store(events).series, SPECS, {})
    assert report_dict(ev)["measured"]["inlet"] == {"state": "measured", "min_C": 22.5, "max_C": 22.5}
    assert "inlet 22.5 °C" in render_evaluation(ev)

    store = _store(events, inlet=False)
    power = SPECS[:1]
    ev = evaluate(RUN, events, store.series, power, {}, limits=Limits(require_inlet=False))
    assert report_dict(ev)["measured"]["inlet"] == {"state": "waived"}
    text = render_evaluation(ev)
    assert "inlet temperature not measured (waived: --no-inlet-required)" in text
    assert "inlet temperature not measured (waived" in render_html(ev)

    ev = evaluate(RUN, events, store.series, power, {})
    assert report_dict(ev)["measured"]["inlet"] == {"state": "not measured"}


def test_units_everywhere() -> None:
    events = _events()
    ev = evaluate(RUN, events, _store(events).series, SPECS, {})
    text = render_evaluation(ev)
    assert "ops/s" in text and "Average Active Power (W)" in text and "(ops/s per W)" in text
    page = render_html(ev)
    assert "(ops/s per W)" in page and "ops/s" in page
    assert report_dict(ev)["units"]["ratio"] == "ops/s per W"


def test_failed_checks_come_first_and_the_badge_names_them() -> None:
    events = _events()
    store = _store(events)
    ev = evaluate(RUN, events, store.series, SPECS, {}, limits=Limits(min_inlet_c=30.0))
    assert not ev.valid
    text = render_evaluation(ev)
    assert "INVALID: inlet_temp failed" in text
    lines = [ln for ln in text.splitlines() if ln.strip().startswith(("pass", "FAIL"))]
    first_pass = next(i for i, ln in enumerate(lines) if ln.strip().startswith("pass"))
    assert all(ln.strip().startswith("FAIL") for ln in lines[:first_pass]) and first_pass > 0
    assert not any(ln.strip().startswith("FAIL") for ln in lines[first_pass:])
    page = render_html(ev)
    assert "INVALID: inlet_temp failed" in page
    assert page.index("FAIL") < page.index('class="pass"')


def test_partial_run_shows_idle_as_not_measured_never_zero() -> None:
    events = sweep_events(specpower_phases(), abort_after="l50")
    ev = evaluate(RUN, events, _store(events).series, SPECS, {})
    assert ev.result["partial"] is True
    assert "idle_W" not in ev.result.get("summary", {})
    assert math.isnan(ev.summary.idle_W)
    text = render_evaluation(ev)
    assert "active idle not measured" in text and "active idle 0" not in text
    # The overall figure divides by the target loads alone, higher than a whole run's: its line says so.
    (line,) = [x for x in text.splitlines() if x.startswith("∑ops / ∑power = ")]
    assert line.endswith("(ops/s per W; without active idle in ∑power)"), line
    page = render_html(ev)
    assert "active idle power (W): not measured" in page
    assert "without active idle in ∑power" in page
    doc = report_dict(ev)
    _validate("report", doc)
    # read back from a store: still not measured, not 0
    store = MemoryStore()
    for e in events:
        store.write_phase(e)
    store.write_result(ev.result)
    parser = argparse.ArgumentParser()
    report_cli.add_arguments(parser)
    back, _ = report_cli.load(parser.parse_args([RUN]), store)  # type: ignore[misc]
    assert math.isnan(back.summary.idle_W)
    assert "active idle not measured" in render_evaluation(back)
    assert "idle_W" not in report_dict(back)["result"]["summary"]


def test_a_run_stopped_in_calibration_says_why_it_has_no_calibrated_throughput() -> None:
    events = _events(abort_after="cal3")
    store = _store(events)
    ev = evaluate(RUN, events, store.series, SPECS, {})
    assert "calibrated" not in ev.result
    why = "no calibrated throughput: the run stopped during calibration"
    doc = report_dict(ev)
    _validate("report", doc)
    assert doc["measured"]["calibrated_missing"] == "the run stopped during calibration"
    assert why in render_evaluation(ev) and why in render_html(ev)
    # the stored result read back says the same
    store.write_result(ev.result)
    parser = argparse.ArgumentParser()
    report_cli.add_arguments(parser)
    back, _ = report_cli.load(parser.parse_args([RUN]), store)  # type: ignore[misc]
    assert back.calibrated is None and why in render_evaluation(back)
    assert report_dict(back)["measured"]["calibrated_missing"] == "the run stopped during calibration"


def _sqlite_run(path: Path, events: list[dict]) -> None:
    """The phase events and a 150 W channel at 10 Hz, as the collector would have stored them."""
    from wattbench.store import open_store

    store = open_store(str(path))
    for e in events:
        store.write_phase(e)
    t0, t1 = events[0]["t"], events[-1]["t"]
    rows = [{"s": i, "t": t, "c": "psu", "W": 150.0} for i, t in enumerate(range(t0, t1 + 1, 100))]
    for k in range(0, len(rows), 500):
        store.write_samples("bench", rows[k : k + 500])
    store.flush()
    store.close()


def _report(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    report_cli.add_arguments(parser)
    code = report_cli.run(parser.parse_args(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_report_stores_the_result_of_a_run_without_one_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from wattbench.store import open_store

    path = tmp_path / "s.sqlite"
    events = _events()
    _sqlite_run(path, events)
    argv = [RUN, "--store", str(path), "--no-inlet-required", "--json"]
    code, out, err = _report(argv, capsys)
    assert code == 0, err
    first = wattbench_schema.strict_loads(out)["result"]
    assert first["t"] == events[-1]["t"]  # stamped with the run's end: the same on every scoring
    store = open_store(str(path))
    try:
        assert store.result(RUN) == first
    finally:
        store.close()
    code, out, err = _report(argv, capsys)
    assert code == 0 and wattbench_schema.strict_loads(out)["result"] == first
    import sqlite3

    with sqlite3.connect(path) as db:
        assert db.execute(
            "SELECT COUNT(*) FROM wb_result WHERE run = ? AND phase = 'overall'", (RUN,)
        ).fetchone() == (1,)


def test_report_of_a_run_in_progress_stores_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from wattbench.store import open_store

    path = tmp_path / "s.sqlite"
    events = [e for e in _events() if e["event"] != "run_end"]
    _sqlite_run(path, events)
    code, _out, err = _report([RUN, "--store", str(path), "--no-inlet-required"], capsys)
    assert code == 0 and "has not ended" in err
    store = open_store(str(path))
    try:
        assert store.result(RUN) is None
    finally:
        store.close()


def test_report_with_an_unreachable_broker_is_exit_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once closed
    path = tmp_path / "s.sqlite"
    _sqlite_run(path, _events())
    code, _out, err = _report([RUN, "--store", str(path), "--broker", f"127.0.0.1:{port}"], capsys)
    assert code == 3 and "unreachable" in err and "Traceback" not in err


def test_the_workloads_op_unit_heads_the_throughput_columns() -> None:
    """A worklet counts hashes, not transactions: its run_start says so, the result records it, and
    the table, the facts and the HTML head their columns with it. Before, every report said ops/s."""
    from wattbench.workloads import make_workload

    wl = make_workload("worklet", {"worklet": "sha256", "workers": 1})
    events = _events(workload=wl.name)
    events[0]["unit"] = wl.ops_unit
    contract.validate_phase(events[0])
    ev = evaluate(RUN, events, _store(events).series, SPECS, {})
    assert ev.result["unit"] == "hashes" and ev.result["workload"] == "worklet-sha256-v1"
    _validate("result", ev.result)
    text = render_evaluation(ev)
    assert "hashes/s per W" in text and "calibrated 3,000 hashes/s" in text
    assert "ops/s" not in text
    page = render_html(ev)
    assert "hashes/s per W" in page and "ops/s" not in page
    # A run recorded before units were: ops, as it always was.
    old = evaluate(RUN, _events(), _store(_events()).series, SPECS, {})
    assert "unit" not in old.result and "ops/s per W" in render_evaluation(old)


def test_the_driver_records_the_workloads_unit() -> None:
    from wattbench.workloads import make_workload

    for name, config, unit in (
        ("builtin", {}, "ops"),
        ("worklet", {"worklet": "random"}, "4KiB-reads"),
        ("fio", {}, "IOs"),
        ("command", {"run": "true", "unit": "frames"}, "frames"),
    ):
        assert make_workload(name, config).ops_unit == unit
    with pytest.raises(Exception, match="unit"):
        make_workload("command", {"run": "true", "unit": "/bad"})
