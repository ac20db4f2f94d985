"""The plug bridge's message rules through real Mosquitto, across a collector restart: a Tasmota and a
Shelly Gen2 switch plug publish every second, each message twice (QoS 0 and QoS 1 in turn), with a stale
retained message of each waiting on the broker; the collector stops and starts again while both plugs
are silent for ten messages. Every reading is stored once with the watts it carried, the retained and
stale messages are no sample but counted drops (at the first start and after the restart), and
`wattbench status --verify` counts exactly the ten missing messages of each plug (the command of
docs/sources/plugs.md). And plugs timed on arrival whose QoS 1 messages the broker queued while the
collector was down: `status --verify` counts none of them missing, only those the plug never sent."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest

pytestmark = [pytest.mark.services, pytest.mark.timeout(300)]

PLUGS = """
[[plug]]
format = "tasmota"
topic = "tasmota_5A3F2C"
dev = "plug-tas"
period_s = 1
zone = "UTC"

[[plug]]
format = "shelly"
topic = "shellyplusplugs-a1b2"
dev = "plug-shelly"
period_s = 1
"""
TAS = "tele/tasmota_5A3F2C/SENSOR"
SHELLY = "shellyplusplugs-a1b2/status/switch:0"
FIRST, SILENT, SECOND = 8, 10, 5  # messages before the restart, missing across it, after it


def tasmota(when_s: float, watts: float) -> bytes:
    # Tasmota's telemetry (Tasmota 14 docs), Time in the plug's zone (here UTC), whole seconds
    when = datetime.fromtimestamp(when_s, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return json.dumps(
        {"Time": when, "ENERGY": {"Total": 1.0 + watts / 1e5, "Power": watts, "Voltage": 230, "Current": 0.5}}
    ).encode()


def shelly(minute_s: int, watts: float) -> bytes:
    # Shelly Gen2 Switch.GetStatus as sent on <prefix>/status/switch:0 (Shelly Gen2 API docs)
    return json.dumps(
        {
            "id": 0,
            "source": "timer",
            "output": True,
            "apower": watts,
            "voltage": 229.5,
            "current": 0.4,
            "aenergy": {"total": 50.0 + watts / 1000, "by_minute": [1.0, 2.0, 3.0], "minute_ts": minute_s},
        }
    ).encode()


def test_retained_stale_and_repeated_plug_messages_across_a_restart(tmp_path: Path, mosquitto: Any) -> None:
    from wattbench.config import CollectorConfig
    from wattbench.ingest.collector import Collector
    from wattbench.store import open_store

    mapping = tmp_path / "plugs.toml"
    mapping.write_text(PLUGS)
    broker = f"{mosquitto.host}:{mosquitto.port}"
    db = str(tmp_path / "wb.sqlite")
    state = tmp_path / "state"

    def collector() -> Collector:
        return Collector(
            CollectorConfig(
                broker=broker,
                store=db,
                state_dir=str(state),
                spool_dir=str(tmp_path / "spool"),
                validate_workers=0,
                plugs=str(mapping),
            )
        ).start()

    pub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="plugs")
    pub.connect(mosquitto.host, mosquitto.port)
    pub.loop_start()

    def send(topic: str, payload: bytes, qos: int, retain: bool = False) -> None:
        info = pub.publish(topic, payload, qos=qos, retain=retain)
        if qos:
            info.wait_for_publish(5)

    now = time.time()
    # what each plug left retained an hour and ten minutes ago
    send(TAS, tasmota(now - 3600, 999.0), 1, retain=True)
    send(SHELLY, shelly(int(now // 60) * 60 - 600, 999.0), 1, retain=True)

    t0 = math.ceil(now) + 2  # the plugs' clock: message k is from t0 + k s
    sent: dict[str, list[float]] = {"plug-tas": [], "plug-shelly": []}

    def tick(k: int) -> None:
        """Message k of both plugs at its time, each sent twice (QoS 0 then 1, or 1 then 0)."""
        delay = t0 + k + 0.1 - time.time()
        if delay > 0:
            time.sleep(delay)
        tw, sw = 100.0 + k, 50.0 + k / 2
        for qos in (k % 2, 1 - k % 2):
            send(TAS, tasmota(t0 + k, tw), qos)
        delay = t0 + k + 0.5 - time.time()
        if delay > 0:
            time.sleep(delay)
        minute = int(time.time() // 60) * 60
        for qos in (1 - k % 2, k % 2):
            send(SHELLY, shelly(minute, sw), qos)
        sent["plug-tas"].append(tw)
        sent["plug-shelly"].append(sw)

    try:
        first = collector()
        try:
            for k in range(FIRST):
                tick(k)
            time.sleep(0.5)
        finally:
            first.stop()
        # both plugs are silent for SILENT messages; the collector restarts meanwhile
        second = collector()
        try:
            time.sleep(1.0)
            # a live message the plug's own clock dates an hour back
            send(TAS, tasmota(time.time() - 3600, 888.0), 1)
            for k in range(FIRST + SILENT, FIRST + SILENT + SECOND):
                tick(k)
            time.sleep(0.5)
        finally:
            second.stop()
    finally:
        pub.loop_stop()
        pub.disconnect()

    store = open_store(db)
    try:
        for dev, watts in sent.items():
            series = store.series(dev, "plug", (t0 - 60) * 1000, (t0 + 120) * 1000)
            assert series.values["W"].tolist() == watts, dev  # every reading once, in order, none else
            assert len(set(series.t_ms.tolist())) == len(watts)
    finally:
        store.close()

    cli = Path(sys.executable).parent / "wattbench"
    out = subprocess.run(
        [str(cli), "status", "--verify", "--json", "--state-dir", str(state), "--store", db],
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ,
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    verify = {v["dev"]: v for v in doc["verify"]}
    for dev in sent:
        assert verify[dev]["missing"] == SILENT, verify[dev]
        assert verify[dev]["count"] == FIRST + SECOND
    devices = {d["dev"]: d for d in doc["devices"]}
    # retained: once at each start; repeat: the second copy of every message
    assert devices["plug-tas"]["dropped"] == {"retained": 2, "stale": 1, "repeat": FIRST + SECOND}
    assert devices["plug-shelly"]["dropped"] == {"retained": 2, "repeat": FIRST + SECOND}
    assert devices["plug-tas"]["missing"] == devices["plug-shelly"]["missing"] == SILENT


QUEUE_PLUGS = """
[[plug]]
format = "shelly"
topic = "shelly-kept"
dev = "shelly-kept"
period_s = 1

