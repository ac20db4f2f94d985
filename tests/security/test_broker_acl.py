"""The shipped ACL against a real Mosquitto: each client can do its job and nothing else."""

from __future__ import annotations

import threading
import time

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.reasoncodes import ReasonCode

pytestmark = pytest.mark.services


class Client:
    """A paho MQTT v5 client that records what it receives and the reason codes of its publishes."""

    def __init__(self, broker, user: str | None, password: str | None, tls_ca: str | None = None) -> None:  # type: ignore[no-untyped-def]
        self.received: list[tuple[str, bytes]] = []
        self.acks: dict[int, ReasonCode] = {}
        self.connected = threading.Event()
        self.connect_rc: ReasonCode | None = None
        self._lock = threading.Lock()
        self.c = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2,
            client_id=f"t-{user}-{time.monotonic_ns()}",
            protocol=mqtt.MQTTv5,
        )
        if user is not None:
            self.c.username_pw_set(user, password)
        if tls_ca:
            self.c.tls_set(ca_certs=tls_ca)
        self.c.on_connect = self._on_connect
        self.c.on_message = lambda c, u, m: self.received.append((m.topic, m.payload))
        self.c.on_publish = self._on_publish
        self.c.connect_async(broker.host, broker.port)
        self.c.loop_start()

    def _on_connect(self, client, userdata, flags, rc, props=None) -> None:  # type: ignore[no-untyped-def]
        self.connect_rc = rc
        self.connected.set()

    def _on_publish(self, client, userdata, mid, rc, props=None) -> None:  # type: ignore[no-untyped-def]
        with self._lock:
            self.acks[mid] = rc

    def wait_connected(self) -> ReasonCode:
        assert self.connected.wait(10), "no CONNACK"
        assert self.connect_rc is not None
        return self.connect_rc

    def publish(self, topic: str, payload: bytes = b"{}") -> ReasonCode:
        info = self.c.publish(topic, payload, qos=1)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with self._lock:
                if info.mid in self.acks:
                    return self.acks[info.mid]
            time.sleep(0.01)
        raise AssertionError(f"no PUBACK for {topic}")

    def subscribe(self, topic: str) -> None:
        self.c.subscribe(topic, qos=1)
        time.sleep(0.3)

    def close(self) -> None:
        self.c.loop_stop()
        self.c.disconnect()


NOT_AUTHORIZED = 135


def accepted(rc: ReasonCode) -> bool:
    """PUBACK success, including MQTT v5's 'no matching subscribers' (16)."""
    return not rc.is_failure


def test_device_publishes_only_under_its_own_id(secure_broker, credentials) -> None:  # type: ignore[no-untyped-def]
    broker = secure_broker()
    collector = Client(broker, "wattbench-collector", credentials["wattbench-collector"])
    assert collector.wait_connected() == 0
    collector.subscribe("wattbench/v1/#")
    device = Client(broker, "bench-a", credentials["bench-a"])
    assert device.wait_connected() == 0

    assert accepted(device.publish("wattbench/v1/dev/bench-a/samples", b"own"))
    spoof = device.publish("wattbench/v1/dev/bench-b/samples", b"spoofed")
    assert spoof.value == NOT_AUTHORIZED, "a device publishing as another device is refused"
    assert device.publish("wattbench/v1/run/r1/phase", b"fake phase").value == NOT_AUTHORIZED
    assert device.publish("wattbench/v1/run/r1/result", b"fake result").value == NOT_AUTHORIZED
    time.sleep(0.5)
    payloads = [p for _, p in collector.received]
    assert payloads == [b"own"], "only the device's own message reaches the collector"
    device.close()
    collector.close()


