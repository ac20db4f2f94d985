"""A device's clock offset over a run, in stretches between clock steps. Pure: rows in, numbers out.

The collector writes its estimate of every device's clock offset into wb_health every few seconds
(offset_ms: receive time minus sample time, minimum over recent batches, restarted at a clock step) with
clk_steps, the number of clock steps it has seen in that device's stream. A run that spans a step has
one offset per stretch of steady clock, and each measurement window has to be moved by the offset of
the stretch it lies in: one offset for the whole run puts the windows on the other side of the step
off by the size of the step.

The health points place a step on the host clock only to within a health period (between the last
point before it and the first after). The samples place it exactly: the first reading after a step
carries the clock_step flag, so the step happened at that reading's device time minus the new offset
(pin()). A window that an unplaced step may fall into is marked uncertain, never silently shifted.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

# How stale the newest reading of a batch can be when it reaches the collector (batch period plus
# network); the step may precede the last health point that did not yet know of it by this much.
DEFAULT_LATENCY_MS = 2000.0
# Estimates farther than this from a window are not used for it while nearer ones exist: a free-running
# crystal drifts by tens of ppm, so an estimate from an hour away can be 100 ms out.
DEFAULT_HORIZON_MS = 300_000.0
# The new offset is itself an estimate (short by the smallest delay), so the flagged reading is looked
# for a little beyond the interval the health points allow.
PIN_SLACK_MS = 250.0


def device_minus_host(measured_ms: float) -> float:
    """The collector's offset as measured and stored (wb_health offset_ms: receive time minus sample
    time, host minus device) in the sign every offset is shown and used in: device minus host, positive
    when the device is ahead. Whatever shows or uses an offset takes it from here, so /metrics, `wattbench
    status`, the report and scoring cannot disagree on the sign."""
    return -float(measured_ms)


@dataclass
class Step:
    """A clock step the collectors reported. On the host clock it lies in (lo_ms, hi_ms]; after pin()
    the two are equal. seen_ms holds, per collector, its first health point that knew of the step: that
    collector's points from then on belong to the new stretch, its earlier ones to the old."""

    lo_ms: float
    hi_ms: float
    seen_ms: dict[str, float]
    seq: int | None = None  # sequence number of the first reading after it, once pinned

    def new_side(self, t_ms: float, collector: str) -> bool:
        seen = self.seen_ms.get(collector)
        return t_ms >= (seen if seen is not None else min(self.seen_ms.values(), default=self.hi_ms))

    @property
    def pinned(self) -> bool:
        return self.lo_ms == self.hi_ms


@dataclass
class Stretch:
    """Offset estimates (host ms, device-minus-host ms) between two steps, in time order."""

    points: list[tuple[float, float]] = field(default_factory=list)

    def estimate(self, start_ms: float, end_ms: float, horizon_ms: float) -> float | None:
        """Device-minus-host offset for [start, end]. Every estimate falls short of the true offset by a
        delay, so the largest one near the window is the best."""
        if not self.points:
            return None
        near = [o for t, o in self.points if start_ms - horizon_ms <= t <= end_ms + horizon_ms]
        if near:
            return max(near)
        mid = (start_ms + end_ms) / 2.0
        return min(self.points, key=lambda p: abs(p[0] - mid))[1]


@dataclass(frozen=True)
class WindowClock:
    """The offset to move one window by, and whether a step lies in the window or may lie in it (the
    window then holds readings stamped on two clocks, or it is not known which clock it was on)."""

    offset_ms: float
    stepped: bool = False
    uncertain: bool = False
    # Sequence numbers of the window's stretch, [lo, hi): after a step back the device stamps times it
    # already used, and only the sequence number tells which clock a reading in the overlap was on.
    seq_lo: int | None = None
    seq_hi: int | None = None
    # Until this host time the readings of the window's stretch carry the clock_step flag for a reason
    # already accounted for: they follow a placed step back, in the span of times it made the device
    # stamp twice.
    overlap_until_ms: float | None = None


