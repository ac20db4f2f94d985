"""The phase plan of a sweep, as pure data.

A SPECpower_ssj2008-style sweep is a few calibration intervals at full speed, then target loads from
100 % down to 10 % of the calibrated throughput, then active idle. Every interval has the same shape:
a pre-measurement ramp, the measurement window, a post-measurement ramp, and a gap before the next one.
Nothing here sleeps or talks to anything; the driver walks the plan.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction

from . import FieldError, plain_number

# SPECpower_ssj2008 defaults. The measurement interval is the published 240 s; the ramps and the gap are
# the usual values but are not confirmed by the run rules, so every one of them is a parameter.
DEFAULT_CALIBRATIONS = 3
MIN_CALIBRATIONS = 3
MAX_CALIBRATIONS = 10
DEFAULT_LEVELS = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1)
DEFAULT_CALIBRATION_USE = 2  # calibrated throughput = mean of the last 2 calibration intervals
DEFAULT_COPIES = (1, 2, 4, 6, 8)

KINDS = ("calibration", "target", "idle", "concurrency")
_PHASE_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,31}$")


# The longest part of an interval: SPECpower's is 240 s, and no benchmark's level is measured for more
# than a day.
MAX_PART_S = 86_400.0


@dataclass(frozen=True)
class Timing:
    """Seconds spent in each part of one interval."""

    pre_s: float = 30.0
    measure_s: float = 240.0
    post_s: float = 30.0
    gap_s: float = 10.0

    def __post_init__(self) -> None:
        for name in ("pre_s", "measure_s", "post_s", "gap_s"):
            value = getattr(self, name)
            if not (value >= 0.0) or value == float("inf"):
                raise FieldError(name, f"must be a finite number >= 0, got {value!r}")
            if value > MAX_PART_S:
                # A mistyped exponent or unit, found before the load starts rather than never.
                raise FieldError(name, f"must be at most {MAX_PART_S:g} s (a day), got {value!r}")
        if self.measure_s <= 0:
            raise FieldError("measure_s", f"must be > 0, got {self.measure_s!r}")

    @property
    def interval_s(self) -> float:
        return self.pre_s + self.measure_s + self.post_s


@dataclass(frozen=True)
class Phase:
    """One interval of the sweep.

    target is the load as a fraction of calibrated throughput (None while calibrating, 0 at idle);
    copies is the job count in concurrency mode. For a concurrency phase, timing.measure_s is the
    longest the jobs may take: the window closes when the last copy finishes.
    """

    name: str
    kind: str
    timing: Timing
    target: float | None = None
    copies: int | None = None

    def __post_init__(self) -> None:
        if not _PHASE_NAME.match(self.name):
            raise ValueError(f"bad phase name {self.name!r}")
        if self.kind not in KINDS:
            raise ValueError(f"bad phase kind {self.kind!r}")
        if self.kind == "target" and (self.target is None or not 0.0 < self.target <= 1.0):
            raise ValueError(f"target phase {self.name} needs a target load in (0, 1]")
        if self.kind == "concurrency" and (self.copies is None or self.copies < 1):
            raise ValueError(f"concurrency phase {self.name} needs copies >= 1")


@dataclass(frozen=True)
class Plan:
    phases: tuple[Phase, ...]
    calibration_use: int = DEFAULT_CALIBRATION_USE

    def __post_init__(self) -> None:
        names = [p.name for p in self.phases]
        if len(set(names)) != len(names):
            raise ValueError(f"phase names repeat: {names}")
        if self.calibrations and not 1 <= self.calibration_use <= len(self.calibrations):
            raise ValueError("calibration_use must be between 1 and the number of calibration intervals")
        if any(p.kind == "target" for p in self.phases) and not self.calibrations:
            raise ValueError("target loads need calibration intervals before them")

    @property
    def calibrations(self) -> tuple[Phase, ...]:
        return tuple(p for p in self.phases if p.kind == "calibration")

    @property
    def scored(self) -> tuple[Phase, ...]:
        """The phases that become rows of the result: target loads, concurrency levels, active idle."""
        return tuple(p for p in self.phases if p.kind != "calibration")

    def duration_s(self) -> float:
        """Planned length of the whole run (concurrency windows counted at their maximum)."""
        total = sum(p.timing.interval_s for p in self.phases)
        total += sum(p.timing.gap_s for p in self.phases[:-1])
        return total

    def remaining_s(self, index: int, elapsed_in_phase: float) -> float:
        """Planned time left when `elapsed_in_phase` seconds into phase number `index`."""
        rest = self.phases[index:]
        left = sum(p.timing.interval_s for p in rest) + sum(p.timing.gap_s for p in rest[:-1])
        return max(0.0, left - elapsed_in_phase)

    def offsets(self) -> list[tuple[Phase, float, float, float, float]]:
        """(phase, phase_start, measure_start, measure_end, phase_end) in seconds from the run start,
        assuming every window runs its planned length."""
        out = []
        t = 0.0
        for i, p in enumerate(self.phases):
            ms = t + p.timing.pre_s
            me = ms + p.timing.measure_s
            pe = me + p.timing.post_s
            out.append((p, t, ms, me, pe))
            t = pe + (p.timing.gap_s if i < len(self.phases) - 1 else 0.0)
        return out


def level_name(target: float) -> str:
    """l100, l90, ... l12.5 for a fractional target."""
    pct = round(target * 100.0, 6)
    text = f"{pct:.6f}".rstrip("0").rstrip(".")
    return f"l{text}"


def specpower_plan(
    calibrations: int = DEFAULT_CALIBRATIONS,
    levels: Sequence[float] = DEFAULT_LEVELS,
    idle: bool = True,
    timing: Timing | None = None,
    calibration_use: int = DEFAULT_CALIBRATION_USE,
) -> Plan:
    """Calibration intervals, target loads (fractions, in the order given) and active idle."""
    _whole("calibrations", calibrations)
    _whole("calibration_use", calibration_use)
    if not MIN_CALIBRATIONS <= calibrations <= MAX_CALIBRATIONS:
        raise FieldError(
            "calibrations", f"must be {MIN_CALIBRATIONS}..{MAX_CALIBRATIONS} intervals, got {calibrations}"
        )
    # Never clamped: a calibrated throughput averaged over fewer intervals than asked for is not the
    # figure the user meant to compare against.
    if not 1 <= calibration_use <= calibrations:
        raise FieldError(
            "calibration_use", f"must be 1..{calibrations} (the calibration intervals), got {calibration_use}"
        )
    if not levels:
        raise ValueError("at least one target load is needed")
    for x in levels:
        if not 0.0 < x <= 1.0:
            raise ValueError(f"target load {x!r} is outside (0, 1] of the calibrated throughput")
    timing = timing or Timing()
    phases = [Phase(f"cal{i + 1}", "calibration", timing) for i in range(calibrations)]
    phases += [Phase(level_name(x), "target", timing, target=float(x)) for x in levels]
    if idle:
        phases.append(Phase("idle", "idle", timing, target=0.0))
    return Plan(tuple(phases), calibration_use=calibration_use)


def _whole(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise FieldError(name, f"must be a whole number, got {value!r}")


def concurrency_plan(
    copies: Sequence[int] = DEFAULT_COPIES, idle: bool = True, timing: Timing | None = None
) -> Plan:
    """One phase per copy count, then active idle. timing.measure_s caps how long the copies may run."""
    if not copies:
        raise ValueError("at least one copy count is needed")
    timing = timing or Timing()
    phases = [Phase(f"c{n}", "concurrency", timing, copies=int(n)) for n in copies]
    if idle:
        phases.append(Phase("idle", "idle", timing, target=0.0))
    return Plan(tuple(phases), calibration_use=1)


def with_idle_timing(plan: Plan, timing: Timing) -> Plan:
    """The same plan with a different timing for the idle phase (a concurrency run's idle window
    should be a fixed length, not the jobs' cap)."""
    return replace(
        plan, phases=tuple(replace(p, timing=timing) if p.kind == "idle" else p for p in plan.phases)
    )


def parse_levels(text: str) -> tuple[float, ...]:
    """ "100,90,80" or "1.0,0.9" or "100%,50%" -> fractions. Values above 1 are percentages."""
    out = []
    parts = [p.strip() for p in text.replace(";", ",").split(",")]
    if parts and not parts[-1]:
        parts.pop()  # "100,50," ends a list; it leaves nothing out
    for part in parts:
        if not part:
            # "100,,50": most likely a level deleted by mistake, which would run as never asked for
            raise ValueError(f"{text!r} has an empty entry")
        pct = part.endswith("%")
        try:
            value = float(plain_number(part.rstrip("%")))
        except ValueError:
            raise ValueError(f"{text!r} is not a list of numbers") from None
        frac = value / 100.0 if pct or value > 1.0 else value
        if not 0.0 < frac <= 1.0:
            raise ValueError(f"target load {part!r} is outside (0 %, 100 %]")
        # Each load is one phase, named by its percentage: the same one twice cannot be told apart.
        if any(level_name(f) == level_name(frac) for f in out):
            raise ValueError(f"target load {part!r} is {level_name(frac)[1:]} % again")
        out.append(frac)
    if not out:
        raise ValueError("no target loads given")
    unmarked = [float(p) for p in parts if not p.endswith("%")]
    if any(v > 1.0 for v in unmarked) and any(v <= 1.0 for v in unmarked):
        # "10,5,1": 1 is 100 % as a fraction, and surely 1 % in this list
        raise ValueError(
            f"{text!r} mixes percentages and fractions (above 1 is a percentage, up to 1 a fraction): "
            "mark percentages with %, or write every load one way"
        )
    return tuple(out)


def copies_problem(counts: Sequence[object]) -> str | None:
    """Why counts cannot be the copy counts of a concurrency sweep, or None. Each count is one level,
    named by it (c1, c4), so a count given twice would be the same level again."""
    if not counts or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in counts):
        return "copy counts must be integers >= 1"
    for i, n in enumerate(counts):
        if n in counts[:i]:
            return f"copy count {n} is given twice: each count is one level"
    return None