def test_collector_reads_but_cannot_publish_samples(secure_broker, credentials) -> None:  # type: ignore[no-untyped-def]
    broker = secure_broker()
    collector = Client(broker, "wattbench-collector", credentials["wattbench-collector"])
    assert collector.wait_connected() == 0
    assert collector.publish("wattbench/v1/dev/bench-a/samples").value == NOT_AUTHORIZED
    assert collector.publish("wattbench/v1/run/r1/phase").value == NOT_AUTHORIZED
    assert accepted(collector.publish("wattbench/v1/rejects/wattbench-collector")), (
        "its own reject notices are allowed"
    )
    assert collector.publish("wattbench/v1/rejects/someone-else").value == NOT_AUTHORIZED
    collector.close()


def test_sweep_publishes_phases_and_telegraf_reads_what_it_writes(secure_broker, credentials) -> None:  # type: ignore[no-untyped-def]
    broker = secure_broker()
    telegraf = Client(broker, "wattbench-telegraf", credentials["wattbench-telegraf"])
    assert telegraf.wait_connected() == 0
    telegraf.subscribe("wattbench/v1/#")  # granted only where the ACL allows reading
    sweep = Client(broker, "wattbench-sweep", credentials["wattbench-sweep"])
    device = Client(broker, "bench-b", credentials["bench-b"])
    assert sweep.wait_connected() == 0 and device.wait_connected() == 0
    assert accepted(sweep.publish("wattbench/v1/run/r1/phase", b"phase"))
    assert sweep.publish("wattbench/v1/dev/bench-b/samples").value == NOT_AUTHORIZED
    assert accepted(device.publish("wattbench/v1/dev/bench-b/status", b"status"))
    assert accepted(device.publish("wattbench/v1/dev/bench-b/samples", b"samples"))
    assert accepted(device.publish("wattbench/v1/dev/bench-b/meta", b"meta"))
    time.sleep(0.5)
    # deploy/telegraf.conf writes samples, status, phase events and results, and needs nothing else
    assert [t for t, _ in telegraf.received] == [
        "wattbench/v1/run/r1/phase",
        "wattbench/v1/dev/bench-b/status",
        "wattbench/v1/dev/bench-b/samples",
    ]
    # the sweep reads what it needs to choose its channels, and publishes nothing there
    sweep.subscribe("wattbench/v1/dev/+/meta")
    sweep.subscribe("wattbench/v1/dev/+/status")
    sweep.subscribe("wattbench/v1/dev/+/samples")
    for kind in ("meta", "status", "samples"):
        assert accepted(device.publish(f"wattbench/v1/dev/bench-b/{kind}", kind.encode()))
    time.sleep(0.5)
    assert sorted(t for t, _ in sweep.received) == [
        "wattbench/v1/dev/bench-b/meta",
        "wattbench/v1/dev/bench-b/samples",
        "wattbench/v1/dev/bench-b/status",
    ]
    assert sweep.publish("wattbench/v1/dev/bench-b/meta").value == NOT_AUTHORIZED
    for c in (telegraf, sweep, device):
        c.close()


@pytest.mark.parametrize("user,password", [(None, None), ("bench-a", "wrong password"), ("intruder", "x")])
def test_unknown_or_anonymous_clients_are_refused(secure_broker, credentials, user, password) -> None:  # type: ignore[no-untyped-def]
    broker = secure_broker()
    client = Client(broker, user, password)
    rc = client.wait_connected()
    assert rc.is_failure, f"connection should be refused, got {rc}"
    client.close()


def test_device_publishes_only_its_own_discovery_configs(secure_broker, credentials) -> None:  # type: ignore[no-untyped-def]
    from wattbench_fw import hass

    broker = secure_broker()
    device = Client(broker, "bench-a", credentials["bench-a"])
    assert device.wait_connected() == 0
    own = hass.config_topic("bench-a", "sim", "W")
    assert accepted(device.publish(own, b"{}")), f"the firmware's own discovery topic {own} is allowed"
    other = hass.config_topic("bench-b", "sim", "W")
    assert device.publish(other, b"{}").value == NOT_AUTHORIZED, "another device's discovery is refused"
    device.close()
