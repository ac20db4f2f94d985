"""Every plug format and component through real Mosquitto: the messages of tests/data/plugs/ (written
after the vendors' documentation) published at QoS 1 under the devices' own topics, the collector
bridging every mapping row at once; the watts, volts, amps and energy of every sample each row should
make equal the stored ones (0 wrong, none missing, none extra). Then a Pro 3EM under a sweep: naming its
total scores each level's mean exactly, and naming only its phases sums them once."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest

from .e2e import sweep_with

pytestmark = [pytest.mark.services, pytest.mark.timeout(400)]

DATA = Path(__file__).resolve().parents[1] / "data" / "plugs"
QUANTITIES = ("W", "V", "A", "PF", "Hz", "Wh")


def _payload(message: dict[str, Any]) -> bytes:
    body = message["payload"]
    return body.encode() if isinstance(body, str) else json.dumps(_fresh(body)).encode()


def _fresh(doc: Any) -> Any:
    """The documented message with its own times (Shelly's aenergy.minute_ts, a notification's ts) made
    now, as a plug sends them: the documentation's examples are months old, and a reading its plug's
    clock dates that far back is a stale one, which the bridge drops (docs/sources/plugs.md)."""
    now = time.time()
    if isinstance(doc, dict):
        out = {k: _fresh(v) for k, v in doc.items()}
        if isinstance(out.get("minute_ts"), int):
            out["minute_ts"] = int(now // 60 * 60)
        if isinstance(out.get("ts"), int | float):
            out["ts"] = round(now, 2)
        return out
    if isinstance(doc, list):
        return [_fresh(v) for v in doc]
    return doc


def _client(mosquitto: Any, name: str) -> mqtt.Client:
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=name)
    client.connect(mosquitto.host, mosquitto.port)
    client.loop_start()
    return client


def test_every_documented_message_is_stored_as_published(tmp_path: Path, mosquitto: Any) -> None:
    from wattbench.bridge import load_plugs
    from wattbench.config import CollectorConfig
    from wattbench.ingest.collector import Collector
    from wattbench.store import open_store

    docs = [json.loads(f.read_text()) for f in sorted(DATA.glob("*.json"))]
    mapping = tmp_path / "plugs.toml"
    mapping.write_text("\n".join(d["plugs"] for d in docs))
    channels = {p.dev: p.channel for p in load_plugs(mapping)}
    expected: dict[str, list[dict[str, float]]] = {dev: [] for dev in channels}
    for doc in docs:
        for message in doc["messages"]:
            for dev, values in message["expect"].items():
                expected[dev].append(values)

    db = str(tmp_path / "wb.sqlite")
    broker = f"{mosquitto.host}:{mosquitto.port}"
    collector = Collector(
        CollectorConfig(
            broker=broker,
            store=db,
            state_dir=str(tmp_path / "state"),
            spool_dir=str(tmp_path / "spool"),
            validate_workers=0,
            health_period_s=1.0,
            plugs=str(mapping),
        )
    )
    collector.start()
    client = _client(mosquitto, "plug-formats")
    start = int(time.time() * 1000) - 1000
    try:
        time.sleep(1.0)  # subscribed
        for doc in docs:
            for message in doc["messages"]:
                client.publish(message["topic"], _payload(message), qos=1).wait_for_publish(5)
                time.sleep(0.02)  # one message per stamp: each sample its own time
        store = open_store(db)
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                now = int(time.time() * 1000) + 1000
                got = {dev: store.series(dev, ch, start, now, QUANTITIES) for dev, ch in channels.items()}
                if all(len(got[dev]) >= len(want) for dev, want in expected.items()):
                    break
                time.sleep(0.25)
            rejects = [r for r in store.rejects() if r["reason"] == "plug"]
        finally:
            store.close()
    finally:
        client.loop_stop()
        client.disconnect()
        collector.stop()

    assert not rejects, rejects
    wrong: list[str] = []
    for dev, want in expected.items():
        series = got[dev]
        assert len(series) == len(want), (dev, len(series), len(want))
        for i, values in enumerate(want):
            for q in QUANTITIES:
                stored = float(series.values[q][i])
                if q not in values:
                    if stored == stored:  # not NaN: a quantity the device did not send was stored
                        wrong.append(f"{dev}[{i}].{q}: stored {stored}, sent none")
                elif stored != pytest.approx(values[q], rel=1e-9):
                    wrong.append(f"{dev}[{i}].{q}: stored {stored}, sent {values[q]}")
    assert wrong == []
    assert sum(len(w) for w in expected.values()) > 40


PHASES = {"a": 101.5, "b": 62.25, "c": 48.25}  # W; the total is their sum, 212 W
PRO3EM = """
[[plug]]
format = "shelly_em"
topic = "shellypro3em-c2ff8e1a6696"
phase = "total"
dev = "p3-total"
channel = "total"
role = "power"
node = "srv1"
period_s = 0.25
""" + "".join(
    f"""
