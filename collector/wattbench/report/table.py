"""The terminal table in the SPECpower_ssj2008 layout:

    Target Load | Actual Load | ops | Average Active Power (W) | Performance to Power Ratio

with an Active Idle row and the line "∑ops / ∑power = N". Concurrency runs get their own columns
(copies, throughput relative to one copy, energy per job).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..core.score import concurrency_figures, node_split
from . import measured as ms
from .measured import badge_text, failures_first, rate_unit, result_ops_label
from .terminal import new_table

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

    from ..core.compliance import Check
    from ..core.score import LevelScore


def fmt_count(x: float | None) -> str:
    """Thousands separators, no decimals above 100, three significant figures below."""
    if x is None or not math.isfinite(x):
        return "—"
    if abs(x) >= 100 or x == 0:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def fmt_watts(x: float | None) -> str:
    """As SPEC prints average power: three significant figures, whole watts from 1000 W up."""
    if x is None or not math.isfinite(x):
        return "—"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 100:
        return f"{x:.0f}"
    return f"{x:.3g}"


def fmt_pct(x: float | None) -> str:
    if x is None or not math.isfinite(x):
        return ""
    return f"{x * 100:.1f}%"


def target_label(lv: LevelScore) -> str:
    if lv.kind == "idle":
        return "Active Idle"
    if lv.kind == "concurrency":
        return f"{lv.copies or lv.phase} copies"
    if lv.target is None:
        return lv.phase
    return f"{lv.target * 100:g}%"


def ratio_unit(ops_label: str = "ops") -> str:
    return f"{rate_unit(ops_label)} per W"


def column_heads(ops_label: str = "ops") -> list[str]:
    """The SPECpower columns, each with its unit."""
    return [
        "Target Load",
        "Actual Load",
        rate_unit(ops_label),
        "Average Active Power (W)",
        f"Performance to Power Ratio ({ratio_unit(ops_label)})",
    ]


def overall_line(overall: float, ops_label: str = "ops", idle: bool = True) -> str:
    """The overall metric's line; idle False: active idle was not measured, so ∑power has the target
    loads only and the figure is higher than a whole run's would be."""
    note = "" if idle else "; without active idle in ∑power"
    return f"∑{ops_label} / ∑power = {fmt_count(overall)} ({ratio_unit(ops_label)}{note})"


def levels_table(levels: Sequence[LevelScore], ops_label: str = "ops", title: str | None = None) -> Any:
    """A rich Table of target loads and active idle."""
    return _rich_table(column_heads(ops_label), [level_cells(lv) for lv in levels], title)


def level_cells(lv: LevelScore) -> tuple[str, str, str, str, str]:
    """One row of the SPECpower table."""
    ratio = 0.0 if lv.kind == "idle" and lv.has_power else lv.ratio
    return (
        target_label(lv),
        "" if lv.kind == "idle" else fmt_pct(lv.actual),
        fmt_count(lv.ops),
        fmt_watts(lv.W),
        fmt_count(ratio),
    )


def concurrency_cells(levels: Sequence[LevelScore]) -> tuple[list[str], list[list[str]]]:
    """The job levels' table, as heads and cells for every rendering: jobs/s, throughput relative to
    the fewest copies, power, energy per job, and the ops the jobs reported when they did."""
    figs = concurrency_figures(levels)
    reported = any(lv.job_ops is not None for lv in levels)
    head = ["Copies", "Jobs/s", "Relative Throughput", "Average Active Power (W)", "Energy per Job (J)"]
    if reported:
        head += ["Job Ops/s", "Job Ops/s per W"]
    body = []
    for lv in levels:
        rel, jpj = figs.get(lv.phase, (math.nan, math.nan))
        idle = lv.kind == "idle"
        cells = [
            "Active Idle" if idle else str(lv.copies or lv.phase),
            "" if idle else f"{lv.ops:.4g}",
            "" if idle else f"{rel:.2f}×",
            fmt_watts(lv.W),
            "" if idle else fmt_count(jpj),
        ]
        if reported:
            ops = lv.job_ops
            cells += [
                "" if ops is None else fmt_count(ops),
                "" if ops is None or not lv.has_power else fmt_count(ops / lv.W),
            ]
        body.append(cells)
    return head, body


def nodes_cells(levels: Sequence[LevelScore]) -> tuple[list[str], list[list[str]]]:
    """A scheduler run's levels: how many nodes ran jobs and what they drew, beside the idle nodes
    (EE HPC WG counts both). No rows when no level has scheduler records and per-node power."""
    head = ["Jobs", "Busy Nodes", "Busy Nodes (W)", "Idle Nodes", "Idle Nodes (W)"]
    body = []
    for lv in levels:
        split = node_split(lv)
        if split is None:
            continue
        busy = (
            f"{split.busy}"
            if split.busy_metered == split.busy
            else f"{split.busy} ({split.busy_metered} metered)"
        )
        body.append(
            [
                str(lv.copies or lv.phase),
                busy,
                fmt_watts(split.busy_W),
                str(split.idle),
                fmt_watts(split.idle_W),
            ]
        )
    return head, body


