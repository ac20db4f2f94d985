"""Renderings of a comparison of candidates (core/compare.py) and of a suite result: the terminal
table, the JSON document (schema/v1/compare.schema.json), and a self-contained HTML page with the
candidates' curves overlaid (ops per watt against load, power against load) as inline SVG."""

from __future__ import annotations

import html
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.compare import COLUMNS, Curve, Point, Prices, Row
from . import measured as ms
from .html import CSS, figure_svg, pyplot
from .measured import rate_unit
from .table import fmt_count, fmt_watts
from .terminal import new_table

BEST = "★"
NOT_COMPARABLE = "≠"
COLOURS = ("#3b6ea8", "#c0392b", "#217a3c", "#9a6700", "#6c3fa0", "#0f7c8c", "#a0366b", "#555555")


def _fmt(key: str, value: float, unit: str) -> str:
    if key in ("idle_W", "peak_W"):
        return f"{fmt_watts(value)} W"
    if key == "suite_score":
        return f"{value:.3f}"
    if key in ("price_per_ops", "energy_cost"):
        return f"{value:.4g}"
    if key in ("peak_ops", "ops_per_currency", "ops_per_u"):
        return f"{fmt_count(value)} {rate_unit(unit)}"
    if key == "overall":
        return f"{fmt_count(value)} {rate_unit(unit)} per W"
    return f"{value:.4g}"


def _columns(rows: Sequence[Row]) -> list[tuple[str, str, bool | None]]:
    """The columns some candidate has a figure for."""
    return [c for c in COLUMNS if any(c[0] in r.figures for r in rows)]


def _status(r: Row) -> str:
    if r.candidate.valid is None:
        return "published"
    return "VALID" if r.candidate.valid else "INVALID"


def compare_document(rows: Sequence[Row], prices: Prices | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "v": 1,
        "baseline": rows[0].candidate.name,
        "candidates": [
            {
                "name": r.candidate.name,
                "source": r.candidate.source[:500],
                "kind": r.candidate.kind,
                "workload": r.candidate.workload[:500],
                "unit": r.candidate.unit,
                "status": _status(r),
                "figures": {k: v for k, v in r.figures.items() if math.isfinite(v)},
                "best": sorted(r.best),
                "comparable": not r.incomparable,
                "incomparable": r.incomparable,
                "notes": r.candidate.notes,
                **({"suite_reference": r.candidate.suite_reference} if r.candidate.suite_reference else {}),
            }
            for r in rows
        ],
    }
    if prices is not None:
        out["prices"] = {
            "price": dict(prices.price),
            "rack_units": dict(prices.rack_units),
            "years": prices.years,
            **({"tariff_kwh": prices.tariff_kwh} if prices.tariff_kwh is not None else {}),
        }
    return out


def _legend_lines(rows: Sequence[Row], prices: Prices | None) -> list[str]:
    lines = [
        f"{BEST} best among the candidates comparable with the baseline ({rows[0].candidate.name}); "
        f"{NOT_COMPARABLE} not comparable with it (reasons below).",
    ]
    if any(r.candidate.kind == "suite" for r in rows):
        lines.append(
            "Suite scores are SERT-style, relative to the reference each suite names: not SPEC SERT "
            "scores, and not comparable with published ones."
        )
    if prices is not None and prices.tariff_kwh is not None:
        lines.append(
            f"Energy cost: mean power over the scored loads and active idle (equal time in each) × "
            f"{prices.years:g} years × tariff; price per unit/s = price ÷ peak throughput; unit/s per "
            "currency unit = peak throughput ÷ (price + energy cost)."
        )
    elif prices is not None and prices.price:
        # no tariff, so no energy cost: the legend says only what the columns shown are
        lines.append(
            "Price per unit/s = price ÷ peak throughput; unit/s per currency unit = peak throughput ÷ price "
            "(no --tariff: no energy cost)."
        )
    return lines


