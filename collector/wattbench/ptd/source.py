"""Where `wattbench ptd` gets its readings: one channel of an appliance on an MQTT broker, or a
simulated meter in this process. The device port on PTDaemon's command line names it:

- `DEV/CHANNEL@BROKER`, e.g. `bench-01/mains@127.0.0.1:1883`: the samples the appliance DEV publishes
  for CHANNEL on wattbench/v1/dev/DEV/samples; the retained meta message names the meter;
- `sim:WATTS`, e.g. `sim:150`: the firmware's simulated meter (model const) read in this process
  (volts 230, power factor 0.95, uncertainty 0.5 %), for a rehearsal of the workflow with no appliance.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from dataclasses import dataclass
from typing import Any, Protocol

import wattbench_schema as contract
from wattbench_fw.meters.sim import SimMeter

from ..mqttconn import AddressError, Settings, open_client
from .protocol import Reading

# The contract's identifiers (schema/v1/common.schema.json): device and channel names.
_IDS = {
    name: re.compile(contract.load_schema("common")["$defs"][f"{name}_id"]["pattern"])
    for name in ("device", "channel")
}


class SourceError(ValueError):
    """A device port that names no source wattbench can read; the message is one line."""


@dataclass(frozen=True)
class SourceSpec:
    kind: str  # "mqtt" or "simulated"
    dev: str = ""
    channel: str = ""
    broker: str = ""
    watts: float = 0.0

    @property
    def label(self) -> str:
        return f"sim:{self.watts:g}" if self.kind == "simulated" else f"{self.dev}/{self.channel}"


def parse_device_port(text: str) -> SourceSpec:
    s = text.strip()
    if s.startswith("sim:"):
        try:
            watts = float(s[4:])
        except ValueError:
            raise SourceError(f"device port {text!r}: sim:WATTS needs a number of watts") from None
        if not math.isfinite(watts) or not 0 <= watts <= 1e7:
            raise SourceError(f"device port {text!r}: watts must be between 0 and 10000000")
        return SourceSpec("simulated", watts=watts)
    where, at, broker = s.partition("@")
    dev, slash, channel = where.partition("/")
    if not at or not slash or not broker:
        raise SourceError(
            f"device port {text!r}: give DEVICE/CHANNEL@BROKER (an appliance's channel) or sim:WATTS"
        )
    for what, name in (("device", dev), ("channel", channel)):
        if not _IDS[what].fullmatch(name):
            raise SourceError(f"device port {text!r}: {what} {name!r} is not a wattbench {what} name")
    try:
        Settings.parse(broker)
    except AddressError as exc:
        raise SourceError(f"device port {text!r}: {exc}") from None
    return SourceSpec("mqtt", dev=dev, channel=channel, broker=broker)


def readings_from_batch(payload: bytes, dev: str, channel: str) -> tuple[list[Reading], int]:
    """The channel's readings in one samples message, and how many rows were refused (not an object,
    no finite non-negative W, a flagged or out-of-range value). Anything that is not a batch of the
    contract's shape gives no readings and one refusal."""
    try:
        doc = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        return [], 1
    if not isinstance(doc, dict) or doc.get("dev") != dev or not isinstance(doc.get("samples"), list):
        return [], 1
    out: list[Reading] = []
    refused = 0
    for row in doc["samples"]:
        if not isinstance(row, dict) or row.get("c") != channel:
            continue
        w = _number(row.get("W"))
        if w is None or w < 0 or row.get("f"):
            refused += 1
            continue
        u = _number(row.get("u"))
        t = row.get("t")
        if isinstance(t, bool) or not isinstance(t, int):
            refused += 1
            continue
        out.append(
            Reading(
                t_ms=t,
                watts=w,
                volts=_number(row.get("V")),
                amps=_number(row.get("A")),
                pf=_number(row.get("PF")),
                u=u if u is not None and 0 <= u <= 1 else None,
            )
        )
    return out, refused


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    v = float(value)
    return v if math.isfinite(v) else None


def meter_from_meta(payload: bytes, channel: str) -> str | None:
    """The meter of the channel as the appliance's meta message states it: kind, model and accuracy."""
    try:
        doc = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("channels"), list):
        return None
    for ch in doc["channels"]:
        if isinstance(ch, dict) and ch.get("c") == channel:
            parts = [f"meter {ch.get('meter', 'unknown')}"]
            if isinstance(ch.get("model"), str):
                parts.append(f"model {ch['model']}")
            acc = _number(ch.get("acc"))
            if acc is not None:
                parts.append(f"accuracy {100 * acc:g}%")
            return " ".join(parts)
    return None


