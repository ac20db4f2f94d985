"""`wattbench score FILE`: score a per-level table, such as a published SPECpower_ssj2008 result.

CSV: a header with the columns target, ops and power, and optionally actual. For several nodes, columns
`power:<node>` and `ops:<node>` are summed per row. Lines starting with '#' are comments; a comment
"published overall ... N" (or "published_overall: N") gives the figure to check against.

    target,actual,ops,power
    100%,99.6%,617957,236
    ...
    Active Idle,,0,72.2

JSON: {"levels": [{"target": "100%" | 1.0 | "idle", "ops": n, "power": W | [W, ...] | {"node": W},
"actual": optional}, ...], "published_overall": optional}. Other keys (system, source) are ignored.

Targets may be written "100%", "1.0", "100" or "Active Idle"/"idle". Numbers may carry thousands
separators ("4,376,919"). With a published figure (or --expect N) the command exits 1 when the computed
metric differs from it by more than the tolerance (0.5 %: published tables print power to three
significant figures).

A table is refused (exit 2, with the reason) when a number cannot be a measurement: power that is not
positive, negative ops, a target load outside (0 %, 100 %], a level given twice, an Active Idle row
with ops. A table that scores but lacks one of the ten standard loads or Active Idle, or has other
loads, is scored and said to be not comparable with SPECpower_ssj2008 results, naming the levels.
"""

from __future__ import annotations

import argparse
import csv
import math
import re
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

DEFAULT_TOLERANCE = 0.005
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
# Above this many rows the terminal shows the first and last rows and the totals, not every row:
# drawing a million-row table takes minutes and gigabytes and nobody reads it. --json has every row.
SUMMARY_ROWS = 100
SHOWN_EACH_END = 5

_IDLE_WORDS = {"idle", "active idle", "active_idle", "activeidle", "0", "0%", "0.0"}
_PUBLISHED_COMMENT = re.compile(
    r"published[ _]overall\b[^\n]*?(-?[0-9][0-9,]*(?:\.[0-9]+)?)\s*$", re.IGNORECASE
)


class TableError(ValueError):
    """The file is not a per-level table this command understands."""


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
            text = value.strip().replace(",", "").replace("_", "").replace(" ", "")
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
    return x


def parse_load(value: Any, what: str) -> float | None:
    """A load as a fraction: "100%" / "1.0" / "100" -> 1.0; "Active Idle" / "idle" -> None.

    Refuses a load outside (0 %, 100 %]: a table has no meaning for a negative load or one above the
    calibrated throughput."""
    if value is None:
        raise TableError(f"{what}: empty")
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _IDLE_WORDS:
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


def _power(value: Any, what: str) -> float:
    x = parse_number(value, what)
    if x <= 0:
        raise TableError(f"{what}: power must be positive, got {x:g}")
    if x < MIN_POWER_W or x > MAX_POWER_W:
        raise TableError(f"{what}: {x:g} W is outside {MIN_POWER_W:g}..{MAX_POWER_W:g} W: check the units")
    return x


def _ops(value: Any, what: str) -> float:
    x = parse_number(value, what)
    if x < 0:
        raise TableError(f"{what}: ops must be >= 0, got {x:g}")
    if x > MAX_OPS:
        raise TableError(f"{what}: {x:g} ops is above {MAX_OPS:g}: check the units")
    return x


def _published(value: Any, what: str) -> float:
    x = parse_number(value, what)
    if not MIN_PUBLISHED <= x <= MAX_PUBLISHED:
        raise TableError(f"{what}: {x:g} is not a score to compare with (a positive ops per watt)")
    return x


def load_label(target: float) -> str:
    """0.4 -> "40%"; NaN (active idle) -> "Active Idle"."""
    if not math.isfinite(target):
        return IDLE_LABEL
    return f"{round(target * 100.0, 6):g}%"