# A rich table's frame: the left border, then per column a space each side and the border after it.
_TABLE_EDGE = 1
_PER_COLUMN = 3
# A candidate's name may fold (it is text); a name up to this long is kept on one line.
_NAME_WIDTH = 20


def _longest_word(texts: Sequence[str]) -> int:
    from rich.cells import cell_len  # late: start-up

    return max((cell_len(w) for t in texts for w in t.split()), default=1)


def _longest_line(texts: Sequence[str]) -> int:
    from rich.cells import cell_len  # late: start-up

    return max((cell_len(t) for t in texts), default=1)


def _fold(needs: Sequence[int], beside: int, width: int) -> list[list[int]]:
    """The figure columns in groups, each as wide as the terminal at most beside the fixed columns
    (needs and beside with their frame); a column wider than that on its own has a group to itself."""
    groups: list[list[int]] = [[]]
    used = beside
    for i, need in enumerate(needs):
        if groups[-1] and used + need > width:
            groups.append([])
            used = beside
        groups[-1].append(i)
        used += need
    return groups


def _share(least: list[int], most: Sequence[int], room: int) -> list[int]:
    """Widths from the least each column needs toward the most it can use, sharing out `room`."""
    widths = list(least)
    while room > 0:
        short = [i for i in range(len(widths)) if widths[i] < most[i]]
        if not short:
            break
        for i in sorted(short, key=lambda i: widths[i] - most[i])[:room]:
            widths[i] += 1
            room -= 1
    return widths


def compare_renderables(rows: Sequence[Row], prices: Prices | None, width: int = 80) -> list[Any]:
    """The table at most `width` wide. Text wraps between words and a name may fold, but a number is
    never cut: each figure column is at least as wide as its longest word, and columns that do not
    fit beside each other go into a further table with the candidates repeated."""
    from rich.text import Text  # late: start-up

    cols = _columns(rows)
    names = [r.candidate.name + (f" {NOT_COMPARABLE}" if r.incomparable else "") for r in rows]
    statuses = [_status(r) for r in rows]
    # the cells say ops/s (or the candidate's unit per second): so does the heading
    heads = [head.replace("unit/s", "ops/s") for _, head, _ in cols]
    cells = [
        [
            _fmt(key, r.figures[key], r.candidate.unit) + (f" {BEST}" if key in r.best else "")
            if key in r.figures
            else "—"
            for r in rows
        ]
        for key, _, _ in cols
    ]
    # The heading is the column's as much as its cells: names of one letter folded "candidate" down the page.
    fixed_least = [
        min(_longest_word(["candidate", *names]), _NAME_WIDTH),
        _longest_word(["status", *statuses]),
    ]
    fixed_most = [_longest_line(["candidate", *names]), _longest_line(["status", *statuses])]
    least = [_longest_word([h, *c]) for h, c in zip(heads, cells, strict=True)]
    most = [_longest_line([h, *c]) for h, c in zip(heads, cells, strict=True)]
    widest = max(least, default=0) + _PER_COLUMN
    # In a very narrow terminal the names fold further before anything else gives way.
    spare = width - widest - _TABLE_EDGE - 2 * _PER_COLUMN - fixed_least[1]
    fixed_least[0] = max(1, min(fixed_least[0], spare))
    beside = _TABLE_EDGE + sum(w + _PER_COLUMN for w in fixed_least)
    groups = _fold([w + _PER_COLUMN for w in least], beside, width)
    out: list[Any] = []
    if beside + widest > width or (len(groups) > 1 and 2 * len(groups) > len(cols)):
        # Too narrow for tables of a few columns each: a list, whose lines wrap between words.
        groups = []
        out.append(Text("candidates"))
        for j in range(len(rows)):
            out.append(Text(f"{names[j]} ({statuses[j]})", style="bold"))
            out += [Text(f"  {heads[i]}: {cells[i][j]}") for i in range(len(cols))]
    for n, group in enumerate(groups, 1):
        room = width - beside - sum(least[i] + _PER_COLUMN for i in group)
        widths = _share(
            [*fixed_least, *(least[i] for i in group)], [*fixed_most, *(most[i] for i in group)], room
        )
        title = "candidates" if len(groups) == 1 else f"candidates ({n} of {len(groups)})"
        table = new_table(title=title, title_justify="left")
        table.add_column("candidate", width=widths[0], overflow="fold")
        table.add_column("status", width=widths[1], overflow="fold")
        for i, w in zip(group, widths[2:], strict=True):
            table.add_column(heads[i], width=w, justify="right", overflow="fold")
        for j, r in enumerate(rows):
            figures = [Text(cells[i][j], style="bold" if cols[i][0] in r.best else "") for i in group]
            table.add_row(names[j], statuses[j], *figures)
        out.append(table)
    out += [Text(line) for line in _legend_lines(rows, prices)]
    for r in rows:
        for why in r.incomparable:
            out.append(Text(f"{NOT_COMPARABLE} {r.candidate.name}: {why}", style="yellow"))
        for note in r.candidate.notes:
            out.append(Text(f"  {r.candidate.name}: {note}"))
    return out


