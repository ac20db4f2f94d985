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
import sys
from pathlib import Path

from ..argtypes import given
from ..core.leveltable import (
    MAX_PUBLISHED,
    MIN_PUBLISHED,
    Table,
    TableError,
    comparability,
    totals,
)
from ..core.published import parse_table
from ..report.outputs import write_outputs
from ..report.score import PublishedCheck, ScoredTable
from .options import add_output_options, number, outputs_from_args

DEFAULT_TOLERANCE = 0.005


def read_table(path: Path) -> Table:
    """The checked table in the file at path (core/published.py reads it)."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            return parse_table(f, is_json=path.suffix.lower() == ".json")
    except OSError as exc:
        raise TableError(f"cannot read {path}: {exc.strerror or exc}") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:

    parser.add_argument("file", type=Path, help="per-level table, CSV or JSON")
    parser.add_argument(
        "--expect", type=number(above=0), metavar="N", help="published overall to check against"
    )
    parser.add_argument(
        "--tolerance",
        type=number(at_least=0),
        default=DEFAULT_TOLERANCE,
        help="relative difference allowed (default 0.005)",
    )
    parser.add_argument(
        "--ops-label", type=given, default="ssj_ops", help='name of the ops column (default "ssj_ops")'
    )
    add_output_options(parser, ScoredTable)


def _check_options(args: argparse.Namespace) -> str | None:
    if args.expect is not None and not (
        math.isfinite(args.expect) and MIN_PUBLISHED <= args.expect <= MAX_PUBLISHED
    ):
        return f"--expect must be a positive ops-per-watt figure, got {args.expect:g}"
    if not (math.isfinite(args.tolerance) and 0.0 <= args.tolerance < 1.0):
        return f"--tolerance must be a fraction from 0 to below 1, got {args.tolerance:g}"
    return None


def run(args: argparse.Namespace) -> int:

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
    # --expect wins over the file's figure, and the line says which of the two it was
    expected, origin, where = (
        (args.expect, "expected", "--expect")
        if args.expect is not None
        else (table.published, "published", f"in {args.file.name}")
    )
    check = None
    if expected is not None:
        difference = (tot.overall - expected) / expected
        check = PublishedCheck(expected, args.tolerance, difference, origin, where)
    scored = ScoredTable(table, tot, comparability(table), args.file.name, args.ops_label, check)
    outputs = outputs_from_args(args, ScoredTable)
    write_outputs(scored, outputs)
    # beside the table, or on stderr while stdout carries the JSON
    note = scored.comparability.sentence()
    side = sys.stderr if outputs.machine_readable else sys.stdout
    if note:
        print(f"wattbench score: {note}" if outputs.machine_readable else note, file=side)
    if check is not None:
        print(check.sentence(tot.overall), file=side)
    return 1 if check is not None and not check.match else 0
