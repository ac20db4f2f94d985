"""Line samples up with the measurement windows of a run. Pure: it reads Series, never a socket.

Rules (SPECpower_ssj2008, MLPerf Power, EE HPC WG):
- a window is the span between a phase's measure_start and measure_end events;
- only samples strictly inside it count (a sample stamped exactly on an edge is left out: it cannot be
  told apart from the ramp it also belongs to);
- each device's timestamps are moved onto the sweep host's clock by that device's known offset
  before the comparison, and an offset above the limit is reported, not hidden by the correction;
- a device whose clock stepped during the run has one offset per stretch of steady clock
  (clocktrack.py): each window is moved by the offset of its own stretch, and a window a step falls
  into, or may fall into, is marked so that compliance can fail it;
- flagged reads (missed, CRC, sensor error) carry no value and are holes; holes are reported as gaps
  and never filled in;
- a node's power is the sum of its channels' average powers; the system is the sum of its nodes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import wattbench_schema as contract

from .clocktrack import ClockTrack, OffsetSource, WindowClock, as_track
from .series import Series

# A hole is an interval between consecutive usable samples longer than this many nominal intervals.
DEFAULT_GAP_FACTOR = 1.5

Fetch = Callable[[str, str, int, int, tuple[str, ...]], Series]


@dataclass(frozen=True)
class Window:
    """One measurement window on the sweep host's clock (UTC ms)."""

    phase: str
    kind: str
    start_ms: int
    end_ms: int
    target: float | None = None
    rate: float | None = None
    ops: int | None = None
    copies: int | None = None
    # A level run by a batch scheduler: the nodes its jobs ran on, from the scheduler's records.
    busy: tuple[str, ...] | None = None
    job_ops: int | None = None  # ops the window's jobs reported, summed; None when none reported any
    unserved: int | None = None  # a paced level's arrivals not served in the window

    @property
    def duration_s(self) -> float:
        return (self.end_ms - self.start_ms) / 1000.0


@dataclass(frozen=True)
class ChannelSpec:
    """A device channel the run uses. role is "power" or "inlet"; node groups power channels (one server
    fed by two supplies is one node); hz is the nominal sample rate when the metadata gives it."""

    dev: str
    ch: str
    role: str = "power"
    node: str | None = None
    hz: float | None = None
    meter: str | None = None  # from the metadata, for the report; None when not known
    # What the metadata says of the meter, for the standard the measurement meets (conformance.py);
    # None when not known: the maker's relative accuracy of W, the source's own update period in s,
    # and the quantities the channel publishes.
    acc: float | None = None
    upd: float | None = None
    quantities: tuple[str, ...] | None = None
    # Its metadata gives role component (a CPU package, DRAM) and the run named it: its power is
    # summed as the run asked, and every report says the sum is component power, not wall power.
    component: bool = False
    # Its meter's power is modelled, not measured (its folder says so: wattbench.meterinfo).
    simulated: bool = False

    @property
    def key(self) -> str:
        return f"{self.dev}/{self.ch}"

    @property
    def node_name(self) -> str:
        return self.node or self.dev


@dataclass(frozen=True)
class Gap:
    """Time without usable samples, on the corrected clock. kind: "hole" between two samples, "edge"
    between a window edge and the nearest sample, "empty" for a window with no usable sample at all."""

    dev: str
    ch: str
    phase: str
    start_ms: float
    end_ms: float
    missing: int
    kind: str = "hole"

    @property
    def duration_ms(self) -> float:
        return self.end_ms - self.start_ms


@dataclass
class ChannelWindow:
    """What one channel contributed to one window."""

    spec: ChannelSpec
    n: int  # usable samples strictly inside
    flagged: int  # samples strictly inside that carried no value
    mean: float  # mean W (power) or T (inlet); NaN without samples
    u: float  # mean relative uncertainty of W where the meter reported it; NaN otherwise
    u_samples: int
    nominal_ms: float | None  # expected spacing between samples
    max_interval_ms: float  # longest stretch without a usable sample, window edges included
    gaps: list[Gap] = field(default_factory=list)
    clock_steps: int = 0  # samples strictly inside flagged clock_step: the device clock jumped
    range_changes: int = 0  # samples strictly inside flagged range_change: the meter auto-ranged
    offset_ms: float = 0.0  # device-minus-host offset the window was moved by
    clock_uncertain: bool = False  # a clock step may lie inside the window; which clock is unknown

    @property
    def missing(self) -> int:
        return sum(g.missing for g in self.gaps)


