"""`wattbench compare-estimate RUN`: a software power estimator against a run's measured power.

For each level of the run's stored result, the estimator's PromQL expression is averaged over the
level's window (avg_over_time of a 1 s subquery, evaluated at the window's end) and printed beside the
measured average with the estimator's error. The expression must give one series: the whole server's
estimated power in watts, e.g. Kepler's `sum(rate(kepler_node_platform_joules_total[30s]))` or
Scaphandre's `scaphandre_host_power_microwatts / 1e6`. Several series are refused, not summed: whether
they add up to the server is for the user to say, in the query.

Exit status: 0 shown, 2 no such run or no stored result or a query that gives several series,
3 Prometheus or the store cannot be reached."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from ..argtypes import given
from ..core.align import windows_from_events
from ..core.estimate import compare, summary
from ..exits import Exit
from ..forms import http_address_problem
from ..report.terminal import new_table
from .options import (
    add_store_options,
    checked_by_problem,
    open_store_from_args,
    output_console,
    run_id,
    stored_run_id,
)

EPILOG = """examples:
  wattbench compare-estimate latest --prometheus http://127.0.0.1:9090 \\
      --query 'sum(rate(kepler_node_platform_joules_total[30s]))'
  wattbench compare-estimate RUN --prometheus http://prom:9090 \\
      --query 'scaphandre_host_power_microwatts / 1e6' --json
"""


def _prometheus_problem(text: str) -> str | None:
    # its queries carry no credentials
    return http_address_problem(text, credentials=False)


http_url = checked_by_problem(_prometheus_problem, empty=None)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("run_id", type=run_id, metavar="RUN", help="run id, or latest")
    parser.add_argument("--prometheus", required=True, type=http_url, metavar="URL", help="Prometheus server")
    parser.add_argument(
        "--query",
        required=True,
        type=given,
        metavar="PROMQL",
        help="the estimator's power of the server in W, one series",
    )
    parser.add_argument("--json", action="store_true", help="print JSON (schema/v1/estimate.schema.json)")
    add_store_options(parser)


def estimates_for(
    prometheus: str, query: str, windows: dict[str, Any], phases: list[str]
) -> dict[str, float | str]:
    """The estimator's average watts over each phase's window, or why there is none. Raises ValueError
    when the query gives several series, PromError when Prometheus fails."""
    from ..promql import instant  # late: start-up

    out: dict[str, float | str] = {}
    for phase in phases:
        w = windows.get(phase)
        if w is None:
            out[phase] = "the run's events have no window for this level"
            continue
        seconds = max(1, round(w.duration_s))
        found = instant(prometheus, f"avg_over_time(({query})[{seconds}s:1s])", w.end_ms / 1000.0)
        if not found:
            out[phase] = "the query gives nothing in the level's window"
        elif len(found) > 1:
            labels = ", ".join(json.dumps(s.get("metric", {}), sort_keys=True) for s in found[:3])
            raise ValueError(
                f"the query gives {len(found)} series ({labels}{', ...' if len(found) > 3 else ''}): "
                "make it one, the server's whole estimated power (for example sum(...))"
            )
        else:
            out[phase] = float(found[0]["value"][1])
    return out


def run(args: argparse.Namespace) -> int:
    from ..promql import PromError  # late: start-up

    store = open_store_from_args(args, read_only=True)
    try:
        run_name = stored_run_id(store, args.run_id)
        result = store.result(run_name)
        events = store.phases(run_name)
    finally:
        store.close()
    if result is None:
        what = (
            "has no stored result: score it with `wattbench report` first"
            if events
            else "is not in the store"
        )
        print(f"wattbench compare-estimate: run {run_name!r} {what}", file=sys.stderr)
        return Exit.USAGE
    levels = [lv for lv in result.get("levels", []) if lv.get("W") is not None]
    windows = {w.phase: w for w in windows_from_events(events)}
    try:
        estimates = estimates_for(args.prometheus, args.query, windows, [str(lv["phase"]) for lv in levels])
    except ValueError as exc:
        print(f"wattbench compare-estimate: {exc}", file=sys.stderr)
        return Exit.USAGE
    except PromError as exc:
        print(f"wattbench compare-estimate: {exc}", file=sys.stderr)
        return Exit.UNREACHABLE
    rows = compare(levels, estimates)
    doc = {
        "run": run_name,
        "query": args.query,
        "prometheus": args.prometheus,
        "levels": [r.to_dict() for r in rows],
        "summary": summary(rows),
    }
    if args.json:
        print(json.dumps(doc, indent=1))
        return 0
    _print_table(doc)
    return 0


# Beyond this a figure is shown in three significant figures: an estimate of 1e300 W filled 80 lines.
_COMPACT_ABOVE = 1e9


def _figure(x: float, sign: str = "") -> str:
    return f"{x:{sign},.1f}" if abs(x) < _COMPACT_ABOVE else f"{x:{sign}.3g}"


def _unit_hint(ratio: float) -> str | None:
    """A word on units when the estimate is orders of magnitude off: a query in µW (Scaphandre's unit)
    without its / 1e6 is off by a million, and reads as an estimator that is very wrong."""
    if not (math.isfinite(ratio) and ratio > 0) or 0.01 < ratio < 100:
        return None
    return (
        f"the estimate is about 1e{round(math.log10(ratio))} times the measured power: is the query in "
        "another unit? (µW, as Scaphandre gives it, needs / 1e6; mW / 1e3; kW * 1e3)"
    )


def _print_table(doc: dict[str, Any]) -> None:

    table = new_table(title=f"run {doc['run']}: estimator against measured power")
    for col in ("level", "measured W", "estimated W", "error"):
        table.add_column(col, justify="right" if col != "level" else "left")
    for r in doc["levels"]:
        est = _figure(r["estimated_W"]) if "estimated_W" in r else "-"
        err = f"{_figure(r['error'] * 100, '+')} %" if "error" in r else r.get("reason", "-")
        table.add_row(r["phase"], _figure(r["measured_W"]), est, err)
    console = output_console()
    console.print(table)
    s = doc["summary"]
    if s["levels"] and not s.get("power_ratio"):
        # no ratio to divide a score by: the query reads no power of this server
        console.print(
            f"mean |error| {s['mean_abs_error'] * 100:.1f} %; the estimate is 0 W at every level: check "
            "that the query selects this server's power"
        )
    elif s["levels"]:
        ratio = s["power_ratio"]
        console.print(
            f"mean |error| {_figure(s['mean_abs_error'] * 100)} %, largest {_figure(s['max_abs_error'] * 100)} %; "
            f"summed estimate / summed measurement {f'{ratio:.3f}' if ratio < 100 else _figure(ratio)} "
            "(a ∑ops/∑power score from the estimate would be the measured score divided by this)"
        )
    else:
        console.print("no level has an estimate: check the query and that Prometheus scraped during the run")
    hint = _unit_hint(s["power_ratio"]) if s.get("power_ratio") else None
    if hint:
        console.print(hint)
    console.print(f"estimator: {doc['query']}")
