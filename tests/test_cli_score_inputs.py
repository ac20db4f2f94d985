"""Bad input to `wattbench score` (and the plan and limit options of `sweep` and `report`), through the
installed entry point: each gets a one-line reason and the documented exit code, never a traceback. Tables
that score but are not comparable with SPECpower_ssj2008 results say so, and `--json` output validates
against its schema."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import wattbench_schema as contract

WATTBENCH = str(Path(sys.executable).with_name("wattbench"))
STANDARD = [f"{t}%" for t in range(100, 0, -10)]


def _table(rows: list[tuple[str, str, str]], header: str = "target,ops,power") -> str:
    return header + "\n" + "".join(f"{t},{o},{p}\n" for t, o, p in rows)


def _standard(**replace: tuple[str, str, str]) -> list[tuple[str, str, str]]:
    """The ten standard loads and active idle; replace={"40%": (...)} swaps one row."""
    rows = [(t, str(1000 * (10 - i)), str(200 - 10 * i)) for i, t in enumerate(STANDARD)]
    rows.append(("Active Idle", "0", "50"))
    return [replace.get(r[0], r) for r in rows]


GOOD = _table(_standard())
DEEP = "[" * 100_000 + "]" * 100_000


@dataclass(frozen=True)
class Case:
    name: str
    args: tuple[str, ...]
    content: str | bytes | None  # None: no input file is written
    code: int
    fragment: str
    suffix: str = ".csv"


CASES = [
    # what the file holds
    Case("binary file", (), bytes(range(256)) * 64, 2, "not a text file"),
    Case("NUL bytes", (), "target,ops,power\n100%,5\x00,10\n", 2, "not a text file"),
    Case("missing file", (), None, 2, "cannot read"),
    Case("empty file", (), "", 2, "no table rows"),
    Case("only comments", (), "# nothing here\n", 2, "no table rows"),
    Case("deeply nested JSON", (), '{"levels": ' + DEEP + "}", 2, "JSON", ".json"),
    Case("deeply nested JSON array", (), DEEP, 2, "JSON", ".json"),
    Case("JSON NaN", (), '{"levels": [{"target": "100%", "ops": NaN, "power": 5}]}', 2, "NaN", ".json"),
    Case(
        "JSON duplicate key",
        (),
        '{"levels": [{"target": "100%", "ops": 1, "ops": 2, "power": 5}]}',
        2,
        "duplicate key",
        ".json",
    ),
    Case(
        "JSON huge integer",
        (),
        '{"levels": [{"target": "100%", "ops": 1' + "0" * 400 + ', "power": 5}]}',
        2,
        "ops",
        ".json",
    ),
    Case("field too long", (), "target,ops,power\n100%," + "9" * 200_000 + ",5\n", 2, "line 2"),
    Case("column twice", (), "target,ops,power:a,power:a\n100%,5,10,10\n", 2, "power:a more than once"),
    Case("total beside its parts", (), "target,ops,power,power:a\n100%,5,20,10\n", 2, "both power and"),
    Case("row without target", (), "target,ops,power\n,5,10\n", 2, "line 2 target"),
    Case("short row", (), "target,ops,power\n100%\n", 2, "line 2"),
    # the published figure to compare with
    Case("expect 0", ("--expect", "0"), GOOD, 2, "--expect"),
    Case("expect negative", ("--expect", "-5"), GOOD, 2, "--expect"),
    Case("expect nan", ("--expect", "nan"), GOOD, 2, "--expect"),
    Case("expect inf", ("--expect", "inf"), GOOD, 2, "--expect"),
    Case("tolerance negative", ("--tolerance", "-0.1"), GOOD, 2, "--tolerance"),
    Case("tolerance nan", ("--tolerance", "nan"), GOOD, 2, "--tolerance"),
    Case(
        "published_overall 0",
        (),
        json.dumps({"levels": [{"target": "100%", "ops": 5, "power": 5}], "published_overall": 0}),
        2,
        "published_overall",
        ".json",
    ),
    Case("published comment 0", (), "# published overall: 0\n" + GOOD, 2, "published overall"),
    # the numbers in the table
    Case("negative node power", (), "target,ops,power:a,power:b\n100%,5,-10,200\n", 2, "power:a"),
    Case(
        "negative node power JSON",
        (),
        json.dumps({"levels": [{"target": "100%", "ops": 5, "power": {"a": -10, "b": 200}}]}),
        2,
        "power a",
        ".json",
    ),
    Case("zero power", (), _table([("100%", "5", "0")]), 2, "power must be positive"),
    Case("power in the gigawatts", (), _table([("100%", "5", "2e9")]), 2, "check the units"),
    Case("negative ops", (), _table([("100%", "-5", "10")]), 2, "ops"),
    Case("negative node ops", (), "target,ops:a,ops:b,power\n100%,-5,10,20\n", 2, "ops:a"),
    Case("target -50%", (), _table(_standard(**{"50%": ("-50%", "5", "10")})), 2, "outside (0 %, 100 %]"),
    Case("target 150%", (), _table(_standard(**{"50%": ("150%", "5", "10")})), 2, "outside (0 %, 100 %]"),
    Case("target -50", (), _table([("-50", "5", "10")]), 2, "outside (0 %, 100 %]"),
    Case("negative actual", (), "target,actual,ops,power\n100%,-5%,5,10\n", 2, "actual"),
    # a misspelt column was ignored: `actaul` dropped the check that the actual load matches the ops
    Case(
        "unknown CSV column",
        (),
        "target,actaul,ops,power\n100%,50%,5,10\n",
        2,
        "column 'actaul' (did you mean 'actual'?)",
    ),
    Case("extra CSV column", (), "target,ops,power,notes\n100%,5,10,x\n", 2, "unknown column 'notes'"),
    # The actual load is ops over the calibrated throughput, so every row's ops over its actual is the
    # same figure, up to the rounding of a printed percentage; a mistyped row was judged by the load check
    # as typed.
    Case(
        "actual contradicts the ops",
        (),
        "target,actual,ops,power\n100%,99.6%,9960,200\n50%,58.0%,5000,120\n",
        2,
        "line 3: actual 58.0 % contradicts its ops, which are 50.0 % of the calibrated",
    ),
    Case(
        "actual contradicts the ops in JSON",
        (),
        json.dumps(
            {
                "levels": [
                    {"target": 1.0, "actual": 1.0, "ops": 100, "power": 9},
                    {"target": 0.5, "actual": 0.5, "ops": 80, "power": 5},
                ]
            }
        ),
        2,
        "level 2: actual 50.0 % contradicts its ops",
        ".json",
    ),
    Case("duplicate level", (), _table([*_standard(), ("100%", "5", "10")]), 2, "100% appears twice"),
    Case("duplicate level spelt two ways", (), _table([("100%", "5", "10"), ("1.0", "5", "10")]), 2, "twice"),
    Case("two idle rows", (), _table([*_standard(), ("idle", "0", "50")]), 2, "Active Idle appears twice"),
    Case(
        "idle row with ops", (), _table(_standard(**{"Active Idle": ("Active Idle", "17", "50")})), 2, "ops"
    ),
    # A comma separates thousands (1,000) and nothing else: "200,5" was read as 2,005 W, "0,5" as 5 %.
    Case("decimal comma in power", (), _table([("100%", "1000", '"200,5"')]), 2, "'200,5' is not a number"),
    Case("decimal comma in target", (), _table([('"0,5"', "1000", "200")]), 2, "'0,5' is not a number"),
    Case(
        "decimal comma in idle", (), _table([("100%", "1000", "200"), ("idle", "0", '"52,5"')]), 2, "'52,5'"
    ),
    Case(
        "decimal comma in JSON",
        (),
        json.dumps({"levels": [{"target": "100%", "ops": 5, "power": "200,5"}]}),
        2,
        "'200,5' is not a number",
        ".json",
    ),
    # A node with no power in one row, where the others have it, was left out of that row's sum: the
    # level read as half a system's power.
    Case(
        "node power missing in a row",
        (),
        "target,ops,power:a,power:b\n100%,1000,200,\n50%,500,150,140\nActive Idle,0,50,50\n",
        2,
        "line 2: no power for node b, which other lines give",
    ),
    Case(
        "node power missing in a JSON row",
        (),
        json.dumps(
            {
                "levels": [
                    {"target": "100%", "ops": 1000, "power": {"a": 200}},
                    {"target": "50%", "ops": 500, "power": {"a": 150, "b": 140}},
                ]
            }
        ),
        2,
        "level 1: no power for node b, which other levels give",
        ".json",
    ),
    Case(
        "node power list shorter in a row",
        (),
        json.dumps(
            {
                "levels": [
                    {"target": "100%", "ops": 1000, "power": [200]},
                    {"target": "50%", "ops": 500, "power": [150, 140]},
                ]
            }
        ),
        2,
        "level 1: no power for node node2",
        ".json",
    ),
    # A misspelt key dropped the check it names (the published figure), and the exit was 0.
    Case(
        "misspelt published_overall",
        (),
        json.dumps({"levels": [{"target": "100%", "ops": 1000, "power": 200}], "published_overal": 99}),
        2,
        "published_overal",
        ".json",
    ),
    Case(
        "unknown key in a level",
        (),
        json.dumps({"levels": [{"target": "100%", "ops": 1000, "power": 200, "watts": 5000}]}),
        2,
        "watts",
        ".json",
    ),
]


def _run(tmp_path: Path, args: tuple[str, ...], content: str | bytes | None, suffix: str, cmd: str = "score"):  # type: ignore[no-untyped-def]
    path = tmp_path / f"table{suffix}"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    before = sorted(p.name for p in tmp_path.iterdir())
    env = {**os.environ, "COLUMNS": "120"}
    lead = {"score": [str(path)], "report": ["latest", "--store", str(tmp_path / "runs.sqlite")]}
    argv = [WATTBENCH, cmd, *lead.get(cmd, []), *args]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert sorted(p.name for p in tmp_path.iterdir()) == before, "a read created a file"
    return proc


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_bad_input_is_refused_in_one_line(tmp_path: Path, case: Case) -> None:
    proc = _run(tmp_path, case.args, case.content, case.suffix)
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.returncode == case.code, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert case.fragment in lines[0], lines[0]
    assert lines[0].startswith("wattbench score: ")
    assert len(lines[0]) < 400


# The option as typed, never the core's field (calibration_use, min_inlet_c, max_skew_ms).
SWEEP_CASES = [
    (("--calibration-use", "5"), "--calibration-use: must be 1..3"),
    (("--calibrations", "3", "--calibration-use", "0"), "--calibration-use: must be 1..3"),
    (("--calibrations", "2"), "--calibrations: must be 3..10"),
    (("--load-tolerance", "-1"), "--load-tolerance: must be a fraction"),
    (("--load-tolerance", "1.5"), "--load-tolerance: must be a fraction"),
    (("--max-uncertainty", "0"), "--max-uncertainty: must be a fraction"),
    (("--max-skew", "-400"), "--max-skew: must be milliseconds above 0"),
    (("--min-inlet", "-300"), "--min-inlet: must be 0..50 °C"),
    (("--system-nodes", "0"), "--system-nodes: must be a whole number"),
    (("--price", "-1"), "--price: must be a number from 0 to 1e+15"),
    # refused only once the run was over, when its result would not encode
    (("--price", "1e308"), "--price: must be a number from 0 to 1e+15"),
    (("--tariff", "1e300"), "--tariff: must be a number from 0 to 1e+15"),
    (("--tariff", "1", "--years", "0"), "--years: must be a number of years above 0"),
    (("--tariff", "1", "--years", "1000"), "--years: must be a number of years above 0 and at most 100"),
    (("--levels", "100,150"), "outside"),
    # an empty entry was dropped without a word: a level deleted by mistake ran as not asked for
    (("--levels", "100,,50"), "--levels: '100,,50' has an empty entry"),
]


@pytest.mark.parametrize(
    ("args", "fragment"), SWEEP_CASES, ids=lambda x: " ".join(x) if isinstance(x, tuple) else ""
)
def test_sweep_option_out_of_range_is_refused_before_the_run(
    tmp_path: Path, args: tuple[str, ...], fragment: str
) -> None:
    # short phases: should an option slip through, the run it starts ends quickly and the test fails
    fast = ("--pre", "0", "--measure", "0.5", "--post", "0", "--gap", "0", "--wait-data", "0")
    proc = _run(tmp_path, (*args, *fast, "--quiet"), None, "", cmd="sweep")
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], proc.stderr


REPORT_CASES = [
    (("--rescore", "--load-tolerance", "-1"), "--load-tolerance: must be a fraction"),
    (("--max-uncertainty", "2"), "--max-uncertainty: must be a fraction"),
    (("--max-skew", "0"), "--max-skew: must be milliseconds above 0"),
    (("--min-inlet", "nan"), "--min-inlet"),  # not a number: refused as the command line is read
    (("--tariff", "-1"), "--tariff: must be a number from 0 to 1e+15"),
]


@pytest.mark.parametrize(
    ("args", "fragment"), REPORT_CASES, ids=lambda x: " ".join(x) if isinstance(x, tuple) else ""
)
def test_report_limit_out_of_range_is_refused_before_the_store_is_opened(
    tmp_path: Path, args: tuple[str, ...], fragment: str
) -> None:
    proc = _run(tmp_path, args, None, "", cmd="report")
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0] and lines[0].startswith("wattbench report: "), proc.stderr


# --- tables that score, but not as a SPECpower_ssj2008 result -------------------------------------


def _validator():  # type: ignore[no-untyped-def]
    return contract.jsonschema_validator("score")


@pytest.mark.parametrize(
    ("rows", "missing"),
    [
        ([r for r in _standard() if r[0] != "40%"], ["40%"]),
        ([r for r in _standard() if r[0] not in ("40%", "Active Idle")], ["40%", "Active Idle"]),
        (
            [r for r in _standard() if r[0] in ("100%", "50%", "Active Idle")],
            [t for t in STANDARD if t not in ("100%", "50%")],
        ),
    ],
)
def test_missing_levels_are_named(
    tmp_path: Path, rows: list[tuple[str, str, str]], missing: list[str]
) -> None:
    text = _run(tmp_path, (), _table(rows), ".csv")
    assert text.returncode == 0, text.stderr
    assert "not comparable with SPECpower_ssj2008" in text.stdout
    assert "no row for " + ", ".join(missing) in text.stdout

    as_json = _run(tmp_path, ("--json",), _table(rows), ".csv")
    assert as_json.returncode == 0, as_json.stderr
    doc = json.loads(as_json.stdout)
    assert doc["comparable"] is False and doc["missing_levels"] == missing
    assert "no row for " + ", ".join(missing) in as_json.stderr
    assert list(_validator().iter_errors(doc)) == []


def test_extra_levels_are_not_comparable(tmp_path: Path) -> None:
    rows = [*_standard(), ("55%", "5000", "150")]
    proc = _run(tmp_path, ("--json",), _table(rows), ".csv")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 0 and doc["comparable"] is False and doc["missing_levels"] == []
    assert doc["nonstandard_levels"] == 1 and "55%" in proc.stderr


def test_a_full_table_is_comparable_and_says_nothing_extra(tmp_path: Path) -> None:
    proc = _run(tmp_path, ("--json",), _table(_standard()), ".csv")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 0 and proc.stderr == ""
    assert doc["comparable"] is True and doc["missing_levels"] == [] and doc["nonstandard_levels"] == 0
    ops = sum(1000 * (10 - i) for i in range(10))
    power = sum(200 - 10 * i for i in range(10)) + 50
    assert doc["overall"] == pytest.approx(ops / power)
    text = _run(tmp_path, (), _table(_standard()), ".csv")
    assert "not comparable" not in text.stdout and "Active Idle" in text.stdout


def test_actual_loads_printed_to_a_whole_percent_are_not_a_contradiction(tmp_path: Path) -> None:
    # Calibrated 10,000 ops: 100 % reached 9,960 (printed 100 %), 10 % reached 1,046 (printed 10 %).
    text = "target,actual,ops,power\n100%,100%,9960,200\n50%,50%,4951,120\n10%,10%,1046,70\n"
    proc = _run(tmp_path, (), text, ".csv")
    assert proc.returncode == 0, proc.stderr


# --- the JSON contract ------------------------------------------------------------------------------

DATA = Path(__file__).resolve().parent / "data" / "specpower"


@pytest.mark.parametrize(
    "name",
    sorted(p.name for p in DATA.iterdir() if p.suffix in (".csv", ".json") and p.name != "published.json"),
)
def test_score_json_validates_against_its_schema(tmp_path: Path, name: str) -> None:
    proc = subprocess.run(
        [WATTBENCH, "score", str(DATA / name), "--json"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert list(_validator().iter_errors(doc)) == []
    assert doc["comparable"] is True and doc["match"] is True


def test_score_json_with_expect_and_nodes_validates(tmp_path: Path) -> None:
    text = "target,actual,ops:a,ops:b,power:a,power:b\n100%,99.5%,10,10,100,100\nidle,,0,0,25,25\n"
    proc = _run(tmp_path, ("--json", "--expect", "0.08"), text, ".csv")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 0, proc.stderr
    assert list(_validator().iter_errors(doc)) == []
    assert doc["levels"][0]["node_power"] == {"a": 100.0, "b": 100.0}
    assert doc["published_overall"] == 0.08 and doc["match"] is True


def test_the_schema_refuses_what_the_command_never_prints() -> None:
    v = _validator()
    good = {
        "overall": 1.0,
        "comparable": True,
        "missing_levels": [],
        "nonstandard_levels": 0,
        "levels": [{"target": 1.0, "actual": None, "ops": 5.0, "power": 5.0, "ratio": 1.0}],
    }
    assert list(v.iter_errors(good)) == []
    for bad in (
        {**good, "overall": -1.0},
        {**good, "levels": [{**good["levels"][0], "target": 1.5}]},
        {**good, "levels": [{**good["levels"][0], "power": -5.0}]},
        {**good, "levels": [{**good["levels"][0], "detail": 1}]},
        {**good, "extra": 1},
    ):
        assert list(v.iter_errors(bad)), bad
