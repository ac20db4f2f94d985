"""A per-level table, such as a published SPECpower_ssj2008 result: the rules each of its figures
keeps, the table as columns, what no single row shows (validate), how it stands against a standard
result (comparability) and its overall metric (totals). Reading one from text is core/published.py.
"""

from __future__ import annotations

import math
import re
from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .plan import level_name
from .score import LevelScore, overall_ratio

# Bounds a row must keep. Nothing on a bench draws a gigawatt or less than a milliwatt, and no server
# does 10^15 operations per second: such a figure is a unit slip, and refusing it also keeps every
# printed ratio a finite number.
MIN_POWER_W = 1e-3
MAX_POWER_W = 1e9
MAX_OPS = 1e15
MAX_ACTUAL = 10.0  # actual load as a fraction of calibrated throughput: 1000 %
# The published figure: bounded like the ratios the table can produce, so a difference is finite.
MIN_PUBLISHED = 1e-6
MAX_PUBLISHED = MAX_OPS / MIN_POWER_W
# The standard SPECpower_ssj2008 target loads, in percent.
STANDARD_LOADS = tuple(range(100, 0, -10))
IDLE_LABEL = "Active Idle"

IDLE_WORDS = {"idle", "active idle", "active_idle", "activeidle", "0", "0%", "0.0"}


# A number whose commas group its digits in threes, as published tables write thousands.
_GROUPED = re.compile(r"[+-]?\d{1,3}(,\d{3})+(\.\d*)?")


class TableError(ValueError):
    """The text is not a per-level table, or a figure in it cannot be a measurement."""


def parse_number(value: Any, what: str) -> float:
    if isinstance(value, bool):
        raise TableError(f"{what}: {value!r} is not a number")
    if isinstance(value, float):
        x = value
    elif isinstance(value, int):
        try:
            x = float(value)
        except OverflowError:
            raise TableError(f"{what}: {str(value)[:20]}… is not a finite number") from None
    elif isinstance(value, str):
        try:
            x = float(value)
        except ValueError:
            text = value.strip()
            if "," in text and not _GROUPED.fullmatch(text):
                # Not thousands (1,000): a decimal comma ("200,5") read without it is ten times the
                # figure, so it is refused rather than guessed.
                raise TableError(
                    f"{what}: {value[:40]!r} is not a number: a comma only groups thousands (1,000); "
                    "write decimals with a point"
                ) from None
            text = text.replace(",", "").replace("_", "").replace(" ", "")
            if not text:
                raise TableError(f"{what}: empty") from None
            try:
                x = float(text)
            except ValueError:
                raise TableError(f"{what}: {value[:40]!r} is not a number") from None
    else:
        raise TableError(f"{what}: {str(value)[:40]!r} is not a number")
    if not math.isfinite(x):
        raise TableError(f"{what}: {str(value)[:40]!r} is not a finite number")
    return x + 0.0  # "-0" is zero, and printed as -0 it would read as a sign of something


def parse_load(value: Any, what: str) -> float | None:
    """A load as a fraction: "100%" / "1.0" / "100" -> 1.0; "Active Idle" / "idle" -> None.

    Refuses a load outside (0 %, 100 %]: a table has no meaning for a negative load or one above the
    calibrated throughput."""
    if value is None:
        raise TableError(f"{what}: empty")
    if isinstance(value, str):
        text = value.strip().lower()
        if text in IDLE_WORDS:
            return None
        if text.endswith("%"):
            x = parse_number(text[:-1], what) / 100.0
            return _check_load(x, value, what)
    x = parse_number(value, what)
    if x == 0:
        return None
    return _check_load(x / 100.0 if x > 1.0 else x, value, what)


def _check_load(x: float, value: Any, what: str) -> float:
    if not 0.0 < x <= 1.0:
        raise TableError(f"{what}: {str(value).strip()[:20]!r} is outside (0 %, 100 %]")
    return x


