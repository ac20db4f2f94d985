"""Which standard a run's power measurement meets: SPECpower/SERT's analyzer rules and the EE HPC WG
levels 1 to 3. Pure: it reads the channels the run summed (their metadata) and what alignment found in
each window, and states the best the measurement can claim, with the reason it is not the next one.

The statement is about the measurement, not the workload: a run may be VALID (its levels are right for
what was measured) as EE HPC WG Level 1 and still not be comparable with SPECpower results. The rules
(docs/methodology.md, ../shared/methodology.md):

- SPECpower/SERT analyzer: at most 1 % uncertainty of the power (the channels' accuracy weighted by
  their power, as the power_uncertainty check weighs it, since meter errors are systematic), at least
  one independent reading a second, at least two of V, A and PF measured beside W, and 240 s
  measurement windows;
- EE HPC WG: the meters' combined error (root sum of squares of each channel's error in watts, which
  is each error divided by the square root of their number when they are alike) at most 5 % (Level 1),
  2 % (Level 2) or 1 % (Level 3), and with several meters each within 3 %; at least one reading a second
  and a reading interval of at most a tenth of the shortest window; windows (core phases) of at least
  one minute; every window covered; Level 2 adds at least 10 readings per window and a measured idle;
  Level 3 adds an energy counter integrated by the meter itself (Wh) on every power channel.

The share of the system measured (EE HPC WG): given the number of nodes in the system
(`--system-nodes`), the nodes the summed channels belong to are the metered ones, and `coverage_reasons`
applies the methodology's fractions: Level 1 the whole system, or at least 40 kW, or at least the largest
of 2 kW, a tenth of the system and 15 nodes; Level 2 at least the largest of an eighth of the system,
10 kW and 15 nodes; Level 3 the whole system. Without the system's size the share is left to the
operator, as is that an analyzer is on SPEC's accepted list; both are said in the docs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from .align import ChannelSpec, ChannelWindow, WindowPower

SPEC_ACC = 0.01
SPEC_WINDOW_S = 240.0
SPEC_OTHER_QUANTITIES = ("V", "A", "PF")  # at least two of them beside W
LEVEL_ACC = {1: 0.05, 2: 0.02, 3: 0.01}
LEVEL_EACH_ACC = 0.03  # each meter's limit when there are several
LEVEL_WINDOW_S = 60.0
LEVEL_INTERVAL_SHARE = 0.1  # the longest reading interval, as a share of the shortest window
LEVEL2_READINGS = 10
MIN_RATE_HZ = 1.0


# The share of the system each level must measure (EE HPC WG power measurement methodology).
LEVEL1_ENOUGH_W = 40_000.0  # at Level 1 this much measured power suffices on its own
LEVEL_MIN_W = {1: 2_000.0, 2: 10_000.0}
LEVEL_MIN_FRACTION = {1: 1 / 10, 2: 1 / 8}
LEVEL_MIN_NODES = 15


@dataclass(frozen=True)
class Coverage:
    """How much of the system the run metered: nodes in the system, nodes measured, and the mean
    power of the measured nodes together over the scored windows."""

    nodes: int
    metered: int
    metered_W: float


def coverage_reasons(level: int, cov: Coverage) -> list[str]:
    """Why the metered share of the system is too small for the level; [] when it is enough."""
    if cov.metered >= cov.nodes:
        return []
    share = f"{cov.metered} of {cov.nodes} nodes metered ({cov.metered_W / 1000:.3g} kW)"
    if level >= 3:
        return [f"{share}; Level 3 measures the whole system"]
    if level == 1 and cov.metered_W >= LEVEL1_ENOUGH_W:
        return []
    need_nodes = min(max(math.ceil(cov.nodes * LEVEL_MIN_FRACTION[level] - 1e-9), LEVEL_MIN_NODES), cov.nodes)
    short = []
    if cov.metered < need_nodes:
        short.append(f"{need_nodes} nodes")
    if cov.metered_W < LEVEL_MIN_W[level]:
        short.append(f"{LEVEL_MIN_W[level] / 1000:g} kW")
    if not short:
        return []
    rule = (
        "the whole system, 40 kW, or the largest of 2 kW, a tenth of the system and 15 nodes"
        if level == 1
        else "the largest of an eighth of the system, 10 kW and 15 nodes"
    )
    return [f"{share}; Level {level} needs {' and '.join(short)} ({rule})"]


@dataclass(frozen=True)
class ChannelClass:
    """One summed channel as the statement sees it."""

    key: str
    acc: float | None  # relative accuracy of W: the metadata's, else the samples' mean u
    interval_s: float | None  # the longest of the sampling interval and the source's update period
    watts: float  # mean power over the scored windows
    quantities: tuple[str, ...] | None
    gapped: bool  # some window was not fully covered


def short_statement(level: int, spec: bool) -> str:
    """The standard a measurement meets, in a few words: 'EE HPC WG Level 1, not SPEC-comparable'."""
    lvl = f"EE HPC WG Level {level}" if level else "no EE HPC WG level"
    return f"{lvl}, {'SPEC-comparable' if spec else 'not SPEC-comparable'}"


@dataclass(frozen=True)
class Statement:
    spec: bool
    level: int  # EE HPC WG level met, 0 for none
    spec_reasons: list[str] = field(default_factory=list)  # why not SPEC-comparable
    level_reasons: list[str] = field(default_factory=list)  # why not the next level
    acc: float | None = None  # combined relative error (root sum of squares)

    @property
    def short(self) -> str:
        """For the verdict line: 'EE HPC WG Level 1, not SPEC-comparable'."""
        return short_statement(self.level, self.spec)

    @property
    def text(self) -> str:
        """The full statement, with the reason each higher claim is not made."""
        parts = []
        if self.level:
            parts.append(f"EE HPC WG Level {self.level} ({LEVEL_ACC[self.level] * 100:g} %)")
        else:
            parts.append("no EE HPC WG level")
        if self.level < 3 and self.level_reasons:
            nxt = f"Level {self.level + 1}" if self.level else "Level 1"
            parts.append(f"not {nxt}: " + "; ".join(self.level_reasons))
        if self.spec:
            parts.append("SPEC-comparable measurement (analyzer ≤ 1 %, 1/s, 240 s windows)")
        else:
            parts.append("not SPEC-comparable: " + "; ".join(self.spec_reasons))
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "spec": self.spec,
            "eehpc_level": self.level,
            "statement": self.text[:1000],
        }
        if self.acc is not None and math.isfinite(self.acc):
            out["acc"] = float(min(max(self.acc, 0.0), 1.0))
        return out


def _pct(x: float) -> str:
    return f"{x * 100:.2f} %"


def classify(channels: Sequence[ChannelSpec], aligned: Sequence[WindowPower]) -> list[ChannelClass]:
    """Each power channel summed in the scored windows, with what the statement needs of it."""
    # Indexed once: looking each channel up in every window is quadratic in the channels (a 1024-channel
    # cluster run spent 16 s here).
    by_key: dict[str, list[tuple[float, ChannelWindow]]] = {}
    for wp in aligned:
        for c in wp.power:
            by_key.setdefault(c.spec.key, []).append((wp.window.duration_s, c))
    out = []
    for spec in channels:
        if spec.role != "power":
            continue
        pairs = by_key.get(spec.key, [])
        seen = [c for _, c in pairs]
        watts = [c.mean for c in seen if c.n > 0 and math.isfinite(c.mean)]
        acc = spec.acc
        if acc is None:
            us = [c.u for c in seen if c.u_samples and math.isfinite(c.u)]
            acc = sum(us) / len(us) if us else None
        rates = [c.n / d for d, c in pairs if d > 0]
        interval = None
        if spec.hz:
            interval = 1.0 / spec.hz
        elif rates and min(rates) > 0:
            interval = 1.0 / min(rates)
        if interval is not None and spec.upd is not None:
            interval = max(interval, spec.upd)
        out.append(
            ChannelClass(
                key=spec.key,
                acc=acc,
                interval_s=interval,
                watts=sum(watts) / len(watts) if watts else math.nan,
                quantities=spec.quantities,
                gapped=any(c.gaps for c in seen),
            )
        )
    return out


def combined_error(classes: Sequence[ChannelClass]) -> float | None:
    """Root sum of squares of each channel's error in watts, over the summed watts; None when a
    channel's accuracy or power is not known."""
    if not classes or any(c.acc is None or not math.isfinite(c.watts) for c in classes):
        return None
    total = sum(c.watts for c in classes)
    if total <= 0:
        return None
    return math.sqrt(sum((float(c.acc or 0.0) * c.watts) ** 2 for c in classes)) / total


