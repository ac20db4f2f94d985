"""Host mode against the real Mosquitto: everything published validates, the ground-truth file
matches the payloads, sequence numbers and energy survive restarts and power cuts, injected clock
steps are flagged, and a 20 s broker outage loses nothing."""

from __future__ import annotations

import csv
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import paho.mqtt.client as paho
import pytest

import wattbench_schema as schema
from wattbench_devkit import services
from wattbench_fw.host import HostAppliance, parse_broker, sim_config

pytestmark = pytest.mark.services


class Collector:
    """Persistent-session QoS 1 subscriber: the broker queues for it while it is away, even across
    a broker restart, so anything the appliance delivered is seen here."""

    def __init__(self, broker: services.Mosquitto, client_id: str = "fw-test-collector") -> None:
        self.lock = threading.Lock()
        self.messages: list[tuple[str, bytes]] = []
        self.c = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=False)
        self.c.on_message = self._on_message
        self.c.on_connect = lambda c, u, f, rc, p=None: c.subscribe("wattbench/v1/#", qos=1)
        self.c.reconnect_delay_set(0.1, 1.0)
        self.c.connect(broker.host, broker.port, keepalive=5)
        self.c.loop_start()
        end = time.monotonic() + 10
        while not self.c.is_connected() and time.monotonic() < end:
            time.sleep(0.02)
        time.sleep(0.2)

    def _on_message(self, c: Any, u: Any, m: paho.MQTTMessage) -> None:
        with self.lock:
            self.messages.append((m.topic, m.payload))

    def of(self, kind: str) -> list[dict[str, Any]]:
        with self.lock:
            msgs = list(self.messages)
        return [schema.strict_loads(p) for t, p in msgs if t.endswith("/" + kind) and p]

    def rows(self) -> list[dict[str, Any]]:
        return [r for batch in self.of("samples") for r in batch["samples"]]

    def close(self) -> None:
        self.c.loop_stop()
        self.c.disconnect()


@pytest.fixture
def collector(mosquitto: services.Mosquitto) -> Iterator[Collector]:
    c = Collector(mosquitto)
    yield c
    c.close()