def _curves(rows: Sequence[Row]) -> list[tuple[Curve, int]]:
    return [(curve, i) for i, r in enumerate(rows) for curve in r.candidate.curves]


def overlay_charts(curves: Sequence[tuple[Curve, int]]) -> tuple[str, str]:
    """(ops per watt against load, power against load), every curve on the same axes. Throughputs of
    different units share the first chart on a log scale; the legend names each unit."""
    plt = pyplot()
    styles = ("-", "--", ":", "-.")
    charts = []
    for what in ("ratio", "W"):
        fig, ax = plt.subplots(figsize=(9, 4.4))
        for j, (curve, i) in enumerate(curves):
            pts = sorted(curve.points, key=lambda p: p.target)
            ys = [p.ratio if what == "ratio" else p.W for p in pts]
            label = curve.label + (f" ({rate_unit(curve.unit)} per W)" if what == "ratio" else "")
            ax.plot(
                [p.target * 100 for p in pts],
                ys,
                marker="o",
                markersize=3,
                color=COLOURS[i % len(COLOURS)],
                linestyle=styles[j % len(styles)],
                label=label,
            )
        ax.set_xlabel("target load (% of calibrated throughput)")
        if what == "ratio":
            ax.set_ylabel("throughput per watt")
            ax.set_yscale("log")
        else:
            ax.set_ylabel("average active power (W)")
            ax.set_ylim(bottom=0)
        ax.set_xlim(0, 105)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="best")
        charts.append(figure_svg(fig))
    return charts[0], charts[1]