def weighted_error(classes: Sequence[ChannelClass]) -> float | None:
    """The channels' accuracy weighted by their power: SPEC's overall uncertainty, errors taken as
    systematic (they add, they do not average out)."""
    if not classes or any(c.acc is None or not math.isfinite(c.watts) for c in classes):
        return None
    total = sum(c.watts for c in classes)
    if total <= 0:
        return None
    return sum(float(c.acc or 0.0) * c.watts for c in classes) / total


def planned_window_problem(require: str, windows: Sequence[tuple[str, float]]) -> str | None:
    """Why a plan cannot meet the required standard for its window lengths alone, or None: known
    before the run, so a run that could only end "required spec" is not run. windows: (kind,
    measurement seconds) of the plan's scored phases; a job level's window lasts as long as its jobs
    and is judged after the run."""
    fixed = [seconds for kind, seconds in windows if kind != "concurrency"]
    if not fixed:
        return None
    shortest = min(fixed)
    if require == "spec" and shortest < SPEC_WINDOW_S:
        return f"SPECpower's measurement windows are {SPEC_WINDOW_S:g} s; this run's are {shortest:g} s"
    if require.startswith("eehpc") and shortest < LEVEL_WINDOW_S:
        return f"the EE HPC WG's windows are at least {LEVEL_WINDOW_S:g} s; this run's are {shortest:g} s"
    return None


