"""`wattbench compare-estimate` against a real Prometheus (deploy/prometheus/ as shipped) that scrapes an
estimator: a short sweep measures 150 W through the appliance, the estimator says half of that (the
kind of gap users of software estimators report), and the command prints -50 % at every level. A query
giving several series is refused, not summed; Prometheus away is one line and exit 3."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from wattbench_devkit.services import free_port

from .e2e import RUN, sweep_with

pytestmark = [pytest.mark.services, pytest.mark.timeout(300)]

WALL_W = 150.0


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "wattbench"
    p = subprocess.run([str(exe), "compare-estimate", *args], capture_output=True, text=True, timeout=120)
    assert "Traceback" not in p.stderr, p.stderr
    return p


def test_an_estimator_is_compared_level_by_level(tmp_path: Path, mosquitto: Any, prometheus: Any) -> None:
    from prometheus_client import CollectorRegistry, Gauge, start_http_server

    from wattbench.core import contract

    registry = CollectorRegistry()
    Gauge("estimator_node_watts", "a software estimate of the server", registry=registry).set(WALL_W / 2)
    per_process = Gauge("estimator_process_watts", "per process", ["proc"], registry=registry)
    per_process.labels("a").set(30)
    per_process.labels("b").set(45)
    port = free_port()
    server, _ = start_http_server(port, addr="127.0.0.1", registry=registry)
    prom = prometheus([f"127.0.0.1:{port}"])
    try:
        assert prom.wait_query("estimator_node_watts"), prom.log_tail()
        run = sweep_with(tmp_path, mosquitto, "est1", [], sim_watts=WALL_W)
        args = ["--store", run.db, "--prometheus", prom.url]

        p = cli(RUN, *args, "--query", "estimator_node_watts", "--json")
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout)
        contract.validate("estimate", doc)
        assert [r["phase"] for r in doc["levels"]] == ["l100", "l50", "idle"]
        for r in doc["levels"]:
            assert r["measured_W"] == pytest.approx(WALL_W, rel=1e-3)
            assert r["estimated_W"] == pytest.approx(WALL_W / 2, rel=1e-9)
            assert r["error"] == pytest.approx(-0.5, rel=1e-2)
        assert doc["summary"]["levels"] == 3 and doc["summary"]["power_ratio"] == pytest.approx(0.5, rel=1e-2)

        table = cli("latest", *args, "--query", "estimator_node_watts")
        assert table.returncode == 0 and "-50.0 %" in table.stdout, table.stdout
        assert "another unit" not in table.stdout

        # A query in µW (Scaphandre's unit) without its / 1e6 was a table of unexplained millions.
        slip = cli(RUN, *args, "--query", "estimator_node_watts * 1e6")
        assert slip.returncode == 0 and "75,000,000.0" in slip.stdout, slip.stdout
        said = " ".join(slip.stdout.split())  # the line wraps at the terminal's width
        assert "the estimate is about 1e6 times the measured power: is the query in another unit?" in said
        # An absurd figure was printed in all its 301 digits, wrapped over 80 lines.
        absurd = cli(RUN, *args, "--query", "estimator_node_watts * 1e300")
        assert absurd.returncode == 0 and "7.5e+301" in absurd.stdout, absurd.stdout
        assert len(absurd.stdout.splitlines()) < 20, absurd.stdout

        several = cli(RUN, *args, "--query", "estimator_process_watts")
        assert several.returncode == 2 and "gives 2 series" in several.stderr and "sum(" in several.stderr
        summed = cli(RUN, *args, "--query", "sum(estimator_process_watts)", "--json")
        assert json.loads(summed.stdout)["levels"][0]["estimated_W"] == pytest.approx(75.0)

        nothing = cli(RUN, *args, "--query", "no_such_metric", "--json")
        assert nothing.returncode == 0
        assert all(
            r["reason"] == "the query gives nothing in the level's window"
            for r in json.loads(nothing.stdout)["levels"]
        )

        bad = cli(RUN, *args, "--query", "sum(")
        assert (
            bad.returncode == 3
            and "refused the query" in bad.stderr
            and len(bad.stderr.strip().splitlines()) == 1
        )
    finally:
        server.shutdown()

    away = cli(RUN, "--store", run.db, "--prometheus", f"http://127.0.0.1:{free_port()}", "--query", "x")
    assert away.returncode == 3 and "cannot reach Prometheus" in away.stderr
    missing = cli("nope", "--store", run.db, "--prometheus", "http://127.0.0.1:9", "--query", "x")
    assert missing.returncode == 2 and "is not in the store" in missing.stderr
    wrong = cli(RUN, "--store", run.db, "--prometheus", "127.0.0.1:9090", "--query", "x")
    assert wrong.returncode == 2 and "not an http" in wrong.stderr


def test_an_empty_query_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """An empty --query was sent to Prometheus: exit 3 for the connection, not 2 for the mistake."""
    from wattbench.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["compare-estimate", "r1", "--prometheus", "http://127.0.0.1:1", "--query", " "])
    assert exc.value.code == 2 and "argument --query: must not be empty" in capsys.readouterr().err


def test_an_estimate_of_no_power_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    """An estimator reading 0 W printed "the measured score divided by 0.000"."""
    from wattbench.cli.estimate import _print_table

    doc = {
        "run": "r1",
        "query": "q",
        "levels": [{"phase": "l100", "measured_W": 200.0, "estimated_W": 0.0, "error": -1.0}],
        "summary": {"levels": 1, "mean_abs_error": 1.0, "max_abs_error": 1.0, "power_ratio": 0.0},
    }
    _print_table(doc)
    out = capsys.readouterr().out
    assert "divided by" not in out and "the estimate is 0 W at every level" in out