class ClockTrack:
    """Device-minus-host clock offset of one device over time: stretches separated by steps."""

    def __init__(
        self, stretches: Sequence[Stretch], steps: Sequence[Step], horizon_ms: float = DEFAULT_HORIZON_MS
    ) -> None:
        if len(stretches) != len(steps) + 1:
            raise ValueError("a clock track has one stretch more than it has steps")
        self.stretches = list(stretches)
        self.steps = list(steps)
        self.horizon_ms = horizon_ms

    def __repr__(self) -> str:
        offsets = ", ".join(f"{o:+.0f}" for o in self.offsets())
        return f"ClockTrack([{offsets}] ms, {len(self.steps)} step(s))"

    # ------------------------------------------------------------------ construction

    @classmethod
    def constant(cls, offset_ms: float) -> ClockTrack:
        return cls([Stretch([(0.0, float(offset_ms))])], [])

    @classmethod
    def from_health(
        cls,
        rows: Iterable[Mapping[str, Any]],
        latency_ms: float = DEFAULT_LATENCY_MS,
        horizon_ms: float = DEFAULT_HORIZON_MS,
    ) -> ClockTrack:
        """From one device's wb_health rows (t, offset_ms, clk_steps, collector), offsets turned device
        minus host. clk_steps counts per collector process: a step
        lies between two points of one collector whose counts differ upwards (a drop is a restart)."""
        by_collector: dict[str, list[tuple[float, float, int | None]]] = {}
        for row in rows:
            off = row.get("offset_ms")
            if off is None or not math.isfinite(float(off)):
                continue
            steps = row.get("clk_steps")
            by_collector.setdefault(str(row.get("collector", "")), []).append(
                (float(row["t"]), device_minus_host(off), int(steps) if steps is not None else None)
            )
        found: list[Step] = []
        points: list[tuple[float, float, str]] = []
        for name, series in by_collector.items():
            series.sort(key=lambda p: p[0])
            points.extend((t, o, name) for t, o, _ in series)
            for (t0, _, n0), (t1, _, n1) in pairwise(series):
                if n0 is not None and n1 is not None and n1 > n0:
                    # More than one step between two points leaves a stretch without an estimate; it is
                    # still a stretch, so windows in it are found uncertain rather than misplaced.
                    found.extend(Step(t0 - latency_ms, t1, {name: t1}) for _ in range(n1 - n0))
        steps = _merge(found)
        stretches = [Stretch() for _ in range(len(steps) + 1)]
        for t, o, name in sorted(points):
            stretches[sum(1 for s in steps if s.new_side(t, name))].points.append((t, o))
        return cls(stretches, steps, horizon_ms)

    def pin(self, flagged_device_ms: Iterable[float], flagged_seq: Iterable[int] | None = None) -> ClockTrack:
        """Place each step at the first reading after it: the earliest clock_step-flagged reading
        (device clock) inside the step's interval once moved by the new offset. flagged_seq, the
        readings' sequence numbers, lets windows near a step back drop the other clock's readings.
        Steps without a flagged reading stay as they were."""
        times = [float(t) for t in flagged_device_ms]
        seqs = [int(s) for s in flagged_seq] if flagged_seq is not None else [-1] * len(times)
        flagged = sorted(zip(times, seqs, strict=True))
        steps = []
        for k, step in enumerate(self.steps):
            new = self.stretches[k + 1].estimate(step.hi_ms, step.hi_ms, self.horizon_ms)
            if new is None or step.pinned:
                steps.append(step)
                continue
            lo = step.lo_ms + new - PIN_SLACK_MS
            hi = step.hi_ms + new + PIN_SLACK_MS
            first = next(((t, q) for t, q in flagged if lo < t <= hi), None)
            if first is None:
                steps.append(step)
            else:
                at = first[0] - new
                steps.append(Step(at, at, step.seen_ms, first[1] if first[1] >= 0 else None))
        return ClockTrack(self.stretches, steps, self.horizon_ms)

    # ------------------------------------------------------------------ queries

    def offsets(self) -> list[float]:
        """One offset per stretch (its best estimate over all of it); NaN for a stretch without one."""
        return [max(o for _, o in s.points) if s.points else math.nan for s in self.stretches]

    def worst(self) -> float:
        """The offset farthest from zero, for the clock-skew check."""
        known = [o for o in self.offsets() if math.isfinite(o)]
        return max(known, key=abs) if known else 0.0

    def span(self) -> tuple[float, float]:
        """Smallest and largest offset: how far past a run's span its readings can lie."""
        known = [o for o in self.offsets() if math.isfinite(o)] or [0.0]
        return min(known), max(known)

    def window(self, start_ms: float, end_ms: float) -> WindowClock:
        """The offset for a window [start, end] on the host clock."""
        bounds = [(-math.inf, -math.inf)] + [(s.lo_ms, s.hi_ms) for s in self.steps] + [(math.inf, math.inf)]
        best_k, best_overlap = 0, -math.inf
        stepped = uncertain = False
        for k in range(len(self.stretches)):
            begin, end = bounds[k], bounds[k + 1]
            # Overlap with the stretch, an unplaced step taken at the middle of its interval.
            lo = max(start_ms, _mid(begin))
            hi = min(end_ms, _mid(end))
            if hi - lo > best_overlap:
                best_k, best_overlap = k, hi - lo
        for s in self.steps:
            if s.pinned and start_ms < s.hi_ms < end_ms:
                stepped = True
            elif not s.pinned and s.lo_ms < end_ms and start_ms < s.hi_ms:
                uncertain = True
        est = self.stretches[best_k].estimate(start_ms, end_ms, self.horizon_ms)
        if est is None:
            uncertain = True
            est = _nearest_estimate(self.stretches, best_k, start_ms, end_ms, self.horizon_ms)
        if stepped or uncertain:
            return WindowClock(est, stepped, uncertain)
        before = self.steps[best_k - 1].seq if best_k > 0 else None
        after = self.steps[best_k].seq if best_k < len(self.steps) else None
        return WindowClock(est, seq_lo=before, seq_hi=after, overlap_until_ms=self._overlap_end(best_k))

    def _overlap_end(self, k: int) -> float | None:
        """End (host ms) of the times stamped twice after the step that opens stretch k, if it was a
        placed step back."""
        if k == 0 or not self.steps[k - 1].pinned:
            return None
        step = self.steps[k - 1]
        old = self.stretches[k - 1].estimate(step.hi_ms, step.hi_ms, self.horizon_ms)
        new = self.stretches[k].estimate(step.hi_ms, step.hi_ms, self.horizon_ms)
        if old is None or new is None or old <= new:
            return None
        return step.hi_ms + (old - new) + PIN_SLACK_MS

    def at(self, t_ms: float) -> float:
        return self.window(t_ms, t_ms).offset_ms


