"""Validity checks of a run. Pure: every check gets a pass or a fail with its reason, and a run that fails
any of them is invalid, shown as such and never hidden.

Limits follow SPECpower_ssj2008 and MLPerf Power; the ones marked unconfirmed in the methodology are
defaults of Limits, not constants.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from . import FieldError
from .align import WindowPower
from .conformance import Statement
from .score import LevelScore

MAX_CHECKS = 256  # the result schema's limit
REQUIRE = ("none", "eehpc-l1", "eehpc-l2", "eehpc-l3", "spec")


# A server's inlet air: below freezing or above 50 °C no data-centre class allows, so a minimum outside
# this range is a typo or a unit mix-up, not a stricter or looser rule.
INLET_RANGE_C = (0.0, 50.0)


def _in_range(name: str, value: float, low: float, high: float, what: str) -> None:
    """value strictly between low and high, and finite."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FieldError(name, f"must be a number, got {value!r}")
    if not (math.isfinite(value) and low < value < high):
        raise FieldError(name, f"must be {what}, got {value!r}")


@dataclass(frozen=True)
class Limits:
    load_tolerance: float = 0.02  # unconfirmed
    # "relative": |actual/target - 1| <= tolerance; "points": |actual - target| <= tolerance, in
    # fractions of calibrated throughput.
    load_mode: str = "relative"
    min_rate_hz: float = 1.0
    min_inlet_c: float = 20.0  # unconfirmed
    require_inlet: bool = True
    # None: no pass/fail on accuracy; the run's standard statement (conformance.py) says which
    # standard's accuracy it meets. A number makes it a check of every window (unconfirmed: 1 %).
    max_uncertainty: float | None = None
    max_skew_ms: float = 400.0
    # The standard the measurement must meet (conformance.py), or "none": only stated.
    require: str = "none"
    # Nodes in the system measured: with it the statement judges the share of the system metered
    # (EE HPC WG); None leaves that share to the operator.
    system_nodes: int | None = None

    def __post_init__(self) -> None:
        if self.require not in REQUIRE:
            raise FieldError("require", f"must be one of {', '.join(REQUIRE)}, got {self.require!r}")
        if self.load_mode not in ("relative", "points"):
            raise FieldError("load_mode", f"is 'relative' or 'points', not {self.load_mode!r}")
        # A limit out of these ranges either fails every run or passes every run; both would make the
        # check say nothing, so they are refused before anything is measured.
        _in_range("load_tolerance", self.load_tolerance, 0.0, 1.0, "a fraction above 0 and below 1")
        _in_range("min_rate_hz", self.min_rate_hz, 0.0, math.inf, "readings per second above 0")
        if self.max_uncertainty is not None:
            _in_range("max_uncertainty", self.max_uncertainty, 0.0, 1.0, "a fraction above 0 and below 1")
        _in_range("max_skew_ms", self.max_skew_ms, 0.0, math.inf, "milliseconds above 0")
        if self.system_nodes is not None and not (
            isinstance(self.system_nodes, int) and 1 <= self.system_nodes <= 1_000_000
        ):
            raise FieldError("system_nodes", f"must be a whole number 1..1000000, got {self.system_nodes!r}")
        lo, hi = INLET_RANGE_C
        if not (math.isfinite(self.min_inlet_c) and lo <= self.min_inlet_c <= hi):
            raise FieldError("min_inlet_c", f"must be {lo:g}..{hi:g} °C, got {self.min_inlet_c!r}")


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    reason: str = ""
    phase: str | None = None

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"name": self.name, "ok": self.ok}
        if self.reason:
            out["reason"] = self.reason[:500]
        if self.phase:
            out["phase"] = self.phase[:32]
        return out


def _pct(x: float) -> str:
    return f"{x * 100:.2f}%"


def check_load(level: LevelScore, limits: Limits, calibration_spread: float | None = None) -> Check | None:
    """Actual load against the target, for target loads only. A failure names the calibration spread
    (sweep.plan.calibration_spread) when it is beyond the tolerance itself: then the machine's own speed
    moved, and pacing could not have held the level. A level that fell short names the share of its
    arrivals it did not serve, where the workload counted them (LevelScore.unserved)."""
    if level.kind != "target" or level.target is None:
        return None
    name = "load_within_2pct" if limits.load_tolerance == 0.02 else "load_within_tolerance"
    if level.actual is None:
        return Check(name, False, "no calibrated throughput to compare with", level.phase)
    if limits.load_mode == "relative":
        dev = level.actual / level.target - 1.0
    else:
        dev = level.actual - level.target
    ok = abs(dev) <= limits.load_tolerance + 1e-12
    unit = "of target" if limits.load_mode == "relative" else "points"
    reason = f"actual {_pct(level.actual)} vs target {_pct(level.target)} ({dev * 100:+.2f}% {unit}, limit ±{limits.load_tolerance * 100:g}%)"
    if not ok and calibration_spread is not None and calibration_spread > limits.load_tolerance:
        reason += f"; calibration intervals differed by {calibration_spread * 100:.1f}%"
    share = level.behind_share
    if not ok and share is not None:
        # The window's count is its arrivals less the unserved ones: the machine did less than its
        # calibrated throughput in this window, which no pacing can make up.
        reason += (
            f"; {share * 100:.1f}% of its arrivals were not served in the window: the machine fell behind"
        )
    return Check(name, ok, reason, level.phase)


