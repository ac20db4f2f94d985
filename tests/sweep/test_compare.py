"""`wattbench compare`: the figures by hand, best marks among comparable candidates only, the reasons
a candidate cannot be compared, and the command on three real kinds of input (a demo-like run, a
storage suite and a published SPECpower table): the table, the JSON against its schema, and the HTML
page rendered offline in headless Chromium."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from sweep_synth import RUN, T0, MemoryStore, specpower_phases, sweep_events, trace

import wattbench_schema
from wattbench.cli import main
from wattbench.core.align import ChannelSpec
from wattbench.core.compare import Candidate, Curve, Point, Prices, compare, figures, incomparable
from wattbench.core.evaluate import evaluate
from wattbench.core.suite import WorkletResult, suite_document

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = ROOT / "tests/data/specpower/ibm-x3650-m2-2009.csv"


def cand(
    name: str, pts: list[tuple[float, float, float]], idle: float | None = 50.0, **kw: object
) -> Candidate:
    base: dict = {"kind": "run", "workload": "builtin", "unit": "ops", "spec": False, "eehpc_level": 1,
                  "shortest_window_s": 10.0, "valid": True}  # fmt: skip
    base.update(kw)
    curve = Curve(name, str(base["unit"]), tuple(Point(*p) for p in pts))
    return Candidate(name, f"file {name}", curves=[curve], idle_W=idle, **base)


A = cand("a", [(1.0, 1000.0, 200.0), (0.5, 500.0, 150.0)])
B = cand("b", [(1.0, 1500.0, 250.0), (0.5, 750.0, 170.0)], idle=40.0)


def test_figures_by_hand() -> None:
    f = figures(A, Prices({"a": 5000.0}, {"a": 2.0}, tariff_kwh=0.25, years=4.0))
    assert f["idle_W"] == 50.0 and f["peak_W"] == 200.0 and f["peak_ops"] == 1000.0
    assert f["overall"] == pytest.approx(1500.0 / 400.0, rel=1e-15)
    # mean of 200, 150 and 50 W = 133.33 W, for 4 years of 8766 h at 0.25 per kWh
    energy = (400.0 / 3) / 1000.0 * 8766.0 * 4.0 * 0.25
    assert f["energy_cost"] == pytest.approx(energy, rel=1e-15)
    assert f["price_per_ops"] == pytest.approx(5.0, rel=1e-15)
    assert f["ops_per_currency"] == pytest.approx(1000.0 / (5000.0 + energy), rel=1e-15)
    assert f["ops_per_u"] == pytest.approx(500.0, rel=1e-15)
    # Without a price or rack units, no figure made from them: absent, never 0.
    assert "price_per_ops" not in figures(A, Prices(tariff_kwh=0.25)) and "ops_per_u" not in figures(A)


def test_best_is_marked_among_comparable_candidates_only() -> None:
    other = cand("c", [(1.0, 9e9, 1.0)], workload="fio", unit="IOs")
    rows = compare([A, B, other], Prices({"a": 5000.0, "b": 9000.0, "c": 1.0}, tariff_kwh=0.2))
    a, b, c = rows
    assert "peak_ops" in b.best and "overall" in b.best and "idle_W" in b.best
    assert "peak_W" in a.best and "price_per_ops" in a.best
    # c's enormous figures are another workload's: marked, explained, never best.
    assert c.best == set() and c.incomparable == ["another workload (fio, IOs/s against builtin, ops/s)"]


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"workload": "worklet-sha256-v2", "unit": "hashes"}, "another workload"),
        ({"spec": True}, "SPEC-comparable measurement on one side only"),
        ({"eehpc_level": 2}, "EE HPC WG level 2 against 1"),
        ({"shortest_window_s": 240.0}, "rehearsal timing"),
        ({"kind": "suite"}, "a suite of worklets against a single workload"),
    ],
)
def test_what_makes_a_candidate_incomparable(change: dict, why: str) -> None:
    (reason,) = incomparable(cand("x", [(1.0, 1.0, 1.0)], **change), A)
    assert reason.startswith(why)


def test_an_invalid_run_is_never_best_and_says_why() -> None:
    """An INVALID run was marked best (idle, peak throughput, overall) with only a note beside it: a
    failed check means its figures are no measurement to buy on."""
    bad = cand("b", [(1.0, 1500.0, 250.0), (0.5, 750.0, 170.0)], idle=40.0, valid=False)
    a, b = compare([A, bad])
    assert b.best == set() and b.incomparable == ["the run is INVALID: its figures are not ranked"]
    # nor as the baseline: nothing is ranked against it
    b, a = compare([bad, A])
    assert b.best == set() and b.incomparable and a.best == set()
    published = cand("p", [(1.0, 2000.0, 250.0)], valid=None)  # a table: validity not known
    assert incomparable(published, A) == []


def test_suites_of_other_worklet_versions_are_not_comparable() -> None:
    s1 = cand("s1", [(1.0, 1.0, 1.0)], kind="suite", workload="worklet-flood-v1,worklet-sha256-v1")
    s2 = cand("s2", [(1.0, 1.0, 1.0)], kind="suite", workload="worklet-flood-v1,worklet-sha256-v2")
    assert incomparable(s2, s1)[0].startswith("other worklets or worklet versions")
    assert incomparable(s1, s1) == []


# ---------------------------------------------------------------------------- the command
def demo_result(tmp_path: Path) -> Path:
    """A run as `sweep --json-out` writes it, scored from a synthetic store."""
    events = sweep_events(specpower_phases())
    events[0]["unit"] = "ops"
    store = MemoryStore()
    for e in events:
        store.write_phase(e)
    end = events[-1]["t"]
    store.add_series(trace("bench", "psu", T0, end, 10, lambda t: 150 + 20 * np.sin(t / 3000.0)))
    ev = evaluate(RUN, events, store.series, [ChannelSpec("bench", "psu", hz=10)], {})
    path = tmp_path / "demo.json"
    path.write_text(json.dumps(ev.result))
    return path


def storage_suite(tmp_path: Path) -> Path:
    def result(name: str, cal: float, watts: tuple[float, float]) -> dict:
        levels = [
            {"phase": "l100", "kind": "target", "target": 1.0, "ops": cal, "W": watts[0], "Wh": watts[0] / 360},
            {"phase": "l50", "kind": "target", "target": 0.5, "ops": cal / 2, "W": watts[1], "Wh": watts[1] / 360},
        ]  # fmt: skip
        if name == "random":
            levels.append({"phase": "idle", "kind": "idle", "target": 0.0, "ops": 0.0, "W": 70.0})
        return {"v": 1, "run": f"st-{name}", "t": T0, "valid": True, "overall": 1.0, "levels": levels,
                "checks": [], "calibrated": cal, "workload": f"worklet-{name}-v1", "unit": "x"}  # fmt: skip

    doc = suite_document(
        "storage",
        "st",
        T0,
        [
            WorkletResult("random", "storage", "4KiB-reads", result("random", 20000.0, (130.0, 110.0))),
            WorkletResult("sequential", "storage", "1MiB-reads", result("sequential", 900.0, (140.0, 115.0))),
        ],
    )
    path = tmp_path / "storage-suite.json"
    path.write_text(json.dumps(doc))
    return path


def test_compare_three_kinds_of_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    demo, suite = demo_result(tmp_path), storage_suite(tmp_path)
    html = tmp_path / "compare.html"
    argv = ["compare", str(demo), str(suite), str(PUBLISHED), "--html", str(html)]
    argv += [
        "--price",
        "demo=4000",
        "--price",
        "storage-suite=6000",
        "--tariff",
        "0.3",
        "--rack-units",
        "demo=1",
    ]
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    errors = [e.message for e in wattbench_schema.jsonschema_validator("compare").iter_errors(doc)]
    assert errors == []
    run, st, table = doc["candidates"]
    assert doc["baseline"] == "demo" and run["notes"][0] == f"run {RUN}"
    # the synthetic run has no inlet probe: INVALID, so never ranked, and the note says which check
    assert not run["comparable"] and run["incomparable"] == ["the run is INVALID: its figures are not ranked"]
    assert "the run is INVALID (inlet_temp failed)" in run["notes"]
    assert st["kind"] == "suite" and st["figures"]["suite_score"] == 1.0 and not st["comparable"]
    assert table["kind"] == "table" and table["status"] == "published" and not table["comparable"]
    assert "another workload (SPECpower_ssj2008, ssj_ops/s against builtin, ops/s)" in table["incomparable"]
    assert "SPEC-comparable measurement on one side only" in table["incomparable"]
    assert run["figures"]["price_per_ops"] == pytest.approx(4000 / run["figures"]["peak_ops"], rel=1e-12)
    assert run["best"] == []  # nothing comparable to be best against
    # the table on the terminal
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "≠" in out and "SERT-style" in out and "ssj_ops/s" in out
    page = html.read_text()
    assert page.count("<svg") == 2 and "Throughput per watt against load" in page


def test_the_page_is_self_contained_and_renders_offline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.fail("chromium is not installed: scripts/provision.sh installs it")
    html = tmp_path / "compare.html"
    a, b = demo_result(tmp_path), storage_suite(tmp_path)
    assert main(["compare", str(a), str(b), str(PUBLISHED), "--html", str(html)]) == 0
    capsys.readouterr()
    page = html.read_text()
    # Nothing to fetch: no scripts, stylesheets, images or fonts from elsewhere.
    for needle in ("<script", "<link", "<img", "<iframe", "@import"):
        assert needle not in page, needle
    refs = re.findall(r'(?:href|src)\s*=\s*"([^"]*)"', page) + re.findall(r"url\(([^)]*)\)", page)
    assert [r for r in refs if not r.startswith("#")] == []  # only the charts' own clip paths
    shot = tmp_path / "shot.png"
    # Every name resolves nowhere and every proxy fetch fails: the page must render from itself alone.
    proc = subprocess.run(
        [
            chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--window-size=1200,1800", "--host-resolver-rules=MAP * ~NOTFOUND",
            "--proxy-server=http://127.0.0.1:9", f"--screenshot={shot}", html.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0 and shot.is_file(), proc.stderr[-2000:]
    from PIL import Image

    img = np.asarray(Image.open(shot).convert("RGB")).reshape(-1, 3)
    colours = {tuple(int(c) for c in px) for px in img[::7]}
    # The charts are drawn: the first three candidates' line colours are on the screen.
    for hexcol in ("#3b6ea8", "#c0392b", "#217a3c"):
        want = tuple(int(hexcol[i : i + 2], 16) for i in (1, 3, 5))
        assert any(math.dist(want, c) < 12 for c in colours), hexcol
    assert len(colours) > 50  # text, table and charts, not a blank page


def test_a_published_table_is_named_by_its_file(capsys: pytest.CaptureFixture[str]) -> None:
    """A JSON table's "system" is a long sentence: the candidate is named by its file, which --price
    can spell, and the system is shown beside it. Before, --price dell-r7425-2018=9000 was refused."""
    dell = ROOT / "tests/data/specpower/dell-r7425-2018.json"
    argv = ["compare", str(dell), str(PUBLISHED), "--price", "dell-r7425-2018=9000", "--json"]
    assert main(argv) == 0
    first = json.loads(capsys.readouterr().out)["candidates"][0]
    assert first["name"] == "dell-r7425-2018" and first["notes"][0].startswith(
        "system: Dell Inc. PowerEdge R7425"
    )
    assert first["figures"]["price_per_ops"] > 0


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        (["compare", "no-such-run"], "no such file; for a stored run give --store"),
        (["compare", "{demo}", "{demo}"], "two candidates are named"),
        (["compare", "{demo}", "--price", "nobody=1"], "no candidate of that name; the candidates are demo"),
        (["compare", "{demo}", "--price", "x"], "NAME=NUMBER"),
        (["compare", "{demo}", "--years", "0"], "--years"),
        (["compare", "{bad}"], "bad.csv"),
    ],
)
def test_wrong_input_is_one_line(
    argv: list[str], why: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    demo = demo_result(tmp_path)
    bad = tmp_path / "bad.csv"
    bad.write_text("hello,world\n1,2\n")
    try:
        code = main([a.format(demo=demo, bad=bad) for a in argv])
    except SystemExit as exc:  # argparse's own usage errors
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code == 2 and why in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) <= 2


def _docs_compare_example() -> list[str]:
    """The `wattbench compare a.json b.json …` example of docs/sweep.md, as its words."""
    import shlex

    text = (ROOT / "docs/sweep.md").read_text()
    block = re.search(r"```sh\n(wattbench compare a\.json b\.json .*?)```", text, re.S)
    assert block, "docs/sweep.md has no `wattbench compare a.json b.json` example"
    return shlex.split(block.group(1).replace("\\\n", " "))


def _lay_out_docs_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The files the docs' compare example names, in the folder it runs in: a.json and b.json (two
    results whose run ids are not their names) and the published tables under tests/data/specpower."""
    for name, run in (("a", "20260101T000000Z-aaaa"), ("b", "20260102T000000Z-bbbb")):
        result = json.loads(demo_result(tmp_path).read_text())
        (tmp_path / f"{name}.json").write_text(json.dumps(dict(result, run=run)))
    (tmp_path / "tests/data").mkdir(parents=True)
    (tmp_path / "tests/data/specpower").symlink_to(ROOT / "tests/data/specpower")
    monkeypatch.chdir(tmp_path)


