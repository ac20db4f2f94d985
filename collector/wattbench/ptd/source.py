"""Where `wattbench ptd` gets its readings: channels of appliances on an MQTT broker, or simulated
meters in this process. The device port on PTDaemon's command line names them:

- `DEV/CHANNEL@BROKER`, e.g. `bench-01/mains@127.0.0.1:1883`: the samples the appliance DEV publishes
  for CHANNEL on wattbench/v1/dev/DEV/samples; the retained meta message names the meter;
- several channels for PTDaemon's multichannel mode: `DEV/CH1,CH2@BROKER`, `DEV1/CH1,DEV2/CH2@BROKER`,
  or `DEV@BROKER` with `-c 1,2` (positions among the device's power channels);
- `sim:WATTS[,WATTS...]` and `simdc:WATTS[,...]`: the firmware's simulated meters (model const), AC
  (230 V, power factor 0.95) or DC (12 V), read in this process, for a rehearsal with no appliance.

Each channel's meter must have ranges in ranges.py and be a power channel; a device must have a
retained meta message. Otherwise the source is refused before the daemon listens.
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
from wattbench_fw.meters.simdc import SimDC

from ..mqttconn import AddressError, Settings, open_client
from .ranges import MeterRanges, NoRanges, lookup
from .samples import Channel, Reading

# The contract's identifiers (schema/v1/common.schema.json): device and channel names.
_IDS = {
    name: re.compile(contract.load_schema("common")["$defs"][f"{name}_id"]["pattern"])
    for name in ("device", "channel")
}


# How long a device's retained meta message may take to arrive before the device counts as unknown.
META_WAIT_S = 3.0


class SourceError(ValueError):
    """A device port that names no source wattbench can read; the message is one line."""


@dataclass(frozen=True)
class SourceSpec:
    """What a device port names. kind: "mqtt", "simulated" (AC) or "simulated-dc". targets: the
    (device, channel) pairs read, in order; a channel of "" is one picked by its position (-c) among
    the device's power channels, from its meta message. watts: a simulated channel's power each."""

    kind: str
    targets: tuple[tuple[str, str], ...] = ()
    broker: str = ""
    watts: tuple[float, ...] = ()

    @property
    def label(self) -> str:
        if self.kind != "mqtt":
            prefix = SimMeter.KIND if self.kind == "simulated" else SimDC.KIND
            return prefix + ":" + ",".join(f"{w:g}" for w in self.watts)
        return ",".join(f"{d}/{c}" for d, c in self.targets)

    # The one device and channel of a single-channel port, as tests and messages name them.
    @property
    def dev(self) -> str:
        return self.targets[0][0] if self.targets else ""

    @property
    def channel(self) -> str:
        return self.targets[0][1] if self.targets else ""


def _watts(text: str, port: str, prefix: str) -> tuple[float, ...]:
    out = []
    for part in text.split(","):
        try:
            watts = float(part)
        except ValueError:
            raise SourceError(f"device port {port!r}: {prefix}:WATTS needs a number of watts") from None
        if not math.isfinite(watts) or not 0 <= watts <= 1e7:
            raise SourceError(f"device port {port!r}: watts must be between 0 and 10000000")
        out.append(watts)
    return tuple(out)


def parse_device_port(text: str, positions: tuple[int, ...] = ()) -> SourceSpec:
    """A device port: DEV/CH@BROKER; several channels, DEV/CH1,CH2@BROKER or DEV1/CH1,DEV2/CH2@BROKER
    (a bare channel is of the device before it); DEV@BROKER with positions (PTDaemon's -c, counted
    from 1) among the device's power channels; sim:WATTS[,WATTS...]; simdc:WATTS[,WATTS...]."""
    s = text.strip()
    for prefix, kind in (("sim:", "simulated"), ("simdc:", "simulated-dc")):
        if s.startswith(prefix):
            watts = _watts(s[len(prefix) :], text, prefix[:-1])
            if positions and len(positions) != len(watts):
                raise SourceError(
                    f"device port {text!r}: -c names {len(positions)} channels, the port {len(watts)}"
                )
            return SourceSpec(kind, watts=watts)
    where, at, broker = s.partition("@")
    if not at or not broker or not where:
        raise SourceError(
            f"device port {text!r}: give DEVICE/CHANNEL@BROKER (an appliance's channel) or sim:WATTS"
        )
    targets: list[tuple[str, str]] = []
    if "/" not in where:
        if not positions:
            raise SourceError(
                f"device port {text!r}: give DEVICE/CHANNEL@BROKER, or DEVICE@BROKER with -c CHANNELS"
            )
        if not _IDS["device"].fullmatch(where):
            raise SourceError(f"device port {text!r}: device {where!r} is not a wattbench device name")
        targets = [(where, "") for _ in positions]
    else:
        dev = ""
        for item in where.split(","):
            if "/" in item:
                dev, _, channel = item.partition("/")
            else:
                channel = item
            for what, name in (("device", dev), ("channel", channel)):
                if not _IDS[what].fullmatch(name):
                    raise SourceError(f"device port {text!r}: {what} {name!r} is not a wattbench {what} name")
            targets.append((dev, channel))
        if len(set(targets)) != len(targets):
            raise SourceError(f"device port {text!r}: a channel is named twice")
    try:
        Settings.parse(broker)
    except AddressError as exc:
        raise SourceError(f"device port {text!r}: {exc}") from None
    return SourceSpec("mqtt", targets=tuple(targets), broker=broker)