class _Columns:
    """A table being read, one growing array per column, so a million rows cost tens of megabytes."""

    def __init__(self, nodes: Iterable[str] = ()) -> None:
        self.target = array("d")
        self.ops = array("d")
        self.power = array("d")
        self.actual = array("d")
        self.where = array("q")  # line of the file (CSV) or level number (JSON), for messages
        self.nodes = list(nodes)
        self.node_power = [array("d") for _ in self.nodes]

    def node_index(self, name: str) -> int:
        try:
            return self.nodes.index(name)
        except ValueError:
            self.nodes.append(name)
            self.node_power.append(array("d", [math.nan]) * len(self.target))
            return len(self.nodes) - 1

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
    def from_columns(cls, cols: _Columns, where_kind: str, published: float | None) -> Table:
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

    def level(self, i: int) -> Any:
        """Row i as a LevelScore, for the renderers."""
        from ..core.plan import level_name
        from ..core.score import LevelScore

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


def _decode_json(text: str) -> Any:
    import wattbench_schema as contract

    try:
        return contract.strict_loads(text)
    except contract.DecodeError as exc:
        reason = str(exc)
        if "recursion" in reason.lower():
            reason = "nested too deeply"
        raise TableError(f"not valid JSON: {reason[:200]}") from None


def read_json(text: str) -> Table:
    doc = _decode_json(text)
    if not isinstance(doc, dict) or not isinstance(doc.get("levels"), list):
        raise TableError('JSON must be an object with a "levels" list')
    cols = _Columns()
    for i, lv in enumerate(doc["levels"]):
        where = f"level {i + 1}"
        if not isinstance(lv, dict) or "target" not in lv or "ops" not in lv or "power" not in lv:
            raise TableError(f"{where}: needs target, ops and power")
        power = lv["power"]
        parts: dict[str, float] = {}
        if isinstance(power, dict):
            parts = {str(k): _power(v, f"{where} power {k}") for k, v in power.items()}
        elif isinstance(power, list):
            parts = {f"node{j + 1}": _power(v, f"{where} power {j + 1}") for j, v in enumerate(power)}
        if isinstance(power, dict | list):
            if not parts:
                raise TableError(f"{where}: no power value")
            total = _power(math.fsum(parts.values()), f"{where} power")
        else:
            total = _power(power, f"{where} power")
        ops = lv["ops"]
        if isinstance(ops, dict):
            total_ops = _ops(math.fsum(_ops(v, f"{where} ops {k}") for k, v in ops.items()), f"{where} ops")
        elif isinstance(ops, list):
            total_ops = _ops(
                math.fsum(_ops(v, f"{where} ops {j + 1}") for j, v in enumerate(ops)), f"{where} ops"
            )
        else:
            total_ops = _ops(ops, f"{where} ops")
        target = parse_load(lv["target"], f"{where} target")
        actual = parse_actual(lv.get("actual"), f"{where} actual")
        cols.add(i + 1, target, total_ops, total, parts, actual, where)
    published = doc.get("published_overall")
    return Table.from_columns(
        cols, "level", _published(published, "published_overall") if published is not None else None
    )


_NOT_PLAIN = frozenset("# \t\r\n\f\v")


class _Lines:
    """The data lines of a CSV file: comments and blank lines left out, the published figure picked
    up from its comment, and the number of the line last handed out kept for messages."""

    def __init__(self, f: IO[str]) -> None:
        self.f = f
        self.lineno = 0
        self.published: float | None = None

    def __iter__(self) -> Iterator[str]:
        for lineno, line in enumerate(self.f, start=1):
            if "\x00" in line:
                raise TableError(f"not a text file (line {lineno} holds NUL bytes)")
            if line[0] not in _NOT_PLAIN:
                # the usual data line: no need to strip it to know it is neither blank nor a comment
                self.lineno = lineno
                yield line
                continue
            stripped = line.strip()
            if stripped.startswith("#"):
                m = _PUBLISHED_COMMENT.search(stripped)
                if m:
                    self.published = _published(m.group(1), "published overall comment")
                continue
            if stripped:
                self.lineno = lineno
                yield line


