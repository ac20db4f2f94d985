"""Reading a per-level table, such as a published SPECpower_ssj2008 result, from its text.

CSV: a header with the columns target, ops and power, and optionally actual. For several nodes, columns
`power:<node>` and `ops:<node>` are summed per row. Lines starting with '#' are comments; a comment
"published overall ... N" (or "published_overall: N") gives the figure to check against.

JSON: {"levels": [{"target": "100%" | 1.0 | "idle", "ops": n, "power": W | [W, ...] | {"node": W},
"actual": optional}, ...], "published_overall": optional, "system" and "source": optional text}. Any
other key is refused: a misspelt "published_overall" would drop the check it asks for.

No I/O: the caller opens the file and hands its lines over, so a table of a million rows is read as it
goes and never held as text. The rules of each figure and the table's checks are core/leveltable.py.
"""

from __future__ import annotations

import csv
import difflib
import math
import re
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator
from itertools import chain
from typing import Any

import numpy as np

import wattbench_schema as contract

from .leveltable import (
    IDLE_WORDS,
    MAX_ACTUAL,
    MAX_OPS,
    MAX_POWER_W,
    MIN_POWER_W,
    Columns,
    Table,
    TableError,
    parse_actual,
    parse_load,
    parse_ops,
    parse_power,
    parse_published,
    validate,
)

# As much of the text as is looked at to tell JSON from CSV when the name does not say.
SNIFF_CHARS = 4096
BLOCK_ROWS = 16384

_PUBLISHED_COMMENT = re.compile(
    r"published[ _]overall\b[^\n]*?(-?[0-9][0-9,]*(?:\.[0-9]+)?)\s*$", re.IGNORECASE
)


def parse_table(lines: Iterable[str], is_json: bool = False) -> Table:
    """The checked table from its lines, as an open text file gives them. JSON when `is_json` (the file's
    name says so) or when the text begins with "{" or "["; CSV otherwise."""
    try:
        it = iter(lines)
        head: list[str] = []
        seen = 0
        if not is_json:
            # Enough lines to pass any leading blanks, within the first SNIFF_CHARS characters.
            for line in it:
                head.append(line)
                seen += len(line)
                if line.strip() or seen >= SNIFF_CHARS:
                    break
            is_json = "".join(head)[:SNIFF_CHARS].lstrip().startswith(("{", "["))
        rest = chain(head, it)
        table = read_json("".join(rest)) if is_json else read_csv(rest)
    except UnicodeDecodeError as exc:
        raise TableError(f"not a text file (byte {exc.start} is not UTF-8)") from None
    validate(table)
    return table


def _decode_json(text: str) -> Any:
    try:
        return contract.strict_loads(text)
    except contract.DecodeError as exc:
        reason = str(exc)
        if "recursion" in reason.lower():
            reason = "nested too deeply"
        raise TableError(f"not valid JSON: {reason[:200]}") from None


JSON_KEYS = ("levels", "published_overall", "system", "source")
LEVEL_KEYS = ("target", "ops", "power", "actual")
# with power:<node> and ops:<node>
CSV_COLUMNS = LEVEL_KEYS


