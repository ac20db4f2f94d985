"""The scoring group of options, the same for `sweep`, `suite` and `report`: the power and inlet
channels, the devices' clock offsets, the limits of the checks and the cost inputs, read into one
ScoringOptions (sweep/scoring.py), whose defaults, the core's own, are the options' defaults."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence

from ..argtypes import checked_by, number, number_where, whole
from ..core.conformance import planned_window_problem
from ..core.plan import Plan
from ..core.score import amount_problem, years_problem
from ..sweep.channels import parse_channel, parse_offset
from ..sweep.scoring import ScoringOptions
from .options import CliError, as_given, by_name


def add_scoring_arguments(parser: argparse.ArgumentParser) -> None:
    d = ScoringOptions()
    g = parser.add_argument_group("scoring and checks")
    g.add_argument(
        "--channel",
        action="append",
        default=[],
        type=checked_by(parse_channel, "channel"),
        metavar="DEV/CH[@NODE]",
        help="power channel (repeat)",
    )
    g.add_argument(
        "--inlet",
        action="append",
        default=[],
        type=checked_by(parse_channel, "channel"),
        metavar="DEV/CH",
        help="inlet temperature channel",
    )
    g.add_argument(
        "--clock-offset",
        action="append",
        default=[],
        type=checked_by(parse_offset, "offset"),
        metavar="DEV=MS",
        help="device minus host clock",
    )
    g.add_argument(
        "--load-tolerance",
        type=number(),
        default=d.load_tolerance,
        metavar="F",
        help=f"actual vs target load ({d.load_tolerance:g})",
    )
    g.add_argument(
        "--load-mode",
        choices=["relative", "points"],
        default=d.load_mode,
        help=f"how the tolerance applies ({d.load_mode})",
    )
    g.add_argument(
        "--min-inlet",
        type=number(),
        default=d.min_inlet,
        metavar="C",
        help=f"minimum inlet temperature ({d.min_inlet:g})",
    )
    g.add_argument(
        "--no-inlet-required", action="store_true", help="do not fail a run without an inlet probe"
    )
    g.add_argument(
        "--max-uncertainty",
        type=number(),
        default=d.max_uncertainty,
        metavar="F",
        help="fail a window whose power uncertainty is above F (e.g. 0.01); by default the report states "
        "which standard the accuracy meets instead",
    )
    g.add_argument(
        "--require",
        choices=["none", "eehpc-l1", "eehpc-l2", "eehpc-l3", "spec"],
        default=d.require,
        help=f"fail the run unless its measurement meets this standard (default: {d.require}, only stated)",
    )
    g.add_argument(
        "--max-skew",
        type=number(),
        default=d.max_skew,
        metavar="MS",
        help=f"clock skew limit ({d.max_skew:g})",
    )
    g.add_argument(
        "--system-nodes",
        type=whole(),
        default=d.system_nodes,
        metavar="N",
        help="nodes in the system measured: the standard statement then judges the share metered "
        "(EE HPC WG); by default that share is left to you",
    )
    # Checked as they are read, not when they come to be used: --years 0 without --tariff was taken.
    amount = number_where(amount_problem)
    g.add_argument("--price", type=amount, default=d.price, help="system price, for ops per currency unit")
    g.add_argument(
        "--tariff", type=amount, default=d.tariff, metavar="PER_KWH", help="electricity price per kWh"
    )
    g.add_argument(
        "--years",
        type=number_where(years_problem),
        default=d.years,
        help=f"years of service for lifetime cost ({d.years:g})",
    )


LIMIT_OPTIONS = {
    "load_tolerance": "--load-tolerance",
    "load_mode": "--load-mode",
    "min_inlet_c": "--min-inlet",
    "max_uncertainty": "--max-uncertainty",
    "max_skew_ms": "--max-skew",
    "require": "--require",
    "system_nodes": "--system-nodes",
}
COST_OPTIONS = {"price": "--price", "tariff_kwh": "--tariff", "years": "--years"}


def scoring_from_args(args: argparse.Namespace) -> ScoringOptions:
    """The command's ScoringOptions; a value the core refuses is named by its option."""

    check_named_once(args.channel, args.inlet)
    by_name("--clock-offset", [parse_offset(x) for x in args.clock_offset])  # one offset a device
    return as_given({**LIMIT_OPTIONS, **COST_OPTIONS}, lambda: ScoringOptions.from_args(args))


def check_plans_can_meet(scoring: ScoringOptions, plans: Iterable[Plan]) -> None:
    """--require a standard whose windows the plan is too short for: refused before the first phase,
    not after a run that could only end "required spec" (72 minutes at the default timing)."""
    for plan in plans:
        problem = planned_window_problem(scoring.require, [(p.kind, p.timing.measure_s) for p in plan.scored])
        if problem:
            raise CliError(f"--require {scoring.require}: {problem} (--measure)")


def check_named_once(
    power: Sequence[str], inlet: Sequence[str], stored: Sequence[str] = (), stored_inlet: Sequence[str] = ()
) -> None:
    """Each channel named once: a power channel named twice (with or without its @NODE) would be summed
    twice, a run that looks plausible at twice the power, and one named both as power and as the inlet
    probe cannot be both. stored, stored_inlet: those of the channels that a re-scored run was scored
    with and the command line did not name, said as the run's, not as options the user never typed."""

    seen: dict[str, str] = {}
    for option, texts in (("--channel", power), ("--inlet", inlet)):
        for text in texts:
            key = parse_channel(text).key
            if key in seen:
                again = "named twice" if seen[key] == option else f"also named with {seen[key]}"
                if seen[key] == "--channel" and text in stored:
                    again = "the run's power channel (as it was scored)"
                elif seen[key] == "--inlet" and text in stored_inlet:
                    again = "the run's inlet probe (as it was scored)"
                raise CliError(f"{option}: {key} is {again}; a channel is measured once")
            seen[key] = option
