"""A suite: several worklets swept one after another in one session, each with its own calibration and
target loads, and one active idle (after the first worklet's loads); then one suite result with each
worklet's efficiency and the SERT-style score (core/suite.py). Shared by `wattbench suite` and
`wattbench demo --suite`.

Each worklet is an ordinary sweep with the run id `<suite run>-<worklet>`: its result is published and
stored as it finishes, so a suite stopped in the middle keeps the worklets it finished, and the suite
result names them and why the rest are missing.

The suite file (TOML; a sample is schema-checked in tests, see docs/sweep.md "Suites"):

    name = "cpu-memory-storage"
    levels = "100,75,50,25"          # optional: every worklet's loads (default: --levels if given,
                                     # else SERT's for the worklet's group, GROUP_LEVELS)

    [[worklet]]
    worklet = "compress"             # a worklet of the registry: its group and unit come with it

    [[worklet]]
    worklet = "random"
    options = { file = "/var/tmp/wb.dat", size_mb = 4096 }

    [[worklet]]
    name = "fio-randread"            # any other workload: name it and give its group
    workload = "fio"
    group = "storage"
    settings = { rw = "randread" }
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..core import suite as su
from ..core.plan import Plan, Timing, parse_levels, specpower_plan
from ..workloads import load_config, make_workload
from ..workloads.base import WorkloadError
from ..workloads.worklet import WORKLETS
from .channels import ChannelError
from .publish import SinkError
from .session import NothingMeasured, Outcome, SweepSetup, run_sweep

NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
# A worklet's run id is the suite's plus "-<name>", and run ids are at most 64 characters.
MAX_SUITE_RUN = 64 - 33
# The loads SERT 2 sweeps each group's worklets at: CPU four, memory and storage two.
GROUP_LEVELS: dict[str, tuple[float, ...]] = {
    "cpu": (1.0, 0.75, 0.5, 0.25),
    "memory": (1.0, 0.5),
    "storage": (1.0, 0.5),
}
_WORKLET_KEYS = {"worklet", "workers", "seed", "nice", "options", "levels", "name"}


@dataclass(frozen=True)
class Entry:
    name: str
    group: str
    workload: str  # a registered workload name
    config: dict[str, Any]  # its settings, as make_workload takes them
    levels: tuple[float, ...] | None  # None: the suite's


@dataclass(frozen=True)
class Suite:
    name: str
    entries: tuple[Entry, ...]
    levels: tuple[float, ...] | None = None


def _levels(value: Any, where: str) -> tuple[float, ...]:
    """Loads as "100,75,50" or [100, 75, 50]."""
    text = ",".join(str(v) for v in value) if isinstance(value, list) else str(value)
    try:
        return tuple(parse_levels(text))
    except ValueError as exc:
        raise WorkloadError(f"{where}: levels: {exc}") from None


def _entry(i: int, raw: Any, source: str) -> Entry:
    where = f"{source}: worklet {i + 1}"
    if not isinstance(raw, dict):
        raise WorkloadError(f"{where}: a table ([[worklet]]) is needed")
    levels = _levels(raw["levels"], where) if "levels" in raw else None
    if "worklet" in raw:
        if "workload" in raw or "settings" in raw or "group" in raw:
            raise WorkloadError(f"{where}: a registry worklet takes no workload, settings or group")
        unknown = set(raw) - _WORKLET_KEYS
        if unknown:
            raise WorkloadError(f"{where}: unknown keys {sorted(unknown)}; known: {sorted(_WORKLET_KEYS)}")
        worklet = raw["worklet"]
        if worklet not in WORKLETS:
            raise WorkloadError(f"{where}: worklet {worklet!r} is not one of {', '.join(WORKLETS)}")
        name = str(raw.get("name", worklet))
        config = {k: raw[k] for k in ("worklet", "workers", "seed", "nice", "options") if k in raw}
        entry = Entry(name, WORKLETS[worklet][0], "worklet", config, levels)
    else:
        for key in ("name", "workload", "group"):
            if key not in raw:
                raise WorkloadError(f"{where}: give worklet = ..., or name, workload and group")
        settings = raw.get("settings", {})
        if not isinstance(settings, dict):
            raise WorkloadError(f"{where}: settings must be a table")
        extra = set(raw) - {"name", "workload", "group", "settings", "levels"}
        if extra:
            raise WorkloadError(
                f"{where}: {sorted(extra)} belong in settings for workload {raw['workload']!r}"
            )
        if raw["group"] not in su.WEIGHTS:
            raise WorkloadError(f"{where}: group {raw['group']!r} is not one of {', '.join(su.WEIGHTS)}")
        entry = Entry(str(raw["name"]), str(raw["group"]), str(raw["workload"]), dict(settings), levels)
    if not NAME.fullmatch(entry.name):
        raise WorkloadError(
            f"{where}: name {entry.name!r}: 1 to 32 of a-z 0-9 _ -, starting with a letter or digit"
        )
    return entry


def parse_suite(doc: dict[str, Any], where: str = "suite") -> Suite:
    """A suite from its TOML document; WorkloadError naming what is wrong. Every workload is built
    here once, so a bad setting stops the suite before its first phase, not an hour in."""
    unknown = set(doc) - {"name", "levels", "worklet"}
    if unknown:
        raise WorkloadError(f"{where}: unknown keys {sorted(unknown)}; known: levels, name, worklet")
    name = str(doc.get("name", "suite"))
    if not NAME.fullmatch(name):
        raise WorkloadError(f"{where}: name {name!r}: 1 to 32 of a-z 0-9 _ -")
    raw = doc.get("worklet")
    if not isinstance(raw, list) or not raw:
        raise WorkloadError(f"{where}: no [[worklet]] table")
    entries = tuple(_entry(i, r, where) for i, r in enumerate(raw))
    names = [e.name for e in entries]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise WorkloadError(f"{where}: worklet {', '.join(twice)} appears twice (give each its own name)")
    levels = _levels(doc["levels"], where) if "levels" in doc else None
    for e in entries:
        try:
            make_workload(e.workload, e.config)
        except WorkloadError as exc:
            raise in_worklet(where, e.name, exc) from None
    return Suite(name, entries, levels)


def load_suite(path: str | Path) -> Suite:
    return parse_suite(load_config(path), str(path))


def preflight_suite(suite: Suite, where: str = "suite") -> None:
    """Every worklet's pre-flight (its program is there), before the first worklet starts: a worklet
    that cannot start must not be found after the ones before it have run for an hour."""
    for e in suite.entries:
        try:
            make_workload(e.workload, e.config).preflight()
        except WorkloadError as exc:
            raise in_worklet(where, e.name, exc) from None


def in_worklet(where: str, name: str, exc: WorkloadError) -> WorkloadError:
    """A worklet's error, named by where the suite gives it and the worklet's name, once: a worklet
    names itself when the entry has no name of its own ("worklet random: worklet random: ...")."""
    text = str(exc)
    own = f"worklet {name}: "
    return WorkloadError(f"{where}: {text if text.startswith(own) else own + text}")


@dataclass
class SuiteRun:
    document: dict[str, Any]
    outcomes: list[tuple[Entry, Outcome]]
    interrupted: str | None = None

    @property
    def workload_failed(self) -> bool:
        return bool(self.interrupted and self.interrupted.startswith("workload failed"))


def plan_for(
    entry: Entry,
    first: bool,
    suite: Suite,
    timing: Timing,
    calibrations: int,
    calibration_use: int,
    levels: Sequence[float] | None,
    idle: bool,
) -> Plan:
    """The worklet's plan: its calibration and loads (its own, else the suite file's, else `levels`
    when given, else SERT's for its group); the suite's one active idle after the first worklet's
    loads, while that worklet's workers are there and idle."""
    loads = entry.levels or suite.levels or (tuple(levels) if levels else GROUP_LEVELS[entry.group])
    return specpower_plan(calibrations, loads, idle and first, timing, calibration_use)


