"""Reports: `wattbench score` on tables, the terminal table, JSON and the self-contained HTML page, and
`wattbench report` re-rendering a stored run."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np
import pytest
from sweep_synth import RUN, T0, MemoryStore, specpower_phases, sweep_events, trace

from wattbench.cli import report as report_cli
from wattbench.cli import score as scorefile
from wattbench.core import contract
from wattbench.core.align import ChannelSpec
from wattbench.core.evaluate import evaluate
from wattbench.report.html import render_html
from wattbench.report.jsonreport import report_dict
from wattbench.report.table import fmt_watts, render_text

CSV = """# a made-up two-node table
# published overall: sum of ssj_ops / sum of power = 1000
target,actual,ops:a,ops:b,power:a,power:b
100%,99.5%,"100,000","100,000",100,100
50%,50.2%,50000,50000,75,75
Active Idle,,0,0,25,25
"""


def _run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    scorefile.add_arguments(parser)
    code = scorefile.run(parser.parse_args(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_score_csv_multi_node(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.csv"
    path.write_text(CSV)
    code, out, _ = _run_cli([str(path), "--json"], capsys)
    doc = json.loads(out)
    assert doc["overall"] == pytest.approx(300000 / 400)  # idle only in the denominator
    assert doc["levels"][0]["node_power"] == {"a": 100.0, "b": 100.0}
    assert doc["levels"][0]["ops"] == 200000 and doc["levels"][0]["actual"] == pytest.approx(0.995)
    # the comment's published figure (1000) is far off: reported, and the exit status says so
    assert doc["published_overall"] == 1000.0 and doc["match"] is False and code == 1


def test_score_expect_mismatch_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.csv"
    path.write_text(CSV.replace("= 1000", "= 750"))
    code, out, _ = _run_cli([str(path)], capsys)
    assert code == 0 and "∑ssj_ops / ∑power = 750" in out and "matches the published 750.00" in out
    code, out, _ = _run_cli([str(path), "--expect", "760"], capsys)
    assert code == 1 and "differs from the expected 760.00 (--expect)" in out
    code, out, _ = _run_cli([str(path), "--expect", "752"], capsys)
    assert code == 0  # within 0.5 %


def test_score_json_power_forms(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = {
        "levels": [
            {"target": 1.0, "ops": 1000, "power": {"n1": 60, "n2": 40}},
            {"target": "50%", "ops": "500", "power": {"n1": 40, "n2": 35}},
            {"target": "idle", "ops": 0, "power": 25},
        ],
        "published_overall": 7.5,
    }
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    code, out, err = _run_cli([str(path), "--json"], capsys)
    res = json.loads(out)
    assert code == 0 and res["overall"] == pytest.approx(1500 / 200)
    assert res["levels"][1]["node_power"] == {"n1": 40.0, "n2": 35.0}
    assert res["levels"][2]["target"] == "idle" and "matches" in err
    # the same nodes as a list in every load row
    doc["levels"][0]["power"], doc["levels"][1]["power"] = [60, 40], [40, 35]
    path.write_text(json.dumps(doc))
    code, out, err = _run_cli([str(path), "--json"], capsys)
    assert code == 0 and json.loads(out)["levels"][1]["node_power"] == {"node1": 40.0, "node2": 35.0}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("target,ops\n100%,5\n", "header needs"),
        ("target,ops,power\n100%,5,abc\n", "not a number"),
        ("target,ops,power\n100%,5,0\n", "power must be positive"),
        ("target,ops,power\nidle,0,5\n", "no target load rows"),
        ('{"levels": 3}', "levels"),
        ("{broken", "not valid JSON"),
    ],
)
def test_score_bad_tables_are_clear(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    path = tmp_path / ("t.json" if text.startswith("{") else "t.csv")
    path.write_text(text)
    code, _, err = _run_cli([str(path)], capsys)
    assert code == 2 and message in err


def _stored_run() -> tuple[MemoryStore, object]:
    events = sweep_events(specpower_phases())
    store = MemoryStore()
    for e in events:
        store.write_phase(e)
    # the appliance's metadata as the collector stored it: which channel is power, which the inlet
    meta = {
        "v": 1,
        "dev": "bench",
        "fw": "0.1.0",
        "board": "host",
        "channels": [
            {"c": "psu", "meter": "sim", "q": ["W"], "hz": 10, "role": "power"},
            {"c": "inlet", "meter": "ds18b20", "q": ["T"], "hz": 1, "role": "inlet"},
        ],
    }
    store.write_meta(meta, T0 - 1000)
    end = events[-1]["t"]
    store.add_series(trace("bench", "psu", T0, end, 10, lambda t: 150 + 20 * np.sin(t / 3000.0), u=0.004))
    inlet = trace("bench", "inlet", T0, end, 1, lambda t: np.full(t.shape, 22.5))
    inlet.values["T"] = inlet.values.pop("W")
    store.add_series(inlet)
    specs = [ChannelSpec("bench", "psu", hz=10), ChannelSpec("bench", "inlet", role="inlet")]
    ev = evaluate(RUN, events, store.series, specs, {}, now_ms=end + 1000)
    store.write_result(ev.result)
    return store, ev


def test_table_text_has_the_specpower_layout() -> None:
    _, ev = _stored_run()
    text = render_text(ev.levels, ev.result["overall"], valid=ev.valid, checks=ev.checks)
    for col in (
        "Target Load",
        "Actual Load",
        "ops",
        "Average Active Power (W)",
        "Performance to Power Ratio",
    ):
        assert col in text
    assert "Active Idle" in text and re.search(r"∑ops / ∑power = [\d,.]+", text)
    assert "VALID" in text
    assert fmt_watts(96.14) == "96.1" and fmt_watts(287.4) == "287" and fmt_watts(5547.2) == "5,547"


def test_html_is_one_self_contained_page() -> None:
    store, ev = _stored_run()
    page = render_html(ev, store.series)
    assert page.startswith("<!doctype html>") and page.count("<svg") == 2  # SPECpower chart + traces
    assert "<script" not in page and not re.search(r"(src|href)=\"?https?:", page)
    assert "Performance to Power Ratio" in page and "Compliance" in page and "load_within_2pct" in page
    assert "∑ops / ∑power" in page


def test_json_report_carries_the_contract_result() -> None:
    _, ev = _stored_run()
    doc = report_dict(ev, detail=False)
    contract.validate("report", doc)
    assert contract.validate_result(doc["result"]) == ev.result
    assert report_dict(ev)["detail"]["gaps"] == []


def test_report_rerenders_a_stored_run(tmp_path: Path) -> None:
    store, ev = _stored_run()
    parser = argparse.ArgumentParser()
    report_cli.add_arguments(parser)
    args = parser.parse_args(["latest"])
    loaded = report_cli.load(args, store)
    assert not isinstance(loaded, str)
    again, run = loaded
    assert run == RUN and again.result == ev.result  # as stored
    assert [lv.phase for lv in again.levels] == [lv.phase for lv in ev.levels]
    page = render_html(again, store.series)
    assert page.count("<svg") == 2
    args = parser.parse_args([RUN, "--rescore", "--max-uncertainty", "0.001"])
    rescored, _ = report_cli.load(args, store)  # type: ignore[misc]
    assert not rescored.valid and any(c.name == "power_uncertainty" and not c.ok for c in rescored.checks)
    assert isinstance(report_cli.load(parser.parse_args(["nope"]), store), str)


def test_concurrency_run_table_and_page() -> None:
    from sweep_synth import SeriesFetch

    phases = [("c1", "concurrency", None, 1), ("c2", "concurrency", None, 2), ("c4", "concurrency", None, 3)]
    events = sweep_events([*phases, ("idle", "idle", 0.0, 0)])
    for e in events:
        if e["phase"] in ("c1", "c2", "c4"):
            e["copies"] = int(e["phase"][1:])
    s = trace("a", "p", T0, events[-1]["t"], 10, lambda t: np.full(t.shape, 120.0))
    fetch = SeriesFetch([s])
    ev = evaluate(RUN, events, fetch, [ChannelSpec("a", "p", hz=10)], {})
    contract.validate_result(ev.result)
    text = render_text(ev.levels, ev.result["overall"])
    assert "Relative Throughput" in text and "Energy per Job (J)" in text
    assert "3.00×" in text  # 3 jobs in the c4 window against 1 in c1
    assert "400" in text  # 120 W x 10 s / 3 jobs
    assert render_html(ev, fetch).count("<svg") == 2


def test_report_given_the_options_a_result_was_scored_with_shows_it_as_stored(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A run reported with --no-inlet-required is stored with that scoring; the same command again
    shows the stored result, where it used to score the run again (and printed another result, as
    the clock offsets read from the store had moved on meanwhile)."""
    store, _ = _stored_run()
    store.results.clear()  # a run driven by the user's own script: scored first by `report`
    parser = argparse.ArgumentParser()
    report_cli.add_arguments(parser)

    first = parser.parse_args([RUN, "--no-inlet-required"])
    ev, _ = report_cli.load(first, store)  # type: ignore[misc]
    assert ev.result["options"] == {"--no-inlet-required": True}
    contract.validate_result(ev.result)
    assert report_cli.keep_result(first, store, ev, None) == (None, False)
    assert store.result(RUN) == ev.result
    capsys.readouterr()

    again = parser.parse_args([RUN, "--no-inlet-required"])
    shown, _ = report_cli.load(again, store)  # type: ignore[misc]
    assert not again.rescore and shown.result == ev.result
    assert capsys.readouterr().err == ""
    plain = parser.parse_args([RUN])
    shown, _ = report_cli.load(plain, store)  # type: ignore[misc]
    assert not plain.rescore and shown.result == ev.result

    # another limit than the result's: scored again, and said so
    other = parser.parse_args([RUN, "--no-inlet-required", "--load-tolerance", "0.05"])
    rescored, _ = report_cli.load(other, store)  # type: ignore[misc]
    assert other.rescore and "--load-tolerance changes its scoring" in capsys.readouterr().err
    assert rescored.result["options"] == {"--no-inlet-required": True, "--load-tolerance": 0.05}
    assert store.result(RUN) == ev.result