def _mid(bound: tuple[float, float]) -> float:
    lo, hi = bound
    return lo if lo == hi else (lo + hi) / 2.0


def _merge(steps: list[Step]) -> list[Step]:
    """Steps seen by several collectors: intervals that overlap are one step, placed in their
    intersection."""
    out: list[Step] = []
    for s in sorted(steps, key=lambda s: (s.hi_ms, s.lo_ms)):
        if out and s.lo_ms < out[-1].hi_ms and out[-1].lo_ms < s.hi_ms and _distinct_collector(out[-1], s):
            last = out[-1]
            out[-1] = Step(max(last.lo_ms, s.lo_ms), min(last.hi_ms, s.hi_ms), {**s.seen_ms, **last.seen_ms})
        else:
            out.append(s)
    return out


def _distinct_collector(a: Step, b: Step) -> bool:
    # Steps one collector counted between the same pair of its points are two steps, not one seen twice.
    return not set(a.seen_ms) & set(b.seen_ms)


def _nearest_estimate(
    stretches: Sequence[Stretch], k: int, start_ms: float, end_ms: float, horizon_ms: float
) -> float:
    for d in range(1, len(stretches)):
        for j in (k - d, k + d):
            if 0 <= j < len(stretches):
                est = stretches[j].estimate(start_ms, end_ms, horizon_ms)
                if est is not None:
                    return est
    return 0.0


OffsetSource = float | int | ClockTrack


def as_track(value: OffsetSource) -> ClockTrack:
    return value if isinstance(value, ClockTrack) else ClockTrack.constant(float(value))


def window_offset(value: OffsetSource | None, start_ms: float, end_ms: float) -> float:
    """The offset a window is moved by, whether the device has a constant offset or a track."""
    if value is None:
        return 0.0
    if isinstance(value, ClockTrack):
        return value.window(start_ms, end_ms).offset_ms
    return float(value)