class Source(Protocol):
    label: str
    refused: int  # messages and rows refused so far: not the contract's shape, or flagged

    @property
    def meter(self) -> str: ...

    def start(self) -> None: ...

    def take(self) -> list[Reading]:
        """The readings that arrived since the last call."""
        ...

    def silent_s(self) -> float | None:
        """Seconds since the last reading arrived; None if none ever has."""
        ...

    def close(self) -> None: ...


class ReadingBuffer:
    """Readings that arrived and were not yet taken, and when the last one arrived: filled by a
    source's own thread (MQTT callbacks, the simulator), emptied by the server's."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[Reading] = []
        self._last: float | None = None

    def add(self, readings: list[Reading]) -> None:
        with self._lock:
            self._pending.extend(readings)
            self._last = time.monotonic()

    def take(self) -> list[Reading]:
        with self._lock:
            out, self._pending = self._pending, []
        return out

    def silent_s(self) -> float | None:
        with self._lock:
            last = self._last
        return None if last is None else time.monotonic() - last


class MqttSource:
    """One appliance channel, from its samples on the broker."""

    def __init__(self, spec: SourceSpec, meta_wait_s: float = 3.0) -> None:
        self.spec = spec
        self.label = spec.label
        self.meta_wait_s = meta_wait_s
        self._buffer = ReadingBuffer()
        self._lock = threading.Lock()
        self._meter: str | None = None
        self._meta_seen = threading.Event()
        self.refused = 0
        self._client: Any = None

    @property
    def meter(self) -> str:
        return self._meter or f"meter unknown (no meta message from {self.spec.dev})"

    def start(self) -> None:
        """Connect and subscribe (BrokerError when the broker cannot be reached), then wait briefly
        for the retained meta message that names the meter."""
        settings = Settings.parse(self.spec.broker)
        client = open_client(settings, f"wattbench-ptd-{self.spec.dev}-{time.monotonic_ns() % 10**9}")
        self._client = client
        samples = contract.topic_for("samples", dev=self.spec.dev)
        meta = contract.topic_for("meta", dev=self.spec.dev)

        def on_message(c: Any, userdata: Any, msg: Any) -> None:
            if msg.topic == meta:
                meter = meter_from_meta(msg.payload, self.spec.channel)
                if meter is not None:
                    self._meter = meter
                self._meta_seen.set()
                return
            readings, refused = readings_from_batch(msg.payload, self.spec.dev, self.spec.channel)
            with self._lock:
                self.refused += refused
            if readings:
                self._buffer.add(readings)

        client.on_message = on_message
        client.subscribe([(samples, 1), (meta, 1)])
        self._meta_seen.wait(self.meta_wait_s)

    def take(self) -> list[Reading]:
        return self._buffer.take()

    def silent_s(self) -> float | None:
        return self._buffer.silent_s()

    def close(self) -> None:
        if self._client is not None:
            self._client.disconnect()
            self._client.loop_stop()
            self._client = None


class SimSource:
    """The firmware's simulated meter at constant power, read ten times a second in a thread."""

    def __init__(self, spec: SourceSpec, hz: float = 10.0) -> None:
        self.label = spec.label
        self._meter_obj = SimMeter(model="const", watts=spec.watts)
        self._period = 1.0 / hz
        self._buffer = ReadingBuffer()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.refused = 0

    @property
    def meter(self) -> str:
        return (
            f"meter sim (simulated const {self._meter_obj.watts:g} W) accuracy {100 * self._meter_obj.acc:g}%"
        )

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="wattbench-ptd-sim", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._period):
            values, _flags = self._meter_obj.read()
            t = int(time.time() * 1000)
            self._buffer.add([Reading(t, values["W"], values["V"], values["A"], values["PF"], values["u"])])

    def take(self) -> list[Reading]:
        return self._buffer.take()

    def silent_s(self) -> float | None:
        return self._buffer.silent_s()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)


def open_source(spec: SourceSpec) -> MqttSource | SimSource:
    return SimSource(spec) if spec.kind == "simulated" else MqttSource(spec)