def state(
    channels: Sequence[ChannelSpec],
    aligned: Sequence[WindowPower],
    idle_measured: bool,
    coverage: Coverage | None = None,
) -> Statement:
    """The statement for a run whose scored windows are `aligned`. idle_measured: an idle window has
    power (EE HPC WG Levels 2 and 3 require it). coverage: the share of the system metered, when the
    system's size is known; without it the share is not judged (left to the operator)."""
    classes = classify(channels, aligned)
    # SPECpower's window rule is about its target loads; EE HPC WG's core phase is every scored window,
    # a cluster level's jobs included (their window lasts as long as the jobs ran).
    spec_windows = [wp.window.duration_s for wp in aligned if wp.window.kind != "concurrency"]
    windows = [wp.window.duration_s for wp in aligned]
    shortest = min(windows) if windows else 0.0
    spec_shortest = min(spec_windows) if spec_windows else 0.0
    unknown = [c.key for c in classes if c.acc is None]
    intervals = [c.interval_s for c in classes if c.interval_s is not None]
    slowest = max(intervals) if len(intervals) == len(classes) and intervals else None
    gapped = [c.key for c in classes if c.gapped]
    combined = combined_error(classes)
    weighted = weighted_error(classes)

    # Reasons that hold whatever the level.
    common: list[str] = []
    if not classes:
        common.append("no power channel was summed")
    parts = [s.key for s in channels if s.role == "power" and s.component]
    if parts:
        # SPECpower and EE HPC WG both measure what the system draws from its supply.
        common.append(f"{', '.join(parts[:4])} measure a component, not wall power")
    if unknown:
        common.append(f"the accuracy of {', '.join(unknown[:4])} is not known (its metadata gives no acc)")
    if classes and slowest is None:
        common.append("a channel's reading interval is not known")
    if gapped:
        common.append(f"windows not fully covered by {', '.join(gapped[:4])}")

    spec_reasons = list(common)
    if weighted is not None and weighted > SPEC_ACC + 1e-12:
        spec_reasons.append(f"accuracy {_pct(weighted)} above {_pct(SPEC_ACC)}")
    if slowest is not None and slowest > 1.0 / MIN_RATE_HZ + 1e-9:
        spec_reasons.append(f"a reading every {slowest:g} s, fewer than one a second")
    no_q = [c.key for c in classes if c.quantities is None]
    few_q = [
        c.key
        for c in classes
        if c.quantities is not None and sum(q in c.quantities for q in SPEC_OTHER_QUANTITIES) < 2
    ]
    if no_q:
        spec_reasons.append(f"the quantities of {', '.join(no_q[:4])} are not known")
    if few_q:
        spec_reasons.append(f"{', '.join(few_q[:4])} measure fewer than two of V, A and PF")
    if spec_windows and spec_shortest < SPEC_WINDOW_S:
        spec_reasons.append(f"windows of {spec_shortest:g} s, SPECpower's are {SPEC_WINDOW_S:g} s")
    loads = [
        wp.window.target * 100
        for wp in sorted(aligned, key=lambda wp: wp.window.start_ms)
        if wp.window.kind == "target" and wp.window.target is not None
    ]
    if any(b > a for a, b in pairwise(loads)):
        # The same load meets a machine in another thermal and frequency state when run upward.
        if all(b > a for a, b in pairwise(loads)):
            how = f"ran upward ({loads[0]:g} % first)"
        else:
            how = f"ran in the order {', '.join(f'{x:g}' for x in loads)} %"
        spec_reasons.append(f"target loads {how}; SPECpower runs them from the highest down")
    if not windows:
        spec_reasons.append("no window was scored")
    elif not spec_windows:
        spec_reasons.append("job levels only: SPECpower measures target loads")

    def missing(level: int) -> list[str]:
        why = list(common)
        limit = LEVEL_ACC[level]
        if combined is not None and combined > limit + 1e-12:
            why.append(f"combined accuracy {_pct(combined)} above {_pct(limit)}")
        if len(classes) > 1:
            loose = [c.key for c in classes if c.acc is not None and c.acc > LEVEL_EACH_ACC + 1e-12]
            if loose:
                why.append(f"{', '.join(loose[:4])} above {_pct(LEVEL_EACH_ACC)} each")
        if slowest is not None and slowest > 1.0 / MIN_RATE_HZ + 1e-9:
            why.append(f"a reading every {slowest:g} s, fewer than one a second")
        if windows and shortest < LEVEL_WINDOW_S:
            why.append(f"windows of {shortest:g} s, shorter than {LEVEL_WINDOW_S:g} s")
        if not windows:
            why.append("no window was scored")
        if slowest is not None and windows and slowest > LEVEL_INTERVAL_SHARE * shortest + 1e-9:
            why.append(f"a reading interval of {slowest:g} s, over a tenth of a {shortest:g} s window")
        if level >= 2:
            if slowest is not None and windows and shortest / slowest < LEVEL2_READINGS - 1e-9:
                why.append(f"fewer than {LEVEL2_READINGS} readings in a {shortest:g} s window")
            if not idle_measured:
                why.append("idle power not measured")
        if coverage is not None:
            why += coverage_reasons(level, coverage)
        if level >= 3:
            no_wh = [c.key for c in classes if c.quantities is None or "Wh" not in c.quantities]
            if no_wh:
                why.append(f"{', '.join(no_wh[:4])} integrate no energy (no Wh counter)")
        return why

    level, level_reasons = 0, missing(1)
    for lv in (1, 2, 3):
        why = missing(lv)
        if why:
            level_reasons = why
            break
        level, level_reasons = lv, []
    return Statement(
        spec=not spec_reasons,
        level=level,
        spec_reasons=spec_reasons,
        level_reasons=level_reasons,
        acc=combined,
    )