def test_the_docs_compare_example_works_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two result files (`sweep --json-out`) named a.json and b.json and a published table: --price a=…
    and --rack-units b=… name the candidates by the files the user gave, not by run ids the user
    never typed."""
    words = _docs_compare_example()
    assert words[:4] == ["wattbench", "compare", "a.json", "b.json"]
    _lay_out_docs_example(tmp_path, monkeypatch)
    assert main([*words[1:], "--json"]) == 0, capsys.readouterr().err
    doc = json.loads(capsys.readouterr().out)
    a, b, dell = doc["candidates"]
    assert (a["name"], b["name"], dell["name"]) == ("a", "b", "dell-r7425-2018")
    assert a["figures"]["price_per_ops"] == pytest.approx(9000 / a["figures"]["peak_ops"])
    assert b["figures"]["price_per_ops"] == pytest.approx(12000 / b["figures"]["peak_ops"])
    assert b["figures"]["ops_per_u"] == pytest.approx(b["figures"]["peak_ops"] / 2)
    assert "run 20260101T000000Z-aaaa" in a["notes"]  # the run id is still said
    assert (tmp_path / "cmp.html").is_file()


def test_an_unknown_price_name_lists_the_names_there_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    demo = demo_result(tmp_path)
    code = main(["compare", str(demo), str(PUBLISHED), "--price", "dmeo=9000", "--rack-units", "x=1"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err == (
        "wattbench compare: --price dmeo, --rack-units x: no candidate of that name; "
        "the candidates are demo, ibm-x3650-m2-2009\n"
    )


def _number_word(key: str, value: float, unit: str) -> str:
    """The number as the table writes it (the first word of the cell: the unit may wrap after it)."""
    from wattbench.report.compare import _fmt

    return _fmt(key, value, unit).split()[0]


@pytest.mark.parametrize("columns", [80, 60, 44])
def test_no_number_is_cut_in_a_narrow_terminal(
    columns: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every figure of the JSON is in the table whole, whatever the width: text wraps, and columns that
    do not fit beside each other go into a further table; a number is never elided ("4,0…")."""
    words = _docs_compare_example()
    _lay_out_docs_example(tmp_path, monkeypatch)
    argv = [*words[1:4], str(storage_suite(tmp_path)), *words[4:]]
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    monkeypatch.setenv("COLUMNS", str(columns))
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "…" not in text, text
    assert max(len(line) for line in text.splitlines()) <= columns, text
    for c in doc["candidates"]:
        for key, value in c["figures"].items():
            number = _number_word(key, value, c["unit"])
            found = re.search(rf"(?<![\d,.]){re.escape(number)}(?![\d,.])", text)
            assert found, f"{c['name']} {key}: {number} is not whole in\n{text}"


