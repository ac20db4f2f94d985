"""A run driven only by phase events from the user's own script, through real Mosquitto and InfluxDB:
the two examples of docs/sweep.md ("Your own sweep script") are taken from the page and run as they are
around a stand-in benchmark, the collector stores the events and the host-mode appliance's samples, and
`wattbench report` scores the run, stores the result and publishes it retained, the same on every run.

The appliance has a 150 W power channel and a 40 W channel whose metadata says role "other": only the
power channel may be summed."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import wattbench_schema

pytestmark = [pytest.mark.services, pytest.mark.timeout(420)]

ROOT = Path(__file__).resolve().parents[2]
DEV = "sim-own"
POWER_W = 150.0
OTHER_W = 40.0
# Short windows keep the test quick; the report marks such a run as a rehearsal.
TIMING = {"WINDOW_S": "3", "RAMP_S": "0.5", "LEVELS": "100 50"}
PHASES = ["l100", "l50", "idle"]
EVENTS = 1 + 6 * 4 + 1

# It prints as the guide's mybench.py does (ops=N, the command workload's contract), so that a newcomer
# who reuses that program here gets a run, not a ValueError in the script.
BENCH = """
import sys, time
rate, seconds = float(sys.argv[1]), float(sys.argv[2])
print("ops=0")
time.sleep(seconds)
print(f"ops={round((rate or 1000.0) * seconds)}")
"""


def doc_examples() -> dict[str, str]:
    """The first python and the first sh code block of the guide's own-script section."""
    text = (ROOT / "docs" / "sweep.md").read_text()
    section = text.split("## Your own sweep script", 1)[1].split("\n## ", 1)[0]
    out: dict[str, str] = {}
    for lang, body in re.findall(r"```(\w+)\n(.*?)```", section, re.S):
        out.setdefault(lang, body)
    assert {"python", "sh"} <= out.keys(), "the section lost an example"
    return out


def wattbench_cli() -> str:
    path = Path(sys.executable).parent / "wattbench"
    assert path.exists(), "wattbench console script not installed in this environment"
    return str(path)


class Bench:
    """Collector into InfluxDB and the host-mode appliance with a power and an "other" channel."""

    def __init__(self, tmp_path: Path, mosquitto: Any, influxdb: Any) -> None:
        fw_host = pytest.importorskip("wattbench_fw.host")
        from wattbench.config import CollectorConfig
        from wattbench.ingest.collector import Collector

        self.tmp = tmp_path
        self.mosquitto = mosquitto
        self.influxdb = influxdb
        self.broker = f"{mosquitto.host}:{mosquitto.port}"
        cfg = fw_host.sim_config(dev=DEV, broker=self.broker, channels=2, hz=10, model="const", batch_ms=250)
        cfg["channels"][0]["opts"]["watts"] = POWER_W
        cfg["channels"][1]["opts"]["watts"] = OTHER_W
        cfg["channels"][1]["role"] = "other"
        self.collector = Collector(
            CollectorConfig(
                broker=self.broker,
                store=influxdb.url,
                influx_db=influxdb.db,
                state_dir=str(tmp_path / "state"),
                spool_dir=str(tmp_path / "spool"),
                validate_workers=0,
                health_period_s=1.0,
            )
        )
        self.collector.start()
        self.appliance = fw_host.HostAppliance(cfg).start()
        assert self.appliance.wait_connected(20)
        self.bench = tmp_path / "bench.py"
        self.bench.write_text(BENCH)

    def env(self, run: str, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        for key in ("CHANNELS", "RUN", "BROKER", "BROKER_HOST", "BROKER_PORT"):
            env.pop(key, None)
        env.update(TIMING)
        env.update(RUN=run, BENCH=f"{sys.executable} {self.bench}", **extra)
        return env

    def wait_stored(self, run: str) -> None:
        """Every event stored, and samples past the end of the run."""
        from wattbench.store import open_store

        store = open_store(self.influxdb.url, db=self.influxdb.db)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                events = store.phases(run)
                if len(events) == EVENTS:
                    end = max(e["t"] for e in events)
                    if store.series(DEV, "sim1", end, end + 60_000).t_ms.size:
                        return
                time.sleep(0.5)
            raise AssertionError(f"run {run}: {len(store.phases(run))} of {EVENTS} events stored")
        finally:
            store.close()

    def report(self, run: str, *extra: str) -> tuple[int, dict[str, Any], str]:
        cmd = [
            wattbench_cli(),
            "report",
            run,
            "--influx",
            self.influxdb.url,
            "--db",
            self.influxdb.db,
            "--broker",
            self.broker,
            "--no-inlet-required",
            "--json",
            *extra,
        ]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert "Traceback" not in p.stderr, p.stderr
        doc = wattbench_schema.strict_loads(p.stdout) if p.stdout.strip() else {}
        return p.returncode, doc, p.stderr

    def retained(self, run: str) -> list[dict[str, Any]]:
        """The retained result, as a subscriber that joins after the run sees it."""
        import paho.mqtt.client as mqtt

        got: list[dict[str, Any]] = []
        done = threading.Event()
        sub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"reader-{time.monotonic_ns()}")

        def on_message(c: Any, u: Any, m: Any) -> None:
            got.append({"retain": m.retain, "doc": json.loads(m.payload)})
            done.set()

        sub.on_message = on_message
        sub.connect(self.mosquitto.host, self.mosquitto.port)
        sub.subscribe(wattbench_schema.topic_for("result", run=run), qos=1)
        sub.loop_start()
        try:
            assert done.wait(10), "no retained result"
            time.sleep(0.5)  # a second retained message would show here
        finally:
            sub.loop_stop()
            sub.disconnect()
        return got

    def stop(self) -> None:
        self.appliance.stop(timeout=10)
        self.collector.stop()


