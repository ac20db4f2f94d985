"""What the sweep driver needs from a workload."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ..core.plan import Phase, Plan, Timing
from ..forms import as_written

# What a workload's op may be called: it heads report columns and is stored with the result.
UNIT_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_ .-]{0,31}"


class WorkloadError(RuntimeError):
    """The workload cannot run (bad command, worker died): the sweep stops with a clear message."""


class SettingError(WorkloadError):
    """A setting that cannot work, found before the run: key is its key in the workload file, so the
    command names it as the user gave it (the option, or the key in the file)."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key = key
        self.reason = reason


_TYPE_NAMES = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


def setting(name: str, config: Mapping[str, Any], key: str, kinds: tuple[type, ...], default: Any) -> Any:
    """config[key], or `default` when absent, if it is one of `kinds`; a WorkloadError naming the key
    otherwise. TOML keeps types apart, so a wrong one is a mistake in the file: true is not a number, a
    number is not a command line. An integer passes where a number is asked."""
    if key not in config:
        return default
    value = config[key]
    allowed = (*kinds, int) if float in kinds else kinds
    if isinstance(value, bool) != (bool in kinds) or not isinstance(value, allowed):
        want = " or ".join(_TYPE_NAMES[k] for k in kinds)
        raise WorkloadError(f"{name} workload: {key} must be {want}, got {as_written(value)}")
    return value


def check_keys(
    name: str, config: Mapping[str, Any], allowed: Iterable[str], required: Iterable[str] = ()
) -> None:
    """Refuse a setting the workload does not know, naming the ones it does, and a missing one it
    cannot do without: a typo in a workload file must stop the sweep before it starts, not be ignored
    for an hour, and a missing setting is the user's to add, not a constructor's TypeError."""
    known = set(allowed)
    unknown = set(config) - known
    if unknown:
        raise WorkloadError(f"{name} workload: unknown settings {sorted(unknown)}; known: {sorted(known)}")
    missing = [key for key in required if key not in config]
    if missing:
        raise WorkloadError(f"{name} workload: {', '.join(missing)} missing; it has no default")


@dataclass(frozen=True)
class Option:
    """An option of `wattbench sweep` that a workload declares (in the module its registry row names,
    which every command reads as its parser is built, so it imports nothing heavy). Options several
    workloads take are one declaration, which each of them lists.

    key: the setting the value gives, over the workload file's (None: the workload's plan reads it).
    chooses: given without --workload or a workload file naming one, it chooses the first registered
    workload that declares it. elsewhere: given for another workload, the sweep is refused with this
    reason instead of the option being ignored. required: neither the option nor the workload file
    gives the setting: the sweep is refused with this line. program: the setting names the program
    the pre-flight looks for, so its refusal names the option or the file's key the user gave.
    """

    flag: str
    help: str
    key: str | None = None
    type: Callable[[str], Any] | None = None
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    chooses: bool = False
    elsewhere: str | None = None
    required: str | None = None
    program: bool = False

    @property
    def dest(self) -> str:
        """The attribute argparse stores the value under."""
        return self.flag.lstrip("-").replace("-", "_")


@dataclass(frozen=True)
class PlanRequest:
    """What the sweep's command line gives a workload that plans its own phases: the interval timing
    as given, whether to measure active idle, the values of the workload's options (by dest, None when
    not given) and its settings (the workload file's, with the options applied)."""

    timing: Timing
    idle: bool
    options: Mapping[str, Any]
    config: Mapping[str, Any]


class Workload(Protocol):
    """A source of work the driver walks through the phases of a plan.

    window is "fixed" when the measurement window lasts its planned time, or "until_done" when it
    closes as soon as the work finishes (the plan's measure time is then the longest it may take, plus
    overrun_s: a tool told to run for the window needs a moment more to start and print its report).
    calibrates says whether the workload needs calibration intervals to find its top rate. ops_unit
    is what one op is, in the plural ("ops", "hashes", "4KiB-reads"): reports head their throughput
    columns with it.
    """

    name: str
    ops_unit: str
    window: str
    overrun_s: float
    calibrates: bool

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Workload:
        """Build the workload from its settings (the keys of its sample.toml, without `workload`);
        a key it does not own is a WorkloadError."""
        ...

    def preflight(self) -> None:
        """Check, without starting anything, what can be checked before a run is announced (a
        program that is not there): a WorkloadError says what is wrong."""

    def open(self) -> None:
        """Start workers; called once before the first phase."""

    def start_phase(self, phase: Phase, rate: float | None) -> None:
        """Begin the phase's load: rate None = as fast as possible (calibration), 0 = idle, else ops/s."""

    def start_measure(self) -> None: ...

    def measure_done(self) -> bool:
        """True when an "until_done" window may close now."""

    def end_measure(self) -> int:
        """Ops completed inside the measurement window."""

    def end_phase(self) -> None:
        """Stop the phase's load."""

    def completed(self) -> int:
        """Ops completed since open(), for the live achieved rate."""

    def close(self) -> None:
        """Stop everything; safe to call twice and after a failure."""

    def running(self) -> int | None:
        """Jobs or copies still running in this window, for the live view; None without jobs."""

    def failure(self) -> str | None:
        """Why the workload has failed on its own (a command exited non-zero), or None: the driver stops
        the run as soon as this says something."""

    def window_jobs(self) -> list[dict[str, Any]]:
        """The records of the jobs the last window ran, as a scheduler accounted them (phase schema's
        `jobs`); [] for a workload without a scheduler."""

    def window_unserved(self) -> int | None:
        """At a paced level, the last window's arrivals that were not served inside it (dropped once
        the workers ran too far behind, or still queued when it closed); None for a workload that does
        not pace arrivals, and for calibration and idle."""

    def plan(self, request: PlanRequest) -> Plan | None:
        """The workload's own phases (copies of a job, a cluster's levels), or None for the sweep's
        graduated loads of the plan options. A WorkloadError or ValueError is one line, exit 2."""

    def nodes(self) -> list[str] | None:
        """The nodes of a cluster the sweep loads, or None for this machine: their appliances are summed
        when no channel is named, and the standard statement judges the share of them metered."""

    def command_line(self) -> str | None:
        """The command line of the program the workload runs, as the user gave it (its template, with
        the placeholders), or None for a workload that runs no program of the user's. The run records
        it with its secrets redacted (sweep.sut.redact_command)."""


class WorkloadDefaults:
    """The answers of a workload that has no jobs, no scheduler and nothing that fails on its own;
    a workload inherits them and overrides what applies to it."""

    def preflight(self) -> None:
        pass

    def running(self) -> int | None:
        return None

    def failure(self) -> str | None:
        return None

    def window_jobs(self) -> list[dict[str, Any]]:
        return []

    def window_unserved(self) -> int | None:
        return None

    def plan(self, request: PlanRequest) -> Plan | None:
        return None

    def nodes(self) -> list[str] | None:
        return None

    def command_line(self) -> str | None:
        return None