def test_headings_say_per_second_and_the_legend_only_what_is_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The heading read "peak throughput (ops)" over cells in ops/s, and with a price but no tariff the
    legend explained an energy cost that was not there."""
    monkeypatch.setenv("COLUMNS", "250")
    demo = demo_result(tmp_path)
    assert main(["compare", str(demo), str(demo), "--name", "a", "--name", "b", "--price", "a=5"]) == 0
    out = capsys.readouterr().out
    assert "peak throughput (ops/s)" in out and "(ops)" not in out
    assert "Energy cost" not in out and "(no --tariff: no energy cost)" in out


@pytest.mark.parametrize("columns", [80, 60])
def test_no_heading_word_is_folded_where_it_fits(
    columns: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Candidates named a and b left the name column one character wide, and its heading read c, a, n,
    d, … down nine lines: a heading word is as much the column's as its cells are."""
    for name, ops in (("a", 617957), ("b", 717957)):
        rows = f"100%,{ops},213.5\n50%,{ops // 2},150.25\nidle,0,100\n"
        (tmp_path / f"{name}.csv").write_text(f"target,ops,power\n{rows}")
    monkeypatch.setenv("COLUMNS", str(columns))
    argv = ["compare", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"), "--price", "a=5000"]
    assert (
        main([*argv, "--price", "b=6000", "--rack-units", "a=1", "--rack-units", "b=2", "--tariff", "0.3"])
        == 0
    )
    text = capsys.readouterr().out
    assert max(len(line) for line in text.splitlines()) <= columns, text
    assert text.count("┏") == len(re.findall(r"┃ candidate +┃", text)) > 0, text