@pytest.fixture
def bench(tmp_path: Path, mosquitto: Any, influxdb: Any) -> Any:
    b = Bench(tmp_path, mosquitto, influxdb)
    try:
        yield b
    finally:
        b.stop()


def _validate(name: str, doc: dict[str, Any]) -> None:
    errors = [e.message for e in wattbench_schema.jsonschema_validator(name).iter_errors(doc)]
    assert errors == [], errors


def test_own_python_script_is_scored_stored_and_published(bench: Bench, tmp_path: Path) -> None:
    run = "own-python-1"
    script = tmp_path / "own_sweep.py"
    script.write_text(doc_examples()["python"])
    env = bench.env(run, BROKER=bench.broker, CHANNELS=f"{DEV}/sim1")
    p = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().splitlines()[-1] == run
    bench.wait_stored(run)

    code, doc, err = bench.report(run)
    assert code == 0, err
    _validate("report", doc)
    result = doc["result"]
    rows = {r["phase"]: r for r in result["levels"]}
    assert list(rows) == PHASES
    # only the power channel: the 40 W "other" channel is never part of the server's power
    for phase in PHASES:
        assert rows[phase]["W"] == pytest.approx(POWER_W, rel=1e-9), phase
    assert result["overall"] > 0 and not result.get("partial")

    # what was measured: the system under test from run_start, the timing, the waived inlet
    m = doc["measured"]
    assert m["host"] == socket.gethostname()[:64]
    assert m["sut"]["cores"] == os.cpu_count() and m["sut"]["kernel"]
    assert [c["phase"] for c in m["calibration"]] == ["cal1", "cal2", "cal3"]
    assert m["rehearsal"] is True and m["inlet"] == {"state": "waived"}

    # stored, and published retained, exactly the printed result
    from wattbench.store import open_store

    store = open_store(bench.influxdb.url, db=bench.influxdb.db)
    try:
        assert store.result(run) == result
    finally:
        store.close()
    first = bench.retained(run)
    assert first == [{"retain": True, "doc": result}]

    # Grafana's Run view: each of its queries on the run finds what it shows
    for q in run_view_queries(run):
        assert bench.influxdb.query(q), q

    # again: the same result, one stored result, the same retained message
    code, again, err = bench.report(run)
    assert code == 0, err
    assert again["result"] == result
    overall = bench.influxdb.query(f"SELECT * FROM wb_result WHERE run = '{run}' AND phase = 'overall'")
    assert len(overall) == 1
    assert len(bench.influxdb.query(f"SELECT * FROM wb_result WHERE run = '{run}'")) == len(PHASES) + 1
    assert bench.retained(run) == first

    # the terminal report says the same
    p = subprocess.run(
        [
            wattbench_cli(),
            "report",
            run,
            "--influx",
            bench.influxdb.url,
            "--db",
            bench.influxdb.db,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert p.returncode == 0, p.stderr
    assert "inlet temperature not measured (waived: --no-inlet-required)" in p.stdout
    assert "rehearsal, not a comparable result" in p.stdout
    assert f"cores: {os.cpu_count()}" in p.stdout


def run_view_queries(run: str) -> list[str]:
    doc = json.loads((ROOT / "deploy/grafana/dashboards/influxql/run-view.json").read_text())
    out: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            q = node.get("query")
            if isinstance(q, str) and "${run}" in q:
                out.append(q.replace("${run}", run).replace("$timeFilter", "time > 0"))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(doc)
    assert out
    return out


def test_own_shell_script_never_sums_a_channel_whose_role_is_not_power(bench: Bench, tmp_path: Path) -> None:
    """The shell example names no channels: scoring must still take only the channels whose role is
    power, from the appliance's metadata."""
    run = "own-shell-1"
    script = tmp_path / "own_sweep.sh"
    script.write_text(doc_examples()["sh"])
    env = bench.env(run, BROKER_HOST=bench.mosquitto.host, BROKER_PORT=str(bench.mosquitto.port))
    p = subprocess.run(["sh", str(script)], env=env, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().splitlines()[-1] == run
    bench.wait_stored(run)

    code, doc, err = bench.report(run)
    assert code == 0, err
    _validate("report", doc)
    result = doc["result"]
    assert [r["phase"] for r in result["levels"]] == PHASES
    assert doc["measured"]["sut"]["cores"] == os.cpu_count()
    assert bench.retained(run) == [{"retain": True, "doc": result}]
    for row in result["levels"]:
        assert row["W"] == pytest.approx(POWER_W, rel=1e-9), (row["phase"], "a non-power channel was summed")
