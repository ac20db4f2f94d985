"""From a run's phase events and its samples to the scored result: alignment, score, compliance, and the
result message of the contract. Used right after a sweep and when a stored run is re-scored."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import align as al
from . import clocktrack as ct
from . import compliance as cp
from . import conformance as cf
from . import score as sc
from .plan import DEFAULT_CALIBRATION_USE, calibrated_rate, calibration_spread


@dataclass
class Evaluation:
    run: str
    result: dict[str, Any]
    levels: list[sc.LevelScore]
    aligned: list[al.WindowPower]
    checks: list[cp.Check]
    summary: sc.Summary
    calibrated: float | None
    calibration: list[tuple[str, float]] = field(default_factory=list)
    channels: list[al.ChannelSpec] = field(default_factory=list)
    offsets_ms: dict[str, float] = field(default_factory=dict)  # what alignment shifted by
    events: list[dict[str, Any]] = field(default_factory=list)
    measured_offsets_ms: dict[str, float] = field(default_factory=dict)  # what was measured (checked)
    clock: dict[str, ct.ClockTrack] = field(default_factory=dict)  # per device, stretch by stretch
    calibration_missing: str | None = None  # why there is no calibrated throughput, when there is none

    @property
    def valid(self) -> bool:
        return bool(self.result["valid"])


def run_span(events: Sequence[Mapping[str, Any]]) -> tuple[int, int] | None:
    """First and last event time of a run."""
    ts = [int(e["t"]) for e in events if "t" in e]
    return (min(ts), max(ts)) if ts else None


def interrupted_reason(events: Sequence[Mapping[str, Any]]) -> str | None:
    for e in events:
        if e.get("event") == "run_abort":
            return str(e.get("reason") or "run aborted")
    if events and not any(e.get("event") == "run_end" for e in events):
        return "run has no run_end event"
    return None


def planned_phases(events: Sequence[Mapping[str, Any]]) -> list[str]:
    """Scored phases the run started, in order (the plan is not stored; its phase_start events are)."""
    seen: list[str] = []
    for e in sorted(events, key=lambda e: e.get("n", 0)):
        if e.get("event") == "phase_start" and e.get("kind") != "calibration" and e.get("phase") not in seen:
            if not str(e.get("phase", "")).startswith("cal"):
                seen.append(str(e["phase"]))
    return seen


def calibration_rates(windows: Sequence[al.Window]) -> list[tuple[str, float]]:
    """(phase, ops/s) of the run's completed calibration intervals, in order."""
    return [
        (w.phase, (w.ops or 0) / w.duration_s)
        for w in windows
        if w.kind == "calibration" and w.duration_s > 0
    ]


def calibrated_throughput(
    events: Sequence[Mapping[str, Any]],
    cal: Sequence[tuple[str, float]],
    use: int,
    interrupted: str | None,
    calibrations: Sequence[str] | None = None,
) -> tuple[float | None, list[float], str | None]:
    """(calibrated throughput, the rates it is the mean of, why there is none) of a run whose completed
    calibration intervals are cal, (phase, ops/s) in order.

    The calibrated throughput is the mean of the last `use` calibration intervals of the plan. A run
    stopped before those completed has none: the intervals it did complete are the first ones, and the
    first runs low, so their mean is not the machine's throughput. calibrations names the plan's
    calibration phases where the plan is known (the sweep that ran it). The plan is not stored with a
    run, so for a stored run calibration is over only once a later phase started or the run ended."""
    if not cal:
        return None, [], None
    if calibrations:
        measured = dict(cal)
        used = list(calibrations)[-use:]
        missing = [name for name in used if name not in measured]
        if missing:
            why = f"the run stopped before {missing[0]} completed (it would be the mean of {_and(used)})"
            return None, [], why
        rates = [measured[name] for name in used]
        return sum(rates) / len(rates), rates, None
    if interrupted is not None and not planned_phases(events):
        return None, [], "the run stopped during calibration"
    rates = [r for _, r in cal]
    return calibrated_rate(rates, use), rates[-use:], None