def wait_for(cond: Any, timeout: float = 30.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return False


def test_parse_broker() -> None:
    assert parse_broker("10.0.0.5") == ("10.0.0.5", 1883)
    assert parse_broker("broker.lab:8883") == ("broker.lab", 8883)
    assert parse_broker("[::1]:1884") == ("::1", 1884)


def test_published_messages_validate_and_match_the_truth_file(
    mosquitto: services.Mosquitto, collector: Collector, tmp_path: Path
) -> None:
    truth = tmp_path / "truth.csv"
    cfg = sim_config(
        dev="sim-truth",
        broker=mosquitto.url,
        channels=2,
        hz=50,
        model="sine",
        watts=180,
        amp=40,
        period_s=2,
        noise_w=1.5,
        truth=truth,
        count=400,
        spool_dir=tmp_path / "spool",
        batch_ms=200,
    )
    app = HostAppliance(cfg).start()
    assert app.wait_done(60)
    app.stop()
    assert wait_for(lambda: len(collector.rows()) >= 400 and collector.of("status")[-1]["state"] == "offline")
    validators = {k: schema.jsonschema_validator(k) for k in ("samples", "status", "meta")}
    for kind, v in validators.items():
        for doc in collector.of(kind):
            v.validate(doc)
    rows = collector.rows()
    assert sorted(r["s"] for r in rows) == list(range(400))
    with open(truth) as f:
        expected = {int(r["seq"]): (int(r["t_ms"]), r["ch"], float(r["W"])) for r in csv.DictReader(f)}
    got = {r["s"]: (r["t"], r["c"], r["W"]) for r in rows if "W" in r}
    assert got == expected
    (meta,) = collector.of("meta")[-1:]
    assert [c["c"] for c in meta["channels"]] == ["sim1", "sim2"] and meta["board"] == "host"
    assert meta["batch_ms"] == 200  # a reader waits this long for the next samples
    statuses = collector.of("status")
    assert statuses[0]["reason"] == "boot" and statuses[-1]["reason"] == "shutdown"
    assert statuses[-1]["buf"] == {"ram": 0, "flash": 0, "dropped": 0}


def test_sequence_boot_and_energy_survive_restart_and_power_cut(
    mosquitto: services.Mosquitto, collector: Collector, tmp_path: Path
) -> None:
    spool = tmp_path / "spool"
    runs = []
    for graceful in (True, False, True):
        cfg = sim_config(
            dev="sim-reboot",
            broker=mosquitto.url,
            hz=100,
            model="const",
            watts=360,
            count=150,
            spool_dir=spool,
            batch_ms=100,
        )
        app = HostAppliance(cfg).start()
        assert app.wait_done(60)
        if graceful:
            app.stop()
        else:
            app.kill()
        runs.append(app.counters())
    assert [r["boot"] for r in runs] == [0, 1, 2]
    assert wait_for(lambda: len(collector.rows()) >= 450)
    rows = collector.rows()
    by_boot: dict[int, list[int]] = {}
    for batch in collector.of("samples"):
        by_boot.setdefault(batch["boot"], []).extend(r["s"] for r in batch["samples"])
    seqs = [s for b in sorted(by_boot) for s in by_boot[b]]
    assert len(set(seqs)) == len(seqs) == 450  # never reused, even after the power cut
    assert seqs == sorted(seqs)
    energy = [r["Wh"] for r in sorted(rows, key=lambda r: r["s"]) if "Wh" in r]  # missed slots carry none
    assert energy == sorted(energy)  # the simulated meter restarts at 0 on every boot


def test_injected_clock_step_is_flagged(
    mosquitto: services.Mosquitto, collector: Collector, tmp_path: Path
) -> None:
    cfg = sim_config(
        dev="sim-step", broker=mosquitto.url, hz=100, model="const", spool_dir=tmp_path, batch_ms=100
    )
    app = HostAppliance(cfg).start()
    assert app.wait_connected(10)
    time.sleep(0.3)
    app.inject_clock_step(2500)
    time.sleep(0.3)
    app.stop()
    assert wait_for(lambda: any(b["clk"].get("steps") for b in collector.of("samples")))
    rows = sorted(collector.rows(), key=lambda r: r["s"])
    stepped = [r for r in rows if r.get("f", 0) & schema.FLAG_CLOCK_STEP]
    assert len(stepped) == 1
    i = rows.index(stepped[0])
    assert stepped[0]["t"] - rows[i - 1]["t"] >= 2500  # the jump is visible and explained by the flag


def test_broker_outage_loses_nothing(
    mosquitto: services.Mosquitto, collector: Collector, tmp_path: Path
) -> None:
    """Publish, stop the broker for 20 s, restart it: after backfill every sequence number has
    arrived, in order per device once duplicates are removed, and none is lost."""
    cfg = sim_config(
        dev="sim-outage",
        broker=mosquitto.url,
        channels=2,
        hz=250,
        model="sine",
        spool_dir=tmp_path / "spool",
        batch_ms=250,
    )
    cfg["buffer"] = {"ram_bytes": 65536, "flash_bytes": 16 << 20, "segment_bytes": 32768}
    app = HostAppliance(cfg).start()
    assert app.wait_connected(10)
    time.sleep(3)
    mosquitto.stop()
    time.sleep(20)
    during = app.counters()
    assert not during["connected"] and during["flash"] > 0  # RAM overflowed into flash meanwhile
    mosquitto.start()
    assert app.wait_connected(30)
    time.sleep(2)
    app.stop(timeout=60)  # stops sampling, waits until the broker acknowledged everything
    final = app.counters()
    assert final["dropped"] == 0 and final["ram"] == 0 and final["flash"] == 0
    total = final["seq_next"]
    assert wait_for(lambda: len({r["s"] for r in collector.rows()}) >= total, timeout=60)
    seqs = [r["s"] for r in collector.rows()]
    first_seen: list[int] = []
    seen: set[int] = set()
    for s in seqs:
        if s not in seen:
            seen.add(s)
            first_seen.append(s)
    assert seen == set(range(total))  # zero lost
    assert first_seen == sorted(first_seen)  # in order once duplicates are removed
    reasons = [s.get("reason") for s in collector.of("status")]
    assert "reconnect" in reasons
    print(
        json.dumps(
            {"samples": total, "duplicates": len(seqs) - total, "spilled_batches": app.app.buffer.spilled}
        )
    )


def test_signed_batches_and_home_assistant_discovery(mosquitto: services.Mosquitto, tmp_path: Path) -> None:
    from wattbench.ingest.auth import Verifier

    key = "00112233445566778899aabbccddeeff"
    seen: list[tuple[str, bytes, bool]] = []
    lock = threading.Lock()
    sub = paho.Client(paho.CallbackAPIVersion.VERSION2)

    def on_message(c: Any, u: Any, m: paho.MQTTMessage) -> None:
        with lock:
            seen.append((m.topic, m.payload, bool(m.retain)))

    sub.on_message = on_message
    sub.connect(mosquitto.host, mosquitto.port)
    sub.subscribe([("wattbench/v1/#", 1), ("homeassistant/#", 1)])
    sub.loop_start()
    time.sleep(0.3)
    cfg = sim_config(
        dev="sim-signed", broker=mosquitto.url, hz=20, model="const", count=60, spool_dir=tmp_path
    )
    cfg["hmac_key"] = key
    cfg["hass"] = True
    app = HostAppliance(cfg).start()
    assert app.wait_done(30)
    app.stop()
    assert wait_for(
        lambda: (
            sum(len(schema.strict_loads(p)["samples"]) for t, p, _ in list(seen) if t.endswith("/samples"))
            >= 60
        )
    )
    sub.loop_stop()
    sub.disconnect()
    verifier = Verifier({"sim-signed": bytes.fromhex(key)}, require=True)
    batches = [p for t, p, _ in seen if t.endswith("/samples")]
    for raw in batches:
        verifier.check("sim-signed", raw)
        schema.jsonschema_validator("samples").validate(schema.strict_loads(raw))
    meta = [schema.strict_loads(p) for t, p, _ in seen if t.endswith("/meta")][-1]
    assert meta["hmac"] is True
    discovery = {
        t: json.loads(p) for t, p, _ in seen if t.startswith("homeassistant/") and t.endswith("/config")
    }
    assert len(discovery) == len(meta["channels"][0]["q"])  # one sensor per quantity
    # energy reads the Home Assistant-only state topic (see wattbench_fw.hass), the rest the samples
    hass_state = "homeassistant/sensor/sim-signed/state"
    assert {c["state_topic"] for c in discovery.values()} == {
        "wattbench/v1/dev/sim-signed/samples",
        hass_state,
    }
    assert any(t == hass_state for t, _, _ in seen), "the appliance publishes it"