def readings_from_batch(payload: bytes, dev: str, channels: dict[str, int]) -> tuple[list[Reading], int]:
    """The readings of the channels (name -> index) in one samples message, and how many of their rows
    were refused (not an object, no finite non-negative W, a flagged or out-of-range value). Anything
    that is not a batch of the contract's shape gives no readings and one refusal."""
    try:
        doc = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        return [], 1
    if not isinstance(doc, dict) or doc.get("dev") != dev or not isinstance(doc.get("samples"), list):
        return [], 1
    out: list[Reading] = []
    refused = 0
    for row in doc["samples"]:
        if not isinstance(row, dict) or row.get("c") not in channels:
            continue
        w = _number(row.get("W"))
        if w is None or w < 0 or row.get("f"):
            refused += 1
            continue
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
                ch=channels[row["c"]],
            )
        )
    return out, refused


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    v = float(value)
    return v if math.isfinite(v) else None


def _state(payload: bytes) -> str:
    """The state a status message gives ("online", "offline"), read as the sweep's survey reads it:
    strict JSON that the contract's status schema accepts; "" for anything else."""
    try:
        doc = contract.strict_loads(payload)
    except ValueError:
        return ""
    return str(doc["state"]) if contract.jsonschema_validator("status").is_valid(doc) else ""


def _meta_channels(payload: bytes) -> list[dict[str, Any]] | None:
    try:
        doc = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("channels"), list):
        return None
    return [ch for ch in doc["channels"] if isinstance(ch, dict) and isinstance(ch.get("c"), str)]


def meter_from_meta(payload: bytes, channel: str) -> str | None:
    """The meter of the channel as the appliance's meta message states it: kind, model and accuracy."""
    for ch in _meta_channels(payload) or []:
        if ch.get("c") == channel:
            return _describe(ch)
    return None


def _describe(ch: dict[str, Any]) -> str:
    parts = [f"meter {ch.get('meter', 'unknown')}"]
    if isinstance(ch.get("model"), str):
        parts.append(f"model {ch['model']}")
    acc = _number(ch.get("acc"))
    if acc is not None:
        parts.append(f"accuracy {100 * acc:g}%")
    return " ".join(parts)


def _is_power(ch: dict[str, Any]) -> bool:
    q = ch.get("q")
    return ch.get("role", "power") == "power" and (not isinstance(q, list) or "W" in q)


def channel_from_meta(dev: str, channel: str, meta: dict[str, Any], dc: bool) -> Channel:
    """The channel of a daemon from the meta message's entry for it; SourceError, one line, when it is
    not a power channel, its meter has no ranges, or it is AC under -D (or DC without it)."""
    label = f"{dev}/{channel}"
    if not _is_power(meta):
        raise SourceError(
            f"{label} is not a power channel (role {meta.get('role', '?')}, quantities "
            f"{','.join(str(q) for q in meta.get('q') or []) or 'none'}): a daemon reads wall power"
        )
    kind = str(meta.get("meter", ""))
    rng = meta.get("range")
    full_scale = _number(rng.get("A")) if isinstance(rng, dict) else None
    model = meta.get("model") if isinstance(meta.get("model"), str) else None
    return _checked(label, lookup(kind, model, full_scale), dc)