[[plug]]
format = "shelly"
topic = "shelly-lost"
dev = "shelly-lost"
period_s = 1

[[plug]]
format = "esphome"
topic = "esp-kept"
dev = "esp-kept"
period_s = 1
sensors = { W = "power" }

[[plug]]
format = "esphome"
topic = "esp-lost"
dev = "esp-lost"
period_s = 1
sensors = { W = "power" }
"""
UP, DOWN, AFTER = 5, 5, 6  # messages before the collector stops, while it is down, after it is back
LOST = 3  # the first messages of the outage that the "-lost" plugs never send


def test_messages_the_broker_queued_while_the_collector_was_down_are_not_missing(
    tmp_path: Path, mosquitto: Any
) -> None:
    """Four plugs timed on arrival (Shelly's status, ESPHome) publish every second at QoS 1; the
    collector stops for five messages and the broker keeps them in its persistent session, then
    delivers them together when it is back. For the two that kept sending, `status --verify` counts
    none missing; the two that were silent for the first three messages of the outage count exactly
    those three. Every reading is stored once, the queued ones each with its own stamp."""
    from wattbench.config import CollectorConfig
    from wattbench.ingest.collector import Collector
    from wattbench.store import open_store

    mapping = tmp_path / "plugs.toml"
    mapping.write_text(QUEUE_PLUGS)
    db = str(tmp_path / "wb.sqlite")
    state = tmp_path / "state"

    def collector() -> Collector:
        return Collector(
            CollectorConfig(
                broker=f"{mosquitto.host}:{mosquitto.port}",
                store=db,
                state_dir=str(state),
                spool_dir=str(tmp_path / "spool"),
                validate_workers=0,
                plugs=str(mapping),
            )
        ).start()

    pub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="plugs")
    pub.connect(mosquitto.host, mosquitto.port)
    pub.loop_start()
    t0 = math.ceil(time.time()) + 2
    if t0 % 60 > 45:
        # Shelly's time is the minute: a queued message from a minute's last seconds, delivered a few
        # seconds on, would be stale (two periods plus the minute), and is no sample to count
        t0 += 60 - t0 % 60
    sent: dict[str, list[float]] = {d: [] for d in ("shelly-kept", "shelly-lost", "esp-kept", "esp-lost")}

    def tick(k: int, lost: bool = False) -> None:
        delay = t0 + k + 0.1 - time.time()
        if delay > 0:
            time.sleep(delay)
        minute = int(time.time() // 60) * 60
        watts = 100.0 + k
        messages = {
            "shelly-kept": ("shelly-kept/status/switch:0", shelly(minute, watts)),
            "esp-kept": ("esp-kept/sensor/power/state", f"{watts:g}".encode()),
        }
        if not lost:
            messages["shelly-lost"] = ("shelly-lost/status/switch:0", shelly(minute, watts))
            messages["esp-lost"] = ("esp-lost/sensor/power/state", f"{watts:g}".encode())
        for dev, (topic, payload) in messages.items():
            pub.publish(topic, payload, qos=1).wait_for_publish(5)
            sent[dev].append(watts)

    try:
        first = collector()
        try:
            for k in range(UP):
                tick(k)
            time.sleep(0.5)
        finally:
            first.stop()
        for k in range(UP, UP + DOWN):  # the broker queues these for the collector's session
            tick(k, lost=k < UP + LOST)
        second = collector()
        try:
            for k in range(UP + DOWN, UP + DOWN + AFTER):
                tick(k)
            time.sleep(0.5)
        finally:
            second.stop()
    finally:
        pub.loop_stop()
        pub.disconnect()

    store = open_store(db)
    try:
        for dev, watts in sent.items():
            series = store.series(dev, "plug", (t0 - 60) * 1000, (t0 + 120) * 1000)
            assert series.values["W"].tolist() == watts, dev  # every reading once, in order
            assert len(set(series.t_ms.tolist())) == len(watts)
    finally:
        store.close()

    cli = Path(sys.executable).parent / "wattbench"
    out = subprocess.run(
        [str(cli), "status", "--verify", "--json", "--state-dir", str(state), "--store", db],
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ,
    )
    assert out.returncode == 0, out.stderr
    verify = {v["dev"]: v for v in json.loads(out.stdout)["verify"]}
    for dev, watts in sent.items():
        real = LOST if dev.endswith("-lost") else 0
        assert (verify[dev]["missing"], verify[dev]["count"]) == (real, len(watts)), verify[dev]
