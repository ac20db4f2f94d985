"""`wattbench compare RUN|FILE …`: candidate servers side by side, for a purchase.

Each argument is a stored run (its id, with --store or --influx), a result file (`sweep --json-out`,
`report --json`), a suite result (`suite --json-out`), or a per-level table such as a published
SPECpower_ssj2008 result (CSV or JSON, as `wattbench score` reads). The first is the baseline: a
candidate measured another way (another workload or op, another measurement standard, rehearsal
timing on one side only) is marked as not comparable with it, says why, and takes no part in "best".

Prices are per candidate (--price NAME=AMOUNT, --rack-units NAME=U); the tariff and years apply to all.
A file is named by its stem (a.json is a; a result's run id and a table's "system" are shown beside
it), a stored run by its id; --name sets the names in order.

Exit codes: 0 table (and page) written, 2 bad arguments or an input that is not one of the above, 3 the
store is unreachable.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import wattbench_schema as contract

from ..argtypes import given
from ..core import contract as results
from ..core.compare import Candidate, Curve, Point, Prices, compare
from ..core.leveltable import TableError, comparability
from ..core.published import parse_table
from ..core.score import MAX_AMOUNT, amount_problem, years_problem
from ..report.outputs import Comparison, write_outputs
from .options import (
    CliError,
    add_output_options,
    add_store_options,
    by_name,
    number,
    open_store_from_args,
    outputs_from_args,
    store_given,
    stored_run_id,
)

if TYPE_CHECKING:
    from ..store import Store


def _named_number(text: str, positive: bool = False) -> tuple[str, float]:
    name, sep, value = text.rpartition("=")
    try:
        x = float(value)
    except ValueError:
        x = math.nan
    if not sep or not name or amount_problem(x) or (positive and x == 0):
        raise argparse.ArgumentTypeError(
            f"{text!r}: NAME=NUMBER with a number {'>' if positive else '>='} 0 and at most {MAX_AMOUNT:g}"
        )
    return name, x


def _named_height(text: str) -> tuple[str, float]:
    # A server has some height: 0 U would drop its column without a word.
    return _named_number(text, positive=True)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = __doc__.split("\n\n", 1)[1]
    parser.add_argument("inputs", nargs="+", metavar="RUN|FILE", help="runs, result files, suites or tables")
    parser.add_argument(
        "--name", action="append", default=[], type=given, metavar="NAME", help="names, in order (repeat)"
    )
    g = parser.add_argument_group("price-performance")
    g.add_argument(
        "--price",
        action="append",
        default=[],
        type=_named_number,
        metavar="NAME=AMOUNT",
        help="a candidate's purchase price, for price per ops/s and ops/s per currency unit (repeat)",
    )
    g.add_argument(
        "--rack-units",
        action="append",
        default=[],
        type=_named_height,
        metavar="NAME=U",
        help="a candidate's height in rack units, for ops/s per rack unit (repeat)",
    )
    g.add_argument("--tariff", type=number(), metavar="PER_KWH", help="electricity price per kWh")
    g.add_argument(
        "--years",
        type=number(),
        default=None,
        help="years of service, over which --tariff's energy cost is counted (4)",
    )
    add_store_options(parser, default_help="none: inputs are files")
    add_output_options(parser, Comparison)


def _read_json(path: Path) -> Any:
    try:
        return contract.strict_loads(path.read_bytes())
    except contract.DecodeError:
        return None


def _levels_points(levels: list[dict[str, Any]]) -> tuple[list[Any], float | None, float | None]:
    """Target-load points, active idle, and the shortest window (from Wh and W), of result levels."""

    points = [
        Point(float(lv.get("target", 0.0)), float(lv["ops"]), float(lv["W"]))
        for lv in levels
        if lv.get("kind", "target") == "target"
    ]
    copies = {
        lv["phase"]: int(lv["phase"][1:])
        for lv in levels
        if lv.get("kind") == "concurrency" and str(lv.get("phase", ""))[1:].isdigit()
    }
    if copies:
        # A job level's load is its jobs over the most jobs of the run: a cluster sweep's share of
        # the cluster, so a compact and a spread run of one cluster line up level by level.
        top = max(copies.values())
        points = [
            Point(copies[lv["phase"]] / top, float(lv["ops"]), float(lv["W"]))
            for lv in levels
            if lv.get("phase") in copies
        ]
    idle = [float(lv["W"]) for lv in levels if lv.get("kind") == "idle"]
    windows = [float(lv["Wh"]) / float(lv["W"]) * 3600.0 for lv in levels if lv.get("Wh") and lv.get("W")]
    return points, (idle[-1] if idle else None), (min(windows) if windows else None)


def from_result(name: str, source: str, result: dict[str, Any]) -> Any:
    points, idle, shortest = _levels_points(result.get("levels", []))
    if not points:
        raise CliError(f"{source}: the result has no target load or job level with power")
    unit = str(result.get("unit") or "ops")
    std = result.get("standard") or {}
    failed = sorted({str(c.get("name")) for c in result.get("checks", []) if not c.get("ok")})
    notes = [] if result.get("valid") else [f"the run is INVALID ({', '.join(failed) or 'no checks'} failed)"]
    if result.get("partial"):
        notes.append("the run was interrupted")
    return Candidate(
        name,
        source,
        "run",
        str(result.get("workload") or "unknown"),
        unit,
        [Curve(name, unit, tuple(points))],
        idle_W=idle,
        valid=bool(result.get("valid")),
        spec=std.get("spec"),
        eehpc_level=std.get("eehpc_level"),
        shortest_window_s=shortest,
        notes=notes,
    )


def from_suite(name: str, source: str, doc: dict[str, Any]) -> Any:
    curves, shortest, specs, levels = [], [], set(), set()
    for w in doc.get("worklets", []):
        pts = tuple(
            Point(float(lv.get("target", 0.0)), float(lv["ops"]), float(lv["W"])) for lv in w["levels"]
        )
        shortest += [float(lv["window_s"]) for lv in w["levels"] if "window_s" in lv]
        if pts:
            curves.append(Curve(f"{name}: {w['name']}", str(w["unit"]), pts))
        std = w.get("standard") or {}
        if "spec" in std:
            specs.add(bool(std["spec"]))
            levels.add(int(std["eehpc_level"]))
    if not curves:
        raise CliError(f"{source}: the suite has no worklet with power")
    workload = ",".join(sorted(str(w.get("workload") or w["name"]) for w in doc.get("worklets", [])))
    score = doc.get("score") or {}
    notes = [] if doc.get("valid") else ["the suite is not valid"]
    if doc.get("score_refused"):
        notes.append(f"no suite score: {doc['score_refused']}")
    return Candidate(
        name,
        source,
        "suite",
        workload,
        "mixed",
        curves,
        idle_W=doc.get("idle_W"),
        valid=bool(doc.get("valid")),
        spec=min(specs) if specs else None,
        eehpc_level=min(levels) if levels else None,
        shortest_window_s=min(shortest) if shortest else None,
        suite_score=score.get("value"),
        suite_reference=score.get("reference"),
        notes=notes,
    )


def from_table(name: str, source: str, path: Path) -> Any:
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            table = parse_table(f, is_json=path.suffix.lower() == ".json")
    except OSError as exc:
        raise CliError(f"{source}: cannot read {path}: {exc.strerror or exc}") from None
    except TableError as exc:
        raise CliError(f"{source}: {exc}") from None
    levels = [table.level(i) for i in range(len(table))]
    points = tuple(
        Point(float(lv.target), lv.ops, lv.W)
        for lv in levels
        if lv.kind == "target" and lv.target is not None
    )
    idle = [lv.W for lv in levels if lv.kind == "idle"]
    comp = comparability(table)
    notes = ["a published table: as printed, not measured here"]
    if not comp.comparable:
        notes.append(comp.sentence())
    return Candidate(
        name,
        source,
        "table",
        "SPECpower_ssj2008",
        "ssj_ops",
        [Curve(name, "ssj_ops", points)],
        idle_W=idle[-1] if idle else None,
        # A published SPECpower result was measured to SPEC's rules with full 240 s windows.
        spec=True,
        shortest_window_s=240.0,
        notes=notes,
    )


def _readable(result: dict[str, Any], where: str) -> None:
    """A result as the contract has it, or a CliError in the contract's words: a hand-edited file (a
    level without W, W 0, a number in quotes, another format version) is refused, never scored."""
    try:
        results.validate_result(result)
    except results.ContractError as exc:
        why = str(exc).removeprefix("result message breaks the contract: ").removeprefix("data.")
        raise CliError(f"{where}: not a result wattbench can read: {why}") from None
    problem = results.contradiction(result)
    if problem:
        raise CliError(f"{where}: not a result wattbench can read: {problem}")


def load_candidate(item: str, name: str | None, store: Store | None) -> Any:
    path = Path(item)
    if path.is_file():
        stem = name or path.stem
        doc = _read_json(path) if path.suffix.lower() == ".json" else None
        if isinstance(doc, dict) and doc.get("kind") == "suite":
            return from_suite(stem, str(path), doc)
        result = doc.get("result") if isinstance(doc, dict) else None
        if not isinstance(result, dict) and isinstance(doc, dict) and "checks" in doc and "run" in doc:
            result = doc
        if isinstance(result, dict):
            _readable(result, path.name)
            # Named by its file, as the user gave it (a.json is a), like a table or a suite; the run
            # id, which the user did not type, is said beside it.
            candidate = from_result(stem, str(path), result)
            if result.get("run"):
                candidate.notes.insert(0, f"run {str(result['run'])[:64]}")
            return candidate
        table = from_table(stem, str(path), path)
        if isinstance(doc, dict) and isinstance(doc.get("system"), str):
            # Named by its file, which --price and --rack-units can spell; the system is said.
            table.notes.insert(0, f"system: {doc['system'][:200]}")
        return table
    if store is None:
        raise CliError(f"{item}: no such file; for a stored run give --store FILE or --influx URL")
    run = stored_run_id(store, item)
    said = item if run == item else f"{item} (run {run})"
    result = store.result(run)
    if result is None:
        raise CliError(f"{said}: no such file, and no result of that run in the store")
    _readable(result, f"stored run {run}")
    return from_result(name or run, f"stored run {run}", result)


def run(args: argparse.Namespace) -> int:
    if len(args.name) > len(args.inputs):
        raise CliError(f"{len(args.name)} names for {len(args.inputs)} inputs")
    if args.years is not None and args.tariff is None:
        raise CliError("--years needs --tariff: the service life counts only the energy cost")
    years = 4.0 if args.years is None else args.years
    problem = years_problem(years)
    if problem:
        raise CliError(f"--years {problem}")
    problem = None if args.tariff is None else amount_problem(args.tariff)
    if problem:
        raise CliError(f"--tariff {problem}")
    prices = by_name("--price", args.price)
    units = by_name("--rack-units", args.rack_units)
    store = open_store_from_args(args, read_only=True) if store_given(args) else None
    try:
        names = args.name + [None] * (len(args.inputs) - len(args.name))
        candidates = [load_candidate(i, n, store) for i, n in zip(args.inputs, names, strict=True)]
    finally:
        if store is not None:
            store.close()
    seen = [c.name for c in candidates]
    twice = sorted({n for n in seen if seen.count(n) > 1})
    if twice:
        raise CliError(f"two candidates are named {', '.join(twice)}: give --name for each")
    unknown = [f"--price {n}" for n in prices if n not in seen]
    unknown += [f"--rack-units {n}" for n in units if n not in seen]
    if unknown:
        raise CliError(
            f"{', '.join(unknown)}: no candidate of that name; the candidates are {', '.join(seen)}"
        )
    given = prices or units or args.tariff is not None
    costs = Prices(prices, units, args.tariff, years) if given else None
    write_outputs(Comparison(compare(candidates, costs), costs), outputs_from_args(args, Comparison))
    return 0