def render_compare_html(rows: Sequence[Row], prices: Prices | None) -> str:
    cols = _columns(rows)
    head = "".join(f"<th>{html.escape(h)}</th>" for _, h, _ in cols)
    body = []
    for r in rows:
        mark = f' <span class=fail title="not comparable">{NOT_COMPARABLE}</span>' if r.incomparable else ""
        cells = []
        for key, _, _ in cols:
            if key not in r.figures:
                cells.append("<td class=n>—</td>")
                continue
            text = html.escape(_fmt(key, r.figures[key], r.candidate.unit))
            cells.append(
                f"<td class=n><b>{text} {BEST}</b></td>" if key in r.best else f"<td class=n>{text}</td>"
            )
        body.append(
            f"<tr><td>{html.escape(r.candidate.name)}{mark}</td><td>{_status(r)}</td>{''.join(cells)}</tr>"
        )
    notes = [f"<li>{html.escape(line)}</li>" for line in _legend_lines(rows, prices)]
    for r in rows:
        notes += [
            f"<li class=fail>{NOT_COMPARABLE} {html.escape(r.candidate.name)}: {html.escape(w)}</li>"
            for w in r.incomparable
        ]
        notes += [f"<li>{html.escape(r.candidate.name)}: {html.escape(n)}</li>" for n in r.candidate.notes]
        notes.append(
            f"<li class=meta>{html.escape(r.candidate.name)}: from {html.escape(r.candidate.source)}</li>"
        )
    ratio_svg, power_svg = overlay_charts(_curves(rows))
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    return "\n".join(
        [
            "<!doctype html><html lang=en><head><meta charset=utf-8>",
            "<title>wattbench comparison</title>",
            f"<style>{CSS}</style></head><body>",
            f"<h1>Candidates compared</h1><p class=meta>{len(rows)} candidates, baseline "
            f"{html.escape(rows[0].candidate.name)}; made {when}</p>",
            f"<table><thead><tr><th>candidate</th><th>status</th>{head}</tr></thead><tbody>",
            "".join(body),
            "</tbody></table>",
            f"<ul class=facts>{''.join(notes)}</ul>",
            "<h2>Throughput per watt against load</h2>",
            f"<div class=chart>{ratio_svg}</div>",
            "<h2>Power against load</h2>",
            f"<div class=chart>{power_svg}</div>",
            "</body></html>",
        ]
    )


def write_compare_html(path: str, rows: Sequence[Row], prices: Prices | None) -> None:
    text = render_compare_html(rows, prices)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


# ---------------------------------------------------------------------------- a suite's result
def _suite_cells(w: Mapping[str, Any]) -> list[str]:
    return [
        w["name"],
        w["group"],
        w["unit"],
        fmt_count(w["calibrated"]) if "calibrated" in w else "—",
        fmt_count(w["overall"]) if "overall" in w else "—",
        f"{w['efficiency']:.4g}" if "efficiency" in w else "—",
        ("VALID" if w["valid"] else "INVALID") + (", interrupted" if w.get("partial") else ""),
    ]


def suite_renderables(doc: Mapping[str, Any]) -> list[Any]:
    """A suite result on the terminal: each worklet's efficiency, the score, and what it is not."""
    from rich.text import Text  # late: start-up

    table = new_table(title=f"suite {doc['suite']}, run {doc['run']}", title_justify="left")
    for head in (
        "worklet",
        "group",
        "unit",
        "calibrated (/s)",
        "overall (/s per W)",
        "efficiency",
        "verdict",
    ):
        left = head in ("worklet", "group", "unit", "verdict")
        table.add_column(head, justify="left" if left else "right", overflow="fold")
    for w in doc["worklets"]:
        table.add_row(*_suite_cells(w))
    out: list[Any] = [table]
    for w in doc["worklets"]:
        out += [Text(f"{w['name']}: {f}", style="red") for f in w.get("failed", [])]
    m = doc.get("measured")
    if m:
        measured = new_table(
            show_header=False, box=None, pad_edge=False, title="What was measured", title_justify="left"
        )
        measured.add_column(style="bold")
        measured.add_column()
        for label, text in ms.suite_items(m):
            measured.add_row(label, text)
        out.append(measured)
        rehearsal = ms.rehearsal_text(m)
        if rehearsal:
            out.append(Text(rehearsal, style="bold yellow"))
    if "idle_W" in doc:
        out.append(Text(f"active idle {fmt_watts(doc['idle_W'])} W (measured once for the suite)"))
    score = doc.get("score")
    if score:
        groups = ", ".join(
            f"{g} {v:.4g} (weight {score['weights'][g]:.0%})" for g, v in score["groups"].items()
        )
        out.append(
            Text(
                f"suite score {score['value']:.4f} relative to {score['reference']}"
                + (" — PARTIAL" if score["partial"] else ""),
                style="bold",
            )
        )
        out.append(Text(f"group efficiencies: {groups}"))
        out += [Text(n) for n in score["notes"]]
    else:
        out.append(
            Text(f"no suite score: {doc.get('score_refused', 'no worklet finished')}", style="bold red")
        )
    if doc.get("interrupted"):
        out.append(Text(f"interrupted: {doc['interrupted']}; the finished worklets are kept", style="yellow"))
    verdict = "VALID" if doc["valid"] else "NOT VALID"
    out.append(Text(f"suite result: {verdict}", style="bold green" if doc["valid"] else "bold red"))
    out.append(Text(doc["label"], style="dim"))
    return out


