"""`wattbench score` on very long tables: the right overall and a terminal summary of a dozen lines
instead of a row per line. (How long it takes is bench/bench_score_table.py's business, not a test's.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

import wattbench_schema as contract
from wattbench.report.table import fmt_count

WATTBENCH = str(Path(sys.executable).with_name("wattbench"))


def write_table(path: Path, rows: int) -> Fraction:
    """rows distinct target loads (k / rows of the calibrated throughput, printed in percent), ops 3k,
    power 200 W plus k mod 7 W, and an Active Idle row of 100 W. Returns the exact overall."""
    ops = 0
    power = 100
    with path.open("w") as f:
        f.write("# synthetic table\ntarget,actual,ops,power\n")
        for k in range(1, rows + 1):
            w = 200 + k % 7
            ops += 3 * k
            power += w
            pct = Fraction(100 * k, rows)
            f.write(f"{float(pct)!r}%,,{3 * k},{w}\n")
        f.write("Active Idle,,0,100\n")
    return Fraction(ops, power)


@pytest.mark.parametrize("rows", [10_000, 1_000_000])
def test_long_table_scores_right_and_prints_a_summary(tmp_path: Path, rows: int) -> None:
    path = tmp_path / "long.csv"
    exact = write_table(path, rows)
    expect = f"{float(exact)!r}"
    proc = subprocess.run(
        [WATTBENCH, "score", str(path), "--expect", expect, "--tolerance", "0"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "120"},
    )
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    # exit 0 with no tolerance at all: the computed overall is the exact one, to the last bit
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) < 40, f"{len(lines)} lines printed for {rows} rows"
    assert f"{rows + 1 - 10:,} are not" in proc.stdout
    assert f"∑ {rows:,} target loads" in proc.stdout
    assert f"∑ssj_ops / ∑power = {fmt_count(float(exact))}" in proc.stdout
    assert "matches the expected" in proc.stdout


def test_long_table_json_has_every_row_and_validates(tmp_path: Path) -> None:
    path = tmp_path / "long.csv"
    exact = write_table(path, 10_000)
    proc = subprocess.run(
        [WATTBENCH, "score", str(path), "--json"], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert len(doc["levels"]) == 10_001 and doc["levels"][-1]["target"] == "idle"
    assert doc["overall"] == float(exact)
    assert doc["comparable"] is False and doc["nonstandard_levels"] == 10_000 - 10
    assert list(contract.jsonschema_validator("score").iter_errors(doc)) == []


VARIED = """target,actual,ops,power
100%,99.6%,617957,236
 90% ,90.3,560266,222.5
0.8,0.804,498387,207
70,,435441,1e2
60.0%,60%,372068,176
0.5,,310402,162
Active Idle,,0,72.2
"""


@pytest.mark.parametrize(
    "text",
    [
        VARIED,
        VARIED.replace("0.804", "nan"),
        VARIED.replace("Active Idle,,0", "Active Idle,,5"),
        VARIED.replace("1e2", "0"),
        VARIED.replace("0.5,,", "150%,,"),
        VARIED.replace("0.5,,", "100,,"),
    ],
    ids=["valid", "nan actual", "idle ops", "zero power", "target 150%", "repeated level"],
)
def test_block_reader_agrees_with_the_row_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    """Plain rows are parsed a block at a time with numpy; the result, or the refusal, must be the row
    reader's exactly."""
    from wattbench.cli import score as sf
    from wattbench.core import published

    path = tmp_path / "t.csv"
    path.write_text(text)

    def read() -> object:
        try:
            t = sf.read_table(path)
        except sf.TableError as exc:
            return str(exc)
        return [a.tolist() for a in (t.target, t.ops, t.power, t.actual, t.where)]

    fast = read()
    monkeypatch.setattr(published, "_fast_block", lambda *a: False)
    slow = read()
    assert repr(fast) == repr(slow)