[[plug]]
format = "shelly_em"
topic = "shellypro3em-c2ff8e1a6696"
phase = "{p}"
dev = "p3-{p}"
channel = "{p}"
role = "component"
node = "srv1"
period_s = 0.25
"""
    for p in PHASES
)


class Pro3EM(threading.Thread):
    """A Pro 3EM's generic status updates, four times a second: emdata:0 and em:0."""

    def __init__(self, mosquitto: Any) -> None:
        super().__init__(daemon=True)
        self.client = _client(mosquitto, "pro3em")
        self.stopped = threading.Event()
        self.energy = dict.fromkeys(PHASES, 1000.0)

    def run(self) -> None:
        prefix = "shellypro3em-c2ff8e1a6696/status"
        while not self.stopped.wait(0.25):
            data: dict[str, Any] = {"id": 0}
            em: dict[str, Any] = {"id": 0}
            for p, watts in PHASES.items():
                self.energy[p] += watts * 0.25 / 3600
                data[f"{p}_total_act_energy"] = round(self.energy[p], 3)
                em.update({f"{p}_act_power": watts, f"{p}_voltage": 230.0, f"{p}_current": watts / 230})
            data["total_act"] = round(sum(self.energy.values()), 3)
            em["total_act_power"] = sum(PHASES.values())
            em["total_current"] = sum(PHASES.values()) / 230
            self.client.publish(f"{prefix}/emdata:0", json.dumps(data), qos=1).wait_for_publish(5)
            self.client.publish(f"{prefix}/em:0", json.dumps(em), qos=1).wait_for_publish(5)

    def stop(self) -> None:
        self.stopped.set()
        self.join(5)
        self.client.loop_stop()
        self.client.disconnect()


@pytest.mark.parametrize(
    "named", [["p3-total/total"], ["p3-a/a", "p3-b/b", "p3-c/c"]], ids=["total", "phases"]
)
def test_a_sweep_on_a_pro3em_counts_its_watts_once(tmp_path: Path, mosquitto: Any, named: list[str]) -> None:
    mapping = tmp_path / "plugs.toml"
    mapping.write_text(PRO3EM)
    meter = Pro3EM(mosquitto)

    def start_meter() -> None:
        meter.start()
        time.sleep(2.0)  # each row's metadata stored before the sweep checks the named channels

    try:
        run = sweep_with(
            tmp_path, mosquitto, "unused", [], named=named, before=start_meter, plugs=str(mapping)
        )
    finally:
        meter.stop()
    assert sorted(s.key for s in run.outcome.channels) == sorted(named)
    rows = {r["phase"]: r for r in run.outcome.evaluation.result["levels"]}
    assert set(rows) == {"l100", "l50", "idle"}
    for phase, row in rows.items():
        assert row["W"] == pytest.approx(sum(PHASES.values()), rel=1e-12), phase
