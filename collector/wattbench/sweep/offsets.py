"""How far each device's clock is from the sweep host's during a run, and waiting for a run's last
samples to reach the store.

The offsets come from the collector's health points (ClockTrack, core/clocktrack.py); which channels a
run uses is channels.py.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..core.align import ChannelSpec
from ..core.clocktrack import ClockTrack, OffsetSource, device_minus_host, window_offset

if TYPE_CHECKING:
    from ..store.base import Store

log = logging.getLogger(__name__)

# The collector's offset estimate is receive time minus sample time, minimum over recent batches: it
# includes the network delay and how long the newest sample of a batch waited for the batch to close
# (about one sample period). Estimates this small say nothing certain about the clock, so alignment
# does not shift by them; the clock_skew check still sees them.
DEFAULT_DEADBAND_MS = 250.0
# Health points this far either side of a run still describe its clock: the estimate just before the
# first window and just after the last one are the ones that see those windows' batches.
RUN_MARGIN_MS = 60_000


def offsets_from_health(rows: Iterable[Mapping[str, Any]], devices: Sequence[str]) -> dict[str, float]:
    """Device-minus-host clock offsets from the collector's health rows. The largest estimate per device
    wins when several collectors report it."""
    out: dict[str, float] = {}
    wanted = set(devices)
    for row in rows:
        dev = row.get("dev")
        off = row.get("offset_ms")
        if dev not in wanted or off is None or not math.isfinite(float(off)):
            continue
        dev_minus_host = device_minus_host(off)
        if dev not in out or abs(dev_minus_host) > abs(out[dev]):
            out[dev] = dev_minus_host
    return out


def offsets_from_store(
    store: Store, devices: Sequence[str], start_ms: int | None = None, end_ms: int | None = None
) -> dict[str, OffsetSource]:
    """Each device's clock offset during a run: a ClockTrack from the health points of the run's span
    (one offset per stretch between clock steps). Without a span, or for a device with no health point
    in it, one offset per device from its latest health point."""
    out: dict[str, OffsetSource] = {}
    if start_ms is not None and end_ms is not None:
        try:
            rows = store.offset_history(list(devices), start_ms - RUN_MARGIN_MS, end_ms + RUN_MARGIN_MS)
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
    try:
        latest = offsets_from_health(store.health(), [d for d in devices if d not in out])
    except Exception as exc:
        log.warning("could not read clock offsets from the store: %s", exc)
        return out
    out.update(latest)
    return out


def wait_for_data(
    store: Store,
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