def required_readings(duration_s: float, min_rate_hz: float) -> int:
    """Readings a window must hold: one per whole reading period (one per whole second at 1/s), less
    the one that the window's edges can cost a meter reading exactly at the minimum rate (a reading on
    an edge is not inside), and never fewer than one: a window without a reading has no power."""
    return max(1, math.floor(duration_s * min_rate_hz + 1e-9) - 1)


def check_sample_rate(wp: WindowPower, limits: Limits) -> Check:
    """At least min_rate_hz usable samples per second on every power channel (required_readings)."""
    phase = wp.window.phase
    if not wp.power:
        return Check("sample_rate", False, "no power channel", phase)
    duration = wp.window.duration_s
    need = required_readings(duration, limits.min_rate_hz)
    per_s = max(duration, 1e-9)
    bad = []
    for c in wp.power:
        if c.n < need:
            bad.append(f"{c.spec.key} {c.n / per_s:.2f}/s ({c.n} readings in {duration:.3g} s)")
    if bad:
        return Check(
            "sample_rate",
            False,
            f"below {limits.min_rate_hz:g}/s, {need} needed: " + ", ".join(bad[:8]),
            phase,
        )
    lowest = min(c.n for c in wp.power)
    return Check("sample_rate", True, f"lowest {lowest / per_s:.2f}/s ({lowest} readings)", phase)


def check_gaps(wp: WindowPower) -> Check:
    phase = wp.window.phase
    gaps = wp.gaps
    if not gaps:
        return Check("no_gaps", True, "", phase)
    parts = []
    for g in gaps[:6]:
        if g.kind == "empty":
            parts.append(f"{g.dev}/{g.ch} no samples in window")
        else:
            parts.append(f"{g.dev}/{g.ch} {g.kind} {g.duration_ms / 1000:.2f}s ({g.missing} missing)")
    more = f" and {len(gaps) - 6} more" if len(gaps) > 6 else ""
    return Check("no_gaps", False, "; ".join(parts) + more, phase)


def check_inlet(wp: WindowPower, limits: Limits) -> Check | None:
    phase = wp.window.phase
    t = wp.inlet_c
    if not math.isfinite(t):
        if not limits.require_inlet:
            return None
        return Check("inlet_temp", False, "no inlet temperature measured", phase)
    ok = t >= limits.min_inlet_c
    return Check("inlet_temp", ok, f"mean inlet {t:.1f} °C (minimum {limits.min_inlet_c:g} °C)", phase)


def check_uncertainty(wp: WindowPower, limits: Limits) -> Check | None:
    """Only where a limit is set and the meter reports an uncertainty (the u field)."""
    u = wp.uncertainty
    if limits.max_uncertainty is None or not math.isfinite(u):
        return None
    ok = u <= limits.max_uncertainty + 1e-12
    return Check(
        "power_uncertainty", ok, f"{u * 100:.2f}% (limit {limits.max_uncertainty * 100:g}%)", wp.window.phase
    )


def check_stable(wp: WindowPower) -> Check:
    """No auto-ranging and no clock step inside a measurement window.

    A range change mid-window mixes two accuracy regimes, and the rules forbid it; a clock step means
    the window's samples were stamped on two different clocks, so the window no longer covers what
    the workload did. Both are flagged by the appliance on the samples themselves."""
    phase = wp.window.phase
    parts = []
    for c in wp.channels:
        if c.range_changes:
            parts.append(f"{c.spec.dev}/{c.spec.ch}: {c.range_changes} auto-ranged sample(s)")
        if c.clock_steps:
            parts.append(f"{c.spec.dev}/{c.spec.ch}: clock stepped ({c.clock_steps} flagged sample(s))")
        elif c.clock_uncertain:
            parts.append(
                f"{c.spec.dev}/{c.spec.ch}: the device clock stepped in or next to the window and the step "
                "could not be placed, so which offset applies is unknown"
            )
    if parts:
        return Check("stable_range_and_clock", False, "; ".join(parts[:8]), phase)
    return Check("stable_range_and_clock", True, "", phase)


def check_skew(
    offsets_ms: Mapping[str, float], limits: Limits, steps: Mapping[str, int] | None = None
) -> Check:
    """Clock offset of every device against the sweep host: the largest over the run when a device's
    clock stepped (steps counts them). Corrected in alignment, but a clock that far off means the device
    was not synchronised as the rules require."""
    if not offsets_ms:
        return Check("clock_skew", True, "no offsets measured; device clocks taken as the host's")
    steps = steps or {}

    def stepped(d: str) -> str:
        n = steps.get(d, 0)
        return f" (clock stepped {n} time{'s' if n != 1 else ''} during the run)" if n else ""

    worst_dev = max(offsets_ms, key=lambda d: abs(offsets_ms[d]))
    worst = offsets_ms[worst_dev]
    bad = {d: o for d, o in offsets_ms.items() if abs(o) > limits.max_skew_ms}
    if bad:
        text = ", ".join(f"{d} {o:+.0f} ms{stepped(d)}" for d, o in sorted(bad.items()))
        return Check("clock_skew", False, f"above {limits.max_skew_ms:g} ms: {text}")
    return Check("clock_skew", True, f"largest {worst_dev} {worst:+.0f} ms{stepped(worst_dev)}")


