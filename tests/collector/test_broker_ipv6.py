"""An IPv6 broker written as [::1]:PORT works for every part of wattbench that connects: the host-mode
appliance publishes to it, the collector stores what arrives, and the sweep reads from it and publishes
to it. A real Mosquitto listens on ::1."""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from wattbench_devkit import services

pytestmark = pytest.mark.services


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


def _free_port6() -> int:
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
        s.bind(("::1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def broker6(tmp_path: Path) -> Iterator[str]:
    """A Mosquitto on ::1; its 127.0.0.1 listener is only there for the start-up check."""
    if not _ipv6_loopback():
        pytest.skip("this machine has no IPv6 loopback (::1)")
    port4, port6 = services.free_port(), _free_port6()
    conf = f"listener {port4} 127.0.0.1\nlistener {port6} ::1\nallow_anonymous true"
    try:
        broker = services.Mosquitto(tmp_path / "mosquitto6", port=port4, extra_conf=conf)
    except services.ServiceUnavailable as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(exc))
    broker.start()
    yield f"[::1]:{port6}"
    broker.stop()


@pytest.mark.timeout(120)
def test_appliance_and_collector_on_an_ipv6_broker_in_brackets(broker6: str, tmp_path: Path) -> None:
    from wattbench.config import CollectorConfig
    from wattbench.ingest.collector import Collector
    from wattbench_fw.host import HostAppliance, sim_config

    collector = Collector(
        CollectorConfig(
            broker=broker6,
            store=str(tmp_path / "wb.sqlite"),
            state_dir=str(tmp_path / "state"),
            spool_dir=str(tmp_path / "spool"),
            validate_workers=0,
            connect_timeout_s=10.0,
        )
    ).start()
    try:
        cfg = sim_config(dev="v6-a", broker=broker6, hz=5, model="const", watts=40.0, count=10)
        app = HostAppliance(cfg).start()
        try:
            assert app.wait_connected(20), app.counters()
            assert collector.wait_for(lambda c: c.get("stored_samples", 0) >= 10, 30), collector.counters()
        finally:
            app.stop(timeout=10)
    finally:
        collector.stop()


@pytest.mark.timeout(60)
def test_sweep_reads_and_publishes_on_an_ipv6_broker_in_brackets(broker6: str) -> None:
    """The sweep's two connections: the metadata reader and the phase/result publisher."""
    import wattbench_schema as contract
    from wattbench.sweep.publish import MqttSink
    from wattbench.sweep.session import MqttSettings

    event = next(v.payload for v in contract.vectors("valid") if v.schema == "phase")
    seen: list[tuple[str, bytes]] = []
    reader = MqttSettings(broker6).client("v6-reader")
    try:
        reader.on_message = lambda c, u, m: seen.append((m.topic, m.payload))
        reader.subscribe("wattbench/v1/run/+/phase", qos=1)
        time.sleep(0.5)  # the subscription is in place before the event goes out
        sink = MqttSink(broker6, "v6-sweep")
        try:
            assert (sink.host, sink.port) == ("::1", int(broker6.rsplit(":", 1)[1]))
            sink.phase(event)
            assert sink.failures == 0
        finally:
            sink.close()
        deadline = time.monotonic() + 10
        while not seen and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        reader.disconnect()
        reader.loop_stop()
    assert [json.loads(p)["run"] for _, p in seen] == [event["run"]]


def test_the_embedded_broker_names_an_ipv6_host_in_brackets() -> None:
    """Its address read "::1:1883", which parses as the host "::1:1883" (the collector it fed, and the
    broker's own log line, named no broker at all)."""
    from wattbench.broker import EmbeddedBroker
    from wattbench.mqttconn import parse_broker

    url = EmbeddedBroker(host="::1", port=18830).url
    assert url == "[::1]:18830"
    address = parse_broker(url)
    assert (address.host, address.port) == ("::1", 18830)
    assert EmbeddedBroker(host="127.0.0.1", port=18830).url == "127.0.0.1:18830"
