"""Candidate servers side by side: the figures a purchase is decided on, which candidate is best in
each, price-performance in the TPC style, and which candidates cannot be compared with the first and
why. Pure: candidates in (built from results, suite results or published tables at the edge), a table
out.

Figures per candidate:
- idle W: active idle; peak W: the highest average power of a target load;
- peak throughput: the highest ops/s of a target load, in the candidate's unit;
- overall: Σ ops/s over the target loads ÷ Σ W over the target loads and active idle (SPECpower's
  overall metric); a suite has no overall across worklets of different units, it has its score;
- suite score: the SERT-style score, relative to the reference its result names.
With prices (currency units), a tariff (currency per kWh) and years of service:
- price per ops/s = price ÷ peak throughput (TPC's price/performance, purchase only);
- energy cost = mean power over the scored segments (loads and active idle, equal time in each,
  the SPECpower mix) × 8766 h × years × tariff;
- ops/s per currency unit over the service life = peak throughput ÷ (price + energy cost);
- ops/s per rack unit = peak throughput ÷ rack units.

Comparability with the first candidate (the baseline): another workload or op unit (for worklets,
another version of the op), a different measurement standard (SPEC-comparable or not, EE HPC WG
level), or rehearsal timing (windows shorter than SPECpower's 240 s) on one side only. A candidate
that cannot be compared is listed with the reasons and takes no part in "best".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .score import HOURS_PER_YEAR, overall_ratio

SPEC_WINDOW_S = 240.0


@dataclass(frozen=True)
class Point:
    """One target load of a curve: target fraction, throughput (unit/s) and average power (W)."""

    target: float
    ops: float
    W: float

    @property
    def ratio(self) -> float:
        return self.ops / self.W


@dataclass(frozen=True)
class Curve:
    """One load line: a sweep's, or one worklet's of a suite."""

    label: str
    unit: str
    points: tuple[Point, ...]


@dataclass
class Candidate:
    name: str
    source: str  # where it came from, for the reader: "stored run X", a file name
    kind: str  # run | suite | table
    workload: str  # what produced the ops (worklet versions for a suite), for comparability
    unit: str
    curves: list[Curve]
    idle_W: float | None = None
    valid: bool | None = None  # None: not known (a published table)
    spec: bool | None = None  # SPEC-comparable measurement; None: not stated
    eehpc_level: int | None = None
    shortest_window_s: float | None = None  # None: not known
    suite_score: float | None = None
    suite_reference: str | None = None
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Prices:
    """Per candidate name: its price and rack units; one tariff and service life for all."""

    price: Mapping[str, float] = field(default_factory=dict)
    rack_units: Mapping[str, float] = field(default_factory=dict)
    tariff_kwh: float | None = None
    years: float = 4.0


# The columns, in order: key, heading, whether higher is better (None: not ranked).
COLUMNS: tuple[tuple[str, str, bool | None], ...] = (
    ("idle_W", "active idle (W)", False),
    ("peak_W", "peak power (W)", False),
    ("peak_ops", "peak throughput (unit/s)", True),
    ("overall", "overall (unit/s per W)", True),
    ("suite_score", "suite score (SERT-style)", True),
    ("price_per_ops", "price per unit/s", False),
    ("energy_cost", "energy cost over the service life", False),
    ("ops_per_currency", "unit/s per currency unit over the service life", True),
    ("ops_per_u", "unit/s per rack unit", True),
)


@dataclass
class Row:
    candidate: Candidate
    figures: dict[str, float]
    incomparable: list[str]  # why it cannot be compared with the baseline; [] when it can
    best: set[str] = field(default_factory=set)


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def rehearsal(c: Candidate) -> bool | None:
    if c.shortest_window_s is None:
        return None
    return c.shortest_window_s < SPEC_WINDOW_S - 0.5


def figures(c: Candidate, prices: Prices | None = None) -> dict[str, float]:
    """The candidate's figures; a figure that cannot be had is left out, never 0."""
    points = [p for curve in c.curves for p in curve.points]
    out: dict[str, float] = {}
    if _finite(c.idle_W):
        out["idle_W"] = float(c.idle_W)  # type: ignore[arg-type]
    if points:
        out["peak_W"] = max(p.W for p in points)
    single = c.kind != "suite" and len(c.curves) == 1 and c.curves[0].points
    if single:
        pts = c.curves[0].points
        out["peak_ops"] = max(p.ops for p in pts)
        segments = [p.W for p in pts] + ([float(c.idle_W)] if _finite(c.idle_W) else [])  # type: ignore[arg-type]
        out["overall"] = overall_ratio([p.ops for p in pts], segments)
    if _finite(c.suite_score):
        out["suite_score"] = float(c.suite_score)  # type: ignore[arg-type]
    if prices is None:
        return out
    price = prices.price.get(c.name)
    if points and prices.tariff_kwh is not None:
        segs = [p.W for p in points] + ([float(c.idle_W)] if _finite(c.idle_W) else [])  # type: ignore[arg-type]
        mean_w = math.fsum(segs) / len(segs)
        out["energy_cost"] = mean_w / 1000.0 * HOURS_PER_YEAR * prices.years * prices.tariff_kwh
    if "peak_ops" in out and out["peak_ops"] > 0:
        if price is not None:
            out["price_per_ops"] = price / out["peak_ops"]
            total = price + out.get("energy_cost", 0.0)
            if total > 0:
                out["ops_per_currency"] = out["peak_ops"] / total
        units = prices.rack_units.get(c.name)
        if units:
            out["ops_per_u"] = out["peak_ops"] / units
    return out