def check_exclusive(sharing: Sequence[str]) -> Check | None:
    """Another run drove one of this run's power channels while it ran (sharing: each such run, said),
    or None: the meter's watts during the overlap hold both runs' load, so neither is the server's
    power at its own levels. Two benches writing into one store at once each meter their own server and
    share nothing."""
    if not sharing:
        return None
    return Check("exclusive", False, "; ".join(sharing))


def check_channels(aligned: Sequence[WindowPower], problems: Sequence[str] = ()) -> Check:
    """The power channels summed are the server's, all of them, all along: a channel refused when it
    was chosen (problems) or one that has no usable sample in some window (a device that fell silent)
    fails the run by name, rather than leaving a smaller sum."""
    silent: dict[str, list[str]] = {}
    summed: list[str] = []
    for wp in aligned:
        for c in wp.power:
            if c.spec.key not in summed:
                summed.append(c.spec.key)
            if c.n == 0:
                silent.setdefault(c.spec.key, []).append(wp.window.phase)
    parts = list(problems)
    for key, phases in silent.items():
        more = f" and {len(phases) - 6} more" if len(phases) > 6 else ""
        parts.append(f"{key} silent (no samples) in {', '.join(phases[:6])}{more}")
    if not summed and aligned and not parts:
        parts.append("no power channel")
    if parts:
        return Check("channels", False, "; ".join(parts))
    return Check("channels", True, "summed " + (", ".join(summed) or "nothing: no window was scored"))


def check_complete(planned: Iterable[str], measured: Iterable[str], interrupted: str | None = None) -> Check:
    planned = list(planned)
    have = set(measured)
    if interrupted:
        return Check("complete", False, interrupted)
    missing = [p for p in planned if p not in have]
    if missing:
        return Check("complete", False, "no result for " + ", ".join(missing))
    return Check("complete", True, f"{len(planned)} levels measured")


def check_run(
    levels: Sequence[LevelScore],
    aligned: Sequence[WindowPower],
    offsets_ms: Mapping[str, float],
    planned: Sequence[str],
    interrupted: str | None = None,
    limits: Limits | None = None,
    clock_steps: Mapping[str, int] | None = None,
    calibration_spread: float | None = None,
) -> list[Check]:
    """Every check of a run: completeness and clock skew once, the rest per scored window."""
    limits = limits or Limits()
    checks: list[Check] = [check_complete(planned, [lv.phase for lv in levels if lv.has_power], interrupted)]
    checks.append(check_skew(offsets_ms, limits, clock_steps))
    by_phase = {wp.window.phase: wp for wp in aligned}
    for lv in levels:
        c = check_load(lv, limits, calibration_spread)
        if c:
            checks.append(c)
        wp = by_phase.get(lv.phase)
        if wp is None:
            continue
        if not wp.power:
            checks.append(Check("sample_rate", False, "no power channel", lv.phase))
            continue
        checks.append(check_sample_rate(wp, limits))
        checks.append(check_gaps(wp))
        checks.append(check_stable(wp))
        for c in (check_inlet(wp, limits), check_uncertainty(wp, limits)):
            if c:
                checks.append(c)
    return fit(checks)


def check_standard(statement: Statement, limits: Limits) -> Check | None:
    """The standard the run must meet (--require), against the one its measurement meets."""
    need = limits.require
    if need == "none":
        return None
    if need == "spec":
        ok = statement.spec
        why = "; ".join(statement.spec_reasons)
    else:
        want = int(need[-1])
        ok = statement.level >= want
        why = "; ".join(statement.level_reasons)
    reason = f"required {need}; measured as {statement.short}"
    if not ok and why:
        reason += f" ({why})"
    return Check("standard", ok, reason)


def fit(checks: list[Check], limit: int = MAX_CHECKS) -> list[Check]:
    """Keep every failure and fold passes of the same name into one line when the list is too long."""
    if len(checks) <= limit:
        return checks
    failed = [c for c in checks if not c.ok]
    passed: dict[str, int] = {}
    for c in checks:
        if c.ok:
            passed[c.name] = passed.get(c.name, 0) + 1
    out = failed + [Check(name, True, f"passed in {n} windows") for name, n in passed.items()]
    if len(out) > limit:
        out = [
            *out[: limit - 1],
            Check("more_failures", False, f"{len(out) - limit + 1} further failures omitted"),
        ]
    return out


def is_valid(checks: Iterable[Check]) -> bool:
    return all(c.ok for c in checks)
