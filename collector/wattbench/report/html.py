"""One self-contained HTML page per run: inline CSS, charts as inline SVG drawn by matplotlib, no
scripts and no external files, so it can be mailed or archived as it is.

It shows the result table in the SPECpower layout, the SPECpower-style chart (performance to power
ratio as bars, average power as a line on a second axis), the power trace of every level with its
measurement window marked, and every compliance check with its reason.
"""

from __future__ import annotations

import html
import io
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..core.clocktrack import ClockTrack, OffsetSource, window_offset
from ..core.score import LevelScore, concurrency_figures
from . import measured as ms
from .jsonreport import clock_stretches
from .measured import badge_text, failures_first, result_ops_label
from .table import (
    column_heads,
    concurrency_cells,
    fmt_count,
    fmt_watts,
    level_cells,
    nodes_cells,
    overall_line,
    rate_unit,
    ratio_unit,
    target_label,
)

MAX_TRACE_CHANNELS = 8

CSS = """
body{font:15px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1100px;color:#1d2327;padding:0 1rem}
h1{font-size:1.5rem;margin-bottom:.2rem}h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #ddd;padding-bottom:.2rem}
.meta{color:#555}.badge{display:inline-block;padding:.1rem .6rem;border-radius:.3rem;font-weight:600;color:#fff}
.valid{background:#217a3c}.invalid{background:#b3261e}.rehearsal{background:#9a6700}
table{border-collapse:collapse;margin:.6rem 0}th,td{padding:.3rem .7rem;border-bottom:1px solid #e3e3e3}
th{background:#f4f5f7;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}
.overall{font-size:1.2rem;font-weight:600;margin:.6rem 0}.pass{color:#217a3c;font-weight:600}.fail{color:#b3261e;font-weight:600}
.chart svg{max-width:100%;height:auto}.facts li{margin:.1rem 0}
"""


def figure_svg(fig: Any) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    import matplotlib.pyplot as plt  # late: start-up

    plt.close(fig)
    text = buf.getvalue()
    return text[text.find("<svg") :]


def pyplot() -> Any:
    import matplotlib  # late: start-up

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt  # late: start-up

    plt.rcParams["svg.fonttype"] = "none"  # text stays text: smaller, searchable
    plt.rcParams["svg.hashsalt"] = "wattbench"  # same input, same page
    return plt


# Every axis runs this far past its data (a share of the data's span), so the tallest bar, the highest
# point and a flat trace stand clear of the frame instead of sitting on it.
HEADROOM = 0.08


def padded(lo: float, hi: float, from_zero: bool = False) -> tuple[float, float]:
    """Axis limits HEADROOM beyond the data lo..hi on both sides; from_zero keeps 0 as the bottom
    (bars, and power, which reads against zero), the span then counted from it. A flat series (lo ==
    hi) is padded by a share of its value, so it is drawn in the middle of the frame."""
    if from_zero:
        lo = min(lo, 0.0)
    span = hi - lo
    if not math.isfinite(span) or span <= 0:
        span = abs(hi) if math.isfinite(hi) and hi else 1.0
    return (lo if from_zero else lo - HEADROOM * span, hi + HEADROOM * span)


def framed(*axes: Any) -> None:
    """A visible line all round each plot, so the headroom reads as space inside a frame."""
    for ax in axes:
        for spine in ax.spines.values():
            spine.set_visible(True)
            spine.set_linewidth(1.0)
            spine.set_color("#555555")


def _bar_xlim(n: int) -> tuple[float, float]:
    """Headroom beside bars at 0..n-1 (each 0.8 wide)."""
    return padded(-0.4, n - 1 + 0.4)


def specpower_chart(levels: Sequence[LevelScore], ops_label: str = "ops") -> str:
    """Performance to power ratio as bars, average active power as a line on a second axis."""
    plt = pyplot()
    rows = [lv for lv in levels if lv.has_power]
    labels = [target_label(lv) for lv in rows]
    ratios = [0.0 if lv.kind == "idle" else lv.ratio for lv in rows]
    watts = [lv.W for lv in rows]
    fig, ax = plt.subplots(figsize=(9, 4.2))
    x = list(range(len(rows)))
    ax.bar(x, ratios, color="#3b6ea8", label="performance to power ratio")
    ax.set_ylabel(f"performance to power ratio ({ratio_unit(ops_label)})")
    ax.set_xticks(x, labels, rotation=0, fontsize=8)
    ax2 = ax.twinx()
    ax2.plot(x, watts, color="#c0392b", marker="o", label="average active power (W)")
    ax2.set_ylabel("average active power (W)")
    ax2.set_ylim(*padded(0.0, max(watts or [1.0]), from_zero=True))
    ax.set_ylim(*padded(0.0, max(ratios or [1.0]), from_zero=True))
    ax.set_xlim(*_bar_xlim(len(rows)))
    framed(ax, ax2)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, loc="upper right", fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return figure_svg(fig)


