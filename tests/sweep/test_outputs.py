"""One output convention: every command with a result takes --json (to stdout), --json-out FILE and
--html FILE from one registry of renderings (report/outputs.py), each JSON keeps its schema, and a new
rendering is one row of that registry: the commands offer it, check its file and write it."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from sweep_synth import RUN, T0, MemoryStore, specpower_phases, sweep_events, trace

import wattbench_schema
from wattbench.cli import main
from wattbench.cli.app import build_parser
from wattbench.core.align import ChannelSpec
from wattbench.core.evaluate import evaluate
from wattbench.report import outputs
from wattbench.report.outputs import Outputs, Renderer, RunResult, write_outputs
from wattbench.store import open_store


def _validate(name: str, doc: object) -> None:
    errors = [e.message for e in wattbench_schema.jsonschema_validator(name).iter_errors(doc)]
    assert errors == []


def _stored_run(path: Path) -> dict:
    """A scored run in an embedded store, as a sweep leaves it; its result."""
    events = sweep_events(specpower_phases())
    mem = MemoryStore()
    for e in events:
        mem.write_phase(e)
    mem.add_series(trace("bench", "psu", T0, events[-1]["t"], 10, lambda t: 150 + 20 * np.sin(t / 3000.0)))
    ev = evaluate(RUN, events, mem.series, [ChannelSpec("bench", "psu", hz=10)], {}, now_ms=events[-1]["t"])
    store = open_store(str(path))
    for e in events:
        store.write_phase(e)
    store.write_result(ev.result)
    store.flush()
    store.close()
    return ev.result


def _options(command: str) -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {o for a in sub.choices[command]._actions for o in a.option_strings}


@pytest.mark.parametrize("command", ["report", "sweep", "suite", "compare", "score"])
def test_every_command_with_a_result_takes_the_same_output_options(command: str) -> None:
    assert {"--json", "--json-out", "--html"} <= _options(command)


def test_the_demo_writes_files_and_keeps_stdout_for_its_own_lines() -> None:
    demo = _options("demo")
    assert {"--json-out", "--html"} <= demo and "--json" not in demo


def test_report_json_out_is_the_result_a_sweep_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = _stored_run(tmp_path / "s.sqlite")
    out = tmp_path / "r.json"
    assert main(["report", RUN, "--store", str(tmp_path / "s.sqlite"), "--json", "--json-out", str(out)]) == 0
    printed = capsys.readouterr()
    _validate("report", wattbench_schema.strict_loads(printed.out))
    written = wattbench_schema.strict_loads(out.read_bytes())
    _validate("result", written)
    assert written == result
    # with JSON on stdout, the line saying where the file went is on stderr
    assert f"result JSON: {out}" in printed.err


def test_a_renderer_is_one_row_of_the_registry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test double added to the registry alone is an option of `wattbench report`, checked before
    the store is read, and written with its note."""

    def levels_csv(r: RunResult, _width: int) -> str:
        rows = [f"{lv.phase},{lv.W:.1f}" for lv in r.evaluation.levels]
        return "\n".join(["phase,W", *rows]) + "\n"

    row = Renderer(RunResult, "levels-csv", "file", levels_csv, help="levels as CSV", note="levels CSV")
    monkeypatch.setattr(outputs, "RENDERERS", [*outputs.RENDERERS, row])
    store = tmp_path / "s.sqlite"
    _stored_run(store)
    out = tmp_path / "levels.csv"
    assert main(["report", RUN, "--store", str(store), "--levels-csv", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("phase,W\n") and "\nl100," in text
    assert f"levels CSV: {out}" in capsys.readouterr().out
    # its folder is checked as the command line is read, like every output file's
    with pytest.raises(SystemExit) as stop:
        main(["report", RUN, "--store", str(store), "--levels-csv", str(tmp_path / "nope" / "l.csv")])
    assert stop.value.code == 2
    assert "--levels-csv: folder" in capsys.readouterr().err
    assert "--levels-csv" not in _options("compare")  # it renders runs only


def test_write_outputs_without_a_console_prints_the_tables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "s.sqlite"
    result = _stored_run(store)
    reader = open_store(str(store), must_exist=True)
    try:
        from wattbench.core.evaluate import from_stored

        ev = from_stored(result, reader.phases(RUN), [])
        html = tmp_path / "r.html"
        write_outputs(RunResult(ev, reader.series), Outputs(files={"html": str(html)}))
    finally:
        reader.close()
    out = capsys.readouterr().out
    assert f"run {RUN}" in out and f"HTML report: {html}" in out
    assert html.read_text(encoding="utf-8").startswith("<!doctype html>")


def test_suite_json_prints_the_suite_result_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`suite --json`: stdout is the suite result (schema/v1/suite.schema.json) and nothing else; what
    the suite says while it runs goes to stderr."""
    from wattbench.sweep import suite as suite_mod

    result = {
        "v": 1, "run": "s-sha256", "t": 1_795_600_000_000, "valid": True, "overall": 2.0, "checks": [],
        "calibrated": 100.0, "unit": "hashes",
        "levels": [{"phase": "l100", "kind": "target", "target": 1.0, "ops": 100.0, "W": 50.0}],
    }  # fmt: skip

    def fake_sweep(setup: object) -> object:
        return SimpleNamespace(
            record=SimpleNamespace(interrupted=None),
            evaluation=SimpleNamespace(result=result, events=[]),
            channels=[],
            store_error=None,
        )

    monkeypatch.setattr(suite_mod, "run_sweep", fake_sweep)
    suite = tmp_path / "suite.toml"
    suite.write_text('name = "one"\n[[worklet]]\nworklet = "sha256"\nworkers = 1\n')
    out = tmp_path / "suite.json"
    argv = ["suite", str(suite), "--ops-only", "--quiet", "--json", "--json-out", str(out)]
    main(argv)
    printed = capsys.readouterr()
    doc = wattbench_schema.strict_loads(printed.out)
    _validate("suite", doc)
    assert doc == wattbench_schema.strict_loads(out.read_bytes())
    assert "suite" in printed.err and f"suite result JSON: {out}" in printed.err


@pytest.mark.timeout(120)
def test_sweep_json_prints_the_json_report(tmp_path: Path) -> None:
    """`sweep --json`, as `report --json`: the JSON report on stdout, every other line on stderr."""
    out = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, "-m", "wattbench.cli", "sweep", "--ops-only", "--quiet", "--workers", "1",
         "--pre", "0", "--measure", "0.5", "--post", "0", "--gap", "0", "--levels", "100", "--no-idle",
         "--json", "--json-out", str(out)],
        capture_output=True, text=True, timeout=110, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr  # ops only: never valid
    doc = wattbench_schema.strict_loads(proc.stdout)
    _validate("report", doc)
    assert doc["result"] == wattbench_schema.strict_loads(out.read_bytes())
    assert f"result JSON: {out}" in proc.stderr


SCORE_TABLE = (
    "target,ops,power\n"
    + "".join(f"{t}%,{100 * t},{50 + t}\n" for t in range(100, 0, -10))
    + "Active Idle,0,40\n# published overall 6.9\n"
)


def test_score_json_out_and_html_are_the_scored_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`score` writes the same document to --json-out FILE as it prints with --json, and an HTML page."""
    table = tmp_path / "t.csv"
    table.write_text(SCORE_TABLE)
    assert main(["score", str(table), "--json"]) == 1  # the published figure is deliberately off
    printed = capsys.readouterr()
    shown = wattbench_schema.strict_loads(printed.out)
    _validate("score", shown)
    assert shown["match"] is False and "differs from the published" in printed.err

    out, page = tmp_path / "s.json", tmp_path / "s.html"
    assert main(["score", str(table), "--json-out", str(out), "--html", str(page)]) == 1
    printed = capsys.readouterr()
    written = wattbench_schema.strict_loads(out.read_bytes())
    assert written == shown
    text = page.read_text(encoding="utf-8")
    assert text.startswith("<!doctype html>") and "t.csv" in text and "Active Idle" in text
    assert "differs from the published" in text
    # the terminal still has the table, the check and where each file went
    assert "Active Idle" in printed.out and "differs from the published" in printed.out
    assert f"score JSON: {out}" in printed.out and f"score HTML: {page}" in printed.out


def test_score_json_out_checks_its_folder_before_reading_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["score", str(tmp_path / "t.csv"), "--json-out", str(tmp_path / "nope" / "s.json")])
    assert stop.value.code == 2
    assert "--json-out: folder" in capsys.readouterr().err
