"""Contract-valid sample streams for collector tests and the ingest benchmark: simulated appliances
publishing batches over a real MQTT connection, with known sequence numbers to count by."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import paho.mqtt.client as mqtt

import wattbench_schema as contract


@dataclass
class Stream:
    """`devices` appliances with `channels` channels each at `rate_hz` per channel, `batch` rows per
    message. Sequence numbers are per device and run across channels, as the contract says."""

    devices: int = 4
    channels: int = 2
    rate_hz: int = 1000
    batch: int = 250
    samples_per_device: int = 25_000
    start_ms: int | None = None
    prefix: str = "sim"
    boot: int = 1

    def __post_init__(self) -> None:
        if self.start_ms is None:
            # In the recent past, so every timestamp is well inside the collector's future tolerance.
            span_ms = math.ceil(self.samples_per_device / self.channels) * 1000 // self.rate_hz
            self.start_ms = int(time.time() * 1000) - span_ms - 60_000

    @property
    def total(self) -> int:
        return self.devices * self.samples_per_device

    def dev(self, i: int) -> str:
        return f"{self.prefix}-{i:03d}"

    def device_batches(self, i: int) -> Iterator[tuple[str, bytes]]:
        dev = self.dev(i)
        topic = contract.topic_for("samples", dev=dev)
        step = 1000.0 / self.rate_hz
        rows: list[dict[str, object]] = []
        for s in range(self.samples_per_device):
            tick, ch = divmod(s, self.channels)
            t = self.start_ms + int(tick * step)  # type: ignore[operator]
            w = 100.0 + 10.0 * ch + (s % 97) * 0.25
            rows.append({"s": s, "t": t, "c": f"psu{ch + 1}", "W": w, "V": 230.0, "Wh": round(s * 0.001, 3)})
            if len(rows) == self.batch:
                yield topic, self._encode(dev, rows)
                rows = []
        if rows:
            yield topic, self._encode(dev, rows)

    def _encode(self, dev: str, rows: list[dict[str, object]]) -> bytes:
        return contract.dumps(
            {"v": 1, "dev": dev, "boot": self.boot, "clk": {"sync": "host"}, "samples": rows}
        )

    def messages(self) -> list[tuple[str, bytes]]:
        """All batches, devices interleaved the way concurrent appliances would send them."""
        per_dev = [list(self.device_batches(i)) for i in range(self.devices)]
        out: list[tuple[str, bytes]] = []
        for k in range(max(len(b) for b in per_dev)):
            for b in per_dev:
                if k < len(b):
                    out.append(b[k])
        return out


class Publisher:
    """A paho MQTT 5 client publishing QoS 1 messages as fast as the broker acknowledges them."""

    def __init__(
        self, host: str, port: int, client_id: str = "wb-test-pub", protocol: int = mqtt.MQTTv5
    ) -> None:
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=protocol)
        self.client.max_inflight_messages_set(1000)
        self.client.max_queued_messages_set(0)
        self._ready = threading.Event()
        self.client.on_connect = lambda *a, **k: self._ready.set()
        self.client.connect(host, port)
        self.client.loop_start()
        if not self._ready.wait(10):
            raise TimeoutError("publisher did not connect")

    def publish_all(
        self, messages: list[tuple[str, bytes]], rate_msgs: float | None = None, timeout: float = 300
    ) -> None:
        infos = []
        t0 = time.monotonic()
        for k, (topic, payload) in enumerate(messages):
            if rate_msgs:
                due = t0 + k / rate_msgs
                delay = due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            infos.append(self.client.publish(topic, payload, qos=1))
        deadline = time.monotonic() + timeout
        for info in infos:
            info.wait_for_publish(max(0.1, deadline - time.monotonic()))
            if not info.is_published():
                raise TimeoutError("broker did not acknowledge every message")

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()