def read_csv(f: IO[str]) -> Table:
    lines = _Lines(f)
    reader = csv.reader(lines)
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise TableError("no table rows") from None
    except csv.Error as exc:
        raise TableError(f"line {lines.lineno}: {exc}") from None
    power_cols = [k for k, h in enumerate(header) if h == "power" or h.startswith("power:")]
    ops_cols = [k for k, h in enumerate(header) if h == "ops" or h.startswith("ops:")]
    if "target" not in header or not power_cols or not ops_cols:
        raise TableError(
            f"CSV header needs target, ops (or ops:<node>) and power (or power:<node>); got {header[:20]}"
        )
    twice = sorted({h for h in header if header.count(h) > 1})
    if twice:
        raise TableError(f"CSV header names {', '.join(twice)[:80]} more than once")
    for name in ("power", "ops"):
        if name in header and any(h.startswith(f"{name}:") for h in header):
            # a total next to its parts would be summed with them: counted twice
            raise TableError(f"CSV header has both {name} and {name}:<node>; give one or the other")
    per_node = any(":" in header[k] for k in power_cols)
    names = [header[k].split(":", 1)[1] if ":" in header[k] else header[k] for k in power_cols]
    i_target = header.index("target")
    i_actual = header.index("actual") if "actual" in header else None
    width = len(header)
    cols = _Columns(names if per_node else ())

    def one_row(lineno: int, rec: list[str]) -> None:
        where = f"line {lineno}"
        if len(rec) > width:
            raise TableError(f"{where}: more fields than the header has")
        rec = rec + [""] * (width - len(rec))
        parts = {
            names[j]: _power(rec[k], f"{where} {header[k]}")
            for j, k in enumerate(power_cols)
            if rec[k].strip()
        }
        if not parts:
            raise TableError(f"{where}: no power value")
        power = next(iter(parts.values())) if len(parts) == 1 else math.fsum(parts.values())
        if len(parts) > 1:
            power = _power(power, f"{where} power")
        if len(ops_cols) == 1:
            k = ops_cols[0]
            ops = _ops(rec[k], f"{where} {header[k]}") if rec[k].strip() else 0.0
        else:
            ops = _ops(
                math.fsum(_ops(rec[k], f"{where} {header[k]}") for k in ops_cols if rec[k].strip()),
                f"{where} ops",
            )
        target = parse_load(rec[i_target] or None, f"{where} target")
        actual = parse_actual(rec[i_actual], f"{where} actual") if i_actual is not None else math.nan
        cols.add(lineno, target, ops, power, parts if per_node else {}, actual, where)

    # One figure per row (no per-node columns): parse a block of rows at a time with numpy, and fall
    # back to one_row for a block that does not parse cleanly, so that every refusal and its message
    # come from one place.
    simple = len(power_cols) == 1 and len(ops_cols) == 1 and not per_node
    block: list[list[str]] = []
    block_lines = array("q")

    def flush() -> None:
        if not (
            simple
            and _fast_block(cols, block, block_lines, width, i_target, ops_cols[0], power_cols[0], i_actual)
        ):
            for lineno, rec in zip(block_lines, block, strict=True):
                one_row(lineno, rec)
        block.clear()
        del block_lines[:]

    try:
        for rec in reader:
            block.append(rec)
            block_lines.append(lines.lineno)
            if len(block) >= BLOCK_ROWS:
                flush()
        flush()
    except csv.Error as exc:
        raise TableError(f"line {lines.lineno}: {exc}") from None
    return Table.from_columns(cols, "line", lines.published)


BLOCK_ROWS = 16384


def _fractions(text: np.ndarray, above: float) -> np.ndarray:
    """Loads written "40%", "40" or "0.4" as fractions; raises ValueError where one is not a number.
    A figure without "%" is a percentage when it is above `above`."""
    pct = np.char.endswith(text, "%")
    x = np.char.rstrip(text, "%").astype(np.float64)
    return np.where(pct | (x > above), x / 100.0, x)