def parse_copies(text: str) -> tuple[int, ...]:
    try:
        out = tuple(int(plain_number(p)) for p in text.replace(";", ",").split(",") if p.strip())
    except ValueError:
        raise ValueError(f"copy counts must be integers >= 1: {text!r}") from None
    problem = copies_problem(out)
    if problem:
        raise ValueError(f"{problem} ({text})")
    return out


def calibrated_rate(rates: Iterable[float], use_last: int = DEFAULT_CALIBRATION_USE) -> float:
    """Mean of the last `use_last` calibration rates: the first interval usually runs low (warm-up)."""
    if isinstance(use_last, bool) or not isinstance(use_last, int) or use_last < 1:
        raise ValueError(f"use_last must be a whole number >= 1, got {use_last!r}")
    values = [float(r) for r in rates]
    if not values:
        raise ValueError("no calibration intervals measured")
    tail = values[-min(use_last, len(values)) :]
    return sum(tail) / len(tail)


def calibration_spread(rates: Iterable[float], use_last: int = DEFAULT_CALIBRATION_USE) -> float | None:
    """How far apart the calibration rates that make the calibrated throughput are: (max - min) / mean
    of the last `use_last`. A machine whose speed moves by more than the load tolerance between them (a
    busy host under a virtual machine, frequency scaling, thermal limits) cannot hold a level within that
    tolerance however well the workload is paced, and a failed load check says so. None from fewer than
    two intervals."""
    values = [float(r) for r in rates]
    tail = values[-min(use_last, len(values)) :] if values else []
    if len(tail) < 2:
        return None
    mean = sum(tail) / len(tail)
    return (max(tail) - min(tail)) / mean if mean > 0 else None


