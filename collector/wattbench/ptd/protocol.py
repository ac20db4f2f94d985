"""The part of SPEC PTDaemon's line protocol that MLCommons' power-dev speaks, as pure functions and a
state machine: no socket, no clock, no file. The server (server.py) feeds it command lines, the time
and the source's readings, and writes out what it returns.

The shapes are those power-dev's server sends and parses (docs/mlperf-power.md lists them):

- one line per message, ending CR LF; a reply is one line, except `RL`, whose first line
  `Last N samples` is followed by N sample lines;
- a sample line is `Time,MM-DD-YYYY HH:MM:SS.fff,Watts,w,Volts,v,Amps,a,PF,pf` (UTC); the `-l` log
  adds `,Mark,<mark>`; a missed sample carries -2 in every quantity, as PTDaemon logs it, and one over
  its range -1 in W, A (or V) and PF; in multichannel mode `RL,*,*` adds each channel's fields;
- a console line is `MM-DD-YYYY HH:MM:SS.fff: message`; a silent second and a reading over its range
  are `ERROR:` lines and a sample above 1 % uncertainty PTDaemon's `WARNING:` line, the shapes
  power-dev's compliance/check.py weighs.

A second's sample and its lines are samples.py's. Each channel's ranges and accuracy are its meter
kind's row (ranges.py): `SR` takes the next range up, and every sample's uncertainty comes from its
reading and the range in force.

`Hello` is answered with the protocol's fixed greeting, because power-dev will not talk to a daemon
that answers otherwise; `Identify` then says truthfully that this is wattbench and which meter it reads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .ranges import next_range, uncertainty
from .samples import Channel, ChannelSample, Reading, Sample, aggregate, console_line, sum_uncertainty

GREETING = "Hello, PTDaemon here!"
GO_REPLY = "Starting untimed measurement, maximum 500000 samples at 1000ms with 0 rampup samples"
STOP_REPLY = "Stopping untimed measurement"
NO_MEASUREMENT = "Error: no measurement to stop"
INVALID_PARAMS = "Error: Invalid number of parameters"
UNKNOWN = "Error: Unknown command"
RANGE_CHANGED = "Range {q} changed"
MAX_SAMPLES = 500_000
INTERVAL_MS = 1000
# A line longer than this is not a command of the protocol; it is refused, not buffered without end.
MAX_LINE = 1024
# PTDaemon's limit for a sample's uncertainty (check.py reads the warning it logs above it).
UNCERTAINTY_LIMIT = 0.01


# ---------------------------------------------------------------------------------------- commands


@dataclass(frozen=True)
class Command:
    """A parsed command line. kind is the command's name; error is set when the line is malformed,
    and is then the whole reply."""

    kind: str
    args: tuple[str, ...] = ()
    error: str | None = None


_NO_ARGS = {"Hello", "Identify", "RR", "Stop", "Watts", "Uncertainty"}


def parse_command(line: str) -> Command:
    text = line.strip()
    if not text:
        return Command("", error="Error: empty command")
    if len(text) > MAX_LINE:
        return Command("", error=f"Error: command longer than {MAX_LINE} characters")
    if not text.isprintable():
        return Command("", error="Error: command holds control characters")
    name, *args = text.split(",")
    if name in _NO_ARGS:
        if args:
            return Command(name, error=INVALID_PARAMS)
        return Command(name)
    if name == "SR":
        if len(args) != 2:
            return Command(name, error=INVALID_PARAMS)
        if args[0] not in ("V", "A"):
            return Command(name, error=f"Error: SR sets V or A, not {args[0][:16]!r}")
        if args[1] != "Auto" and parse_range(args[1]) is None:
            return Command(name, error=f"Error: range {args[1][:32]!r} is not Auto or a positive number")
        return Command(name, tuple(args))
    if name == "Go":
        if len(args) != 3:
            return Command(name, error=INVALID_PARAMS)
        interval, rampup, mark = args
        if not interval.isdigit() or not rampup.isdigit():
            return Command(name, error="Error: Go takes an interval in ms and a number of rampup samples")
        if int(interval) != INTERVAL_MS:
            return Command(name, error=f"Error: only {INTERVAL_MS} ms samples are supported")
        if int(rampup) != 0:
            return Command(name, error="Error: only 0 rampup samples are supported")
        if not mark:
            return Command(name, error="Error: Go needs a mark")
        return Command(name, (interval, rampup, mark))
    if name in ("RL", "DC-RL"):
        # RL: the unread samples. RL,N: the last N samples. RL,*,*: the unread samples of the sum and
        # of every channel, PTDaemon's multichannel form (the state answers it for one channel with
        # PTDaemon's error, and power-dev then falls back to RL).
        if name == "RL" and args == ["*", "*"]:
            return Command(name, ("*", "*"))
        if len(args) > 1:
            return Command(name, error=INVALID_PARAMS)
        if args and (not args[0].isdigit() or int(args[0]) < 1):
            return Command(name, error="Error: RL takes a number of samples of at least 1")
        return Command(name, tuple(args))
    return Command(name, error=UNKNOWN)


def parse_range(text: str) -> float | None:
    """A range value power-dev sends (e.g. 230.000000, 0.47300000000000003), or None when it is not a
    finite positive number."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and 0 < value <= 1e6 else None