def _fast_block(
    cols: _Columns,
    block: list[list[str]],
    lines: array,  # type: ignore[type-arg]
    width: int,
    i_target: int,
    i_ops: int,
    i_power: int,
    i_actual: int | None,
) -> bool:
    """Add a block of rows whose every field parses and passes as it is; False (nothing added) when
    any row needs a closer look."""
    if not block or any(len(r) != width for r in block):
        return False
    try:
        ops = np.array([r[i_ops] for r in block], dtype=np.float64)
        power = np.array([r[i_power] for r in block], dtype=np.float64)
        tt = np.char.lower(np.char.strip(np.array([r[i_target] for r in block], dtype=str)))
        idle = np.isin(tt, list(_IDLE_WORDS))
        target = np.full(len(block), np.nan)
        if not idle.all():
            target[~idle] = _fractions(tt[~idle], 1.0)
        actual = np.full(len(block), np.nan)
        if i_actual is not None:
            at = np.char.strip(np.array([r[i_actual] for r in block], dtype=str))
            given = at != ""
            if given.any():
                actual[given] = _fractions(at[given], 1.5)
    except ValueError:
        return False
    idle |= target == 0.0
    target[idle] = np.nan
    loads = ~idle
    with np.errstate(invalid="ignore"):
        ok = (
            np.isfinite(ops).all()
            and np.isfinite(power).all()
            and (ops >= 0).all()
            and (ops <= MAX_OPS).all()
            and (power >= MIN_POWER_W).all()
            and (power <= MAX_POWER_W).all()
            and ((target[loads] > 0) & (target[loads] <= 1.0)).all()
            and not (ops[idle] > 0).any()
            and not ((actual < 0) | (actual > MAX_ACTUAL) | np.isinf(actual)).any()
            and (i_actual is None or not np.isnan(actual[given]).any())
        )
    if not ok:
        return False
    for col, values in ((cols.target, target), (cols.ops, ops), (cols.power, power), (cols.actual, actual)):
        col.frombytes(values.astype(np.float64).tobytes())
    cols.where.extend(lines)
    return True


def read_table(path: Path) -> Table:
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            head = f.read(4096)
            f.seek(0)
            is_json = path.suffix.lower() == ".json" or head.lstrip().startswith(("{", "["))
            table = read_json(f.read()) if is_json else read_csv(f)
    except OSError as exc:
        raise TableError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise TableError(f"not a text file (byte {exc.start} is not UTF-8)") from None
    validate(table)
    return table


def validate(table: Table) -> None:
    """What no single row shows: an empty table, no target loads, a level given twice."""
    if not len(table):
        raise TableError("the table has no levels")
    loads = table.is_load
    if not loads.any():
        raise TableError("the table has no target load rows")
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
    from ..core.score import overall_ratio

    ops = math.fsum(table.ops[table.is_load].tolist())
    power = math.fsum(table.power.tolist())
    return Totals(overall_ratio([ops], [power]), ops, power)


def ratios(table: Table) -> np.ndarray:
    """Per row ops ÷ W; active idle's is 0, as SPECpower prints it."""
    return np.where(table.is_load, table.ops / table.power, 0.0)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from .options import number

    parser.add_argument("file", type=Path, help="per-level table, CSV or JSON")
    parser.add_argument(
        "--json",
        action="store_true",
        help='print {"overall": N, "levels": [...], ...} (schema/v1/score.schema.json) instead of the table',
    )
    parser.add_argument(
        "--expect", type=number(above=0), metavar="N", help="published overall to check against"
    )
    parser.add_argument(
        "--tolerance",
        type=number(at_least=0),
        default=DEFAULT_TOLERANCE,
        help="relative difference allowed (default 0.005)",
    )
    parser.add_argument("--ops-label", default="ssj_ops", help='name of the ops column (default "ssj_ops")')