def _checked(label: str, row: MeterRanges | NoRanges, dc: bool) -> Channel:
    if isinstance(row, NoRanges):
        raise SourceError(f"{label}: {row.why}; a daemon needs a meter with ranges")
    if dc and not row.dc:
        raise SourceError(
            f"{label}: meter {row.kind} measures AC; -D takes a DC meter (ina226, ina228, simdc)"
        )
    if row.dc and not dc:
        raise SourceError(f"{label}: meter {row.kind} measures DC; give -D, as for an analyzer's DC mode")
    return Channel(label, row)


class Source(Protocol):
    label: str
    refused: int  # messages and rows refused so far: not the contract's shape, or flagged

    @property
    def meter(self) -> str: ...

    def start(self) -> None:
        """Connect, and learn what each channel is (SourceError when one cannot be read)."""
        ...

    def channels(self) -> tuple[Channel, ...]:
        """The channels read, in the order of the readings' `ch`, once started."""
        ...

    def take(self) -> list[Reading]:
        """The readings that arrived since the last call."""
        ...

    def silent_s(self) -> float | None:
        """Seconds since a channel last sent a reading, for the one silent longest; None if one never
        has."""
        ...

    def close(self) -> None: ...


class ReadingBuffer:
    """Readings that arrived and were not yet taken, and when each channel's last one arrived: filled by
    a source's own thread (MQTT callbacks, the simulator), emptied by the server's."""

    def __init__(self, channels: int = 1) -> None:
        self._lock = threading.Lock()
        self._pending: list[Reading] = []
        self._last: list[float | None] = [None] * channels

    def add(self, readings: list[Reading]) -> None:
        now = time.monotonic()
        with self._lock:
            self._pending.extend(readings)
            for r in readings:
                if 0 <= r.ch < len(self._last):
                    self._last[r.ch] = now

    def take(self) -> list[Reading]:
        with self._lock:
            out, self._pending = self._pending, []
        return out

    def silent_s(self) -> float | None:
        with self._lock:
            last = list(self._last)
        if any(t is None for t in last):
            return None
        return time.monotonic() - min(t for t in last if t is not None)


