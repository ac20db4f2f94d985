"""`wattbench sweep`: drive this server through graduated loads and score its work per watt.

Before the first phase the sweep checks what it can: the output files can be written, the store is
there and answers, the broker accepts the connection, every --channel and --inlet names a channel
that its device's metadata (on the broker, or in the store) lists, with a role that fits, or else the
power channels can be chosen without a guess, the workload can start. A run without a store measures
no power, so it is refused unless --ops-only asks for exactly that.

Exit codes: 0 valid run, 1 run complete but invalid (a check failed), 2 bad arguments or configuration
(also when a named channel is not on the broker or in the store, the power channels cannot be chosen
without a guess, see docs/sweep.md, or the workload's program is not there), 3 broker or store
unreachable, 4 the workload could not run or failed (the run stops at the failing level, which is
named), 130 interrupted (a partial result is still published, marked invalid). A run that ends before
its first measurement window closes stores and publishes nothing and prints one line.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Mapping
from typing import Any

from .. import workloads
from ..argtypes import checked_by, whole
from ..core.plan import Timing, parse_levels, specpower_plan
from ..exits import Exit
from ..report.outputs import RunResult, write_outputs
from ..store import Store
from ..sweep.channels import ChannelError
from ..sweep.progress import LogDisplay, RichDisplay
from ..sweep.publish import SinkError
from ..workloads import (
    choose,
    load_config,
    make_workload,
    option_values,
    program_source,
    setting_source,
    settings_for,
)
from ..workloads.base import PlanRequest, SettingError, WorkloadError
from .options import (
    CliError,
    add_broker_options,
    add_output_options,
    add_store_options,
    as_given,
    default_store,
    fresh_run_id,
    number,
    open_store_from_args,
    outputs_from_args,
    publish_settings,
    readable_file,
    store_given,
    store_name,
)
from .scoring import add_scoring_arguments, check_plans_can_meet, scoring_from_args

# The plan's fields -> the options that give them, for a value the plan refuses.
PLAN_OPTIONS = {
    "calibrations": "--calibrations",
    "calibration_use": "--calibration-use",
    "pre_s": "--pre",
    "measure_s": "--measure",
    "post_s": "--post",
    "gap_s": "--gap",
}


def add_plan_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("plan (SPECpower_ssj2008 defaults)")
    g.add_argument(
        "--calibrations",
        type=whole(),
        default=3,
        metavar="N",
        help="calibration intervals, 3..10 (3)",
    )
    g.add_argument(
        "--calibration-use",
        type=whole(),
        default=2,
        metavar="N",
        help="calibrated = mean of the last N (2)",
    )
    g.add_argument(
        "--levels",
        default="100,90,80,70,60,50,40,30,20,10",
        type=checked_by(parse_levels, "levels"),
        help="target loads in percent (100,90,80,70,60,50,40,30,20,10)",
    )
    g.add_argument("--no-idle", action="store_true", help="leave out the active idle interval")
    g.add_argument(
        "--pre", type=number(at_least=0), default=30.0, metavar="S", help="ramp-up before each window (30)"
    )
    g.add_argument(
        "--measure", type=number(above=0), default=240.0, metavar="S", help="measurement window (240)"
    )
    g.add_argument(
        "--post", type=number(at_least=0), default=30.0, metavar="S", help="ramp-down after each window (30)"
    )
    g.add_argument(
        "--gap", type=number(at_least=0), default=10.0, metavar="S", help="pause between intervals (10)"
    )


def add_workload_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("workload")
    g.add_argument("--workload", choices=tuple(workloads.REGISTRY), help=f"default {workloads.DEFAULT}")
    g.add_argument(
        "--workload-config",
        metavar="FILE",
        type=readable_file,
        help="TOML settings (see the workload's sample.toml)",
    )
    # Each workload's own options, declared in its folder (workloads/<name>/, its registry row).
    workloads.add_arguments(g)


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    add_output_options(parser, RunResult)


# The wait for the last samples after the last level: an appliance sends what it buffered within a
# batch interval (at most ten minutes), so an hour is ample and more is a typo that never ends.
MAX_WAIT_DATA_S = 3600.0


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    add_broker_options(parser, help_broker="publish phase events and the result here")
    group = add_store_options(parser, default_help="none: give the store `wattbench collect` writes")
    group.add_argument(
        "--ops-only",
        action="store_true",
        help="run without a store: throughput only, power not measured (the run cannot be valid)",
    )
    group.add_argument(
        "--wait-data",
        type=number(at_least=0, at_most=MAX_WAIT_DATA_S),
        default=20.0,
        metavar="S",
        help=f"wait for late samples (20; at most {MAX_WAIT_DATA_S:g}); an appliance that batches for longer "
        "is waited for its batch interval and 5 s",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = __doc__.split("\n\n", 1)[1]

    parser.add_argument(
        "--run", metavar="ID", type=fresh_run_id, help="run id (default: UTC time and a random suffix)"
    )
    add_plan_arguments(parser)
    add_workload_arguments(parser)
    add_connection_arguments(parser)
    add_scoring_arguments(parser)
    add_output_arguments(parser)
    parser.add_argument("--quiet", action="store_true", help="no live display")


def plan_from_args(args: argparse.Namespace, workload: Any, config: dict[str, Any]) -> Any:
    """The workload's own plan, or the graduated loads of the plan options."""

    timing = as_given(PLAN_OPTIONS, lambda: Timing(args.pre, args.measure, args.post, args.gap))
    given = option_values(vars(args))
    try:
        own = workload.plan(PlanRequest(timing, not args.no_idle, given, config))
    except SettingError as exc:
        raise named_as_given(exc, workload.name, given, args) from None
    if own is not None:
        return own
    return as_given(
        PLAN_OPTIONS,
        lambda: specpower_plan(
            args.calibrations, parse_levels(args.levels), not args.no_idle, timing, args.calibration_use
        ),
    )


