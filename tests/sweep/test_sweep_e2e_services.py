"""End to end through real Mosquitto and InfluxDB: the host-mode appliance with its simulated meter,
the collector writing to InfluxDB, a short sweep of the built-in workload, then scoring. Each level's
average power must match the meter's ground truth (every value it published, samples strictly inside
each window) within 0.1 %.

The meter follows a scripted ramp, not this machine's CPU use: the test is about scoring, and a
CPU-following meter made its levels depend on whatever else ran beside it (tests/firmware/meters/
test_sim.py checks the cpu model itself). The ramp is the first quarter of a slow sine, rising for the
first 200 s after the appliance starts, so each window's mean is above the one before it and a window
scored from another's samples would miss its truth by far more than 0.1 %."""

from __future__ import annotations

import csv
import itertools
import json
import threading
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.services, pytest.mark.timeout(420)]


def truth_means(
    path: Path,
    events: list[dict[str, Any]],
    channels: set[str],
    offsets: dict[str, float],
    dev: str,
    counts: dict[str, int] | None = None,
) -> dict[str, float]:
    """Per window, the mean of the true power values strictly inside, summed over channels; counts, when
    given, gets how many true values each window held."""
    from wattbench.core.align import windows_from_events

    rows: dict[str, list[tuple[int, float]]] = {}
    with open(path) as f:
        for r in csv.DictReader(f):
            if r["ch"] in channels:
                rows.setdefault(r["ch"], []).append((int(r["t_ms"]), float(r["W"])))
    off = offsets.get(dev, 0.0)
    out = {}
    for w in windows_from_events(events):
        total = 0.0
        for ch in channels:
            inside = [v for t, v in rows.get(ch, []) if w.start_ms < t - off < w.end_ms]
            assert inside, f"truth has no samples of {ch} in {w.phase}"
            if counts is not None:
                counts[w.phase] = counts.get(w.phase, 0) + len(inside)
            total += sum(inside) / len(inside)
        out[w.phase] = total
    return out


def test_sweep_scores_match_ground_truth(tmp_path: Path, mosquitto: Any, influxdb: Any) -> None:
    fw_host = pytest.importorskip("wattbench_fw.host")
    from wattbench.config import CollectorConfig
    from wattbench.core import contract
    from wattbench.core.plan import Timing, specpower_plan
    from wattbench.ingest.collector import Collector
    from wattbench.store import open_store
    from wattbench.sweep.session import MqttSettings, SweepSetup, run_sweep
    from wattbench.workloads.builtin.workers import BuiltinWorkload

    truth = tmp_path / "truth.csv"
    broker = f"{mosquitto.host}:{mosquitto.port}"
    cfg = fw_host.sim_config(
        dev="sim-e2e", broker=broker, hz=10, model="sine", truth=str(truth), batch_ms=250
    )
    cfg["channels"][0]["opts"].update(watts=100.0, amp=800.0, period_s=800.0)
    collector = Collector(
        CollectorConfig(
            broker=broker,
            store=influxdb.url,
            influx_db=influxdb.db,
            state_dir=str(tmp_path / "state"),
            spool_dir=str(tmp_path / "spool"),
            validate_workers=0,
            health_period_s=1.0,
        )
    )
    collector.start()
    appliance = fw_host.HostAppliance(cfg).start()
    store = open_store(influxdb.url, db=influxdb.db)

    # The retained result, as a subscriber that joins after the run sees it.
    results: list[dict[str, Any]] = []
    got = threading.Event()
    try:
        assert appliance.wait_connected(20)
        plan = specpower_plan(calibrations=3, levels=(1.0, 0.5, 0.1), timing=Timing(1.0, 4.0, 0.5, 0.3))
        setup = SweepSetup(
            run="e2e-run",
            plan=plan,
            workload=BuiltinWorkload(workers=1),
            store=store,
            mqtt=MqttSettings(broker),
            wait_data_s=30,
        )
        outcome = run_sweep(setup)
    finally:
        appliance.stop(timeout=10)
        collector.stop()

    ev = outcome.evaluation
    assert outcome.record.interrupted is None
    assert [s.key for s in outcome.channels] == ["sim-e2e/sim"]  # found through the retained metadata
    assert outcome.channels[0].hz == 10 and outcome.channels[0].node == "node1"
    contract.validate_result(ev.result)
    rows = {r["phase"]: r for r in ev.result["levels"]}
    # the result names what it summed, with every usable sample of the scored windows
    assert [{k: v for k, v in c.items() if k != "samples"} for c in ev.result["channels"]] == [
        {"dev": "sim-e2e", "ch": "sim", "role": "power", "meter": "sim", "acc": 0.005, "node": "node1"}
    ]
    assert ev.result["channels"][0]["samples"] == sum(r["samples"] for r in rows.values())
    assert any(c.name == "channels" and c.ok for c in ev.checks)
    assert list(rows) == ["l100", "l50", "l10", "idle"]

    # Host mode stamps samples with this host's clock: the true offset is zero. The collector's estimate
    # (receive minus sample time) is transport and batching delay, inside the deadband, so nothing is
    # shifted and the truth is taken with no shift either.
    assert ev.offsets_ms == {}
    assert abs(ev.measured_offsets_ms.get("sim-e2e", 0.0)) < 400
    counts: dict[str, int] = {}
    expected = truth_means(truth, outcome.record.events, {"sim"}, {}, "sim-e2e", counts)
    from wattbench.report.table import render_text

    print(render_text(ev.levels, ev.result["overall"], valid=ev.valid, checks=ev.checks))
    for phase, row in rows.items():
        print(
            f"{phase}: scored {row['W']:.4f} W, truth {expected[phase]:.4f} W, measured offset {ev.measured_offsets_ms}"
        )
    for phase, row in rows.items():
        assert row["W"] == pytest.approx(expected[phase], rel=1e-3), phase
        # Every value the appliance measured in the window is scored (at 10 Hz over 4 s about 40; a
        # slot a loaded host reached too late is published as missed, with no value, and counts in
        # neither).
        assert row["samples"] >= counts[phase] - 1 and counts[phase] >= 20, (row["samples"], counts[phase])
    # the windows are told apart: on the rising ramp each window's truth is well above the one before
    # it, far more than the 0.1 % each is matched to
    in_order = [expected[p] for p in ("l100", "l50", "l10", "idle")]
    assert all(b - a > 5.0 for a, b in itertools.pairwise(in_order)), expected
    assert ev.result["overall"] > 0

    # published retained on the result topic, and stored in InfluxDB
    import paho.mqtt.client as mqtt

    sub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="e2e-result-reader")
    sub.on_message = lambda c, u, m: (results.append(json.loads(m.payload)), got.set())
    sub.connect(mosquitto.host, mosquitto.port)
    sub.subscribe("wattbench/v1/run/e2e-run/result", qos=1)
    sub.loop_start()
    try:
        assert got.wait(10), "no retained result"
    finally:
        sub.loop_stop()
        sub.disconnect()
    assert results[0]["overall"] == ev.result["overall"]
    stored = store.result("e2e-run")
    assert stored is not None and stored["overall"] == pytest.approx(ev.result["overall"])
    points = influxdb.query("SELECT * FROM wb_result WHERE run = 'e2e-run'")
    assert {p["phase"] for p in points} >= {"l100", "l50", "l10", "idle"}
    phases = store.phases("e2e-run")
    assert len(phases) == len(outcome.record.events)
    store.close()
