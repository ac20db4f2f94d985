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
import math
from pathlib import Path
from typing import IO, Any

from ..core.leveltable import (
    MAX_PUBLISHED,
    MIN_PUBLISHED,
    Table,
    TableError,
    Totals,
    comparability,
    ratios,
    totals,
)
from ..core.published import parse_table

DEFAULT_TOLERANCE = 0.005
# Above this many rows the terminal shows the first and last rows and the totals, not every row:
# drawing a million-row table takes minutes and gigabytes and nobody reads it. --json has every row.
SUMMARY_ROWS = 100
SHOWN_EACH_END = 5


def read_table(path: Path) -> Table:
    """The checked table in the file at path (core/published.py reads it)."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            return parse_table(f, is_json=path.suffix.lower() == ".json")
    except OSError as exc:
        raise TableError(f"cannot read {path}: {exc.strerror or exc}") from None


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
