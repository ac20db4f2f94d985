"""The part of SPEC PTDaemon's line protocol that MLCommons' power-dev speaks, as pure functions and a
state machine: no socket, no clock, no file. The server (server.py) feeds it command lines, the time
and the source's readings, and writes out what it returns.

The shapes are those power-dev's server sends and parses (docs/mlperf-power.md lists them):

- one line per message, ending CR LF; a reply is one line, except `RL`, whose first line
  `Last N samples` is followed by N sample lines;
- a sample line is `Time,MM-DD-YYYY HH:MM:SS.fff,Watts,w,Volts,v,Amps,a,PF,pf` (UTC); the `-l` log
  adds `,Mark,<mark>`; a missed sample carries -2 in every quantity, as PTDaemon logs it;
- a console line is `MM-DD-YYYY HH:MM:SS.fff: message`.

`Hello` is answered with the protocol's fixed greeting, because power-dev will not talk to a daemon
that answers otherwise; `Identify` then says truthfully that this is wattbench and which meter it reads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime

GREETING = "Hello, PTDaemon here!"
GO_REPLY = "Starting untimed measurement, maximum 500000 samples at 1000ms with 0 rampup samples"
STOP_REPLY = "Stopping untimed measurement"
NO_MEASUREMENT = "Error: no measurement to stop"
INVALID_PARAMS = "Error: Invalid number of parameters"
UNKNOWN = "Error: Unknown command"
RANGE_CHANGED = "Range {q} changed"
MAX_SAMPLES = 500_000
INTERVAL_MS = 1000
MISSED = -2.0
# A line longer than this is not a command of the protocol; it is refused, not buffered without end.
MAX_LINE = 1024
# PTDaemon's limit for a sample's uncertainty (check.py reads the warning it logs above it).
UNCERTAINTY_LIMIT = 0.01


def stamp(t_ms: int) -> str:
    """UTC time as PTDaemon writes it: MM-DD-YYYY HH:MM:SS.fff."""
    dt = datetime.fromtimestamp(t_ms / 1000.0, tz=UTC)
    return dt.strftime("%m-%d-%Y %H:%M:%S.") + f"{dt.microsecond // 1000:03d}"


def console_line(t_ms: int, message: str) -> str:
    return f"{stamp(t_ms)}: {message}"


@dataclass(frozen=True)
class Reading:
    """One sample of the wattbench source: its UTC time (ms) from the appliance's NTP-disciplined
    clock, W with V, A and PF when the meter gives them, and the relative uncertainty of W
    (0.005 = 0.5 %) when it states one."""

    t_ms: int
    watts: float
    volts: float | None = None
    amps: float | None = None
    pf: float | None = None
    u: float | None = None


@dataclass(frozen=True)
class Sample:
    """One 1 s sample of a measurement: the mean of the source's readings taken in that second,
    stamped with the second's end."""

    t_ms: int
    watts: float
    volts: float
    amps: float
    pf: float
    u: float | None
    readings: int

    @property
    def missed(self) -> bool:
        return self.readings == 0

    def fields(self) -> str:
        return (
            f"Time,{stamp(self.t_ms)},Watts,{self.watts:.6f},Volts,{self.volts:.6f},"
            f"Amps,{self.amps:.6f},PF,{self.pf:.6f}"
        )

    def log_line(self, mark: str) -> str:
        return f"{self.fields()},Mark,{mark}"


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def aggregate(t_ms: int, readings: list[Reading]) -> Sample:
    """The 1 s sample of `readings`; with none, a missed sample (-2 everywhere). A quantity the meter
    does not give is -1, as PTDaemon writes an unknown value. The uncertainty of the mean power is
    the power-weighted mean of the readings' uncertainties: a meter's accuracy class is systematic,
    so it does not shrink by averaging."""
    good = [r for r in readings if math.isfinite(r.watts) and r.watts >= 0]
    if not good:
        return Sample(t_ms, MISSED, MISSED, MISSED, MISSED, None, 0)
    w = sum(r.watts for r in good) / len(good)

    def mean_of(values: list[float | None]) -> float:
        known = [v for v in values if v is not None and math.isfinite(v)]
        m = _mean(known)
        return -1.0 if m is None else m

    volts = mean_of([r.volts for r in good])
    amps = mean_of([r.amps for r in good])
    pf = mean_of([r.pf for r in good])
    known = all(r.u is not None and math.isfinite(r.u) for r in good)
    u = weighted_uncertainty([(r.watts, r.u or 0.0) for r in good]) if known else None
    return Sample(t_ms, w, volts, amps, pf, u, len(good))


