"""Scoring a run from the store, in one place: the channels it sums, each device's clock offset and the
deadband resolved from the store and the scoring options, then the run aligned, scored and checked.

`wattbench sweep` (right after its run), `wattbench suite` (each worklet), `wattbench demo` and
`wattbench report` all score through `score_run`, so a run scored by the sweep and scored again by the
report with the same options gives the same result. `ScoringOptions` are the scoring options of the
command line, built once (from the arguments, or from the record a stored result keeps of them); their
defaults are the core's own (`Limits`, `CostInputs`)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from itertools import pairwise
from typing import Any

from ..core.align import ChannelSpec
from ..core.clocktrack import OffsetSource
from ..core.compliance import Limits
from ..core.evaluate import Evaluation, evaluate, from_stored, run_span
from ..core.plan import DEFAULT_CALIBRATION_USE
from ..core.score import CostInputs
from ..store.base import Store
from . import channels as chans

_LIMITS = Limits()
_COST = CostInputs()


@dataclass(frozen=True)
class ScoringOptions:
    """The scoring options, one field per command-line option (the field is the option's argparse
    destination: `load_tolerance` is `--load-tolerance`), each holding the value as the command line
    takes it, so a result's record of them reads back to the same options."""

    channel: tuple[str, ...] = ()  # DEV/CH[@NODE], summed as power
    inlet: tuple[str, ...] = ()  # DEV/CH, inlet temperature
    clock_offset: tuple[str, ...] = ()  # DEV=MS, device minus host clock, taken as exact
    load_tolerance: float = _LIMITS.load_tolerance
    load_mode: str = _LIMITS.load_mode
    min_inlet: float = _LIMITS.min_inlet_c
    no_inlet_required: bool = not _LIMITS.require_inlet
    max_uncertainty: float | None = _LIMITS.max_uncertainty
    require: str = _LIMITS.require
    max_skew: float = _LIMITS.max_skew_ms
    system_nodes: int | None = _LIMITS.system_nodes
    price: float | None = _COST.price
    tariff: float | None = _COST.tariff_kwh
    years: float = _COST.years

    def __post_init__(self) -> None:
        # Refused when built, before anything is measured or scored; FieldError names the field.
        _ = (self.limits, self.cost, self.named_channels, self.offsets)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ScoringOptions:
        given = vars(args)
        return cls(**{f.name: _value(given[f.name]) for f in fields(cls)})

    @classmethod
    def from_record(cls, record: Mapping[str, Any] | None) -> ScoringOptions:
        """The options a result's record names (option name -> value as given); the others default.
        An option this version does not know (a result scored by a newer one) is left out."""
        names = {option_name(f.name): f.name for f in fields(cls)}
        return cls(**{names[k]: _value(v) for k, v in (record or {}).items() if k in names})

    @classmethod
    def from_result(cls, result: Mapping[str, Any]) -> ScoringOptions:
        """The options a stored result was scored with; a result stored before they were recorded
        counts as scored with the defaults."""
        recorded = result.get("options")
        return cls.from_record(recorded if isinstance(recorded, Mapping) else None)

    def record(self) -> dict[str, Any]:
        """The options given other values than their defaults, keyed by option name, lists for the
        repeated ones: what a result records ({} for all defaults)."""
        default = ScoringOptions()
        return {
            option_name(f.name): list(v) if isinstance(v, tuple) else v
            for f in fields(self)
            if (v := getattr(self, f.name)) != getattr(default, f.name)
        }

    def changed_from(self, recorded: Mapping[str, Any] | None) -> list[str]:
        """The options given here (other than their defaults) that a result recording `recorded` was
        not scored with. An option left at its default here changes nothing."""
        was = ScoringOptions.from_record(recorded).record()
        return [opt for opt, value in self.record().items() if was.get(opt) != value]

    def over(self, stored: ScoringOptions) -> ScoringOptions:
        """stored, with the options given here (other than their defaults) in place of its own."""
        default = ScoringOptions()
        given = {f.name: getattr(self, f.name) for f in fields(self)}
        return replace(stored, **{k: v for k, v in given.items() if v != getattr(default, k)})

    @property
    def limits(self) -> Limits:
        return Limits(
            load_tolerance=self.load_tolerance,
            load_mode=self.load_mode,
            min_inlet_c=self.min_inlet,
            require_inlet=not self.no_inlet_required,
            max_uncertainty=self.max_uncertainty,
            max_skew_ms=self.max_skew,
            require=self.require,
            system_nodes=self.system_nodes,
        )

    @property
    def cost(self) -> CostInputs | None:
        if self.price is None and self.tariff is None:
            return None
        return CostInputs(price=self.price, tariff_kwh=self.tariff, years=self.years)

    @property
    def named_channels(self) -> list[ChannelSpec]:
        return [chans.parse_channel(c) for c in self.channel] + [
            chans.parse_channel(c, "inlet") for c in self.inlet
        ]

    @property
    def offsets(self) -> dict[str, float] | None:
        """The clock offsets given, or None: then they are read from the store."""
        if not self.clock_offset:
            return None
        return dict(chans.parse_offset(x) for x in self.clock_offset)