@dataclass
class WindowPower:
    window: Window
    channels: list[ChannelWindow]

    @property
    def power(self) -> list[ChannelWindow]:
        return [c for c in self.channels if c.spec.role == "power"]

    @property
    def inlet(self) -> list[ChannelWindow]:
        return [c for c in self.channels if c.spec.role == "inlet"]

    @property
    def node_watts(self) -> dict[str, float]:
        """Average power per node; NaN for a node with any power channel that has no samples, because a
        node missing one of its supplies would look falsely frugal."""
        out: dict[str, float] = {}
        for c in self.power:
            name = c.spec.node_name
            out[name] = out.get(name, 0.0) + c.mean  # NaN propagates
        return out

    @property
    def watts(self) -> float:
        """System average power: the sum over nodes. NaN when there is no power data."""
        nodes = self.node_watts
        if not nodes:
            return math.nan
        return float(sum(nodes.values()))

    @property
    def inlet_c(self) -> float:
        values = [c.mean for c in self.inlet if c.n > 0]
        return float(np.mean(values)) if values else math.nan

    @property
    def uncertainty(self) -> float:
        """Relative uncertainty of the system power, weighting each channel's reported u by its power
        (meter errors are systematic, so they do not average out across samples). NaN if no channel
        reported one."""
        num = 0.0
        den = 0.0
        for c in self.power:
            if c.u_samples and math.isfinite(c.mean) and math.isfinite(c.u):
                num += c.u * c.mean
                den += c.mean
        return num / den if den > 0 else math.nan

    @property
    def samples(self) -> int:
        return sum(c.n for c in self.power)

    @property
    def gaps(self) -> list[Gap]:
        return [g for c in self.power for g in c.gaps]


def windows_from_events(events: Iterable[Mapping[str, Any]]) -> list[Window]:
    """Measurement windows from a run's phase events: each phase whose measure_start has a matching
    measure_end. A window opened and never closed (an interrupted run) is not a window."""
    open_: dict[str, Mapping[str, Any]] = {}
    starts: dict[str, Mapping[str, Any]] = {}
    out: list[Window] = []
    for ev in sorted(events, key=lambda e: (e.get("n", 0), e.get("t", 0))):
        phase = ev.get("phase")
        kind = ev.get("event")
        if kind == "phase_start":
            starts[phase] = ev
        elif kind == "measure_start":
            open_[phase] = ev
        elif kind == "measure_end" and phase in open_:
            begin = open_.pop(phase)
            info = {**starts.get(phase, {}), **begin, **ev}
            target = info.get("target")
            out.append(
                Window(
                    phase=phase,
                    kind=str(info.get("kind") or _kind_from_name(phase)),
                    start_ms=int(begin["t"]),
                    end_ms=int(ev["t"]),
                    target=float(target) if target is not None else None,
                    rate=float(info["rate"]) if info.get("rate") is not None else None,
                    ops=int(ev["ops"]) if ev.get("ops") is not None else None,
                    copies=int(info["copies"]) if info.get("copies") is not None else None,
                    busy=_busy_nodes(ev.get("jobs")),
                    job_ops=_job_ops(ev.get("jobs")),
                    unserved=int(ev["unserved"]) if ev.get("unserved") is not None else None,
                )
            )
    return out


def _busy_nodes(jobs: Any) -> tuple[str, ...] | None:
    """The nodes a window's jobs ran on (the measure_end's scheduler records), sorted; None when the
    window carries no records."""
    if not isinstance(jobs, list):
        return None
    nodes = {str(n) for j in jobs if isinstance(j, Mapping) for n in (j.get("nodes") or [])}
    return tuple(sorted(nodes))


def _job_ops(jobs: Any) -> int | None:
    if not isinstance(jobs, list):
        return None
    counts = [j["ops"] for j in jobs if isinstance(j, Mapping) and isinstance(j.get("ops"), int)]
    return sum(counts) if counts else None


