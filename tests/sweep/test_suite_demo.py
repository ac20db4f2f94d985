"""`wattbench demo --suite` and `wattbench suite` end to end: the embedded broker, the host-mode
appliance and the collector, three worklets swept one after another with power measured, one active
idle, the suite table and page; and a suite stopped with Ctrl-C in its second worklet keeps the first."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import wattbench_schema

pytestmark = pytest.mark.timeout(400)

WIDE = {**os.environ, "COLUMNS": "160"}
SHORT = ["--measure", "1", "--pre", "0.5", "--post", "0.2", "--gap", "0.1"]


def _stored_results(store: Path) -> dict[str, dict]:
    db = sqlite3.connect(store)
    rows = db.execute("SELECT run, doc FROM wb_result WHERE phase = 'overall'").fetchall()
    return {run: json.loads(doc) for run, doc in rows}


def test_demo_suite_runs_three_worklets_with_power(tmp_path: Path) -> None:
    pytest.importorskip("wattbench_fw.host")
    html, store = tmp_path / "suite.html", tmp_path / "demo.sqlite"
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "wattbench.cli", "demo", "--suite", "--quiet", *SHORT,
         "--html", str(html), "--store", str(store)],
        capture_output=True, text=True, timeout=380, cwd=tmp_path, env=WIDE,
    )  # fmt: skip
    took = time.monotonic() - t0
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    for name, unit in (("sha256", "hashes"), ("flood", "triads"), ("random", "4KiB-reads")):
        assert name in out and unit in out, name
    (line,) = [ln for ln in out.splitlines() if ln.startswith("demo result: ")]
    assert "suite score 1.0000 (SERT-style, relative to itself)" in line
    assert "not comparable with published SERT scores" in out
    results = _stored_results(store)
    assert sorted(r.rsplit("-", 1)[1] for r in results) == ["flood", "random", "sha256"]
    for run, result in results.items():
        assert result["unit"] and result["workload"].startswith("worklet-"), run
        assert all(lv["W"] > 0 for lv in result["levels"])  # power was measured for every level
    idles = [r for r in results.values() if any(lv["kind"] == "idle" for lv in r["levels"])]
    assert len(idles) == 1 and idles[0]["run"].endswith("-sha256")  # one active idle, after the first
    page = html.read_text()
    assert page.count("<svg") == 2 and "suite score 1.0000" in page
    assert took < 240, took  # 1 s windows: far inside the 4 minutes the full demo suite may take


def test_a_suite_stopped_in_its_second_worklet_keeps_the_first(tmp_path: Path) -> None:
    """Through `wattbench suite` (ops only, so it needs no services): Ctrl-C during the second worklet
    ends the command with 130, and the suite result written keeps the first worklet with its figures."""
    suite = tmp_path / "s.toml"
    suite.write_text(
        'name = "two"\nlevels = "100,50"\n'
        '[[worklet]]\nworklet = "sha256"\nworkers = 1\n'
        '[[worklet]]\nworklet = "sort"\nworkers = 1\n'
    )
    out = tmp_path / "suite.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "wattbench.cli", "suite", str(suite), "--ops-only", "--quiet",
         "--measure", "2", "--pre", "0.5", "--post", "0.2", "--gap", "0.1", "--json-out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if "worklet 2/2" in line:
            # Inside the second worklet's first calibration interval, whose window (0.5 s ramp-up,
            # 2 s measured) cannot have closed yet, however loaded the machine.
            time.sleep(0.3)
            proc.send_signal(signal.SIGINT)
            break
    rest, _ = proc.communicate(timeout=60)
    text = "".join(seen) + rest
    assert proc.returncode == 130, text[-3000:]
    assert "Traceback" not in text
    doc = json.loads(out.read_text())
    errors = [e.message for e in wattbench_schema.jsonschema_validator("suite").iter_errors(doc)]
    assert errors == []
    # The second worklet was stopped in its calibration, before any window: it measured nothing, so
    # it is not in the suite (nothing of it is stored either); the suite says where it stopped.
    (first,) = doc["worklets"]
    assert first["name"] == "sha256" and first["calibrated"] > 0 and len(first["levels"]) == 0
    assert doc["interrupted"].startswith("interrupted") and "worklet sort" in doc["interrupted"]
    assert not doc["complete"] and not doc["valid"]
    assert "the finished worklets are kept" in text


def test_suite_refuses_bad_input_before_it_starts(tmp_path: Path) -> None:
    suite = tmp_path / "s.toml"
    suite.write_text('[[worklet]]\nworklet = "sha256"\nworkers = "two"\n')
    good = tmp_path / "good.toml"
    good.write_text('[[worklet]]\nworklet = "sha256"\n')
    for argv, code, why in (
        ([str(suite), "--ops-only"], 2, "worklet sha256: worklet workload: workers must be an integer"),
        ([str(tmp_path / "none.toml"), "--ops-only"], 2, "none.toml"),
        ([str(good)], 2, "no store"),
        ([str(good), "--ops-only", "--reference", str(good)], 2, "not valid JSON"),
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "wattbench.cli", "suite", *argv],
            capture_output=True, text=True, timeout=60, cwd=tmp_path,
        )  # fmt: skip
        assert proc.returncode == code and why in proc.stderr, (argv, proc.stderr)
        assert "Traceback" not in proc.stderr