def concurrency_chart(levels: Sequence[LevelScore]) -> str:
    plt = pyplot()
    figs = concurrency_figures(levels)
    rows = [lv for lv in levels if lv.phase in figs]
    x = [lv.copies or 0 for lv in rows]
    fig, ax = plt.subplots(figsize=(8, 4))
    relative = [figs[lv.phase][0] for lv in rows]
    energy = [figs[lv.phase][1] for lv in rows]
    ax.bar([str(c) for c in x], relative, color="#3b6ea8", label="relative throughput")
    ax.set_xlabel("copies")
    ax.set_ylabel("throughput relative to the fewest copies")
    ax2 = ax.twinx()
    ax2.plot([str(c) for c in x], energy, color="#c0392b", marker="o", label="energy per job (J)")
    ax2.set_ylabel("energy per job (J)")
    ax.set_ylim(*padded(0.0, _top(relative), from_zero=True))
    ax2.set_ylim(*padded(0.0, _top(energy), from_zero=True))
    ax.set_xlim(*_bar_xlim(len(rows)))
    framed(ax, ax2)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, loc="upper left", fontsize=8)
    return figure_svg(fig)


def _top(values: Sequence[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return max(finite) if finite else 1.0


def phase_spans(events: Sequence[dict[str, Any]]) -> dict[str, tuple[int, int, int, int]]:
    """phase -> (phase_start, measure_start, measure_end, phase_end) in UTC ms, where all four exist."""
    marks: dict[str, dict[str, int]] = {}
    for e in events:
        marks.setdefault(str(e.get("phase")), {})[str(e.get("event"))] = int(e["t"])
    out = {}
    for phase, m in marks.items():
        if {"measure_start", "measure_end"} <= set(m):
            out[phase] = (
                m.get("phase_start", m["measure_start"]),
                m["measure_start"],
                m["measure_end"],
                m.get("phase_end", m["measure_end"]),
            )
    return out


def traces_chart(
    levels: Sequence[LevelScore],
    events: Sequence[dict[str, Any]],
    fetch: Callable[..., Any],
    channels: Sequence[Any],
    offsets_ms: Mapping[str, OffsetSource],
) -> str:
    """Small multiples: each level's power over its whole interval, the measurement window shaded."""
    plt = pyplot()
    spans = phase_spans(events)
    rows = [lv for lv in levels if lv.phase in spans]
    power = [c for c in channels if c.role == "power"][:MAX_TRACE_CHANNELS]
    if not rows or not power:
        return ""
    cols = 4 if len(rows) > 6 else min(3, len(rows))
    nrows = math.ceil(len(rows) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(3.0 * cols, 2.2 * nrows), squeeze=False, sharey=True)
    for ax in axes.flat[len(rows) :]:
        ax.set_visible(False)
    lows: list[float] = []
    highs: list[float] = []
    for ax, lv in zip(axes.flat, rows, strict=False):
        p0, m0, m1, p1 = spans[lv.phase]
        for c in power:
            off = window_offset(offsets_ms.get(c.dev), m0, m1)
            s = fetch(c.dev, c.ch, int(p0 + off), int(p1 + off), ("W",))
            t = (s.t_ms.astype(float) - off - m0) / 1000.0
            w = np.asarray(s.values["W"], dtype=float)
            ax.plot(t, w, lw=0.8, label=c.key)
            if np.isfinite(w).any():
                lows.append(float(np.nanmin(w)))
                highs.append(float(np.nanmax(w)))
        ax.axvspan(0, (m1 - m0) / 1000.0, color="#3b6ea8", alpha=0.08)
        # The whole interval, ramps included, with headroom on both sides.
        ax.set_xlim(*padded((p0 - m0) / 1000.0, (p1 - m0) / 1000.0))
        framed(ax)
        ax.set_title(f"{target_label(lv)} · {fmt_watts(lv.W)} W", fontsize=9)
        ax.tick_params(labelsize=7)
        ax.set_xlabel("s from window start", fontsize=7)
    if lows:
        axes.flat[0].set_ylim(*padded(min(lows), max(highs)))  # shared by every level
    axes.flat[0].set_ylabel("W", fontsize=8)
    if len(power) > 1:
        axes.flat[0].legend(fontsize=6)
    fig.tight_layout()
    return figure_svg(fig)


def _table_html(levels: Sequence[LevelScore], ops_label: str) -> str:
    if any(lv.kind == "concurrency" for lv in levels):
        head, body = concurrency_cells(levels)
    else:
        head, body = column_heads(ops_label), [list(level_cells(lv)) for lv in levels]
    return _rows_html(head, body)


def _rows_html(head: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    out = ["<table><thead><tr>", *(f"<th>{html.escape(h)}</th>" for h in head), "</tr></thead><tbody>"]
    for row in body:
        out.append(
            "<tr>"
            + "".join(f"<td{' class=n' if i else ''}>{html.escape(v)}</td>" for i, v in enumerate(row))
            + "</tr>"
        )
    out.append("</tbody></table>")
    return "".join(out)


def _checks_html(checks: Sequence[Any]) -> str:
    out = ["<table><thead><tr><th></th><th>check</th><th>phase</th><th>reason</th></tr></thead><tbody>"]
    for c in failures_first(checks):
        mark = '<span class="pass">pass</span>' if c.ok else '<span class="fail">FAIL</span>'
        out.append(
            f"<tr><td>{mark}</td><td>{html.escape(c.name)}</td><td>{html.escape(c.phase or '')}</td>"
            f"<td>{html.escape(c.reason)}</td></tr>"
        )
    out.append("</tbody></table>")
    return "".join(out)


def _clock_time(ms: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(ms / 1000)) + f".{int(ms % 1000):03d}"


def _clocks_html(clock: Mapping[str, ClockTrack]) -> str:
    """Devices whose clock stepped: each stretch of steady clock, from when, and its offset."""

    rows = []
    for dev, track in sorted(clock.items()):
        if not track.steps:
            continue
        for st in clock_stretches(track):
            since = st.get("from_ms")
            if since is None:
                when = "start"
            elif isinstance(since, list):
                when = f"between {_clock_time(since[0])} and {_clock_time(since[1])} (not placed)"
            else:
                when = _clock_time(since)
            off = st["offset_ms"]
            rows.append(
                f"<tr><td>{html.escape(dev)}</td><td>{when}</td>"
                f"<td>{'unknown' if off is None else f'{off:+.0f} ms'}</td></tr>"
            )
    if not rows:
        return ""
    return (
        "<h2>Device clocks</h2><p class=meta>A device clock stepped during the run; each window was moved by "
        "the offset (device minus host, UTC times on the host clock) of the stretch it lies in.</p>"
        "<table><thead><tr><th>device</th><th>from</th><th>offset</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table>"
    )


def _channels_html(rows: Sequence[Mapping[str, Any]]) -> str:
    """The channels the run used: the power ones are what was summed."""
    if not rows:
        return ""
    body = "".join(
        "<tr>"
        + "".join(
            f"<td>{html.escape(str(v))}</td>"
            for v in (
                r["dev"],
                r["ch"],
                r.get("meter", "unknown"),
                ms.role_cell(r),
                r.get("node", ""),
                ms.accuracy_cell(r),
                f"every {r['upd']:g} s" if "upd" in r else "",
                fmt_count(r.get("samples", 0)),
            )
        )
        + "</tr>"
        for r in rows
    )
    return (
        "<h2>Channels</h2><p class=meta>Only channels whose role is server power are summed; samples "
        "are the usable ones inside the measurement windows.</p><table><thead><tr><th>device</th>"
        "<th>channel</th><th>meter</th><th>role</th><th>node</th><th>accuracy</th><th>updates</th>"
        "<th>samples</th></tr></thead><tbody>" + body + "</tbody></table>"
    )


def _measured_html(evaluation: Any) -> str:
    """The system under test, calibration, timing (a rehearsal is marked) and the inlet."""

    m = ms.measured(evaluation)
    rows = [
        ("system under test", " · ".join(f"{k}: {v}" for k, v in ms.sut_items(m))),
        *ms.how_items(m, evaluation.result),
        (
            "calibration",
            ms.calibration_text(m, evaluation.calibrated, fmt_count, ms.result_ops_label(evaluation.result)),
        ),
        ("timing", ms.timing_text(m)),
        ("inlet", ms.inlet_text(m)),
        ("standard", ms.standard_text(evaluation.result)),
        ("scored with", ms.options_text(evaluation.result)),
    ]
    out = ["<h2>What was measured</h2>"]
    rehearsal = ms.rehearsal_text(m)
    if rehearsal:
        out.append(f'<p><span class="badge rehearsal">{html.escape(rehearsal)}</span></p>')
    out.append("<table><tbody>")
    out += [f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows]
    out.append("</tbody></table>")
    if m["timing"]:
        out.append(
            "<table><thead><tr><th>interval</th><th>ramp-up (s)</th><th>measurement window (s)</th>"
            "<th>ramp-down (s)</th></tr></thead><tbody>"
        )
        for r in m["timing"]:
            cells = [r.get("ramp_up_s"), r["measure_s"], r.get("ramp_down_s")]
            out.append(
                f"<tr><td>{html.escape(r['phase'])}</td>"
                + "".join(f"<td class=n>{'' if v is None else f'{v:g}'}</td>" for v in cells)
                + "</tr>"
            )
        out.append("</tbody></table>")
    return "".join(out)


def _nodes_html(levels: Sequence[LevelScore]) -> list[str]:
    head, body = nodes_cells(levels)
    if not body:
        return []
    return [
        "<h2>Nodes</h2><p class=meta>Per level, the nodes that ran its jobs and the nodes left idle, each "
        "with their power; both count in the level's power.</p>",
        _rows_html(head, body),
    ]


def _idle_measured(result: dict[str, Any]) -> bool:
    return "idle_W" in (result.get("summary") or {})


def _simulated_badge(result: Mapping[str, Any]) -> str:
    """A simulated meter said at the top of the page, where a reader reads the watts."""
    if not result.get("simulated_meter"):
        return ""
    return (
        ' <span class="badge rehearsal">simulated meter</span></p>'
        f"<p class=meta>{html.escape(ms.SIMULATED_TEXT)}"
    )


def render_html(evaluation: Any, fetch: Callable[..., Any] | None = None) -> str:
    """The page as a string. fetch (Store.series) adds the power traces; without it they are left out.
    Throughput is in the workload's own unit."""

    result = evaluation.result
    ops_label = result_ops_label(result)
    levels = evaluation.levels
    valid = bool(result.get("valid"))
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(result["t"] / 1000))
    facts = []
    if evaluation.calibrated:
        facts.append(f"calibrated throughput {fmt_count(evaluation.calibrated)} {rate_unit(ops_label)}")
    summ = result.get("summary", {})
    for key, label, fmt in (
        ("peak_ops", f"peak throughput ({rate_unit(ops_label)})", fmt_count),
        ("peak_W", "peak power (W)", fmt_watts),
        ("idle_W", "active idle power (W)", fmt_watts),
        ("energy_Wh", "run energy (Wh)", lambda v: f"{v:.4g}"),
        ("cost", "energy cost of the run", lambda v: f"{v:.4g}"),
        ("ops_per_dollar", f"{ops_label} per currency unit over the service life", fmt_count),
    ):
        if key in summ:
            facts.append(f"{label}: {fmt(summ[key])}")
    if "idle_W" not in summ:
        facts.append("active idle power (W): not measured")
    if result.get("partial"):
        facts.append("partial run: interrupted before the end")

    parts = [
        "<!doctype html><html lang=en><head><meta charset=utf-8>",
        f"<title>wattbench run {html.escape(evaluation.run)}</title><style>{CSS}</style></head><body>",
        f"<h1>wattbench run {html.escape(evaluation.run)}</h1>",
        f"<p class=meta>{html.escape(ms.workload_text(result))} · scored {when} · "
        f'<span class="badge {"valid" if valid else "invalid"}">'
        f"{html.escape(badge_text(valid, evaluation.checks, result))}</span>{_simulated_badge(result)}</p>",
        "<h2>Result</h2>",
        _table_html(levels, ops_label),
        *_nodes_html(levels),
        f"<p class=overall>{html.escape(overall_line(result['overall'], ops_label, idle=_idle_measured(result)))}</p>",
        "<ul class=facts>" + "".join(f"<li>{html.escape(f)}</li>" for f in facts) + "</ul>",
    ]
    if any(lv.has_power for lv in levels):
        if any(lv.kind == "concurrency" for lv in levels):
            parts += [
                "<h2>Throughput and energy per job</h2>",
                f"<div class=chart>{concurrency_chart(levels)}</div>",
            ]
        else:
            parts += [
                "<h2>Performance to power ratio and average power</h2>",
                f"<div class=chart>{specpower_chart(levels, ops_label)}</div>",
            ]
    if fetch is not None and evaluation.events and evaluation.channels:
        # The devices alignment moved, each by its own track when its clock stepped.
        shifts = {d: evaluation.clock.get(d, o) for d, o in evaluation.offsets_ms.items()}
        svg = traces_chart(levels, evaluation.events, fetch, evaluation.channels, shifts)
        if svg:
            parts += [
                "<h2>Power per level</h2>",
                "<p class=meta>Shaded: the measurement window.</p>",
                f"<div class=chart>{svg}</div>",
            ]
    parts.append(_measured_html(evaluation))
    parts += ["<h2>Compliance</h2>", _checks_html(evaluation.checks)]
    clocks = _clocks_html(evaluation.clock)
    if clocks:
        parts.append(clocks)
    channels = _channels_html(result.get("channels") or [])
    if channels:
        parts.append(channels)
    parts.append("</body></html>")
    return "\n".join(parts)


def write_html(path: str, evaluation: Any, fetch: Callable[..., Any] | None = None) -> None:
    text = render_html(evaluation, fetch)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