def _kind_from_name(phase: str) -> str:
    if phase.startswith("cal"):
        return "calibration"
    if phase == "idle":
        return "idle"
    if phase.startswith("c"):
        return "concurrency"
    return "target"


def _fields_for(spec: ChannelSpec) -> tuple[str, ...]:
    return ("W", "u") if spec.role == "power" else ("T",)


def channel_window(
    series: Series,
    spec: ChannelSpec,
    window: Window,
    offset_ms: float = 0.0,
    gap_factor: float = DEFAULT_GAP_FACTOR,
    seq_range: tuple[int | None, int | None] = (None, None),
    overlap_until_ms: float | None = None,
) -> ChannelWindow:
    """Reduce one channel's samples to its contribution to one window.

    series may span more than the window; timestamps are corrected by offset_ms (device clock minus the
    sweep host's clock) and only samples strictly inside (start, end) are kept. seq_range [lo, hi), when
    given, keeps only readings of one stretch of the device clock, and clock_step flags up to
    overlap_until_ms (host clock) are not counted: they mark a step back's overlap that was placed and
    told apart (see clocktrack.WindowClock).
    """
    quantity = "W" if spec.role == "power" else "T"
    t = series.t_ms
    lo = window.start_ms + offset_ms
    hi = window.end_ms + offset_ms
    # Series are in time order, so the strict window is one slice; searchsorted keeps this O(log n).
    i0 = int(np.searchsorted(t, lo, side="right"))
    i1 = int(np.searchsorted(t, hi, side="left"))
    pick: slice | np.ndarray = slice(i0, i1)
    if seq_range != (None, None):
        seq = series.seq[i0:i1]
        keep = np.ones(seq.shape, dtype=bool)
        if seq_range[0] is not None:
            keep &= (seq >= seq_range[0]) | (seq < 0)
        if seq_range[1] is not None:
            keep &= (seq < seq_range[1]) | (seq < 0)
        if not keep.all():
            pick = np.arange(i0, i1)[keep]
    tc = t[pick].astype(np.float64) - offset_ms
    values = series.values.get(quantity)
    vals = values[pick] if values is not None else np.full(tc.shape, np.nan)
    ok = np.isfinite(vals)
    n = int(ok.sum())
    flagged = int(tc.size - n)
    mean = float(vals[ok].mean()) if n else math.nan

    u_mean = math.nan
    u_n = 0
    if spec.role == "power":
        u = series.values.get("u")
        if u is not None:
            uw = u[pick][ok]
            has = np.isfinite(uw)
            u_n = int(has.sum())
            if u_n:
                u_mean = float(uw[has].mean())

    # Nominal spacing: the metadata's rate when known, else the median spacing of every sample in the
    # window (flagged ones included: a missed read still marks when a reading was due).
    if spec.hz and spec.hz > 0:
        nominal: float | None = 1000.0 / spec.hz
    elif tc.size >= 2:
        nominal = float(np.median(np.diff(tc)))
        if nominal <= 0:
            nominal = None
    else:
        nominal = None

    good = tc[ok]
    gaps: list[Gap] = []
    if n == 0:
        missing = round(window.duration_s * 1000.0 / nominal) if nominal else 0
        gaps.append(Gap(spec.dev, spec.ch, window.phase, window.start_ms, window.end_ms, missing, "empty"))
        max_interval = float(window.end_ms - window.start_ms)
    else:
        edges = np.concatenate(([float(window.start_ms)], good, [float(window.end_ms)]))
        dt = np.diff(edges)
        max_interval = float(dt.max())
        if nominal:
            limit = gap_factor * nominal
            for k in np.nonzero(dt > limit)[0]:
                k = int(k)
                kind = "edge" if k == 0 or k == dt.size - 1 else "hole"
                # Between two samples, the interval holds round(dt/nominal) - 1 missing readings. Against a
                # window edge only the grid anchored on the one sample is known: ceil(dt/nominal) - 1.
                ratio = float(dt[k] / nominal)
                due = round(ratio) if kind == "hole" else math.ceil(ratio - 1e-9)
                missing = max(1, due - 1)
                gaps.append(
                    Gap(spec.dev, spec.ch, window.phase, float(edges[k]), float(edges[k + 1]), missing, kind)
                )
    flags = series.flags[pick]
    stepped = (flags & contract.FLAG_CLOCK_STEP) != 0
    if overlap_until_ms is not None:
        stepped &= tc > overlap_until_ms
    return ChannelWindow(
        spec,
        n,
        flagged,
        mean,
        u_mean,
        u_n,
        nominal,
        max_interval,
        gaps,
        clock_steps=int(np.count_nonzero(stepped)),
        range_changes=int(np.count_nonzero(flags & contract.FLAG_RANGE_CHANGE)),
    )