def _and(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def workload_name(events: Sequence[Mapping[str, Any]]) -> str | None:
    for e in events:
        if e.get("event") == "run_start" and e.get("workload"):
            return str(e["workload"])
    return None


def ops_unit(events: Sequence[Mapping[str, Any]]) -> str | None:
    """What one op of the run's workload is ("hashes", "4KiB-reads"), as its run_start said."""
    for e in events:
        if e.get("event") == "run_start" and e.get("unit"):
            return str(e["unit"])
    return None


def evaluate(
    run: str,
    events: Sequence[Mapping[str, Any]],
    fetch: al.Fetch | None,
    channels: Sequence[al.ChannelSpec],
    offsets_ms: Mapping[str, ct.OffsetSource] | None = None,
    limits: cp.Limits | None = None,
    cost: sc.CostInputs | None = None,
    planned: Sequence[str] | None = None,
    interrupted: str | None = None,
    calibration_use: int = DEFAULT_CALIBRATION_USE,
    calibrations: Sequence[str] | None = None,
    now_ms: int | None = None,
    deadband_ms: float = 0.0,
    channel_problems: Sequence[str] = (),
    options: Mapping[str, Any] | None = None,
    sharing: Sequence[str] = (),
) -> Evaluation:
    """Score a run. fetch may be None (no store): the levels then have ops but no power.

    offsets_ms are device-minus-host clock offsets as measured, one per device or a ClockTrack when the
    offset changed during the run; alignment shifts each window by its offset when beyond deadband_ms,
    and the clock_skew check judges the largest of each device. channel_problems are reasons the
    channels could not all be chosen as asked; they fail the `channels` check. options are the scoring
    options the run was scored with, as the command line took them: the result records them, so a
    later report can tell whether it was asked for another scoring. calibrations are the names of the
    plan's calibration phases, when the plan is known (calibrated_throughput). sharing: the other runs
    that drove this run's power channels while it ran (the `exclusive` check)."""
    tracks, measured, offsets = clock_figures(offsets_ms or {}, deadband_ms)
    steps = {k: len(t.steps) for k, t in tracks.items() if t.steps}
    windows = al.windows_from_events(events)
    if interrupted is None:
        interrupted = interrupted_reason(events)
    if planned is None:
        planned = planned_phases(events)

    cal = calibration_rates(windows)
    calibrated, used, calibration_missing = calibrated_throughput(
        events, cal, calibration_use, interrupted, calibrations
    )

    scored = [w for w in windows if w.kind != "calibration"]
    power_channels = [c for c in channels if c.role in ("power", "inlet")]
    span = run_span(events)
    whole = None
    if span and any(c.role == "power" for c in channels):
        whole = al.Window("run", "run", span[0], span[1])  # for the run's energy
    run_energy = None
    if fetch is not None and power_channels:
        # The whole run is aligned with the windows, so each channel is fetched once.
        placed: dict[str, ct.ClockTrack] = {}
        extra = [whole] if whole is not None else []
        aligned = al.align(
            [*scored, *extra], power_channels, fetch, tracks, deadband_ms=deadband_ms, placed=placed
        )
        tracks.update(placed)
        if whole is not None:
            watts = aligned.pop().watts
            if math.isfinite(watts):
                run_energy = al.window_energy_wh(watts, whole)
    else:
        aligned = [al.WindowPower(w, []) for w in scored]

    levels = [_level(wp, calibrated) for wp in aligned]
    summary = sc.summarize(levels, run_energy, cost)
    spread = calibration_spread(used, calibration_use)
    checks = cp.check_run(levels, aligned, measured, planned, interrupted, limits, steps, spread)
    statement = None
    if fetch is not None:
        idle = any(lv.kind == "idle" and lv.has_power for lv in levels)
        statement = cf.state(channels, aligned, idle, coverage(channels, aligned, limits))
        required = cp.check_standard(statement, limits or cp.Limits())
        first = [cp.check_channels(aligned, channel_problems), cp.check_exclusive(sharing)]
        checks = cp.fit([c for c in (*first, *checks, required) if c is not None])
    result = build_result(
        run, levels, checks, summary, calibrated, workload_name(events), interrupted, now_ms, ops_unit(events)
    )
    result.update(recorded(events, channels))
    listed = channel_rows(channels, aligned) if fetch is not None else []
    if listed:
        result["channels"] = listed
    if statement is not None:
        result["standard"] = statement.to_dict()
    if options is not None:
        result["options"] = dict(options)
    return Evaluation(
        run,
        result,
        levels,
        aligned,
        checks,
        summary,
        calibrated,
        cal,
        list(channels),
        offsets,
        [dict(e) for e in events],
        measured,
        tracks,
        calibration_missing,
    )


def recorded(events: Sequence[Mapping[str, Any]], channels: Sequence[al.ChannelSpec]) -> dict[str, Any]:
    """What the run recorded of how it was measured, for the result: the workload's command line
    (redacted when it was recorded), the host's load average at the start and end (run_start, then
    run_end or run_abort), and whether a summed channel's meter is a simulated one."""
    out: dict[str, Any] = {}
    load: dict[str, float] = {}
    for e in events:
        if e.get("event") == "run_start":
            if e.get("command"):
                out["command"] = str(e["command"])[:500]
            if _load(e.get("load")):
                load["start"] = float(e["load"])
        elif e.get("event") in ("run_end", "run_abort") and _load(e.get("load")):
            load["end"] = float(e["load"])
    if load:
        out["load"] = load
    if any(c.role == "power" and c.simulated for c in channels):
        out["simulated_meter"] = True
    return out


def _load(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and 0 <= x <= 1e6


def channel_rows(
    channels: Sequence[al.ChannelSpec], aligned: Sequence[al.WindowPower]
) -> list[dict[str, Any]]:
    """The channels the run used, for every report: power channels are the ones summed, inlet channels
    gave the inlet temperature; samples counts the usable ones inside the scored windows."""
    counts: dict[str, int] = {}
    for wp in aligned:
        for c in wp.channels:
            counts[c.spec.key] = counts.get(c.spec.key, 0) + c.n
    rows = []
    for s in channels:
        if s.role not in ("power", "inlet"):
            continue
        row: dict[str, Any] = {"dev": s.dev, "ch": s.ch, "role": "component" if s.component else s.role}
        if s.meter:
            row["meter"] = s.meter[:32]
        if s.role == "power" and s.acc is not None and 0 <= s.acc <= 1:
            row["acc"] = float(s.acc)
        if s.role == "power" and s.upd is not None and 0 < s.upd <= 86400:
            row["upd"] = float(s.upd)
        if s.role == "power":
            row["node"] = s.node_name[:32]
        row["samples"] = counts.get(s.key, 0)
        rows.append(row)
    return rows[:256]


def clock_figures(
    offsets_ms: Mapping[str, ct.OffsetSource], deadband_ms: float
) -> tuple[dict[str, ct.ClockTrack], dict[str, float], dict[str, float]]:
    """Each device's clock track, its measured offset (the largest of the run, which clock_skew
    judges) and the offset reported as applied (the measured one beyond the deadband)."""
    tracks = {k: ct.as_track(v) for k, v in offsets_ms.items()}
    measured = {k: t.worst() for k, t in tracks.items()}
    applied = {k: v for k, v in measured.items() if abs(v) > deadband_ms}
    return tracks, measured, applied


def from_stored(
    result: Mapping[str, Any],
    events: Sequence[Mapping[str, Any]] = (),
    channels: Sequence[al.ChannelSpec] = (),
    offsets_ms: Mapping[str, ct.OffsetSource] | None = None,
    deadband_ms: float = 0.0,
) -> Evaluation:
    """An Evaluation for rendering a stored result as it was scored (no re-alignment). offsets_ms and
    deadband_ms are the run's clock offsets as evaluate takes them: the result does not keep them, and
    the report shows them beside it."""
    tracks, measured, offsets = clock_figures(offsets_ms or {}, deadband_ms)
    summ = result.get("summary", {})
    summary = sc.Summary(
        overall=float(result["overall"]),
        peak_ops=float(summ.get("peak_ops", 0.0)),
        peak_W=float(summ.get("peak_W", math.nan)),
        idle_W=float(summ.get("idle_W", math.nan)),
        energy_Wh=float(summ.get("energy_Wh", math.nan)),
        cost=summ.get("cost"),
        ops_per_dollar=summ.get("ops_per_dollar"),
    )
    calibrated = result.get("calibrated")
    missing = None
    if calibrated is None:
        # The result does not keep why; the events say as much as a stored run can (no plan).
        cal = calibration_rates(al.windows_from_events(events))
        missing = calibrated_throughput(events, cal, DEFAULT_CALIBRATION_USE, interrupted_reason(events))[2]
    return Evaluation(
        run=str(result["run"]),
        result=dict(result),
        levels=levels_from_result(result),
        aligned=[],
        checks=checks_from_result(result),
        summary=summary,
        calibrated=calibrated,
        channels=list(channels),
        offsets_ms=offsets,
        events=[dict(e) for e in events],
        measured_offsets_ms=measured,
        clock=tracks,
        calibration_missing=missing,
    )


def _level(wp: al.WindowPower, calibrated: float | None) -> sc.LevelScore:
    w = wp.window
    ops_rate = (w.ops or 0) / w.duration_s if w.duration_s > 0 else 0.0
    actual = None
    if w.kind == "target":
        actual = sc.actual_load(ops_rate, calibrated)
    elif w.kind == "idle":
        actual = 0.0 if calibrated else None
    return sc.LevelScore(
        phase=w.phase,
        kind=w.kind,
        target=w.target if w.kind != "concurrency" else None,
        ops=ops_rate,
        W=wp.watts if wp.channels else math.nan,
        duration_s=w.duration_s,
        ops_count=w.ops,
        actual=actual,
        inlet_C=wp.inlet_c,
        samples=wp.samples if wp.channels else None,
        gaps=len(wp.gaps) if wp.channels else None,
        u=wp.uncertainty,
        copies=w.copies,
        node_W=wp.node_watts,
        busy=w.busy,
        job_ops=w.job_ops / w.duration_s if w.job_ops is not None and w.duration_s > 0 else None,
        unserved=w.unserved,
    )


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def result_level(lv: sc.LevelScore) -> dict[str, Any]:
    row: dict[str, Any] = {"phase": lv.phase, "kind": lv.kind, "ops": float(lv.ops), "W": float(lv.W)}
    if lv.target is not None:
        row["target"] = float(lv.target)
    if _finite(lv.actual) and 0 <= lv.actual <= 10:  # type: ignore[operator]
        row["actual"] = float(lv.actual)  # type: ignore[arg-type]
    if _finite(lv.Wh):
        row["Wh"] = float(lv.Wh)
    row["ratio"] = float(lv.ratio)
    if _finite(lv.inlet_C) and -60 <= lv.inlet_C <= 150:
        row["inlet_C"] = float(lv.inlet_C)
    if lv.samples is not None:
        row["samples"] = int(lv.samples)
    if lv.gaps is not None:
        row["gaps"] = int(lv.gaps)
    if _finite(lv.u) and 0 <= lv.u <= 1:
        row["u"] = float(lv.u)
    if lv.busy is not None:
        row["busy"] = list(lv.busy)
    if _finite(lv.job_ops):
        row["job_ops"] = float(lv.job_ops)  # type: ignore[arg-type]
    if lv.unserved is not None:
        row["unserved"] = int(lv.unserved)
    return row


def coverage(
    channels: Sequence[al.ChannelSpec], aligned: Sequence[al.WindowPower], limits: cp.Limits | None
) -> cf.Coverage | None:
    """The share of the system the run metered, when the system's size is known: the nodes of the
    summed channels, and their mean power over the scored windows that have it."""
    if limits is None or limits.system_nodes is None:
        return None
    nodes = {c.node_name for c in channels if c.role == "power"}
    watts = [wp.watts for wp in aligned if math.isfinite(wp.watts)]
    mean = sum(watts) / len(watts) if watts else 0.0
    return cf.Coverage(limits.system_nodes, len(nodes), mean)


def build_result(
    run: str,
    levels: Sequence[sc.LevelScore],
    checks: Sequence[cp.Check],
    summary: sc.Summary,
    calibrated: float | None,
    workload: str | None,
    interrupted: str | None,
    now_ms: int | None = None,
    unit: str | None = None,
) -> dict[str, Any]:
    """The result message of the contract. A level without power data has no row (its checks say why)."""
    rows = [result_level(lv) for lv in levels if lv.has_power][:64]
    valid = cp.is_valid(checks) and not interrupted
    result: dict[str, Any] = {
        "v": 1,
        "run": run,
        "t": int(now_ms if now_ms is not None else time.time() * 1000),
        "valid": bool(valid),
        "overall": float(min(max(summary.overall, 0.0), 1e12)),
        "levels": rows,
        "checks": [c.to_dict() for c in checks],
    }
    if interrupted:
        result["partial"] = True
    if workload:
        result["workload"] = workload[:64]
    if unit:
        result["unit"] = unit[:32]
    if _finite(calibrated):
        result["calibrated"] = float(calibrated)  # type: ignore[arg-type]
    # A figure that was not measured is left out, never written as 0: with no load level scored (a
    # run stopped in calibration) there is no peak throughput.
    summ: dict[str, float] = {}
    if any(lv.kind in ("target", "concurrency") for lv in levels):
        summ["peak_ops"] = float(summary.peak_ops)
    if _finite(summary.peak_W):
        summ["peak_W"] = float(summary.peak_W)
    if _finite(summary.idle_W):
        summ["idle_W"] = float(summary.idle_W)
    if _finite(summary.energy_Wh):
        summ["energy_Wh"] = float(summary.energy_Wh)
    if _finite(summary.cost):
        summ["cost"] = float(summary.cost)  # type: ignore[arg-type]
    if _finite(summary.ops_per_dollar):
        summ["ops_per_dollar"] = float(summary.ops_per_dollar)  # type: ignore[arg-type]
    result["summary"] = summ
    return result


def levels_from_result(result: Mapping[str, Any]) -> list[sc.LevelScore]:
    """Rebuild table rows from a stored result message."""
    out = []
    for row in result.get("levels", []):
        W = float(row["W"])
        wh = row.get("Wh")
        duration = float(wh) * 3600.0 / W if wh is not None and W > 0 else None
        phase = str(row["phase"])
        copies = int(phase[1:]) if row.get("kind") == "concurrency" and phase[1:].isdigit() else None
        out.append(
            sc.LevelScore(
                phase=phase,
                kind=str(row["kind"]),
                target=row.get("target"),
                ops=float(row["ops"]),
                W=W,
                duration_s=duration,
                actual=row.get("actual"),
                inlet_C=float(row.get("inlet_C", math.nan)),
                samples=row.get("samples"),
                gaps=row.get("gaps"),
                u=float(row.get("u", math.nan)),
                copies=copies,
                busy=tuple(row["busy"]) if isinstance(row.get("busy"), list) else None,
                job_ops=float(row["job_ops"]) if row.get("job_ops") is not None else None,
                unserved=int(row["unserved"]) if row.get("unserved") is not None else None,
            )
        )
    return out


def checks_from_result(result: Mapping[str, Any]) -> list[cp.Check]:
    return [
        cp.Check(c["name"], bool(c["ok"]), c.get("reason", ""), c.get("phase"))
        for c in result.get("checks", [])
    ]