def parse_actual(value: Any, what: str) -> float:
    """Actual load as a fraction; NaN when the table does not give it."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return math.nan
    if isinstance(value, str) and value.strip().endswith("%"):
        x = parse_number(value.strip()[:-1], what) / 100.0
    else:
        x = parse_number(value, what)
        x = x / 100.0 if x > 1.5 else x
    if not 0.0 <= x <= MAX_ACTUAL:
        raise TableError(f"{what}: {str(value).strip()[:20]!r} is outside 0 %..{MAX_ACTUAL * 100:g} %")
    return x


def parse_power(value: Any, what: str) -> float:
    x = parse_number(value, what)
    if x <= 0:
        raise TableError(f"{what}: power must be positive, got {x:g}")
    if x < MIN_POWER_W or x > MAX_POWER_W:
        raise TableError(f"{what}: {x:g} W is outside {MIN_POWER_W:g}..{MAX_POWER_W:g} W: check the units")
    return x


def parse_ops(value: Any, what: str) -> float:
    x = parse_number(value, what)
    if x < 0:
        raise TableError(f"{what}: ops must be >= 0, got {x:g}")
    if x > MAX_OPS:
        raise TableError(f"{what}: {x:g} ops is above {MAX_OPS:g}: check the units")
    return x


def parse_published(value: Any, what: str) -> float:
    x = parse_number(value, what)
    if not MIN_PUBLISHED <= x <= MAX_PUBLISHED:
        raise TableError(f"{what}: {x:g} is not a score to compare with (a positive ops per watt)")
    return x


def load_label(target: float) -> str:
    """0.4 -> "40%"; NaN (active idle) -> "Active Idle"."""
    if not math.isfinite(target):
        return IDLE_LABEL
    return f"{round(target * 100.0, 6):g}%"


class Columns:
    """A table being read, one growing array per column, so a million rows cost tens of megabytes."""

    def __init__(self, nodes: Iterable[str] = ()) -> None:
        self.target = array("d")
        self.ops = array("d")
        self.power = array("d")
        self.actual = array("d")
        self.where = array("q")  # line of the file (CSV) or level number (JSON), for messages
        self.nodes = list(nodes)
        self.node_power = [array("d") for _ in self.nodes]
        # by name: a search of the list for every value made a table of 20,000 nodes take 9 s
        self._index = {name: i for i, name in enumerate(self.nodes)}

    def node_index(self, name: str) -> int:
        i = self._index.get(name)
        if i is None:
            i = self._index[name] = len(self.nodes)
            self.nodes.append(name)
            self.node_power.append(array("d", [math.nan]) * len(self.target))
        return i

    def add(
        self,
        where: int,
        target: float | None,
        ops: float,
        power: float,
        parts: dict[str, float],
        actual: float,
        label: str,
    ) -> None:
        """One row; parts is its power per node, empty when the table gives one figure."""
        if target is None and ops > 0:
            raise TableError(f"{label}: an {IDLE_LABEL} row has no ops, got {ops:g}")
        if parts:
            for name, w in parts.items():
                self.node_power[self.node_index(name)].append(w)
            n = len(self.target) + 1
            for col in self.node_power:
                if len(col) < n:
                    col.append(math.nan)
        elif self.node_power:
            for col in self.node_power:
                col.append(math.nan)
        self.target.append(math.nan if target is None else target)
        self.ops.append(ops)
        self.power.append(power)
        self.actual.append(actual)
        self.where.append(where)


@dataclass
class Table:
    """Columns of a per-level table; target is NaN for active idle, actual NaN where not given, and
    node_power (rows x nodes) NaN where a node has no value in a row."""

    target: np.ndarray
    ops: np.ndarray
    power: np.ndarray
    actual: np.ndarray
    where: np.ndarray
    where_kind: str  # "line" or "level"
    nodes: tuple[str, ...] = ()
    node_power: np.ndarray | None = None
    published: float | None = None

    @classmethod
    def from_columns(cls, cols: Columns, where_kind: str, published: float | None) -> Table:
        node_power = None
        if cols.nodes:
            node_power = np.stack([np.frombuffer(c, dtype=np.float64) for c in cols.node_power], axis=1)
        return cls(
            np.frombuffer(cols.target, dtype=np.float64),
            np.frombuffer(cols.ops, dtype=np.float64),
            np.frombuffer(cols.power, dtype=np.float64),
            np.frombuffer(cols.actual, dtype=np.float64),
            np.frombuffer(cols.where, dtype=np.int64),
            where_kind,
            tuple(cols.nodes),
            node_power,
            published,
        )

    def __len__(self) -> int:
        return int(self.target.size)

    @property
    def is_load(self) -> np.ndarray:
        return np.isfinite(self.target)

    def node_parts(self, i: int) -> dict[str, float]:
        if self.node_power is None:
            return {}
        row = self.node_power[i]
        return {name: float(w) for name, w in zip(self.nodes, row, strict=True) if math.isfinite(w)}

    def level(self, i: int) -> LevelScore:
        """Row i as a LevelScore, for the renderers."""
        t = float(self.target[i])
        idle = not math.isfinite(t)
        actual = float(self.actual[i])
        return LevelScore(
            phase="idle" if idle else level_name(t),
            kind="idle" if idle else "target",
            target=0.0 if idle else t,
            ops=float(self.ops[i]),
            W=float(self.power[i]),
            actual=actual if math.isfinite(actual) else None,
            node_W=self.node_parts(i),
        )


def validate(table: Table) -> None:
    """What no single row shows: an empty table, no target loads, a level given twice."""
    if not len(table):
        raise TableError("the table has no levels")
    loads = table.is_load
    if not loads.any():
        raise TableError("the table has no target load rows")
    if table.node_power is not None:
        # A row giving some nodes' power but not all summed only those: the level read as a smaller
        # system, and its efficiency rose by the missing node's share.
        given = np.isfinite(table.node_power)
        partial = np.nonzero(given.any(axis=1) & ~given.all(axis=1))[0]
        if partial.size:
            i = int(partial[0])
            node = table.nodes[int(np.argmin(given[i]))]
            raise TableError(
                f"{table.where_kind} {table.where[i]}: no power for node {node}, which other "
                f"{table.where_kind}s give: every level must measure the same nodes"
            )
    _check_actual(table)
    # A level is its load in percent to six decimals, as the phase names of a sweep are.
    key = np.where(loads, np.round(table.target * 100.0, 6), -1.0)
    order = np.argsort(key, kind="stable")
    ordered = key[order]
    same = np.nonzero(ordered[1:] == ordered[:-1])[0]
    if same.size:
        first, second = order[same[0]], order[same[0] + 1]
        label = load_label(float(table.target[first]))
        raise TableError(
            f"{label} appears twice ({table.where_kind}s {table.where[first]} and {table.where[second]})"
        )


# How far a row's actual load may stand from its ops over the calibrated throughput: half a load point
# and half a percent of itself, what printing each figure to a whole percent can account for.
ACTUAL_SLACK = 0.005


def _check_actual(table: Table) -> None:
    """The actual load is ops over the calibrated throughput, so every row's ops over its actual is
    the same figure. It is taken from the row of the highest actual load, where rounding weighs least;
    a row that stands off it by more than rounding has one of the two mistyped, and the load check
    would judge the one typed."""
    given = np.nonzero(np.isfinite(table.actual) & table.is_load)[0]
    if given.size < 2:
        return
    top = int(given[np.argmax(table.actual[given])])
    if table.actual[top] <= 0 or table.ops[top] <= 0:
        return
    calibrated = table.ops[top] / table.actual[top]
    for i in given:
        actual, implied = float(table.actual[i]), float(table.ops[i] / calibrated)
        if abs(actual - implied) > ACTUAL_SLACK * (1.0 + actual):
            raise TableError(
                f"{table.where_kind} {table.where[i]}: actual {actual * 100:.1f} % contradicts its ops, "
                f"which are {implied * 100:.1f} % of the calibrated throughput (ops over actual on "
                f"{table.where_kind} {table.where[top]}): one of the two is mistyped"
            )


@dataclass(frozen=True)
class Comparability:
    """How the table stands against a SPECpower_ssj2008 result: the standard levels it lacks (Active
    Idle included) and how many other loads it has."""

    missing: list[str]
    nonstandard: list[str]  # labels of the first few
    nonstandard_count: int

    @property
    def comparable(self) -> bool:
        return not self.missing and not self.nonstandard_count

    def sentence(self) -> str:
        """One line, or "" when the table is a complete standard one."""
        if self.comparable:
            return ""
        parts = []
        if self.missing:
            parts.append("no row for " + ", ".join(self.missing))
        if self.nonstandard_count:
            more = self.nonstandard_count - len(self.nonstandard)
            listed = ", ".join(self.nonstandard) + (f" and {more:,} more" if more > 0 else "")
            parts.append(f"{self.nonstandard_count:,} load(s) outside the standard ten ({listed})")
        if IDLE_LABEL in self.missing:
            parts.append("the denominator has the target loads only")
        return "not comparable with SPECpower_ssj2008 results: " + "; ".join(parts)


def comparability(table: Table) -> Comparability:
    pct = np.round(table.target[table.is_load] * 100.0, 6)
    standard = np.isin(pct, np.array(STANDARD_LOADS, dtype=np.float64))
    missing = [f"{p}%" for p in STANDARD_LOADS if not np.any(pct == p)]
    if table.is_load.all():
        missing.append(IDLE_LABEL)
    other = pct[~standard]
    return Comparability(missing, [f"{p:g}%" for p in other[:5]], int(other.size))


@dataclass(frozen=True)
class Totals:
    overall: float
    ops: float  # Σ over the target loads
    power: float  # Σ over every row, active idle included


def totals(table: Table) -> Totals:
    """The overall metric: Σ ops over the target loads ÷ Σ average power over every row."""
    ops = math.fsum(table.ops[table.is_load].tolist())
    power = math.fsum(table.power.tolist())
    return Totals(overall_ratio([ops], [power]), ops, power)


def ratios(table: Table) -> np.ndarray:
    """Per row ops ÷ W; active idle's is 0, as SPECpower prints it."""
    return np.where(table.is_load, table.ops / table.power, 0.0)