def weighted_uncertainty(pairs: list[tuple[float, float]]) -> float:
    """The relative uncertainty of a mean power from (watts, relative uncertainty) pairs: their
    power-weighted mean (a meter's accuracy class is systematic, so it does not shrink by averaging);
    the largest when no power was drawn."""
    total = sum(w for w, _ in pairs)
    if total > 0:
        return sum(w * u for w, u in pairs) / total
    return max(u for _, u in pairs)


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
        # RL: the unread samples. RL,N: the last N samples. More parameters (the multichannel
        # RL,*,*) are not for a single-channel source, and power-dev then falls back to RL.
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

    identity is the Identify reply. silence_s: a source that has sent nothing for this long is
    silent, and a command that needs its data gets an error reply instead of stale numbers.

    Readings are sorted into the measurement's seconds by their own timestamps, so a sample holds what
    the meter measured in that second whenever the batch carrying it arrived. A second is closed
    lag_ms after its end: a reading that arrives later than that is not counted, and a second with
    none is a missed sample. lag_ms must exceed the appliance's batch interval and network delay."""

    def __init__(self, identity: str, source: str, silence_s: float = 5.0, lag_ms: int = 2000) -> None:
        self.identity = identity
        self.source = source
        self.silence_s = silence_s
        self.lag_ms = lag_ms
        self.pending: list[Reading] = []
        self.volts_range: float | None = None  # None: auto
        self.amps_range: float | None = None
        self.measurement: Measurement | None = None
        self.next_tick_ms: int | None = None

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
            rng = None if value == "Auto" else parse_range(value)
            if quantity == "V":
                self.volts_range = rng
            else:
                self.amps_range = rng
            out.reply.append(RANGE_CHANGED.format(q=quantity))
            shown = "Auto" if rng is None else f"{rng:.6f}"
            out.console.append(console_line(now_ms, f"Range {quantity} set to {shown}"))
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
            out.reply.extend(self._rl(int(cmd.args[0]) if cmd.args else None))
        return out

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
        """Ranges,<A auto>,<A range>,<V auto>,<V range>. With auto ranging on, the range shown is the
        highest reading of the current (or last) measurement, -1 before there is one."""
        m = self.measurement

        def part(fixed: float | None, seen: float) -> str:
            if fixed is not None:
                return f"0,{fixed:.6f}"
            return f"1,{seen:.6f}" if seen > 0 else "1,-1.000000"

        max_a = m.max_amps if m is not None else -1.0
        max_v = m.max_volts if m is not None else -1.0
        return f"Ranges,{part(self.amps_range, max_a)},{part(self.volts_range, max_v)}"

    def _valid(self) -> list[Sample]:
        m = self.measurement
        return [] if m is None else [s for s in m.samples if not s.missed]

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
        """Watts,<mean>,<min>,<max>,<samples>,<missed samples> of the current (or last) measurement."""
        m = self._readable(silent_s)
        if isinstance(m, str):
            return m
        valid = self._valid()
        missed = len(m.samples) - len(valid)
        if not valid:
            return f"Watts,-1.000000,-1.000000,-1.000000,0,{missed}"
        ws = [s.watts for s in valid]
        return f"Watts,{sum(ws) / len(ws):.6f},{min(ws):.6f},{max(ws):.6f},{len(ws)},{missed}"

    def _uncertainty(self, silent_s: float | None) -> str:
        """Uncertainty,<mean %>,<max %>,<samples without a stated uncertainty>: the relative
        uncertainty of the measurement's mean power and the largest of one sample, in percent."""
        m = self._readable(silent_s)
        if isinstance(m, str):
            return m
        valid = self._valid()
        known = [s for s in valid if s.u is not None]
        unknown = len(valid) - len(known)
        if not known:
            return f"Uncertainty,-1.000000,-1.000000,{unknown}"
        pairs = [(s.watts, s.u or 0.0) for s in known]
        mean = weighted_uncertainty(pairs)
        return f"Uncertainty,{100 * mean:.6f},{100 * max(u for _, u in pairs):.6f},{unknown}"

    def _rl(self, last: int | None) -> list[str]:
        m = self.measurement
        if m is None:
            return ["Last 0 samples"]
        if last is None:
            rows = m.samples[m.unread :]
            m.unread = len(m.samples)
        else:
            rows = m.samples[-last:]
        return [f"Last {len(rows)} samples", *(s.fields() for s in rows)]

    # -- sampling

    @property
    def running(self) -> bool:
        return self.measurement is not None and self.measurement.running

    def add(self, readings: list[Reading]) -> None:
        """Readings that arrived; those from before the measurement began are not part of it."""
        m = self.measurement
        if m is None or not m.running:
            return
        self.pending.extend(r for r in readings if r.t_ms > m.started_ms)

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
                self._sample(m, aggregate(end, window), out)
        return out

    def _sample(self, m: Measurement, sample: Sample, out: Output) -> None:
        t = sample.t_ms
        m.samples.append(sample)
        out.log.append(sample.log_line(m.mark))
        out.console.append(f"{stamp(t)},{sample.log_line(m.mark).split(',', 2)[2]}")
        if sample.missed:
            out.console.append(console_line(t, f"WARNING: Missed 1 samples from {self.source}"))
            return
        m.max_volts = max(m.max_volts, sample.volts)
        m.max_amps = max(m.max_amps, sample.amps)
        if self.amps_range is not None and sample.amps > self.amps_range:
            out.console.append(
                console_line(t, f"WARNING: Amps {sample.amps:.6f} above the set range {self.amps_range:.6f}")
            )
        if self.volts_range is not None and sample.volts > self.volts_range:
            out.console.append(
                console_line(
                    t, f"WARNING: Volts {sample.volts:.6f} above the set range {self.volts_range:.6f}"
                )
            )
        if sample.u is not None and sample.u > UNCERTAINTY_LIMIT:
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
