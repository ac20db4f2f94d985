"""`wattbench report RUN_ID`: re-render a stored run as the terminal table, JSON and an HTML page.

By default the result is shown as it was scored and stored; --rescore aligns and scores the stored
samples again (with the checks' limits given here). RUN_ID "latest" is the newest run in the store.
"""

from __future__ import annotations

import argparse
from typing import Any


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ..sweep.cli import add_scoring_arguments

    parser.add_argument("run_id", metavar="RUN_ID", help='run id, or "latest"')
    parser.add_argument("--store", metavar="PATH", help="embedded SQLite store (default wattbench.sqlite)")
    parser.add_argument("--influx", metavar="URL", help="InfluxDB instead of the embedded store")
    parser.add_argument("--db", metavar="NAME", help="InfluxDB database (wattbench)")
    parser.add_argument("--html", metavar="FILE", help="write the HTML report here")
    parser.add_argument("--json", action="store_true", help="print the result as JSON instead of the table")
    parser.add_argument("--rescore", action="store_true", help="align and score the stored samples again")
    add_scoring_arguments(parser)


def _channels(args: argparse.Namespace, store: Any, events: list[dict[str, Any]]) -> list[Any]:
    from ..sweep import channels as chans
    from ..sweep.cli import channels_from_args
    from ..sweep.evaluate import run_span

    explicit = channels_from_args(args)
    if explicit:
        return explicit
    span = run_span(events)
    if span is None:
        return []
    found = chans.from_store(store, span[0], span[1])
    named = next(
        (e.get("channels") for e in events if e.get("event") == "run_start" and e.get("channels")), None
    )
    if named:
        # The run named its channels; keep those (roles still come from what the store holds).
        keep = set(named)
        inlets = [s for s in found if s.role == "inlet"]
        found = [s for s in found if s.key in keep] + [s for s in inlets if s.key not in keep]
    return found


def load(args: argparse.Namespace, store: Any) -> tuple[Any, str] | str:
    """(evaluation, run id), or an error message."""
    from ..sweep import channels as chans
    from ..sweep.cli import cost_from_args, limits_from_args, offsets_from_args
    from ..sweep.evaluate import clock_figures, evaluate, from_stored, run_span

    run = args.run_id
    if run == "latest":
        runs = store.runs()
        if not runs:
            return "the store holds no runs"
        run = runs[0]
    events = store.phases(run)
    stored = store.result(run)
    if not events and stored is None:
        recent = ", ".join(store.runs()[:10]) or "none"
        return f"no run {run!r} in the store (recent runs: {recent})"
    specs = _channels(args, store, events) if events else []
    offsets = offsets_from_args(args)
    deadband = 0.0
    if offsets is None:
        span = run_span(events) or (None, None)
        offsets = chans.offsets_from_store(store, sorted({s.dev for s in specs}), *span)
        deadband = chans.DEFAULT_DEADBAND_MS
    if stored is not None and not args.rescore:
        ev = from_stored(stored, events, specs)
        ev.clock, ev.measured_offsets_ms, ev.offsets_ms = clock_figures(offsets, deadband)
        return ev, run
    ev = evaluate(
        run,
        events,
        store.series,
        specs,
        offsets,
        limits_from_args(args),
        cost_from_args(args),
        deadband_ms=deadband,
    )
    return ev, run


def run(args: argparse.Namespace) -> int:
    import sys

    from rich.console import Console

    from ..store import open_store
    from ..sweep.cli import cost_from_args, limits_from_args
    from .jsonreport import to_json
    from .table import print_report

    try:
        # out-of-range limits are refused before the store is opened, not after a re-score has begun
        limits_from_args(args)
        cost_from_args(args)
    except ValueError as exc:
        print(f"wattbench report: {exc}", file=sys.stderr)
        return 2
    options: dict[str, Any] = {}
    if args.influx and args.db:
        options["db"] = args.db
    try:
        store = open_store(args.influx or args.store, **options)
    except Exception as exc:
        print(f"wattbench report: store: {exc}", file=sys.stderr)
        return 3
    try:
        loaded = load(args, store)
        if isinstance(loaded, str):
            print(f"wattbench report: {loaded}", file=sys.stderr)
            return 2
        ev, _run = loaded
        if args.json:
            print(to_json(ev))
        else:
            print_report(
                Console(),
                ev.levels,
                ev.result["overall"],
                title=f"run {ev.run}",
                valid=ev.valid,
                checks=ev.checks,
                summary=ev.result.get("summary"),
                calibrated=ev.calibrated,
            )
        if args.html:
            from .html import write_html

            write_html(args.html, ev, store.series)
            print(f"HTML report: {args.html}", file=sys.stderr if args.json else sys.stdout)
        return 0
    finally:
        store.close()