def test_a_result_without_recorded_options_is_scored_again_for_any_option(
    capsys: pytest.CaptureFixture[str],
) -> None:
    store, ev = _stored_run()  # scored by a version that did not record its options
    assert "options" not in ev.result
    parser = argparse.ArgumentParser()
    report_cli.add_arguments(parser)
    args = parser.parse_args([RUN, "--no-inlet-required"])
    report_cli.load(args, store)
    assert args.rescore and "--no-inlet-required changes its scoring" in capsys.readouterr().err


def test_a_run_stopped_before_any_window_says_so_and_shows_no_peak_of_zero() -> None:
    """Interrupted during calibration: no level was scored, so there is no ratio and no peak; the run's
    energy was measured all the same (its samples are outside any window) and stays."""
    summary = {"peak_ops": 0.0, "energy_Wh": 1.045}
    text = render_text([], 0.0, valid=False, summary=summary, calibrated=17_505.0)
    assert "not measured (no window was scored)" in text and "no power samples" not in text
    assert "peak 0" not in text and "run energy 1.045 Wh" in text


def test_the_result_of_a_run_stopped_in_calibration_has_no_peak_throughput() -> None:
    from wattbench.core.evaluate import build_result
    from wattbench.core.score import Summary

    nothing = Summary(overall=0.0, peak_ops=0.0, peak_W=float("nan"), idle_W=float("nan"), energy_Wh=1.045)
    result = build_result(RUN, [], [], nothing, 17_505.0, "builtin", "interrupted by operator during cal2")
    assert result["summary"] == {"energy_Wh": 1.045}
    contract.validate("result", result)