def run_suite(
    suite: Suite,
    run: str,
    base: SweepSetup,
    plans: Callable[[Entry, bool], Plan],
    reference: dict[str, Any] | None = None,
    announce: Callable[[str], None] | None = None,
) -> SuiteRun:
    """Sweep every worklet in turn with base's connections, channels, limits and display (its run,
    plan and workload are set per worklet). Stops at the first worklet interrupted, failing, or
    unable to start (its channel gone offline, the broker gone); what finished before is kept and
    scored, marked partial. Only when the first cannot start does the error reach the caller."""
    if len(run) > MAX_SUITE_RUN:
        raise ValueError(f"suite run id {run!r} is longer than {MAX_SUITE_RUN} characters")
    outcomes: list[tuple[Entry, Outcome]] = []
    finished: list[su.WorkletResult] = []
    interrupted = None
    channels = base.channels
    for i, entry in enumerate(suite.entries):
        try:
            if announce:
                announce(f"worklet {i + 1}/{len(suite.entries)}: {entry.name} ({entry.group})")
            workload = make_workload(entry.workload, entry.config)
            setup = replace(
                base,
                run=f"{run}-{entry.name}",
                plan=plans(entry, i == 0),
                workload=workload,
                channels=channels,
            )
            outcome = run_sweep(setup)
        except KeyboardInterrupt:
            if not finished:
                raise  # in the first worklet's pre-flight: no suite to report, as for a sweep
            # Outside a sweep's phases (between worklets, or while one is scored): that worklet is
            # lost, the finished ones are not.
            interrupted = f"interrupted by operator in worklet {entry.name}"
            break
        except (ChannelError, SinkError) as exc:
            if not finished:
                raise  # nothing measured yet: the command fails as a sweep would
            interrupted = f"worklet {entry.name} could not start: {exc}"
            break
        except NothingMeasured as exc:
            if not finished:
                raise
            # That worklet left nothing behind; the suite is what finished before it, and says
            # which worklet it stopped in.
            interrupted = f"{exc} (worklet {entry.name}, before its first window: nothing of it kept)"
            break
        outcomes.append((entry, outcome))
        finished.append(
            su.WorkletResult(entry.name, entry.group, workload.ops_unit, outcome.evaluation.result)
        )
        # The channels chosen for the first worklet are summed for all: a suite is one system.
        channels = channels or outcome.channels or None
        if outcome.record.interrupted or outcome.store_error:
            interrupted = outcome.store_error or outcome.record.interrupted
            break
    if interrupted is None and len(finished) < len(suite.entries):
        interrupted = "suite stopped early"
    measured = su.suite_measured([(o.evaluation.events, o.evaluation.result) for _, o in outcomes])
    doc = su.suite_document(
        suite.name, run, int(time.time() * 1000), finished, reference, interrupted, measured=measured
    )
    return SuiteRun(doc, outcomes, interrupted)
