"""The renderings of a scored per-level table (`wattbench score`): the terminal table, the JSON of
schema/v1/score.schema.json and an HTML page.

A table may have a million rows, so the JSON is made as it is written, one level per line, and the
terminal and the page show the first and last rows with the totals instead of every row."""

from __future__ import annotations

import html
import json
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..core.leveltable import Comparability, Table, Totals, ratios
from ..core.score import LevelScore
from .html import CSS, _rows_html, specpower_chart
from .table import (
    column_heads,
    fmt_count,
    fmt_watts,
    level_cells,
    overall_line,
    report_renderables,
    summary_levels_table,
)

# Above this many rows the terminal shows the first and last rows and the totals, not every row:
# drawing a million-row table takes minutes and gigabytes and nobody reads it. --json has every row.
SUMMARY_ROWS = 100
SHOWN_EACH_END = 5


@dataclass(frozen=True)
class PublishedCheck:
    """The computed overall against a published one (--expect, or the figure in the file)."""

    expected: float
    tolerance: float
    difference: float
    # Where the figure came from: the user's own expectation is not a published result.
    origin: str = "published"
    where: str = ""

    @property
    def match(self) -> bool:
        return abs(self.difference) <= self.tolerance

    def sentence(self, overall: float) -> str:
        verdict = "matches" if self.match else "differs from"
        where = f" ({self.where})" if self.where else ""
        return (
            f"computed {overall:,.2f} {verdict} the {self.origin} {self.expected:,.2f}{where} "
            f"({self.difference * 100:+.3f}%, tolerance ±{self.tolerance * 100:g}%)"
        )


@dataclass(frozen=True)
class ScoredTable:
    """A per-level table scored: its rows, totals, how it stands against SPECpower_ssj2008 results and,
    with a published figure, the check against it. title names it (the file's name)."""

    table: Table
    totals: Totals
    comparability: Comparability
    title: str
    ops_label: str = "ssj_ops"
    check: PublishedCheck | None = None

    def lines(self) -> list[str]:
        """What is said beside the table: why it is not comparable, and the check."""
        out = [self.comparability.sentence()]
        if self.check is not None:
            out.append(self.check.sentence(self.totals.overall))
        return [line for line in out if line]


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


def score_json(scored: ScoredTable) -> Iterator[str]:
    """The document of schema/v1/score.schema.json in pieces, one level per line, so that a large
    table never sits in memory twice."""
    comp = scored.comparability
    head: dict[str, Any] = {
        "overall": scored.totals.overall,
        "comparable": comp.comparable,
        "missing_levels": comp.missing,
        "nonstandard_levels": comp.nonstandard_count,
    }
    check = scored.check
    if check is not None:
        head.update(
            published_overall=check.expected,
            difference=check.difference,
            tolerance=check.tolerance,
            match=check.match,
        )
    yield "{\n"
    for key, value in head.items():
        yield f"  {json.dumps(key)}: {json.dumps(value, allow_nan=False)},\n"
    yield '  "levels": ['
    table = scored.table
    r = ratios(table)
    for i in range(len(table)):
        yield ",\n    " if i else "\n    "
        yield json.dumps(_level_doc(table, i, float(r[i])), allow_nan=False)
    yield "\n  ]\n}\n"


def _shown(scored: ScoredTable) -> tuple[list[LevelScore], list[LevelScore]]:
    """The rows shown: all, or for a long table the first and last few."""
    table = scored.table
    n = len(table)
    if n <= SUMMARY_ROWS:
        return [table.level(i) for i in range(n)], []
    head = [table.level(i) for i in range(SHOWN_EACH_END)]
    return head, [table.level(i) for i in range(n - SHOWN_EACH_END, n)]


def score_renderables(scored: ScoredTable) -> list[Any]:
    """The terminal's table with the overall; the lines beside it are the command's to print."""
    from rich.text import Text  # late: start-up

    head, tail = _shown(scored)
    if not tail:
        return report_renderables(head, scored.totals.overall, ops_label=scored.ops_label, title=scored.title)
    n = len(scored.table)
    omitted = n - len(head) - len(tail)
    tot = scored.totals
    return [
        summary_levels_table(
            head,
            tail,
            tot.ops,
            tot.power,
            tot.overall,
            loads=int(scored.table.is_load.sum()),
            ops_label=scored.ops_label,
            title=scored.title,
        ),
        Text(overall_line(tot.overall, scored.ops_label), style="bold"),
        f"{n:,} rows; the first {len(head)} and last {len(tail)} are shown, "
        f"{omitted:,} are not (--json prints every row)",
    ]


def render_score_html(scored: ScoredTable) -> str:
    """One self-contained page: the table (its first and last rows when long), the totals, the
    SPECpower-style chart for a table short enough to draw, and what is said beside the table."""
    head, tail = _shown(scored)
    tot = scored.totals
    body = [list(level_cells(lv)) for lv in head]
    if tail:
        body.append(["⋮"] * len(column_heads(scored.ops_label)))
        body += [list(level_cells(lv)) for lv in tail]
        loads = int(scored.table.is_load.sum())
        body.append(
            [
                f"∑ {loads:,} target loads",
                "",
                fmt_count(tot.ops),
                fmt_watts(tot.power),
                fmt_count(tot.overall),
            ]
        )
    notes = "".join(f"<li>{html.escape(line)}</li>" for line in scored.lines())
    chart = "" if tail else f"<div class=chart>{specpower_chart(head, scored.ops_label)}</div>"
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    return "\n".join(
        [
            "<!doctype html><html lang=en><head><meta charset=utf-8>",
            f"<title>wattbench score {html.escape(scored.title)}</title>",
            f"<style>{CSS}</style></head><body>",
            f"<h1>{html.escape(scored.title)}</h1>",
            f"<p class=meta>a per-level table scored by wattbench score; {len(scored.table):,} rows; made {when}</p>",
            f"<p class=overall>{html.escape(overall_line(tot.overall, scored.ops_label))}</p>",
            f"<ul class=facts>{notes}</ul>" if notes else "",
            _rows_html(column_heads(scored.ops_label), body),
            chart,
            "</body></html>",
        ]
    )