def option_name(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def _value(v: Any) -> Any:
    return tuple(v) if isinstance(v, list | tuple) else v


@dataclass(frozen=True)
class RunFacts:
    """What the sweep that ran a run knows of it and the store does not: the events as it sent them,
    the plan's scored phases and calibration intervals, why it stopped, and the channels it bound
    before it started (the plan is not stored with a run, see core.evaluate.calibrated_throughput)."""

    events: Sequence[Mapping[str, Any]]
    planned: Sequence[str] | None = None
    interrupted: str | None = None
    calibrations: Sequence[str] | None = None
    calibration_use: int = DEFAULT_CALIBRATION_USE
    bound: Sequence[ChannelSpec] = ()


@dataclass
class Resolved:
    """A run's channels, its devices' clock offsets and the deadband alignment applies to them."""

    choice: chans.Choice = field(default_factory=chans.Choice)
    offsets: Mapping[str, OffsetSource] = field(default_factory=dict)
    deadband_ms: float = 0.0


def resolve(
    store: Store | None,
    events: Sequence[Mapping[str, Any]],
    options: ScoringOptions,
    bound: Sequence[ChannelSpec] = (),
) -> Resolved:
    """The channels: those bound before the run, else those named in the options, else those the run
    named at its start, else the power channels the stored metadata gives for the run; their roles
    always from the metadata stored during the run. The offsets: those given, taken as exact, else
    each device's clock track from the store's health points of the run, shifted by only beyond the
    deadband (chans.DEFAULT_DEADBAND_MS)."""
    given = options.offsets
    named = list(bound) or options.named_channels
    span = run_span(events)
    if store is None:
        return Resolved(
            chans.Choice(named), given or {}, 0.0 if given is not None else chans.DEFAULT_DEADBAND_MS
        )
    if span is None:
        choice = chans.Choice()
    elif named:
        choice = chans.apply_roles(named, chans.stored_roles(store, *span))
    else:
        started = next(
            (e.get("channels") for e in events if e.get("event") == "run_start" and e.get("channels")), None
        )
        choice = chans.from_store(store, *span, started)
    if given is not None:
        if span is not None and (problems := chans.unmeasured_offsets(given, choice)):
            # refused as the sweep refuses it before the run (a re-score in `report` comes here)
            raise chans.ChannelError("; ".join(problems))
        return Resolved(choice, given, 0.0)
    devices = sorted({s.dev for s in choice.specs})
    # Read once the run's samples are in: the health points that saw its last batches are in by then.
    offsets = chans.offsets_from_store(store, devices, *(span or (None, None)))
    return Resolved(choice, offsets, chans.DEFAULT_DEADBAND_MS)


# How many of the store's runs on each side of this one are looked at for one that ran beside it: runs
# are listed newest first, and one that overlapped this run started within a few places of it.
NEIGHBOURS = 20


def _shared(events: Sequence[Mapping[str, Any]], ours: set[str]) -> list[str]:
    """Those of `ours` (DEV/CH) that a run's run_start named as its channels."""
    named = next((e.get("channels") for e in events if e.get("event") == "run_start"), None) or []
    return sorted(ours & {str(c) for c in named})


def sharing_runs(store: Store, run: str, span: tuple[int, int], channels: Sequence[str]) -> list[str]:
    """The other runs whose events overlap `span` and that named one of `channels` (DEV/CH) on their
    run_start, each said with the channels it shared."""
    ours = set(channels)
    if not ours:  # an ops-only run has no meter to share
        return []
    runs = store.runs()
    at = runs.index(run) if run in runs else 0
    out = []
    for other in runs[max(0, at - NEIGHBOURS) : at + NEIGHBOURS + 1]:
        if other == run:
            continue
        events = store.phases(other)
        theirs = run_span(events)
        if theirs is None or theirs[1] < span[0] or theirs[0] > span[1]:
            continue
        shared = _shared(events, ours)
        if shared:
            out.append(f"run {other} drove {', '.join(shared)} at the same time")
    return out


# A run whose end is not in the store counts as running until it has been quiet for the longer of
# this and twice its longest gap between events: a sweep killed without its end blocks its meter no longer.
QUIET_MS = 120_000


def runs_driving(store: Store, channels: Sequence[str], now_ms: int) -> dict[str, tuple[list[str], int, int]]:
    """The newest runs of the store still in progress on one of `channels`: run -> (the channels shared,
    ms since its last event, ms until it no longer counts as running)."""
    ours = set(channels)
    out: dict[str, tuple[list[str], int, int]] = {}
    for other in store.runs()[:NEIGHBOURS] if ours else []:
        events = store.phases(other)
        if any(e.get("event") in ("run_end", "run_abort") for e in events):
            continue
        shared = _shared(events, ours)
        times = sorted(int(e["t"]) for e in events if "t" in e)
        if not shared or not times:
            continue
        quiet = now_ms - times[-1]
        alive = max(QUIET_MS, 2 * max((b - a for a, b in pairwise(times)), default=0))
        if quiet < alive:
            out[other] = (shared, quiet, alive - quiet)
    return out


def score_run(
    store: Store | None, run: str, options: ScoringOptions, facts: RunFacts | None = None
) -> Evaluation:
    """Score a run: its events (facts.events, else the stored ones), its channels and offsets
    (resolve) and its samples from the store, with the options' limits and cost; the result records
    the options. Without a store (an ops-only sweep, or a store that went away) the levels have ops
    and no power. The result is stamped with the run's last event, not the time of scoring, so scoring
    the same run twice gives the same message."""
    events = list(facts.events) if facts is not None else store.phases(run) if store is not None else []
    resolved = resolve(store, events, options, facts.bound if facts is not None else ())
    span = run_span(events)
    keys = [spec.key for spec in resolved.choice.specs if spec.role == "power"]
    sharing = sharing_runs(store, run, span, keys) if store is not None and span is not None else []
    return evaluate(
        run,
        events,
        store.series if store is not None and span is not None else None,
        resolved.choice.specs,
        resolved.offsets,
        options.limits,
        options.cost,
        planned=facts.planned if facts is not None else None,
        interrupted=facts.interrupted if facts is not None else None,
        calibration_use=facts.calibration_use if facts is not None else DEFAULT_CALIBRATION_USE,
        calibrations=facts.calibrations if facts is not None else None,
        now_ms=span[1] if span is not None else None,
        deadband_ms=resolved.deadband_ms,
        channel_problems=resolved.choice.problems,
        options=options.record(),
        sharing=sharing,
    )


def stored_run(
    store: Store, result: Mapping[str, Any], events: Sequence[Mapping[str, Any]], options: ScoringOptions
) -> Evaluation:
    """A stored result as it was scored (nothing aligned again), with the run's channels and clock
    figures resolved as score_run resolves them."""
    resolved = resolve(store, events, options)
    return from_stored(result, events, resolved.choice.specs, resolved.offsets, resolved.deadband_ms)
