"""`wattbench suite FILE`: sweep several worklets in one session and score them together.

Each worklet of the suite file (see docs/sweep.md "Suites", and the sample in
collector/wattbench/workloads/worklet/suite.toml) is swept with its own calibration and target loads;
active idle is measured once, after the first worklet's loads. Every worklet's result is published and
stored as an ordinary run (`<suite run>-<worklet>`), so a suite stopped in the middle keeps what it
finished. The suite result (--json-out) has each worklet's efficiency and the SERT-style suite score:
relative to --reference (an earlier suite result, such as the first candidate's), or to this run
itself, which scores exactly 1.0. It is never comparable with published SERT scores.

Exit codes: as `wattbench sweep`: 0 valid suite, 1 complete but not valid, 2 bad arguments, suite file
or reference, 3 broker or store unreachable, 4 a workload failed (the suite stops there), 130
interrupted (the finished worklets are kept and the suite result written, marked partial).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from typing import Any

import wattbench_schema as contract

from ..core.plan import Timing, parse_levels
from ..exits import Exit
from ..report.outputs import SuiteResult, write_outputs
from ..sweep.channels import ChannelError
from ..sweep.progress import LogDisplay, RichDisplay
from ..sweep.publish import SinkError
from ..workloads.base import WorkloadError
from .options import (
    CliError,
    add_output_options,
    as_given,
    fresh_run_id,
    outputs_from_args,
    publish_settings,
    readable_file,
    side_console,
    store_name,
)
from .scoring import add_scoring_arguments, check_plans_can_meet, scoring_from_args
from .sweep import (
    NOTHING_STORED,
    PLAN_OPTIONS,
    add_connection_arguments,
    add_plan_arguments,
    check_new_runs,
    ended_early_code,
    sweep_store,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = __doc__.split("\n\n", 1)[1]
    parser.add_argument("suite", metavar="FILE", type=readable_file, help="the suite file (TOML)")
    parser.add_argument(
        "--reference",
        metavar="FILE",
        type=readable_file,
        help="an earlier suite result to normalise by (default: this run, which scores 1.0)",
    )
    parser.add_argument("--run", metavar="ID", type=fresh_run_id, help="suite run id (default: UTC time)")
    add_plan_arguments(parser)
    add_connection_arguments(parser)
    add_scoring_arguments(parser)
    add_output_options(parser, SuiteResult)
    parser.add_argument("--quiet", action="store_true", help="no live display")


def _plan_defaults() -> argparse.Namespace:
    parser = argparse.ArgumentParser(add_help=False)
    add_plan_arguments(parser)
    return parser.parse_args([])


PLAN_DEFAULTS = _plan_defaults()


def read_reference(path: str) -> dict[str, Any]:
    """An earlier suite result, checked against its schema."""

    try:
        with open(path, "rb") as f:
            doc = contract.strict_loads(f.read())
    except OSError as exc:
        raise CliError(f"{path}: {exc.strerror or exc}") from None
    except contract.DecodeError as exc:
        raise CliError(f"{path}: not valid JSON ({exc})") from None
    errors = sorted(e.message for e in contract.jsonschema_validator("suite").iter_errors(doc))
    if errors:
        raise CliError(f"{path}: not a suite result ({errors[0][:200]})")
    if not doc.get("complete"):
        raise CliError(f"{path}: the reference suite is not complete; name a finished one")
    return dict(doc)


class HeldLines:
    """Lines for the operator kept back until release(), then shown as they come."""

    def __init__(self, show: Callable[[str], None]) -> None:
        self.show = show
        self.held: list[str] | None = []

    def __call__(self, line: str) -> None:
        if self.held is None:
            self.show(line)
        else:
            self.held.append(line)

    def release(self) -> None:
        lines, self.held = self.held or [], None
        for line in lines:
            self.show(line)


def exit_code(suite_run: Any) -> int:
    if suite_run.workload_failed:
        return Exit.WORKLOAD
    if any(o.store_error for _, o in suite_run.outcomes):
        return Exit.UNREACHABLE
    if suite_run.interrupted:
        return Exit.INTERRUPTED
    return 0 if suite_run.document["valid"] else Exit.INVALID


def run(args: argparse.Namespace) -> int:
    from ..sweep.driver import new_run_id  # late: start-up
    from ..sweep.session import NothingMeasured, SweepSetup  # late: start-up
    from ..sweep.suite import load_suite, plan_for, preflight_suite, run_suite  # late: start-up

    log = logging.getLogger("wattbench.suite")
    try:
        suite = load_suite(args.suite)
        preflight_suite(suite, args.suite)
        reference = read_reference(args.reference) if args.reference else None
        timing = as_given(PLAN_OPTIONS, lambda: Timing(args.pre, args.measure, args.post, args.gap))
        # --levels applies to every worklet only when given; otherwise each group has SERT's loads.
        given = args.levels != PLAN_DEFAULTS.levels
        levels = parse_levels(args.levels) if given else None
        plans = as_given(
            PLAN_OPTIONS,
            lambda: {
                e.name: plan_for(
                    e,
                    i == 0,
                    suite,
                    timing,
                    args.calibrations,
                    args.calibration_use,
                    levels,
                    not args.no_idle,
                )
                for i, e in enumerate(suite.entries)
            },
        )
        scoring = scoring_from_args(args)
        check_plans_can_meet(scoring, plans.values())
    except (ValueError, WorkloadError) as exc:
        print(f"wattbench suite: {exc}", file=sys.stderr)
        return Exit.CONFIG
    store = sweep_store(args)
    mqtt = publish_settings(args)  # a bad address is its own line, before the warnings of a run
    if store is None:
        log.warning("--ops-only: the suite measures throughput only; power is not measured")
    outputs = outputs_from_args(args, SuiteResult)
    console = side_console(outputs)
    run_id = args.run or new_run_id()
    check_new_runs(store, [run_id, *(f"{run_id}-{e.name}" for e in suite.entries)], args.run)
    total = sum(p.duration_s() for p in plans.values())
    # Held until the first worklet's channels are bound: a refusal before then is its one line alone.
    held = HeldLines(console.print)
    length = f"{total / 60:.0f} min" if total >= 90 else f"{total:.0f} s"  # never "about 0 min"
    held(
        f"[bold]suite[/] {suite.name}: {len(suite.entries)} worklets "
        f"({', '.join(e.name for e in suite.entries)}), about {length}"
    )

    def announce_channel(line: str) -> None:
        held.release()
        print(f"wattbench suite: {line}", file=sys.stderr)

    base = SweepSetup(
        run=run_id,
        plan=next(iter(plans.values())),
        workload=None,
        store=store,
        mqtt=mqtt,
        scoring=scoring,
        display=LogDisplay() if args.quiet or not sys.stderr.isatty() else RichDisplay(),
        wait_data_s=args.wait_data,
        announce=announce_channel,
        store_name=store_name(args),
    )
    try:
        done = run_suite(
            suite,
            run_id,
            base,
            lambda entry, _first: plans[entry.name],
            reference,
            announce=lambda line: held(f"[bold]suite[/]: {line}"),
        )
    except ChannelError as exc:
        print(f"wattbench suite: {exc}", file=sys.stderr)
        return Exit.CONFIG
    except SinkError as exc:
        print(f"wattbench suite: {exc}", file=sys.stderr)
        return Exit.UNREACHABLE
    except NothingMeasured as exc:
        print(f"wattbench suite: {exc} ({NOTHING_STORED})", file=sys.stderr)
        return ended_early_code(exc.record.interrupted)
    finally:
        if store is not None:
            store.close()
    held.release()
    write_outputs(SuiteResult(done.document), outputs)
    for outage in dict.fromkeys(o.broker_outage for _, o in done.outcomes if o.broker_outage):
        print(f"wattbench suite: {outage}", file=sys.stderr)
    return exit_code(done)