def _suite_measured_html(m: Mapping[str, Any]) -> str:
    """The suite's "what was measured", as a run's page shows it; a suite written before it was
    recorded says so."""
    if not m:
        return "<h2>What was measured</h2><p class=meta>not recorded for this suite</p>"
    rows = "".join(
        f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in ms.suite_items(m)
    )
    return f"<h2>What was measured</h2><table><tbody>{rows}</tbody></table>"


def render_suite_html(doc: Mapping[str, Any]) -> str:
    """The suite's page: the worklet table (under a rehearsal banner when a window was shorter than
    SPECpower's), the score with its label, what was measured, both overlaid charts."""
    curves = [
        (
            Curve(
                w["name"],
                w["unit"],
                tuple(
                    Point(float(lv.get("target", 0.0)), float(lv["ops"]), float(lv["W"]))
                    for lv in w["levels"]
                ),
            ),
            i,
        )
        for i, w in enumerate(doc["worklets"])
        if w["levels"]
    ]
    rows = [
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in _suite_cells(w)) + "</tr>"
        for w in doc["worklets"]
    ]
    score = doc.get("score")
    if score:
        line = f"suite score {score['value']:.4f} relative to {score['reference']}" + (
            " (partial)" if score["partial"] else ""
        )
        facts = [line, *score["notes"]]
    else:
        facts = [f"no suite score: {doc.get('score_refused', 'no worklet finished')}"]
    facts += [f"{w['name']}: {f}" for w in doc["worklets"] for f in w.get("failed", [])]
    if "idle_W" in doc:
        facts.append(f"active idle {fmt_watts(doc['idle_W'])} W, measured once for the suite")
    if doc.get("interrupted"):
        facts.append(f"interrupted: {doc['interrupted']}; the finished worklets are kept")
    badge = "valid" if doc["valid"] else "invalid"
    m = doc.get("measured") or {}
    rehearsal = ms.rehearsal_text(m)
    parts = [
        "<!doctype html><html lang=en><head><meta charset=utf-8>",
        f"<title>wattbench suite {html.escape(doc['suite'])}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>Suite {html.escape(doc['suite'])}</h1><p class=meta>run {html.escape(doc['run'])} · "
        f'<span class="badge {badge}">{"VALID" if doc["valid"] else "NOT VALID"}</span></p>',
        f"<p class=meta>{html.escape(doc['label'])}</p>",
        *([f'<p><span class="badge rehearsal">{html.escape(rehearsal)}</span></p>'] if rehearsal else []),
        "<table><thead><tr><th>worklet</th><th>group</th><th>unit</th><th>calibrated (/s)</th>"
        "<th>overall (/s per W)</th><th>efficiency</th><th>verdict</th></tr></thead><tbody>",
        "".join(rows),
        "</tbody></table>",
        "<ul class=facts>" + "".join(f"<li>{html.escape(f)}</li>" for f in facts) + "</ul>",
    ]
    parts.append(_suite_measured_html(m))
    if curves:
        ratio_svg, power_svg = overlay_charts(curves)
        parts += [
            "<h2>Throughput per watt against load</h2>",
            f"<div class=chart>{ratio_svg}</div>",
            "<h2>Power against load</h2>",
            f"<div class=chart>{power_svg}</div>",
        ]
    parts.append("</body></html>")
    return "\n".join(parts)
