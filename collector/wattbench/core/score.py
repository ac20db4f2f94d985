"""The SPECpower_ssj2008-style score. Pure arithmetic over per-level figures.

Per level: throughput (ops/s in the measurement window, like ssj_ops), actual load against the
calibrated throughput, average active power, energy, mean inlet temperature and the performance to
power ratio. Overall: the sum of throughput over the target loads divided by the sum of average power
over the target loads AND active idle, which counts in the denominator only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from . import FieldError

HOURS_PER_YEAR = 8766.0  # 365.25 days
# No currency prices a server, or a kWh, above this: a unit slip, and a lifetime cost that would
# overflow the result.
MAX_AMOUNT = 1e15
# A service life beyond this is a typo (days, or months), not a server's.
MAX_YEARS = 100.0


def amount_problem(amount: float) -> str | None:
    """Why amount cannot be a price or a tariff, or None."""
    if math.isfinite(amount) and 0 <= amount <= MAX_AMOUNT:
        return None
    return f"must be a number from 0 to {MAX_AMOUNT:g}, got {amount!r}"


def years_problem(years: float) -> str | None:
    """Why years cannot be a service life, or None."""
    if math.isfinite(years) and 0 < years <= MAX_YEARS:
        return None
    return f"must be a number of years above 0 and at most {MAX_YEARS:g}, not {years:g}"


def overall_ratio(target_ops: Sequence[float], segment_watts: Sequence[float]) -> float:
    """Σ ops over the target loads ÷ Σ average power over every segment (target loads and active idle).

    Raises ValueError when there is no power to divide by.
    """
    watts = [float(w) for w in segment_watts]
    total_w = math.fsum(watts)
    if not watts or not total_w > 0 or not math.isfinite(total_w):
        raise ValueError("the sum of average power must be a positive number")
    return math.fsum(float(x) for x in target_ops) / total_w


@dataclass
class LevelScore:
    """One row of the result table.

    ops is throughput in ops/s over the measurement window (SPECpower's ssj_ops); ops_count is the
    count behind it when known. W is NaN when the window had no power data; such a level has no ratio
    and no result row.
    """

    phase: str
    kind: str  # target | idle | concurrency
    target: float | None
    ops: float
    W: float
    duration_s: float | None = None
    ops_count: int | None = None
    actual: float | None = None
    inlet_C: float = math.nan
    samples: int | None = None
    gaps: int | None = None
    u: float = math.nan
    copies: int | None = None
    node_W: dict[str, float] = field(default_factory=dict)
    busy: tuple[str, ...] | None = None  # nodes that ran the level's jobs (scheduler records)
    job_ops: float | None = None  # ops/s the level's jobs reported, beside jobs/s in ops
    unserved: int | None = None  # a paced level's arrivals not served in its window

    @property
    def unserved_share(self) -> float | None:
        """A paced level's unserved arrivals as a share of its arrivals (those served in the window
        and those not), or None where the level has no count of them."""
        if not self.unserved or self.duration_s is None or not self.duration_s > 0:
            return None
        served = self.ops_count if self.ops_count is not None else self.ops * self.duration_s
        return self.unserved / (served + self.unserved) if served + self.unserved > 0 else None

    @property
    def behind_share(self) -> float | None:
        """unserved_share when it explains a shortfall: the level fell short of its target and at least
        0.1 % of its arrivals went unserved (below that, a handful queued at the window's end)."""
        share = self.unserved_share
        if share is None or share < 0.001 or self.target is None or self.actual is None:
            return None
        return share if self.actual < self.target else None

    @property
    def has_power(self) -> bool:
        return math.isfinite(self.W) and self.W > 0

    @property
    def ratio(self) -> float:
        return self.ops / self.W if self.has_power else math.nan

    @property
    def Wh(self) -> float:
        if self.duration_s is None or not self.has_power:
            return math.nan
        return self.W * self.duration_s / 3600.0


@dataclass(frozen=True)
class CostInputs:
    """Optional price-performance inputs, in the spirit of TPC's: the system price (currency units),
    the electricity tariff (currency per kWh) and the years of service."""

    price: float | None = None
    tariff_kwh: float | None = None
    years: float = 4.0

    def __post_init__(self) -> None:
        for name in ("price", "tariff_kwh"):
            v = getattr(self, name)
            problem = None if v is None else amount_problem(v)
            if problem:
                raise FieldError(name, problem)
        problem = years_problem(self.years)
        if problem:
            raise FieldError("years", problem)


@dataclass
class Summary:
    overall: float
    peak_ops: float
    peak_W: float
    idle_W: float
    energy_Wh: float
    cost: float | None = None  # energy cost of this run
    lifetime_energy_cost: float | None = None
    ops_per_dollar: float | None = None  # ops served over the service life per unit of total cost


def actual_load(ops_per_s: float, calibrated: float | None) -> float | None:
    if calibrated is None or not calibrated > 0:
        return None
    return ops_per_s / calibrated


def scored_segments(levels: Sequence[LevelScore]) -> tuple[list[LevelScore], list[LevelScore]]:
    """(numerator levels, denominator levels): target or concurrency levels; those plus active idle."""
    loads = [lv for lv in levels if lv.kind in ("target", "concurrency")]
    idle = [lv for lv in levels if lv.kind == "idle"]
    return loads, loads + idle


def overall(levels: Sequence[LevelScore]) -> float:
    """The overall metric over the levels that have power. 0.0 when nothing has power."""
    loads, segments = scored_segments([lv for lv in levels if lv.has_power])
    if not segments:
        return 0.0
    return overall_ratio([lv.ops for lv in loads], [lv.W for lv in segments])


def summarize(
    levels: Sequence[LevelScore], run_energy_wh: float | None = None, cost: CostInputs | None = None
) -> Summary:
    """Overall metric, the figures vendors quote (peak throughput, peak power, idle power) and, with
    cost inputs, energy cost and ops per currency unit.

    Lifetime figures assume the server spends equal time in each scored segment (the SPECpower mix of
    ten loads and idle): mean power and mean throughput over the segments.
    """
    powered = [lv for lv in levels if lv.has_power]
    loads, segments = scored_segments(powered)
    idle = [lv.W for lv in powered if lv.kind == "idle"]
    energy = run_energy_wh
    if energy is None:
        energy = math.fsum(lv.Wh for lv in powered if math.isfinite(lv.Wh))
    summary = Summary(
        overall=overall(levels),
        peak_ops=max((lv.ops for lv in levels if lv.kind in ("target", "concurrency")), default=0.0),
        # Not measured is NaN, never 0 W: a partial run without active idle must not look frugal.
        peak_W=max((lv.W for lv in powered), default=math.nan),
        idle_W=idle[-1] if idle else math.nan,
        energy_Wh=energy,
    )
    if cost is not None and segments:
        mean_w = math.fsum(lv.W for lv in segments) / len(segments)
        mean_ops = math.fsum(lv.ops for lv in loads) / len(segments)
        if cost.tariff_kwh is not None:
            summary.cost = energy / 1000.0 * cost.tariff_kwh
            summary.lifetime_energy_cost = mean_w / 1000.0 * HOURS_PER_YEAR * cost.years * cost.tariff_kwh
        if cost.price is not None:
            total = cost.price + (summary.lifetime_energy_cost or 0.0)
            if total > 0:
                lifetime_ops = mean_ops * HOURS_PER_YEAR * 3600.0 * cost.years
                summary.ops_per_dollar = lifetime_ops / total
    return summary


@dataclass(frozen=True)
class NodeSplit:
    """A scheduler level's power split between the nodes that ran its jobs and the nodes left idle
    (EE HPC WG counts both). metered counts the busy nodes with power; W sums are over metered nodes."""

    busy: int
    busy_metered: int
    busy_W: float
    idle: int
    idle_W: float


def node_split(lv: LevelScore) -> NodeSplit | None:
    """None for a level without scheduler records or per-node power."""
    if lv.busy is None or not lv.node_W:
        return None
    busy = set(lv.busy)
    on = [w for n, w in lv.node_W.items() if n in busy]
    off = [w for n, w in lv.node_W.items() if n not in busy]
    return NodeSplit(len(busy), len(on), float(sum(on)), len(off), float(sum(off)))


def concurrency_figures(levels: Sequence[LevelScore]) -> dict[str, tuple[float, float]]:
    """phase -> (throughput relative to the smallest copy count, energy per job in joules).

    In concurrency mode ops is jobs per second, so joules per job is W / ops.
    """
    conc = [lv for lv in levels if lv.kind == "concurrency" and lv.ops > 0]
    if not conc:
        return {}
    base = min(conc, key=lambda lv: lv.copies or 0).ops
    out = {}
    for lv in conc:
        rel = lv.ops / base if base > 0 else math.nan
        jpj = lv.W / lv.ops if lv.has_power else math.nan
        out[lv.phase] = (rel, jpj)
    return out