# The seed study of cluster load: 1/8 to the whole cluster, as node fractions.
DEFAULT_CLUSTER_LEVELS = "1/8,1/4,1/2,3/4,1"


def parse_fractions(text: str) -> tuple[Fraction, ...]:
    """`1/8,1/4,0.5,1`: the levels as fractions of the cluster, each in (0, 1]."""
    out = []
    for part in str(text).split(","):
        part = part.strip()
        try:
            f = Fraction(part)
        except (ValueError, ZeroDivisionError):
            raise ValueError(f"bad cluster fraction {part!r}: give fractions such as 1/8 or 0.25") from None
        if not 0 < f <= 1:
            raise ValueError(f"cluster fraction {part} is not in (0, 1]")
        out.append(f)
    if not out:
        raise ValueError("no cluster fractions")
    return tuple(out)


def jobs_per_level(fractions: Sequence[Fraction], nodes: int) -> tuple[int, ...]:
    """Each level's job count, a node's worth of work per job: round(fraction × nodes), at least 1;
    levels that come out alike on a small cluster are swept once. Rounds halves up, so 1/8 of 4 nodes
    is 1 job, not 0."""
    counts: list[int] = []
    for f in fractions:
        n = max(1, int(f * nodes + Fraction(1, 2)))
        if n not in counts:
            counts.append(n)
    return tuple(counts)