def _known_keys(keys: Iterable[str], known: tuple[str, ...], where: str, what: str = "key") -> None:
    for key in keys:
        if key not in known:
            near = difflib.get_close_matches(str(key), known, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else f" (known: {', '.join(known)})"
            raise TableError(f"{where}unknown {what} {str(key)[:40]!r}{hint}")


def read_json(text: str) -> Table:
    doc = _decode_json(text)
    if not isinstance(doc, dict) or not isinstance(doc.get("levels"), list):
        raise TableError('JSON must be an object with a "levels" list')
    _known_keys(doc, JSON_KEYS, "")
    cols = Columns()
    for i, lv in enumerate(doc["levels"]):
        where = f"level {i + 1}"
        if not isinstance(lv, dict) or "target" not in lv or "ops" not in lv or "power" not in lv:
            raise TableError(f"{where}: needs target, ops and power")
        _known_keys(lv, LEVEL_KEYS, f"{where}: ")
        power = lv["power"]
        parts: dict[str, float] = {}
        if isinstance(power, dict):
            parts = {str(k): parse_power(v, f"{where} power {k}") for k, v in power.items()}
        elif isinstance(power, list):
            parts = {f"node{j + 1}": parse_power(v, f"{where} power {j + 1}") for j, v in enumerate(power)}
        if isinstance(power, dict | list):
            if not parts:
                raise TableError(f"{where}: no power value")
            total = parse_power(math.fsum(parts.values()), f"{where} power")
        else:
            total = parse_power(power, f"{where} power")
        ops = lv["ops"]
        if isinstance(ops, dict):
            total_ops = parse_ops(
                math.fsum(parse_ops(v, f"{where} ops {k}") for k, v in ops.items()), f"{where} ops"
            )
        elif isinstance(ops, list):
            total_ops = parse_ops(
                math.fsum(parse_ops(v, f"{where} ops {j + 1}") for j, v in enumerate(ops)), f"{where} ops"
            )
        else:
            total_ops = parse_ops(ops, f"{where} ops")
        target = parse_load(lv["target"], f"{where} target")
        actual = parse_actual(lv.get("actual"), f"{where} actual")
        cols.add(i + 1, target, total_ops, total, parts, actual, where)
    published = doc.get("published_overall")
    return Table.from_columns(
        cols, "level", parse_published(published, "published_overall") if published is not None else None
    )


_NOT_PLAIN = frozenset("# \t\r\n\f\v")


class _Lines:
    """The data lines of a CSV file: comments and blank lines left out, the published figure picked
    up from its comment, and the number of the line last handed out kept for messages."""

    def __init__(self, f: Iterable[str]) -> None:
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
                    self.published = parse_published(m.group(1), "published overall comment")
                continue
            if stripped:
                self.lineno = lineno
                yield line


def _header_hint(header: list[str]) -> str:
    """What a spreadsheet's export most likely did to a header that names none of the columns."""
    if len(header) == 1 and header[0].count(";") >= 2:
        return ": the columns are separated by ';': use commas (and a point for decimals)"
    lower = [h.lower() for h in header]
    if lower != header and "target" in lower and any(h == "ops" or h.startswith("ops:") for h in lower):
        return ": column names are lower case: target, ops, power"
    return ""


def read_csv(f: Iterable[str]) -> Table:
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
            + _header_hint(header)
        )
    # a misspelt column would be left out unseen: `actaul` would drop the actual-load check
    _known_keys(
        (h for h in header if not h.startswith(("power:", "ops:"))), CSV_COLUMNS, "CSV header: ", "column"
    )
    twice = sorted(h for h, n in Counter(header).items() if n > 1)
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
    cols = Columns(names if per_node else ())

    def one_row(lineno: int, rec: list[str]) -> None:
        where = f"line {lineno}"
        if len(rec) > width:
            raise TableError(f"{where}: more fields than the header has")
        rec = rec + [""] * (width - len(rec))
        parts = {
            names[j]: parse_power(rec[k], f"{where} {header[k]}")
            for j, k in enumerate(power_cols)
            if rec[k].strip()
        }
        if not parts:
            raise TableError(f"{where}: no power value")
        power = next(iter(parts.values())) if len(parts) == 1 else math.fsum(parts.values())
        if len(parts) > 1:
            power = parse_power(power, f"{where} power")
        if len(ops_cols) == 1:
            k = ops_cols[0]
            ops = parse_ops(rec[k], f"{where} {header[k]}") if rec[k].strip() else 0.0
        else:
            ops = parse_ops(
                math.fsum(parse_ops(rec[k], f"{where} {header[k]}") for k in ops_cols if rec[k].strip()),
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


def _fractions(text: np.ndarray, above: float) -> np.ndarray:
    """Loads written "40%", "40" or "0.4" as fractions; raises ValueError where one is not a number.
    A figure without "%" is a percentage when it is above `above`."""
    pct = np.char.endswith(text, "%")
    x = np.char.rstrip(text, "%").astype(np.float64)
    return np.where(pct | (x > above), x / 100.0, x)


def _fast_block(
    cols: Columns,
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
        idle = np.isin(tt, list(IDLE_WORDS))
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
        col.frombytes((values.astype(np.float64) + 0.0).tobytes())  # + 0.0: "-0" is read as 0, as one by one
    cols.where.extend(lines)
    return True
