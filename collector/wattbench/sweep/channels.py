"""Which device channels a run uses, and how far each device's clock is from the sweep host's.

Channels come, in order of preference, from the command line, from the appliances' retained metadata
on the broker (role, node and sample rate), or from what the store holds for the run's time span
(a channel carrying W is power, one carrying only T is the inlet probe).
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..align import ChannelSpec
from ..clocktrack import ClockTrack, OffsetSource, window_offset

log = logging.getLogger(__name__)

_ARG = re.compile(
    r"^([a-z0-9][a-z0-9_-]{0,31})/([a-z0-9][a-z0-9_.-]{0,23})(?:@([A-Za-z0-9][A-Za-z0-9_.-]{0,31}))?$"
)
# The collector's offset estimate is receive time minus sample time, minimum over recent batches: it
# includes the network delay and how long the newest sample of a batch waited for the batch to close
# (about one sample period). Estimates this small say nothing certain about the clock, so alignment
# does not shift by them; the clock_skew check still sees them.
DEFAULT_DEADBAND_MS = 250.0
# Health points this far either side of a run still describe its clock: the estimate just before the
# first window and just after the last one are the ones that see those windows' batches.
RUN_MARGIN_MS = 60_000


def parse_channel(text: str, role: str = "power") -> ChannelSpec:
    """DEV/CH or DEV/CH@NODE."""
    m = _ARG.match(text.strip())
    if not m:
        raise ValueError(f"bad channel {text!r}: use DEVICE/CHANNEL or DEVICE/CHANNEL@NODE")
    return ChannelSpec(m.group(1), m.group(2), role=role, node=m.group(3))


def parse_offset(text: str) -> tuple[str, float]:
    """DEV=MS: the device clock minus the host clock."""
    dev, sep, ms = text.partition("=")
    try:
        if not sep:
            raise ValueError
        return dev.strip(), float(ms)
    except ValueError:
        raise ValueError(f"bad clock offset {text!r}: use DEVICE=MILLISECONDS") from None


def from_meta(metas: Iterable[Mapping[str, Any]]) -> list[ChannelSpec]:
    """Channel specs from appliance metadata messages (meta.schema.json)."""
    out = []
    for meta in metas:
        dev = meta.get("dev")
        for ch in meta.get("channels", []):
            q = set(ch.get("q", []))
            role = ch.get("role")
            if role is None:
                role = "power" if "W" in q else ("inlet" if "T" in q else "other")
            if role not in ("power", "inlet"):
                continue
            if role == "power" and "W" not in q:
                continue
            out.append(ChannelSpec(str(dev), str(ch["c"]), role=role, node=ch.get("node"), hz=ch.get("hz")))
    return sorted(out, key=lambda s: (s.dev, s.ch))


def read_meta(client_factory: Any, timeout: float = 2.0, quiet: float = 0.5) -> list[dict[str, Any]]:
    """Retained metadata of every appliance on the broker. client_factory() returns a connected paho
    client with its network loop running; it is disconnected here."""
    import threading

    from wattbench_schema import jsonschema_validator, match_topic, strict_loads, subscription

    validator = jsonschema_validator("meta")
    found: dict[str, dict[str, Any]] = {}
    last = [time.monotonic()]
    lock = threading.Lock()

    def on_message(client: Any, userdata: Any, msg: Any) -> None:
        kind = match_topic(msg.topic)
        if kind is None or kind[0] != "meta":
            return  # some brokers deliver more than the filter asked for
        try:
            doc = strict_loads(msg.payload)
            validator.validate(doc)
        except Exception as exc:
            log.warning("ignoring metadata on %s: %s", msg.topic, getattr(exc, "message", exc))
            return
        with lock:
            found[doc["dev"]] = doc
            last[0] = time.monotonic()

    client = client_factory()
    try:
        client.on_message = on_message
        client.subscribe(subscription("meta"), qos=1)
        # Retained messages arrive right after SUBSCRIBE; stop once they have stopped coming.
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with lock:
                if found and time.monotonic() - last[0] > quiet:
                    break
            time.sleep(0.05)
    finally:
        client.disconnect()
        client.loop_stop()
    return list(found.values())


def from_store(store: Any, start_ms: int, end_ms: int) -> list[ChannelSpec]:
    """Channels with samples in the span, with their role told from what they carry."""
    out = []
    for dev, ch in store.channels(start_ms, end_ms):
        s = store.series(dev, ch, start_ms, end_ms, ("W", "T"))
        has_w = bool(s.values["W"].size) and bool((~_nan(s.values["W"])).any())
        has_t = bool(s.values["T"].size) and bool((~_nan(s.values["T"])).any())
        if has_w:
            out.append(ChannelSpec(dev, ch, "power"))
        elif has_t:
            out.append(ChannelSpec(dev, ch, "inlet"))
    return out


def _nan(a: Any) -> Any:
    import numpy as np

    return np.isnan(a)


def offsets_from_health(rows: Iterable[Mapping[str, Any]], devices: Sequence[str]) -> dict[str, float]:
    """Device-minus-host clock offsets from the collector's health rows (offset_ms there is the
    collector's receive time minus sample time, so the sign flips). The largest estimate per device
    wins when several collectors report it."""
    out: dict[str, float] = {}
    wanted = set(devices)
    for row in rows:
        dev = row.get("dev")
        off = row.get("offset_ms")
        if dev not in wanted or off is None or not math.isfinite(float(off)):
            continue
        dev_minus_host = -float(off)
        if dev not in out or abs(dev_minus_host) > abs(out[dev]):
            out[dev] = dev_minus_host
    return out


def offsets_from_store(
    store: Any, devices: Sequence[str], start_ms: int | None = None, end_ms: int | None = None
) -> dict[str, OffsetSource]:
    """Each device's clock offset during a run: a ClockTrack from the health points of the run's span
    (one offset per stretch between clock steps). Without a span, or from a store that keeps only the
    latest health point, one offset per device."""
    history = getattr(store, "offset_history", None)
    out: dict[str, OffsetSource] = {}
    if start_ms is not None and end_ms is not None and callable(history):
        try:
            rows = history(list(devices), start_ms - RUN_MARGIN_MS, end_ms + RUN_MARGIN_MS)
        except Exception as exc:
            log.warning("could not read clock offsets from the store: %s", exc)
            rows = []
        by_dev: dict[str, list[Mapping[str, Any]]] = {}
        for row in rows:
            by_dev.setdefault(str(row.get("dev")), []).append(row)
        for dev in devices:
            if by_dev.get(dev):
                out[dev] = ClockTrack.from_health(by_dev[dev])
        if len(out) == len(set(devices)):
            return out
    health = getattr(store, "health", None)
    if not callable(health):
        return out
    try:
        latest = offsets_from_health(health(), [d for d in devices if d not in out])
    except Exception as exc:
        log.warning("could not read clock offsets from the store: %s", exc)
        return out
    out.update(latest)
    return out


def wait_for_data(
    store: Any,
    specs: Sequence[ChannelSpec],
    until_ms: int,
    offsets: Mapping[str, OffsetSource],
    timeout_s: float,
) -> bool:
    """Wait until every power channel has a sample past until_ms (on its own clock), so the last
    window is complete in the store before it is scored. False on timeout (the gaps will show)."""
    deadline = time.monotonic() + timeout_s
    pending = [s for s in specs if s.role == "power"]
    while True:
        still = []
        for s in pending:
            off = window_offset(offsets.get(s.dev), until_ms, until_ms)
            lo = int(until_ms + off)
            try:
                got = len(store.series(s.dev, s.ch, lo, lo + 3_600_000, ("W",))) > 0
            except Exception as exc:
                log.warning("store read failed while waiting for data: %s", exc)
                got = False
            if not got:
                still.append(s)
        pending = still
        if not pending:
            return True
        if time.monotonic() >= deadline:
            log.warning("no samples after the run's end yet from %s", ", ".join(s.key for s in pending))
            return False
        time.sleep(0.25)
