"""`wattbench report RUN_ID`: show a stored run as the terminal table, JSON and an HTML page.

A run that has a stored result is shown as it was scored. A finished run without one (a run driven by
your own script, which only published phase events) is scored here, and its result is stored and,
with --broker, published retained on the run's result topic, as `wattbench sweep` does; reporting it
again shows, stores and publishes the same result. --rescore aligns and scores the stored samples
again with the scoring options the result records, those given here in their place, and only shows
the outcome. RUN_ID "latest" is the newest
run in the store.

Exit codes: 0 shown, 2 bad arguments or no such run, 3 broker or store unreachable (also when the
result could not be stored or published; it is still shown).
"""

from __future__ import annotations

import argparse
import difflib
import sys
from typing import TYPE_CHECKING, Any

from ..core.evaluate import run_span
from ..report.outputs import RunResult, write_outputs
from ..sweep.channels import ChannelError, unknown_in_store
from ..sweep.publish import MqttSink, SinkError, StoreSink
from ..sweep.scoring import ScoringOptions, score_run, stored_run
from .options import (
    add_broker_options,
    add_output_options,
    add_store_options,
    mqtt_ca,
    mqtt_password,
    mqtt_user,
    open_store_from_args,
    outputs_from_args,
    run_id,
    stored_run_id,
)
from .scoring import add_scoring_arguments, check_named_once, scoring_from_args

if TYPE_CHECKING:
    from ..core.evaluate import Evaluation
    from ..store.base import Store


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # checked by the contract's rule, as compare-estimate checks it: a run id no run can have is a typo
    parser.add_argument("run_id", type=run_id, metavar="RUN_ID", help='run id, or "latest"')
    add_store_options(parser)
    add_output_options(parser, RunResult)
    parser.add_argument("--rescore", action="store_true", help="align and score the stored samples again")
    add_scoring_arguments(parser)
    add_broker_options(parser, help_broker="publish the result here, retained (as wattbench sweep does)")


def load(args: argparse.Namespace, store: Store) -> tuple[Evaluation, str] | str:
    """(evaluation, run id), or an error message."""

    run = stored_run_id(store, args.run_id)
    events = store.phases(run)
    stored = store.result(run)
    if not events and stored is None:
        runs = store.runs()
        near = difflib.get_close_matches(run, runs, n=1)
        hint = f", did you mean {near[0]}?" if near else ""
        return f"no run {run!r} in the store{hint} (recent runs: {', '.join(runs[:10]) or 'none'})"
    given = scoring_from_args(args)
    span = run_span(events)
    if given.named_channels and span is not None:
        # A typo is refused as the sweep refuses it, not scored as a channel that fell silent.
        problems = unknown_in_store(store, given.named_channels, *span, run)
        if problems:
            return "; ".join(problems)
    try:
        return _evaluate(args, store, run, events, stored, given), run
    except ChannelError as exc:  # refused as the sweep refuses it (an offset for a device not measured)
        return str(exc)


def _evaluate(
    args: argparse.Namespace,
    store: Store,
    run: str,
    events: list[dict[str, Any]],
    stored: dict[str, Any] | None,
    given: ScoringOptions,
) -> Evaluation:
    if stored is None:
        return score_run(store, run, given)
    changed = given.changed_from(stored.get("options")) if not args.rescore else []
    # Showing the stored result would silently ignore what the user asked for (another channel,
    # another limit): score again, and keep the stored result as it is.
    args.rescore = args.rescore or bool(changed)
    # The options the run was scored with, but for those given here: a re-score changes only what
    # was asked for.
    options = given.over(ScoringOptions.from_result(stored))
    # `--inlet` here may name a channel the run was scored with as power (or the reverse): said as the
    # run's, for the user typed no --channel
    check_named_once(
        options.channel,
        options.inlet,
        stored=[c for c in options.channel if c not in given.channel],
        stored_inlet=[c for c in options.inlet if c not in given.inlet],
    )
    if not args.rescore:
        return stored_run(store, stored, events, options)
    evaluation = score_run(store, run, options)
    if changed:  # said once the options are known to apply, not before they are refused
        print(
            f"wattbench report: run {run} has a stored result; {', '.join(changed)} "
            f"{'changes' if len(changed) == 1 else 'change'} its scoring, "
            "so it is scored again here (as --rescore)",
            file=sys.stderr,
        )
    return evaluation


def finished(events: list[dict[str, Any]]) -> bool:
    """The run ended or was aborted: nothing more will come, so its result can be kept."""
    return any(e.get("event") in ("run_end", "run_abort") for e in events)


def keep_result(args: argparse.Namespace, store: Store, ev: Evaluation, sink: Any) -> tuple[str | None, bool]:
    """Store a result scored here and publish it (sink: an MqttSink or None), the way a sweep does.
    A stored result is published again as it is. Returns what the user should be told, if anything,
    and whether storing or publishing failed."""

    if args.rescore:
        return (
            "--rescore only shows the new scoring: nothing is stored or published" if sink else None
        ), False
    if store.result(ev.run) is None:
        if not finished(ev.events):
            return "the run has not ended: this result is shown, not stored or published", False
        keeper = StoreSink(store)
        keeper.result(ev.result)
        if keeper.failures:
            return "the result could not be stored", True
    if sink is not None:
        if not ev.result.get("checks"):
            # Stored before InfluxDB kept whole results: publishing it would replace the full
            # retained message with a part of it.
            return "the store holds only part of this result: not published again", False
        sink.result(ev.result)
        if sink.failures:
            return "the result could not be published", True
    return None, False


def open_publisher(args: argparse.Namespace, run: str) -> Any:
    """An MqttSink for --broker, connected before anything is scored; None without --broker."""
    if not getattr(args, "broker", None):
        return None

    return MqttSink(
        args.broker, f"wattbench-report-{run}", mqtt_user(args), mqtt_password(args), mqtt_ca(args)
    )


def run(args: argparse.Namespace) -> int:
    try:
        # out-of-range limits are refused before the store is opened, not after a re-score has begun
        scoring_from_args(args)
    except ValueError as exc:
        print(f"wattbench report: {exc}", file=sys.stderr)
        return 2
    store = open_store_from_args(args, create_db=False, read_only=True)
    try:
        sink = open_publisher(args, args.run_id)
    except (SinkError, OSError) as exc:
        print(f"wattbench report: {exc}", file=sys.stderr)
        store.close()
        return 3
    try:
        loaded = load(args, store)
        if isinstance(loaded, str):
            print(f"wattbench report: {loaded}", file=sys.stderr)
            return 2
        ev, _run = loaded
        note, failed = keep_result(args, store, ev, sink)
        if note:
            print(f"wattbench report: {note}", file=sys.stderr)
        write_outputs(RunResult(ev, store.series), outputs_from_args(args, RunResult))
        return 3 if failed else 0
    finally:
        if sink is not None:
            sink.close()
        store.close()