def _rich_table(head: Sequence[str], body: Sequence[Sequence[str]], title: str | None) -> Any:

    table = new_table(title=title, title_justify="left", header_style="bold")
    for i, name in enumerate(head):
        table.add_column(name, justify="right" if i else "left")
    for row in body:
        table.add_row(*row)
    return table


def concurrency_table(levels: Sequence[LevelScore], title: str | None = None) -> Any:
    return _rich_table(*concurrency_cells(levels), title)


def nodes_table(levels: Sequence[LevelScore]) -> Any:
    return _rich_table(*nodes_cells(levels), "Nodes")


def checks_table(checks: Sequence[Check], compact: bool = True) -> Any:
    """Every failure on its own line; with compact, passes of one check are folded into one line
    (the HTML report and the JSON keep every line)."""

    table = new_table(header_style="bold", show_edge=False, box=None, pad_edge=False)
    table.add_column("", width=4)
    table.add_column("check")
    table.add_column("phase")
    table.add_column("reason")

    checks = failures_first(checks)
    folded: dict[str, list[Check]] = {}
    for c in checks:
        if compact and c.ok and c.phase:
            folded.setdefault(c.name, []).append(c)
    shown: set[str] = set()
    for c in checks:
        if c.name in folded and c.ok and c.phase:
            if c.name not in shown:
                shown.add(c.name)
                n = len(folded[c.name])
                table.add_row(
                    "[green]pass[/]", c.name, f"{n} windows" if n > 1 else c.phase, "" if n > 1 else c.reason
                )
            continue
        mark = "[green]pass[/]" if c.ok else "[bold red]FAIL[/]"
        table.add_row(mark, c.name, c.phase or "", c.reason)
    return table


def channels_table(rows: Sequence[dict[str, Any]]) -> Any:
    """The channels a run used (the result's `channels`): the power ones are what was summed."""

    table = new_table(title="Channels", header_style="bold", show_edge=False, box=None, pad_edge=False)
    for col in ("device", "channel", "meter", "role", "node", "accuracy", "updates", "samples"):
        table.add_column(col, justify="right" if col in ("samples", "accuracy", "updates") else "left")
    for r in rows:
        table.add_row(
            str(r["dev"]),
            str(r["ch"]),
            str(r.get("meter", "unknown")),
            ms.role_cell(r),
            str(r.get("node", "")),
            ms.accuracy_cell(r),
            f"every {r['upd']:g} s" if "upd" in r else "",
            fmt_count(r.get("samples", 0)),
        )
    return table


def report_renderables(
    levels: Sequence[LevelScore],
    overall: float,
    ops_label: str = "ops",
    title: str | None = None,
    valid: bool | None = None,
    checks: Sequence[Check] | None = None,
    summary: dict[str, Any] | None = None,
    calibrated: float | None = None,
    channels: Sequence[dict[str, Any]] | None = None,
    before_checks: Sequence[RenderableType] = (),
    result: dict[str, Any] | None = None,
) -> list[RenderableType]:
    """Everything the terminal shows for a scored run, as rich renderables. result (the result
    message) gives the verdict its standard statement."""
    from rich.text import Text  # late: start-up

    out: list[Any] = []
    if any(lv.kind == "concurrency" for lv in levels):
        out.append(concurrency_table(levels, title))
        if any(node_split(lv) is not None for lv in levels):
            out.append(nodes_table(levels))
    else:
        out.append(levels_table(levels, ops_label, title))
    if not levels:
        # Stopped before its first window (interrupted in calibration): nothing to divide.
        out.append(Text(f"∑{ops_label} / ∑power: not measured (no window was scored)", style="bold"))
    elif not any(lv.has_power for lv in levels):
        # No power was measured (an ops-only run): a ratio of 0 would read as a result.
        out.append(Text(f"∑{ops_label} / ∑power: not measured (no power samples)", style="bold"))
    else:
        idle = summary is None or "idle_W" in summary
        out.append(Text(overall_line(overall, ops_label, idle=idle), style="bold"))
    facts = []
    if calibrated:
        facts.append(f"calibrated {fmt_count(calibrated)} {rate_unit(ops_label)}")
    if summary:
        if "peak_ops" in summary and levels:  # with no window scored, a peak of 0 would be made up
            facts.append(f"peak {fmt_count(summary['peak_ops'])} {rate_unit(ops_label)}")
        if "peak_W" in summary:
            facts.append(f"peak power {fmt_watts(summary['peak_W'])} W")
        if "idle_W" in summary:
            facts.append(f"active idle {fmt_watts(summary['idle_W'])} W")
        else:
            facts.append("active idle not measured")
        if summary.get("energy_Wh"):
            facts.append(f"run energy {summary['energy_Wh']:.4g} Wh")
        if "cost" in summary:
            facts.append(f"energy cost {summary['cost']:.4g}")
        if "ops_per_dollar" in summary:
            facts.append(
                f"{fmt_count(summary['ops_per_dollar'])} {ops_label} per currency unit over the service life"
            )
    if facts:
        out.append(Text(" · ".join(facts)))
    if channels:
        out.append(channels_table(channels))
    if valid is not None:
        out.append(Text(badge_text(valid, checks or [], result), style="bold green" if valid else "bold red"))
    out += before_checks
    if checks:
        out.append(checks_table(checks))
    return out