class MqttSource:
    """Channels of appliances, from their samples on the broker."""

    def __init__(self, spec: SourceSpec, positions: tuple[int, ...] = (), dc: bool = False) -> None:
        self.spec = spec
        self.positions = positions
        self.dc = dc
        self.label = spec.label
        self.meta_wait_s = META_WAIT_S
        self._buffer = ReadingBuffer(len(spec.targets))
        self._lock = threading.Lock()
        self._metas: dict[str, list[dict[str, Any]]] = {}
        self._channels: tuple[Channel, ...] = ()
        self._targets: tuple[tuple[str, str], ...] = spec.targets
        self._described = ""
        self._all_meta = threading.Event()
        self.refused = 0
        self._client: Any = None

    @property
    def meter(self) -> str:
        return self._described

    def channels(self) -> tuple[Channel, ...]:
        return self._channels

    def start(self) -> None:
        """Connect and subscribe (BrokerError when the broker cannot be reached), then wait a few
        seconds for each device's retained meta message, which says what its channels are. A device
        without one is unknown to the broker, and a daemon on it is refused (SourceError) before it
        listens, as PTDaemon refuses to start when it cannot open its analyzer."""
        settings = Settings.parse(self.spec.broker)
        devs = sorted({d for d, _ in self.spec.targets})
        client = open_client(settings, f"wattbench-ptd-{devs[0]}-{time.monotonic_ns() % 10**9}")
        self._client = client
        meta_topics = {contract.topic_for("meta", dev=d): d for d in devs}
        status_topics = {contract.topic_for("status", dev=d): d for d in devs}
        sample_topics = {contract.topic_for("samples", dev=d): d for d in devs}
        states: dict[str, str] = {}
        index: dict[str, dict[str, int]] = {d: {} for d in devs}
        started = threading.Event()

        def on_message(c: Any, userdata: Any, msg: Any) -> None:
            if msg.topic in status_topics:
                with self._lock:
                    states[status_topics[msg.topic]] = _state(msg.payload)
                return
            if msg.topic in meta_topics:
                chans = _meta_channels(msg.payload)
                with self._lock:
                    if chans is not None:
                        self._metas[meta_topics[msg.topic]] = chans
                    if len(self._metas) == len(devs):
                        self._all_meta.set()
                return
            dev = sample_topics.get(msg.topic)
            if dev is None or not started.is_set():
                return
            readings, refused = readings_from_batch(msg.payload, dev, index[dev])
            with self._lock:
                self.refused += refused
            if readings:
                self._buffer.add(readings)

        client.on_message = on_message
        # The statuses first: a broker sends the retained messages in the order of the filters, so the
        # status is in when the meta is.
        client.subscribe(
            [(t, 1) for t in status_topics] + [(t, 1) for t in sample_topics] + [(t, 1) for t in meta_topics]
        )
        self._all_meta.wait(self.meta_wait_s)
        with self._lock:
            metas = dict(self._metas)
        missing = [d for d in devs if d not in metas]
        if missing:
            raise SourceError(
                f"device {missing[0]}: no retained meta message on {self.spec.broker} within "
                f"{self.meta_wait_s:g} s: no such device on this broker, or it has never connected"
            )
        with self._lock:
            offline = [d for d in devs if states.get(d) == "offline"]
        if offline:
            raise SourceError(
                f"device {offline[0]}: offline (retained status on {self.spec.broker}): its appliance is "
                "not running, so nothing would be read"
            )
        targets = self._resolve(metas)
        channels = []
        for dev, name in targets:
            entry = next(ch for ch in metas[dev] if ch["c"] == name)
            channels.append(channel_from_meta(dev, name, entry, self.dc))
            index[dev][name] = len(channels) - 1
        self._targets = targets
        self._channels = tuple(channels)
        self._described = "; ".join(
            _describe(next(ch for ch in metas[d] if ch["c"] == n)) for d, n in targets
        )
        started.set()

    def _resolve(self, metas: dict[str, list[dict[str, Any]]]) -> tuple[tuple[str, str], ...]:
        """The (device, channel) pairs read: as named, or by -c position among a device's power
        channels."""
        out = []
        for i, (dev, name) in enumerate(self.spec.targets):
            names = [ch["c"] for ch in metas[dev]]
            if not name:
                power = [ch["c"] for ch in metas[dev] if _is_power(ch)]
                pos = self.positions[i]
                if not 1 <= pos <= len(power):
                    raise SourceError(
                        f"-c {pos}: device {dev} has {len(power)} power channels ({', '.join(power) or 'none'})"
                    )
                name = power[pos - 1]
            elif name not in names:
                raise SourceError(
                    f"device {dev} has no channel {name!r} (it has {', '.join(names) or 'none'})"
                )
            out.append((dev, name))
        return tuple(out)

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
    """The firmware's simulated meters at constant power (AC, or DC rails for simdc), one per channel,
    read ten times a second in a thread."""

    def __init__(self, spec: SourceSpec, dc: bool = False, hz: float = 10.0) -> None:
        self.label = spec.label
        meter_cls = SimDC if spec.kind == "simulated-dc" else SimMeter
        self._kind = meter_cls.KIND
        self._meters = [meter_cls(model="const", watts=w) for w in spec.watts]
        row = lookup(self._kind)
        self._channels = tuple(
            _checked(f"{self._kind}:{w:g}" if len(spec.watts) > 1 else spec.label, row, dc)
            for w in spec.watts
        )
        self._period = 1.0 / hz
        self._buffer = ReadingBuffer(len(self._meters))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.refused = 0

    @property
    def meter(self) -> str:
        watts = ", ".join(f"{m.watts:g} W" for m in self._meters)
        return f"meter {self._kind} (simulated const {watts})"

    def channels(self) -> tuple[Channel, ...]:
        return self._channels

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="wattbench-ptd-sim", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._period):
            t = int(time.time() * 1000)
            readings = []
            for i, meter in enumerate(self._meters):
                values, _flags = meter.read()
                readings.append(Reading(t, values["W"], values["V"], values["A"], values.get("PF"), ch=i))
            self._buffer.add(readings)

    def take(self) -> list[Reading]:
        return self._buffer.take()

    def silent_s(self) -> float | None:
        return self._buffer.silent_s()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)


def open_source(
    spec: SourceSpec, positions: tuple[int, ...] = (), dc: bool = False
) -> MqttSource | SimSource:
    """The source a device port names; SourceError (one line) when a simulated meter does not fit -D."""
    return SimSource(spec, dc) if spec.kind != "mqtt" else MqttSource(spec, positions, dc)