def named_as_given(
    exc: SettingError, name: str, given: Mapping[str, Any], args: argparse.Namespace
) -> CliError:
    """A workload setting's problem, named as the user gave the setting: the option, else the key in
    the workload file, so that the one line points at what to correct."""
    return CliError(f"{setting_source(name, exc.key, given, args.workload_config)}: {exc.reason}")


def workload_from_args(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """The workload the options and the workload file give, checked before anything runs, and its
    settings."""

    config: dict[str, Any] = load_config(args.workload_config) if args.workload_config else {}
    declared = config.get("workload")
    if args.workload and declared and declared != args.workload:
        # one of the two is a slip: the file's settings would be checked against the wrong workload
        raise CliError(
            f"--workload {args.workload}: --workload-config {args.workload_config} is a file of the "
            f"{declared} workload; give one or the other"
        )
    given = option_values(vars(args))
    name = choose(args.workload or config.get("workload"), given)
    in_file = {k: v for k, v in config.items() if k != "workload"}
    try:
        config = settings_for(name, given, config)
    except WorkloadError as exc:
        raise CliError(str(exc)) from None
    if {**config, **in_file} != config:
        # An option over a key of the file: the file's value is checked all the same, as it would be
        # read without the option, so that the next run without it does not fail on it.
        try:
            make_workload(name, {**config, **in_file})
        except SettingError as exc:
            raise CliError(f"{args.workload_config}: {exc.key}: {exc.reason}") from None
        except WorkloadError as exc:
            raise CliError(f"{args.workload_config}: {exc}") from None
    try:
        workload = make_workload(name, config)
    except SettingError as exc:
        raise named_as_given(exc, name, given, args) from None
    except WorkloadError as exc:
        # A key it does not know or a value of the wrong type: the options give neither, the file does.
        raise CliError(f"{args.workload_config}: {exc}" if args.workload_config else str(exc)) from None
    try:
        workload.preflight()
    except SettingError as exc:
        raise named_as_given(exc, name, given, args) from None
    except WorkloadError as exc:
        # Named as the user gave it, so the one line points at what to correct.
        raise CliError(f"{program_source(name, given, args.workload_config)}: {exc}") from None
    return workload, config


NOTHING_STORED = "before the first measurement window: no run stored"


def ended_early_code(reason: str | None) -> int:
    """The exit code of a run that stopped before its end, from the reason the driver gave."""
    return Exit.WORKLOAD if reason and reason.startswith("workload failed") else Exit.INTERRUPTED


def sweep_store(args: argparse.Namespace) -> Any:
    """The collector's store, which must already be there and answer; None for an ops-only run."""

    if getattr(args, "ops_only", False):
        if store_given(args):
            raise CliError("--ops-only measures no power: leave out --store/--influx, or --ops-only")
        return None
    if not store_given(args):
        raise CliError(
            "no store: give --store FILE or --influx URL, where `wattbench collect` writes (its default "
            f"is {default_store()}), or --ops-only to measure throughput without power"
        )
    # The collector makes the database: one the sweep would make is a misspelt --db, and the run would
    # go into it.
    return open_store_from_args(args, must_exist=True, create_db=False)


def check_new_runs(store: Store | None, runs: list[str], given: str | None) -> None:
    """The runs about to be stored are not in the store yet: a second run under one id merges the two
    runs' events, and neither can be scored again. CliError (exit 2) otherwise."""
    if store is None:
        return
    stored = set(store.runs())
    taken = next((r for r in runs if r in stored), None)
    if taken is None:
        return
    said = f"--run {given}: " if given else ""
    raise CliError(
        f"{said}run {taken} is already in the store; give another id, or leave --run out for one of the time"
    )


def exit_code(outcome: Any) -> int:
    """The exit code of a sweep that measured something (the module's docstring lists them)."""
    if outcome.store_error:
        return Exit.UNREACHABLE
    if outcome.record.interrupted:
        return ended_early_code(outcome.record.interrupted)
    return 0 if outcome.evaluation.valid else Exit.INVALID


def run(args: argparse.Namespace) -> int:
    from ..sweep.driver import new_run_id  # late: start-up
    from ..sweep.session import NothingMeasured, SweepSetup, run_sweep  # late: start-up

    log = logging.getLogger("wattbench.sweep")
    outputs = outputs_from_args(args, RunResult)
    try:
        workload, config = workload_from_args(args)
        plan = plan_from_args(args, workload, config)
        nodes = workload.nodes()
        if nodes is not None and args.system_nodes is None:
            # EE HPC WG judges the share of the system metered: the system is the cluster swept. It is
            # scored and recorded as if --system-nodes had been given.
            args = argparse.Namespace(**{**vars(args), "system_nodes": len(nodes)})
        scoring = scoring_from_args(args)
        check_plans_can_meet(scoring, [plan])
    except (ValueError, WorkloadError) as exc:
        print(f"wattbench sweep: {exc}", file=sys.stderr)
        return Exit.CONFIG
    store = sweep_store(args)  # a StoreError ends the command with exit 3, before any phase
    run = args.run or new_run_id()
    check_new_runs(store, [run], args.run)
    mqtt = publish_settings(args)  # a bad address is its own line, before the warnings of a run
    if store is None:
        log.warning("--ops-only: the run measures throughput only; power is not measured")
    display = LogDisplay() if args.quiet or not sys.stderr.isatty() else RichDisplay()
    setup = SweepSetup(
        run=run,
        plan=plan,
        workload=workload,
        store=store,
        mqtt=mqtt,
        scoring=scoring,
        display=display,
        wait_data_s=args.wait_data,
        announce=lambda line: print(f"wattbench sweep: {line}", file=sys.stderr),
        nodes=nodes,
        store_name=store_name(args),
    )
    try:
        outcome = run_sweep(setup)
    except NothingMeasured as exc:
        # No window, no report: an empty table would only hide the reason.
        print(f"wattbench sweep: {exc} ({NOTHING_STORED})", file=sys.stderr)
        if store is not None:
            store.close()
        return ended_early_code(exc.record.interrupted)
    except ChannelError as exc:
        print(f"wattbench sweep: {exc}", file=sys.stderr)
        if store is not None:
            store.close()
        return Exit.CONFIG
    except SinkError as exc:
        print(f"wattbench sweep: {exc}", file=sys.stderr)
        if store is not None:
            store.close()
        return Exit.UNREACHABLE
    try:
        fetch = store.series if store is not None and not outcome.store_error else None
        write_outputs(RunResult(outcome.evaluation, fetch), outputs)
    finally:
        if store is not None:
            store.close()
    if outcome.store_error:
        print(f"wattbench sweep: {outcome.store_error}", file=sys.stderr)
    if outcome.broker_outage:
        # The reason a channel read silent may be the broker, not the meter: say so last.
        print(f"wattbench sweep: {outcome.broker_outage}", file=sys.stderr)
    return exit_code(outcome)
