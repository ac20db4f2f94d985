"""Smart plugs end to end: plug-format messages published on real Mosquitto under the plugs' own
topics, bridged by the collector into the contract, stored in the embedded store and scored by a short
sweep that names the plug's channel. Every level is the plug's power within 0.1 %; a malformed plug
message before the run is a counted reject with its reason, never a sample; Shelly and ESPHome plugs
beside it are stored as they reported."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest

from .e2e import sweep_with

pytestmark = [pytest.mark.services, pytest.mark.timeout(300)]

WATTS = 212.0
PLUGS = """
[[plug]]
format = "tasmota"
topic = "tasmota_5A3F2C"
dev = "plug-srv1"
node = "srv1"
period_s = 0.25
acc = 0.02

[[plug]]
format = "shelly"
topic = "shellyplusplugs-a1b2"
dev = "plug-srv2"
node = "srv2"
period_s = 0.25

[[plug]]
format = "esphome"
topic = "athom-1"
dev = "plug-srv3"
node = "srv3"
period_s = 0.25
sensors = { W = "power", V = "voltage", Wh = "energy" }
energy_unit = "Wh"
"""


class Plugs(threading.Thread):
    """Three plugs publishing as their firmware does, four times a second."""

    def __init__(self, mosquitto: Any) -> None:
        super().__init__(daemon=True)
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="plugs")
        self.client.connect(mosquitto.host, mosquitto.port)
        self.client.loop_start()
        self.stopped = threading.Event()
        self.energy = 1000.0

    def send(self, topic: str, payload: str | bytes) -> None:
        self.client.publish(topic, payload, qos=1).wait_for_publish(5)

    def run(self) -> None:
        while not self.stopped.wait(0.25):
            self.energy += WATTS * 0.25 / 3600
            self.send(
                "tele/tasmota_5A3F2C/SENSOR",
                json.dumps(
                    {
                        "Time": "2026-11-25T10:00:00",
                        "ENERGY": {
                            "Total": self.energy / 1000,
                            "Power": WATTS,
                            "Voltage": 230,
                            "Current": 0.97,
                            "Factor": 0.95,
                        },
                    }
                ),
            )
            self.send(
                "shellyplusplugs-a1b2/status/switch:0",
                json.dumps({"id": 0, "apower": 99.5, "voltage": 229.0, "aenergy": {"total": 50.0}}),
            )
            self.send("athom-1/sensor/voltage/state", "231.5")
            self.send("athom-1/sensor/power/state", "40.25")

    def stop(self) -> None:
        self.stopped.set()
        self.join(5)
        self.client.loop_stop()
        self.client.disconnect()


def test_plugs_bridged_stored_and_scored(tmp_path: Path, mosquitto: Any) -> None:
    from wattbench.store import open_store

    mapping = tmp_path / "plugs.toml"
    mapping.write_text(PLUGS)
    plugs = Plugs(mosquitto)

    def start_plugs() -> None:
        plugs.send("tele/tasmota_5A3F2C/SENSOR", b"{garbage")  # a malformed plug message
        plugs.send("shellyplusplugs-a1b2/status/switch:0", json.dumps({"id": 0, "output": False}))
        plugs.start()
        time.sleep(2.0)  # the bridge has stored each plug's metadata before the sweep checks it

    try:
        run = sweep_with(
            tmp_path,
            mosquitto,
            "unused",
            [],
            named=["plug-srv1/plug"],
            before=start_plugs,
            plugs=str(mapping),
        )
    finally:
        plugs.stop()

    ev = run.outcome.evaluation
    assert [s.key for s in run.outcome.channels] == ["plug-srv1/plug"]
    rows = {r["phase"]: r for r in ev.result["levels"]}
    assert set(rows) == {"l100", "l50", "idle"}
    for phase, row in rows.items():
        assert row["W"] == pytest.approx(WATTS, rel=1e-3), phase
    ch = ev.result["channels"][0]
    assert (ch["meter"], ch["role"], ch["node"], ch["acc"], ch["upd"]) == (
        "tasmota",
        "power",
        "srv1",
        0.02,
        0.25,
    )
    failed = {c.name for c in ev.checks if not c.ok} - {"load_within_2pct", "inlet_temp"}
    assert not failed, [c for c in ev.checks if not c.ok]

    store = open_store(run.db)
    try:
        now = int(time.time() * 1000)
        shelly = store.series("plug-srv2", "plug", now - 300_000, now)
        esphome = store.series("plug-srv3", "plug", now - 300_000, now)
        rejects = [r for r in store.rejects() if r["reason"] == "plug"]
        (seq,) = [c for c in store.sequence_check("plug-srv1")]
    finally:
        store.close()
    assert shelly.t_ms.size > 10 and set(shelly.values["W"].tolist()) == {99.5}
    assert esphome.t_ms.size > 10 and set(esphome.values["W"].tolist()) == {40.25}
    details = sorted(r["detail"] or "" for r in rejects)
    assert any("tasmota plug tasmota_5A3F2C: not JSON" in d for d in details), details
    assert any("shelly plug shellyplusplugs-a1b2: apower missing" in d for d in details), details
    assert all(r["dev"] in ("plug-srv1", "plug-srv2") for r in rejects)
    assert seq is not None