def _check_options(args: argparse.Namespace) -> str | None:
    if args.expect is not None and not (
        math.isfinite(args.expect) and MIN_PUBLISHED <= args.expect <= MAX_PUBLISHED
    ):
        return f"--expect must be a positive ops-per-watt figure, got {args.expect:g}"
    if not (math.isfinite(args.tolerance) and 0.0 <= args.tolerance < 1.0):
        return f"--tolerance must be a fraction from 0 to below 1, got {args.tolerance:g}"
    return None


def _level_doc(table: Table, i: int, ratio: float) -> dict[str, Any]:
    t = float(table.target[i])
    actual = float(table.actual[i])
    doc: dict[str, Any] = {
        "target": t if math.isfinite(t) else "idle",
        "actual": actual if math.isfinite(actual) else None,
        "ops": float(table.ops[i]),
        "power": float(table.power[i]),
        "ratio": ratio,
    }
    parts = table.node_parts(i)
    if parts:
        doc["node_power"] = parts
    return doc


def write_json(out: IO[str], table: Table, head: dict[str, Any]) -> None:
    """The result as JSON, one level per line, written as it goes so that a large table never sits in
    memory twice."""
    import json

    out.write("{\n")
    for key, value in head.items():
        out.write(f"  {json.dumps(key)}: {json.dumps(value, allow_nan=False)},\n")
    out.write('  "levels": [')
    r = ratios(table)
    for i in range(len(table)):
        out.write(",\n    " if i else "\n    ")
        out.write(json.dumps(_level_doc(table, i, float(r[i])), allow_nan=False))
    out.write("\n  ]\n}\n")


def print_table(table: Table, tot: Totals, ops_label: str, title: str) -> None:
    from ..report.table import print_report, print_summary_report
    from .options import output_console

    console = output_console()
    n = len(table)
    if n <= SUMMARY_ROWS:
        levels = [table.level(i) for i in range(n)]
        print_report(console, levels, tot.overall, ops_label=ops_label, title=title)
        return
    head = [table.level(i) for i in range(SHOWN_EACH_END)]
    tail = [table.level(i) for i in range(n - SHOWN_EACH_END, n)]
    print_summary_report(
        console,
        head,
        tail,
        n - 2 * SHOWN_EACH_END,
        tot.ops,
        tot.power,
        tot.overall,
        loads=int(table.is_load.sum()),
        ops_label=ops_label,
        title=title,
    )


def run(args: argparse.Namespace) -> int:
    import sys

    problem = _check_options(args)
    if problem:
        print(f"wattbench score: {problem}", file=sys.stderr)
        return 2
    try:
        table = read_table(args.file)
        tot = totals(table)
    except (TableError, ValueError) as exc:
        print(f"wattbench score: {args.file}: {exc}", file=sys.stderr)
        return 2
    value = tot.overall
    comp = comparability(table)
    expected = args.expect if args.expect is not None else table.published
    diff = (value - expected) / expected if expected is not None else None
    mismatch = diff is not None and abs(diff) > args.tolerance
    note = comp.sentence()

    if args.json:
        head: dict[str, Any] = {
            "overall": value,
            "comparable": comp.comparable,
            "missing_levels": comp.missing,
            "nonstandard_levels": comp.nonstandard_count,
        }
        if expected is not None:
            head.update(
                published_overall=expected, difference=diff, tolerance=args.tolerance, match=not mismatch
            )
        write_json(sys.stdout, table, head)
        if note:
            print(f"wattbench score: {note}", file=sys.stderr)
    else:
        print_table(table, tot, args.ops_label, str(args.file.name))
        if note:
            print(note)
    if diff is not None:
        verdict = "differs from" if mismatch else "matches"
        line = f"computed {value:,.2f} {verdict} published {expected:,.2f} ({diff * 100:+.3f}%, tolerance ±{args.tolerance * 100:g}%)"
        print(line, file=sys.stderr if args.json else sys.stdout)
    return 1 if mismatch else 0