def incomparable(c: Candidate, base: Candidate) -> list[str]:
    """Why c's figures cannot be set against the baseline's; [] when they can."""
    if c.valid is False:
        # a failed check, on either side, leaves no measurement to rank
        return ["the run is INVALID: its figures are not ranked"]
    if c is base:
        return []
    why = []
    if c.kind == "suite" and base.kind == "suite":
        if c.workload != base.workload:
            why.append(f"other worklets or worklet versions ({c.workload} against {base.workload})")
    elif c.kind == "suite" or base.kind == "suite":
        why.append("a suite of worklets against a single workload")
    elif (c.workload, c.unit) != (base.workload, base.unit):
        why.append(f"another workload ({c.workload}, {c.unit}/s against {base.workload}, {base.unit}/s)")
    if c.spec is not None and base.spec is not None and c.spec != base.spec:
        why.append("SPEC-comparable measurement on one side only")
    if c.eehpc_level is not None and base.eehpc_level is not None and c.eehpc_level != base.eehpc_level:
        why.append(f"EE HPC WG level {c.eehpc_level} against {base.eehpc_level}")
    r, rb = rehearsal(c), rehearsal(base)
    if r is not None and rb is not None and r != rb:
        why.append("rehearsal timing (windows under 240 s) on one side only")
    return why


def compare(candidates: Sequence[Candidate], prices: Prices | None = None) -> list[Row]:
    """The rows, the first candidate being the baseline; best marks among those comparable with it."""
    if not candidates:
        raise ValueError("nothing to compare")
    base = candidates[0]
    rows = [Row(c, figures(c, prices), incomparable(c, base)) for c in candidates]
    # Nothing is ranked against an invalid baseline: "comparable with it" would mean nothing.
    ranked = [r for r in rows if not r.incomparable] if base.valid is not False else []
    if len(ranked) < 2:
        return rows  # a best among one is no finding
    for key, _, higher in COLUMNS:
        if higher is None:
            continue
        have = [r for r in ranked if key in r.figures]
        if len(have) < 2:
            continue
        pick = max if higher else min
        best = pick(r.figures[key] for r in have)
        for r in have:
            if r.figures[key] == best:
                r.best.add(key)
    return rows