# ------------------------------------------------------------------------------------------- state


@dataclass
class Measurement:
    mark: str
    started_ms: int
    samples: list[Sample] = field(default_factory=list)
    unread: int = 0  # index of the first sample RL has not returned yet
    running: bool = True
    max_volts: float = -1.0
    max_amps: float = -1.0


@dataclass
class Output:
    """What one step of the state machine asks the server to do."""

    reply: list[str] = field(default_factory=list)
    console: list[str] = field(default_factory=list)
    log: list[str] = field(default_factory=list)


class PtdState:
    """The daemon's state: ranges, the current (or last) measurement and its samples.

    identity is the Identify reply. channels: what the daemon reads, each with its meter's ranges;
    one channel, or several for PTDaemon's multichannel mode. dc: the meters measure DC (`-D`), and the
    samples are read with DC-RL as PTDaemon's DC mode has them. silence_s: a source that has sent
    nothing for this long is silent, and a command that needs its data gets an error reply instead of
    stale numbers.

    Readings are sorted into the measurement's seconds by their own timestamps, so a sample holds what
    the meter measured in that second whenever the batch carrying it arrived. A second is closed
    lag_ms after its end: a reading that arrives later than that is not counted, and a second with
    none is a missed sample. lag_ms must exceed the appliance's batch interval and network delay."""

    def __init__(
        self,
        identity: str,
        source: str,
        channels: tuple[Channel, ...],
        silence_s: float = 5.0,
        lag_ms: int = 2000,
        dc: bool = False,
    ) -> None:
        if not channels:
            raise ValueError("a daemon reads at least one channel")
        self.identity = identity
        self.source = source
        self.channels = channels
        self.dc = dc
        self.silence_s = silence_s
        self.lag_ms = lag_ms
        self.pending: list[Reading] = []
        # The range in force on each channel: None is auto ranging.
        self.volts_range: list[float | None] = [None] * len(channels)
        self.amps_range: list[float | None] = [None] * len(channels)
        self.measurement: Measurement | None = None
        self.next_tick_ms: int | None = None
        self._silent_since: list[int | None] = [None] * len(channels)

    @property
    def multichannel(self) -> bool:
        return len(self.channels) > 1

    # -- commands

    def handle(self, line: str, now_ms: int, silent_s: float | None) -> Output:
        """The reply to one command line. silent_s: seconds since the source last sent a reading
        (None: it never has)."""
        out = self._handle(line, now_ms, silent_s)
        # The console shows every reply, as PTDaemon's does; power-dev keeps the console in ptd_logs.txt.
        if out.reply:
            out.console.append(console_line(now_ms, f"Response to client sent: {out.reply[0]}"))
            out.console.extend(out.reply[1:])
        return out

    def _handle(self, line: str, now_ms: int, silent_s: float | None) -> Output:
        cmd = parse_command(line)
        out = Output()
        if cmd.error is not None:
            out.reply.append(cmd.error)
            return out
        m = self.measurement
        if cmd.kind == "Hello":
            out.reply.append(GREETING)
        elif cmd.kind == "Identify":
            out.reply.append(self.identity)
        elif cmd.kind == "RR":
            out.reply.append(self.ranges())
        elif cmd.kind == "SR":
            quantity, value = cmd.args
            self._set_range(quantity, None if value == "Auto" else parse_range(value), now_ms, out)
        elif cmd.kind == "Go":
            if m is not None and m.running:
                out.reply.append(f"Error: measurement {m.mark!r} is running; Stop it first")
            elif self._silent(silent_s):
                out.reply.append(self._silence_error(silent_s))
            else:
                mark = cmd.args[2]
                self.measurement = Measurement(mark, now_ms)
                self.next_tick_ms = now_ms + INTERVAL_MS
                self.pending = []
                self._silent_since = [None] * len(self.channels)
                out.reply.append(GO_REPLY)
                out.console.append(console_line(now_ms, f"Go with mark {mark!r}"))
        elif cmd.kind == "Stop":
            if m is None or not m.running:
                out.reply.append(NO_MEASUREMENT)
            else:
                out.console.extend(self._stop(now_ms))
                out.reply.append(STOP_REPLY)
        elif cmd.kind == "Watts":
            out.reply.append(self._watts(silent_s))
        elif cmd.kind == "Uncertainty":
            out.reply.append(self._uncertainty(silent_s))
        elif cmd.kind in ("RL", "DC-RL"):
            out.reply.extend(self._read_log(cmd))
        return out

    def _set_range(self, quantity: str, value: float | None, now_ms: int, out: Output) -> None:
        """SR: auto ranging, or on every channel the meter's range that holds value, the next one up
        as an analyzer picks it; a value above a meter's largest range is refused."""
        picked: list[float | None] = []
        for ch in self.channels:
            steps = ch.row.volts if quantity == "V" else ch.row.amps
            if value is None:
                picked.append(None)
                continue
            step = next_range(steps, value)
            if step is None:
                out.reply.append(
                    f"Error: {quantity} range {value:.6f} is above the largest range of {ch.label}, "
                    f"{steps[-1]:g} {quantity}"
                )
                return
            picked.append(step)
        if quantity == "V":
            self.volts_range = picked
        else:
            self.amps_range = picked
        out.reply.append(RANGE_CHANGED.format(q=quantity))
        for ch, step in zip(self.channels, picked, strict=True):
            if value is None or step is None:
                said = "Auto"
            elif step == value:
                said = f"{step:.6f}"
            else:
                said = f"{step:.6f} (asked {value:.6f}: the next range up of {ch.row.kind})"
            where = f" on {ch.label}" if self.multichannel else ""
            out.console.append(console_line(now_ms, f"Range {quantity} set to {said}{where}"))

    def _silent(self, silent_s: float | None) -> bool:
        return silent_s is None or silent_s >= self.silence_s

    def _silence_error(self, silent_s: float | None) -> str:
        if silent_s is None:
            return f"Error: no samples from {self.source} yet"
        return f"Error: no samples from {self.source} for {silent_s:.1f} s"

    def _stop(self, now_ms: int) -> list[str]:
        m = self.measurement
        assert m is not None
        m.running = False
        self.next_tick_ms = None
        self.pending = []
        lines = [console_line(now_ms, "Completed test")]
        if m.max_volts > 0 or m.max_amps > 0:
            lines.append(
                console_line(
                    now_ms,
                    f"Highest readings of {m.mark!r}: Volts {m.max_volts:.6f}, Amps {m.max_amps:.6f}",
                )
            )
        return lines

    def disconnected(self, now_ms: int) -> list[str]:
        """The client went away: a running measurement ends, since nobody is left to stop it."""
        m = self.measurement
        if m is None or not m.running:
            return []
        lines = self._stop(now_ms)
        lines.append(
            console_line(now_ms, f"Client disconnected during measurement {m.mark!r}: measurement stopped")
        )
        return lines

    def ranges(self) -> str:
        """Ranges,<A auto>,<A range>,<V auto>,<V range> of the first channel. With auto ranging on, the
        range shown is the highest reading of the current (or last) measurement, -1 before there is
        one; a fixed range is the meter's range in force."""
        m = self.measurement

        def part(fixed: float | None, seen: float) -> str:
            if fixed is not None:
                return f"0,{fixed:.6f}"
            return f"1,{seen:.6f}" if seen > 0 else "1,-1.000000"

        max_a = m.max_amps if m is not None else -1.0
        max_v = m.max_volts if m is not None else -1.0
        return f"Ranges,{part(self.amps_range[0], max_a)},{part(self.volts_range[0], max_v)}"

    def _valid(self) -> list[Sample]:
        m = self.measurement
        return [] if m is None else [s for s in m.samples if s.valid]

    def _readable(self, silent_s: float | None) -> Measurement | str:
        """The current (or last) measurement, or the error reply when there is none or its source has
        gone silent while it runs."""
        m = self.measurement
        if m is None:
            return "Error: no measurement yet"
        if m.running and self._silent(silent_s):
            return self._silence_error(silent_s)
        return m

    def _watts(self, silent_s: float | None) -> str:
        """Watts,<mean>,<min>,<max>,<samples>,<invalid samples> of the current (or last) measurement:
        the invalid ones are those missed or over a range."""
        m = self._readable(silent_s)
        if isinstance(m, str):
            return m
        valid = self._valid()
        invalid = len(m.samples) - len(valid)
        if not valid:
            return f"Watts,-1.000000,-1.000000,-1.000000,0,{invalid}"
        ws = [s.watts for s in valid]
        return f"Watts,{sum(ws) / len(ws):.6f},{min(ws):.6f},{max(ws):.6f},{len(ws)},{invalid}"

    def _uncertainty(self, silent_s: float | None) -> str:
        """Uncertainty,<mean %>,<max %>,<valid samples whose uncertainty cannot be evaluated>: the
        relative uncertainty of the measurement's mean power and the largest of one sample, in percent."""
        m = self._readable(silent_s)
        if isinstance(m, str):
            return m
        valid = self._valid()
        known = [(s.watts, s.u) for s in valid if s.u is not None]
        unknown = len(valid) - len(known)
        mean = sum_uncertainty(known)
        if mean is None:
            return f"Uncertainty,-1.000000,-1.000000,{unknown}"
        return f"Uncertainty,{100 * mean:.6f},{100 * max(u for _, u in known):.6f},{unknown}"

    def _read_log(self, cmd: Command) -> list[str]:
        """RL, RL,N, RL,*,* and DC-RL. A DC meter's samples are read with DC-RL, an AC meter's with RL;
        the other is an unknown command, as power-dev expects when it falls back from RL,*,* (`Invalid
        number of parameters`: a single AC channel) to RL, or (`Unknown command`) to DC-RL."""
        if (cmd.kind == "DC-RL") != self.dc:
            return [UNKNOWN]
        every = cmd.args == ("*", "*")
        if every and not self.multichannel:
            return [UNKNOWN if self.dc else INVALID_PARAMS]
        m = self.measurement
        if m is None:
            return ["Last 0 samples"]
        if cmd.args and not every:
            rows = m.samples[-int(cmd.args[0]) :]
        else:
            rows = m.samples[m.unread :]
            m.unread = len(m.samples)
        return [f"Last {len(rows)} samples", *(s.fields(every) for s in rows)]

    # -- sampling

    @property
    def running(self) -> bool:
        return self.measurement is not None and self.measurement.running

    def add(self, readings: list[Reading]) -> None:
        """Readings that arrived; those from before the measurement began are not part of it."""
        m = self.measurement
        if m is None or not m.running:
            return
        n = len(self.channels)
        self.pending.extend(r for r in readings if r.t_ms > m.started_ms and 0 <= r.ch < n)

    def due(self, now_ms: int) -> bool:
        return self.next_tick_ms is not None and now_ms >= self.next_tick_ms + self.lag_ms

    def tick(self, now_ms: int) -> Output:
        """The samples of every second of the running measurement that is closed by now."""
        out = Output()
        m = self.measurement
        # A late wake-up (a busy host) still gives one sample for each second of the measurement.
        while m is not None and m.running and self.next_tick_ms is not None and self.due(now_ms):
            end = self.next_tick_ms
            self.next_tick_ms = end + INTERVAL_MS
            window = [r for r in self.pending if end - INTERVAL_MS < r.t_ms <= end]
            self.pending = [r for r in self.pending if r.t_ms > end]
            if len(m.samples) < MAX_SAMPLES:
                self._sample(m, end, window, out)
        return out

    def _ranged(self, i: int, sample: ChannelSample) -> tuple[ChannelSample, str | None]:
        """The channel's sample judged on the ranges in force: over a range it is invalid; else it gets
        its uncertainty. The second value is the quantity over its range, if any."""
        ch = self.channels[i]
        vr = self.volts_range[i] or next_range(ch.row.volts, max(sample.volts, 0.0))
        ar = self.amps_range[i] or next_range(ch.row.amps, max(sample.amps, 0.0))
        if vr is None or sample.volts > vr:
            return sample.invalid("Voltage"), "Voltage"
        if ar is None or sample.amps > ar:
            return sample.invalid("Current"), "Current"
        u = uncertainty(ch.row, sample.watts, vr, ar)
        return ChannelSample(sample.watts, sample.volts, sample.amps, sample.pf, sample.readings, u), None

    def _sample(self, m: Measurement, end: int, window: list[Reading], out: Output) -> None:
        t = end
        chans: list[ChannelSample] = []
        problems: list[str] = []
        for i, ch in enumerate(self.channels):
            raw = aggregate([r for r in window if r.ch == i])
            where = f" (channel {i + 1}, {ch.label})" if self.multichannel else ""
            if raw.missed:
                since = self._silent_since[i]
                if since is None:
                    since = self._silent_since[i] = end - INTERVAL_MS
                # A second without a reading is a hole in the measured energy: an error, as an
                # analyzer that stops answering is one, and the sample is invalid, never filled in.
                problems.append(
                    f"ERROR: No samples from {ch.label} for {(end - since) / 1000:.1f} s: "
                    f"the meter is silent, sample invalid{where}"
                )
                chans.append(raw)
                continue
            self._silent_since[i] = None
            m.max_volts = max(m.max_volts, raw.volts)
            m.max_amps = max(m.max_amps, raw.amps)
            judged, over = self._ranged(i, raw)
            if over is not None:
                problems.append(f"ERROR: {over} appears to be too high for set range{where}")
            chans.append(judged)
        valid = all(c.valid for c in chans)
        u = sum_uncertainty([(c.watts, c.u) for c in chans if c.u is not None]) if valid else None
        if valid and any(c.u is None for c in chans):
            u = None
        sample = Sample(t, tuple(chans), u)
        m.samples.append(sample)
        out.log.append(sample.log_line(m.mark))
        out.console.append(sample.console_line(m.mark))
        out.console.extend(console_line(t, p) for p in problems)
        if not valid:
            return
        if sample.u is None:
            out.console.append(console_line(t, "ERROR: Can't evaluate uncertainty of this sample!"))
        elif sample.u > UNCERTAINTY_LIMIT:
            out.console.append(
                console_line(
                    t,
                    f"WARNING: Uncertainty {100 * sample.u:.2f}%, which is above 1.00% limit for the last sample!",
                )
            )


def identity(version: str, meter: str, source: str) -> str:
    """The Identify reply: wattbench, its version and the meter, never a Yokogawa or a PTDaemon
    version. power-dev's checker reads the first field as the meter model and `version=X-` as the
    PTDaemon version, and rightly refuses both."""
    clean = [_field(x) for x in (meter, source)]
    return f"wattbench,{clean[0]},{clean[1]},version={version}-wattbench,not SPEC PTDaemon"


def _field(text: str) -> str:
    """A value that cannot break the comma-separated reply."""
    return "".join(ch if ch.isprintable() and ch != "," else " " for ch in text)[:80] or "unknown"
