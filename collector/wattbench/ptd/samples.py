"""A PTDaemon sample and its lines: one channel's readings of a second averaged into its 1 s sample
(-2 in every quantity when it missed the second, -1 for one over its range), the sum over channels
with its uncertainty, and the sample, log and console lines in PTDaemon's shapes (protocol.py has the
protocol around them)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime

from .ranges import MeterRanges

MISSED = -2.0
INVALID = -1.0


def stamp(t_ms: int) -> str:
    """UTC time as PTDaemon writes it: MM-DD-YYYY HH:MM:SS.fff."""
    dt = datetime.fromtimestamp(t_ms / 1000.0, tz=UTC)
    return dt.strftime("%m-%d-%Y %H:%M:%S.") + f"{dt.microsecond // 1000:03d}"


def console_line(t_ms: int, message: str) -> str:
    return f"{stamp(t_ms)}: {message}"


@dataclass(frozen=True)
class Reading:
    """One reading of a wattbench source: its UTC time (ms) from the appliance's NTP-disciplined
    clock, W with V, A and PF when the meter gives them, and the channel it is of (0 is the first
    channel the daemon reads)."""

    t_ms: int
    watts: float
    volts: float | None = None
    amps: float | None = None
    pf: float | None = None
    ch: int = 0


@dataclass(frozen=True)
class Channel:
    """A channel the daemon reads: its label (dev/channel) and its meter's ranges and accuracy."""

    label: str
    row: MeterRanges


@dataclass(frozen=True)
class ChannelSample:
    """One channel's 1 s sample: the mean of its readings in that second. over names the quantity that
    was above its range ("Current" or "Voltage"), and u is the relative uncertainty of W on the
    ranges in force."""

    watts: float
    volts: float
    amps: float
    pf: float
    readings: int
    u: float | None = None
    over: str = ""

    @property
    def missed(self) -> bool:
        return self.readings == 0

    @property
    def valid(self) -> bool:
        return not self.missed and not self.over

    def fields(self) -> str:
        return f"Watts,{self.watts:.6f},Volts,{self.volts:.6f},Amps,{self.amps:.6f},PF,{self.pf:.6f}"

    def invalid(self, over: str) -> ChannelSample:
        """The sample as PTDaemon logs an over-range one: the quantity over its range, W and PF are -1
        (power-dev issue #219 shows `Watts,-1.000000,Volts,121.610000,Amps,-1.000000,PF,-1.000000`)."""
        volts = INVALID if over == "Voltage" else self.volts
        amps = INVALID if over == "Current" else self.amps
        return ChannelSample(INVALID, volts, amps, INVALID, self.readings, None, over)


MISSED_CHANNEL = ChannelSample(MISSED, MISSED, MISSED, MISSED, 0)


@dataclass(frozen=True)
class Sample:
    """One 1 s sample of a measurement, stamped with the second's end: the channels' samples and,
    first, their sum. With one channel the sum is that channel. With several, the sum line carries the
    highest volts and amps of the channels (power-dev's ranging reads them from it, see
    docs/mlperf-power.md) and PF -1. A sample with a channel missed or over its range is invalid, and
    so is its sum: -2 for a missed one, -1 for one over range."""

    t_ms: int
    channels: tuple[ChannelSample, ...]
    u: float | None = None

    @property
    def valid(self) -> bool:
        return all(c.valid for c in self.channels)

    @property
    def missed(self) -> bool:
        return any(c.missed for c in self.channels)

    @property
    def total(self) -> ChannelSample:
        if len(self.channels) == 1:
            return self.channels[0]
        if self.missed:
            return MISSED_CHANNEL
        volts = max(c.volts for c in self.channels)
        amps = max(c.amps for c in self.channels)
        if not self.valid:
            return ChannelSample(INVALID, volts, amps, INVALID, 1, None, "sum")
        return ChannelSample(sum(c.watts for c in self.channels), volts, amps, INVALID, 1, self.u)

    @property
    def watts(self) -> float:
        return self.total.watts

    def fields(self, every_channel: bool = False) -> str:
        """The RL line: the sum, then, for RL,*,* with several channels, each channel."""
        line = f"Time,{stamp(self.t_ms)},{self.total.fields()}"
        if every_channel and len(self.channels) > 1:
            line += "".join(f",{c.fields()}" for c in self.channels)
        return line

    def log_line(self, mark: str) -> str:
        return f"Time,{stamp(self.t_ms)},{self.total.fields()},Mark,{mark}"

    def console_line(self, mark: str) -> str:
        line = f"{stamp(self.t_ms)},{self.total.fields()},Mark,{mark}"
        if len(self.channels) > 1:
            line += "".join(f",Ch{i + 1},{c.fields()}" for i, c in enumerate(self.channels))
        return line


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def aggregate(readings: list[Reading]) -> ChannelSample:
    """The 1 s sample of one channel's `readings`; with none, a missed sample (-2 everywhere). A quantity
    the meter does not give is -1, as PTDaemon writes an unknown value."""
    good = [r for r in readings if math.isfinite(r.watts) and r.watts >= 0]
    if not good:
        return MISSED_CHANNEL

    def mean_of(values: list[float | None]) -> float:
        known = [v for v in values if v is not None and math.isfinite(v)]
        m = _mean(known)
        return INVALID if m is None else m

    return ChannelSample(
        sum(r.watts for r in good) / len(good),
        mean_of([r.volts for r in good]),
        mean_of([r.amps for r in good]),
        mean_of([r.pf for r in good]),
        len(good),
    )


def sum_uncertainty(pairs: list[tuple[float, float]]) -> float | None:
    """The relative uncertainty of a sum (or a mean) of powers from (watts, relative uncertainty)
    pairs: the absolute errors added, over the total. A meter's accuracy is systematic, so it neither
    shrinks by averaging nor cancels between channels. None when no power was drawn."""
    total = sum(w for w, _ in pairs)
    if total > 0:
        return sum(w * u for w, u in pairs) / total
    return None