def measured_renderables(evaluation: Any) -> list[RenderableType]:
    """What was measured: the system under test, the workload's command line, the host's load, a
    simulated meter, calibration, timing (a rehearsal is marked) and inlet."""
    from rich.text import Text  # late: start-up

    m = ms.measured(evaluation)
    table = new_table(
        show_header=False, box=None, pad_edge=False, title="What was measured", title_justify="left"
    )
    table.add_column(style="bold")
    table.add_column()
    table.add_row("system under test", " · ".join(f"{k}: {v}" for k, v in ms.sut_items(m)))
    for label, text in ms.how_items(m, evaluation.result):
        table.add_row(label, text)
    table.add_row(
        "calibration",
        ms.calibration_text(m, evaluation.calibrated, fmt_count, ms.result_ops_label(evaluation.result)),
    )
    table.add_row("timing", ms.timing_text(m))
    table.add_row("inlet", ms.inlet_text(m))
    table.add_row("standard", ms.standard_text(evaluation.result))
    table.add_row("scored with", ms.options_text(evaluation.result))
    out: list[Any] = [table]
    rehearsal = ms.rehearsal_text(m)
    if rehearsal:
        out.append(Text(rehearsal, style="bold yellow"))
    return out


def evaluation_renderables(evaluation: Any) -> list[RenderableType]:
    """A scored run as the terminal shows it: the table, the verdict naming what failed, what was
    measured, then the checks with the failures first. Throughput is in the workload's own unit."""
    return report_renderables(
        evaluation.levels,
        evaluation.result["overall"],
        result_ops_label(evaluation.result),
        title=f"run {evaluation.run}",
        valid=evaluation.valid,
        checks=evaluation.checks,
        summary=evaluation.result.get("summary"),
        calibrated=evaluation.calibrated,
        channels=evaluation.result.get("channels"),
        before_checks=measured_renderables(evaluation),
        result=evaluation.result,
    )


def print_evaluation(console: Console, evaluation: Any) -> None:
    for r in evaluation_renderables(evaluation):
        console.print(r)


def render_evaluation(evaluation: Any, width: int = 140) -> str:
    """The whole terminal report of a scored run as plain text."""
    from rich.console import Console  # late: start-up

    console = Console(width=width, record=True, file=_Null(), color_system=None)
    print_evaluation(console, evaluation)
    return console.export_text()


def summary_levels_table(
    head: Sequence[LevelScore],
    tail: Sequence[LevelScore],
    total_ops: float,
    total_power: float,
    overall: float,
    loads: int,
    ops_label: str = "ops",
    title: str | None = None,
) -> Any:
    """The table of a very long run: its first and last rows, a ⋮ row where the others are left out,
    and a totals row (Σ ops over the target loads, Σ power over every row, and their ratio), so the
    terminal gets a dozen lines instead of a million."""
    table = levels_table(head, ops_label, title)
    for col in table.columns:
        col.overflow = "fold"  # a total cut short with an ellipsis would read as a different number
    table.add_row(*(["⋮"] * len(table.columns)), style="dim")
    for lv in tail:
        table.add_row(*level_cells(lv))
    table.add_section()
    table.add_row(
        f"∑ {loads:,} target loads",
        "",
        fmt_count(total_ops),
        fmt_watts(total_power),
        fmt_count(overall),
        style="bold",
    )
    return table


def print_summary_report(
    console: Console,
    head: Sequence[LevelScore],
    tail: Sequence[LevelScore],
    omitted: int,
    total_ops: float,
    total_power: float,
    overall: float,
    loads: int,
    ops_label: str = "ops",
    title: str | None = None,
) -> None:
    """print_report for a table too long to draw row by row."""
    from rich.text import Text  # late: start-up

    console.print(summary_levels_table(head, tail, total_ops, total_power, overall, loads, ops_label, title))
    console.print(Text(overall_line(overall, ops_label), style="bold"))
    console.print(
        f"{len(head) + len(tail) + omitted:,} rows; the first {len(head)} and last {len(tail)} are shown, "
        f"{omitted:,} are not (--json prints every row)"
    )


def print_report(console: Console, *args: Any, **kwargs: Any) -> None:
    for r in report_renderables(*args, **kwargs):
        console.print(r)


def render_text(*args: Any, width: int = 110, **kwargs: Any) -> str:
    """The report as plain text (for logs, notes and tests)."""
    from rich.console import Console  # late: start-up

    console = Console(width=width, record=True, file=_Null(), color_system=None)
    print_report(console, *args, **kwargs)
    return console.export_text()


class _Null:
    def write(self, _s: str) -> int:
        return 0

    def flush(self) -> None:
        pass