def align(
    windows: Sequence[Window],
    channels: Sequence[ChannelSpec],
    fetch: Fetch,
    offsets_ms: Mapping[str, OffsetSource] | None = None,
    gap_factor: float = DEFAULT_GAP_FACTOR,
    deadband_ms: float = 0.0,
    placed: dict[str, ClockTrack] | None = None,
) -> list[WindowPower]:
    """Every window's per-channel contributions.

    fetch(dev, ch, start_ms, end_ms, fields) returns the samples with start_ms <= t <= end_ms on the
    device's own clock (Store.series). Each channel is fetched once over the span of all windows, so a
    run costs one query per channel, not one per window. offsets_ms gives each device's offset, constant
    or as a ClockTrack; a window's offset within deadband_ms of zero is taken as zero. placed, if given,
    receives each device's track with its steps placed from the flagged readings.
    """
    offsets_ms = offsets_ms or {}
    out = [WindowPower(w, []) for w in windows]
    if not windows:
        return out
    span_lo = min(w.start_ms for w in windows)
    span_hi = max(w.end_ms for w in windows)
    found: dict[int, list[ChannelWindow]] = {}
    by_dev: dict[str, list[int]] = {}
    for i, spec in enumerate(channels):
        by_dev.setdefault(spec.dev, []).append(i)
    for dev, idx in by_dev.items():
        track = as_track(offsets_ms.get(dev, 0.0))
        low, high = track.span()

        def load(i: int, dev: str = dev, low: float = low, high: float = high) -> Series:
            lo, hi = math.floor(span_lo + low), math.ceil(span_hi + high)
            return fetch(dev, channels[i].ch, lo, hi, _fields_for(channels[i]))

        # Placing a step takes the flagged readings of all the device's channels, so then they are all
        # held at once; otherwise one channel at a time keeps memory flat.
        held = {i: load(i) for i in idx} if track.steps else {}
        if track.steps:
            track = track.pin(*_clock_step_readings(held.values()))
        if placed is not None and dev in offsets_ms:
            placed[dev] = track
        clocks = [track.window(w.start_ms, w.end_ms) for w in windows]
        for i in idx:
            series = held.pop(i) if i in held else load(i)
            found[i] = [
                _on_clock(series, channels[i], wp.window, wc, deadband_ms, gap_factor)
                for wp, wc in zip(out, clocks, strict=True)
            ]
    for i in range(len(channels)):
        for wp, cw in zip(out, found[i], strict=True):
            wp.channels.append(cw)
    return out


def _clock_step_readings(series: Iterable[Series]) -> tuple[np.ndarray, np.ndarray]:
    """Device times and sequence numbers of one device's clock_step-flagged readings."""
    times, seqs = [], []
    for s in series:
        hit = (s.flags & contract.FLAG_CLOCK_STEP) != 0
        times.append(s.t_ms[hit])
        seqs.append(s.seq[hit])
    if not times:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    return np.concatenate(times), np.concatenate(seqs)


def _on_clock(
    series: Series, spec: ChannelSpec, window: Window, wc: WindowClock, deadband_ms: float, gap_factor: float
) -> ChannelWindow:
    """A channel's window moved by the offset of the stretch of clock it lies in."""
    off = wc.offset_ms if abs(wc.offset_ms) > deadband_ms else 0.0
    cw = channel_window(series, spec, window, off, gap_factor, (wc.seq_lo, wc.seq_hi), wc.overlap_until_ms)
    cw.offset_ms = off
    cw.clock_uncertain = wc.uncertain or wc.stepped
    return cw


def window_energy_wh(watts: float, window: Window) -> float:
    return watts * window.duration_s / 3600.0
