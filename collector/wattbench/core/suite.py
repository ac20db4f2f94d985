"""The SERT-style suite score: several worklets, each swept at graduated loads, combined into one
efficiency figure relative to a reference run the user names. Pure: numbers in, numbers out.

The method (docs/sweep.md, "Suite score"), after SPEC SERT 2's structure; SPEC's own reference
constants are not public, so the score is relative to a run of the user's own and is never comparable
with published SERT scores:

1. interval efficiency = normalised performance / interval power, where normalised performance is the
   interval's ops/s over the reference run's calibrated ops/s for the same worklet (so on the
   reference run itself it is the actual load fraction);
2. a worklet's efficiency is the geometric mean of its intervals' efficiencies (active idle is not an
   interval: it is measured and reported once for the suite);
3. a group's efficiency (cpu, memory, storage) is the geometric mean of its worklets';
4. the suite's efficiency is the geometric mean of the groups' weighted CPU 65 %, memory 30 %,
   storage 5 % (SERT's weights), and its score is that over the reference run's suite efficiency:
   exactly 1.0 for the reference itself.

A group the run does not have is left out and the weights of the others are renormalised; the score
then says it is partial and which groups it lacks. Anything that would make a number up (a worklet the
reference does not have, a zero or negative figure, no interval) is refused with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .align import windows_from_events
from .conformance import SPEC_WINDOW_S

WEIGHTS: dict[str, float] = {"cpu": 0.65, "memory": 0.30, "storage": 0.05}


class SuiteError(ValueError):
    """The suite cannot be scored without making a number up; the message says why."""


@dataclass(frozen=True)
class Interval:
    """One measured load level of a worklet: its throughput and its average power."""

    phase: str
    ops_per_s: float
    watts: float


@dataclass(frozen=True)
class WorkletRun:
    name: str
    group: str  # a key of the weights: cpu, memory or storage
    calibrated: float  # ops/s at calibration
    intervals: tuple[Interval, ...]


@dataclass(frozen=True)
class SuiteScore:
    score: float  # the run's suite efficiency over the reference's: 1.0 for the reference itself
    efficiency: float  # the run's own suite efficiency (weighted geometric mean of its groups)
    groups: dict[str, float]  # group -> its efficiency
    worklets: dict[str, float]  # worklet -> its efficiency
    weights: dict[str, float]  # the weights used, renormalised over the groups present
    missing_groups: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)

    @property
    def partial(self) -> bool:
        return bool(self.missing_groups)


def geometric_mean(values: Sequence[float], weights: Sequence[float] | None = None) -> float:
    """exp(Σ wᵢ ln xᵢ / Σ wᵢ); equal weights when none are given. Every value and weight must be > 0."""
    if not values:
        raise SuiteError("a geometric mean of nothing")
    ws = [1.0] * len(values) if weights is None else list(weights)
    if len(ws) != len(values):
        raise SuiteError("as many weights as values are needed")
    for v in (*values, *ws):
        if not (isinstance(v, int | float) and math.isfinite(v) and v > 0):
            raise SuiteError(f"{v!r} cannot enter a geometric mean (it must be a positive number)")
    return math.exp(sum(w * math.log(v) for v, w in zip(values, ws, strict=True)) / sum(ws))


def worklet_efficiency(run: WorkletRun, reference_rate: float) -> float:
    """The geometric mean of the intervals' normalised performance per watt."""
    if not run.intervals:
        raise SuiteError(f"worklet {run.name}: no measured interval")
    if not (math.isfinite(reference_rate) and reference_rate > 0):
        raise SuiteError(f"worklet {run.name}: the reference's calibrated rate is {reference_rate!r}")
    effs = []
    for iv in run.intervals:
        if not (math.isfinite(iv.watts) and iv.watts > 0):
            raise SuiteError(f"worklet {run.name}, {iv.phase}: power {iv.watts!r} W")
        if not (math.isfinite(iv.ops_per_s) and iv.ops_per_s > 0):
            raise SuiteError(f"worklet {run.name}, {iv.phase}: {iv.ops_per_s!r} ops/s")
        effs.append((iv.ops_per_s / reference_rate) / iv.watts)
    return geometric_mean(effs)


def _efficiency(
    runs: Sequence[WorkletRun], reference: Mapping[str, WorkletRun], weights: Mapping[str, float]
) -> tuple[float, dict[str, float], dict[str, float], dict[str, float], tuple[str, ...]]:
    names = [r.name for r in runs]
    if len(set(names)) != len(names):
        raise SuiteError("a worklet appears twice in the suite")
    worklets: dict[str, float] = {}
    by_group: dict[str, list[float]] = {}
    for run in runs:
        if run.group not in weights:
            raise SuiteError(f"worklet {run.name}: group {run.group!r} has no weight ({', '.join(weights)})")
        ref = reference.get(run.name)
        if ref is None:
            raise SuiteError(f"worklet {run.name}: the reference run has no such worklet to normalise by")
        worklets[run.name] = worklet_efficiency(run, ref.calibrated)
        by_group.setdefault(run.group, []).append(worklets[run.name])
    if not by_group:
        raise SuiteError("the suite has no worklet")
    groups = {g: geometric_mean(v) for g, v in by_group.items()}
    present = [g for g in weights if g in groups]
    total = sum(weights[g] for g in present)
    used = {g: weights[g] / total for g in present}
    eff = geometric_mean([groups[g] for g in present], [used[g] for g in present])
    missing = tuple(g for g in weights if g not in groups)
    return eff, groups, worklets, used, missing


def suite_score(
    runs: Sequence[WorkletRun],
    reference: Sequence[WorkletRun],
    weights: Mapping[str, float] = WEIGHTS,
) -> SuiteScore:
    """The run's suite score against the reference run (which may be the run itself: 1.0)."""
    ref_by_name = {r.name: r for r in reference}
    eff, groups, worklets, used, missing = _efficiency(runs, ref_by_name, weights)
    # The reference is scored over the same worklets, so both efficiencies weigh the same groups.
    ref_runs = [ref_by_name[r.name] for r in runs]
    ref_eff, _, _, _, _ = _efficiency(ref_runs, ref_by_name, weights)
    notes = []
    if missing:
        notes.append(
            f"partial: no {', '.join(missing)} worklet; the weights are renormalised over "
            + ", ".join(f"{g} {w:.0%}" for g, w in used.items())
        )
    notes.append("SERT-style, relative to the reference run: not comparable with published SERT scores")
    return SuiteScore(eff / ref_eff, eff, groups, worklets, used, missing, notes)


# ---------------------------------------------------------------------------- the suite's result
LABEL = (
    "SERT-style suite score, relative to the reference run named: not SPEC SERT, and not comparable "
    "with published SERT scores (their reference constants are not public)"
)


@dataclass(frozen=True)
class WorkletResult:
    """One worklet of a suite as its sweep left it: which worklet, and its result message."""

    name: str
    group: str
    unit: str
    result: Mapping[str, Any]


def worklet_run(name: str, group: str, result: Mapping[str, Any]) -> WorkletRun:
    """A worklet's target loads and calibrated rate from its result message (active idle left out)."""
    intervals = tuple(
        Interval(str(lv["phase"]), float(lv["ops"]), float(lv["W"]))
        for lv in result.get("levels", [])
        if lv.get("kind") == "target"
    )
    return WorkletRun(name, group, float(result.get("calibrated") or 0.0), intervals)


def _level_rows(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for lv in result.get("levels", []):
        if lv.get("kind") != "target":
            continue
        row = {k: lv[k] for k in ("phase", "target", "actual", "ops", "W") if k in lv}
        row["ratio"] = float(lv["ops"]) / float(lv["W"])
        if lv.get("Wh"):
            # The window's length, for telling a rehearsal from a full run later.
            row["window_s"] = float(lv["Wh"]) / float(lv["W"]) * 3600.0
        rows.append(row)
    return rows


def worklet_entry(w: WorkletResult) -> dict[str, Any]:
    """A worklet's part of the suite result: its loads, its overall ops per watt (Σ ops/s over Σ W of
    its target loads; active idle is the suite's, not the worklet's) and whether its run was valid."""
    res = w.result
    rows = _level_rows(res)
    entry: dict[str, Any] = {
        "name": w.name,
        "group": w.group,
        "unit": w.unit,
        "run": str(res["run"]),
        "valid": bool(res.get("valid")),
        "levels": rows,
    }
    for key in ("workload", "calibrated", "standard"):
        if key in res:
            entry[key] = res[key]
    watts = math.fsum(r["W"] for r in rows)
    if rows and watts > 0:
        entry["overall"] = math.fsum(r["ops"] for r in rows) / watts
    if res.get("partial"):
        entry["partial"] = True
    failed = [
        f"{c['name']}"
        + (f" at {c['phase']}" if c.get("phase") else "")
        + (f": {c['reason']}" if c.get("reason") else "")
        for c in res.get("checks", [])
        if not c.get("ok")
    ]
    if failed:
        entry["failed"] = [f[:300] for f in failed[:16]]
    return entry


def reference_runs(doc: Mapping[str, Any]) -> list[WorkletRun]:
    """The worklets of an earlier suite result, to normalise by."""
    return [
        worklet_run(
            str(w["name"]),
            str(w["group"]),
            {
                "calibrated": w.get("calibrated"),
                "levels": [{**lv, "kind": "target"} for lv in w.get("levels", [])],
            },
        )
        for w in doc.get("worklets", [])
        if not w.get("partial")
    ]


def suite_measured(runs: Sequence[tuple[Sequence[Mapping[str, Any]], Mapping[str, Any]]]) -> dict[str, Any]:
    """What the suite measured, from each worklet's (events, result) in the order they ran: the system
    under test and host as the first run_start recorded them, the host's load average at the first
    worklet's start and the last one's end, whether a summed meter was simulated, and the shortest
    measurement window (a rehearsal when shorter than SPECpower's 240 s), as a run's report says them."""
    out: dict[str, Any] = {}
    start = next((e for events, _ in runs for e in events if e.get("event") == "run_start"), {})
    if start.get("host"):
        out["host"] = str(start["host"])[:64]
    out["sut"] = dict(start.get("sut") or {})
    loads: list[Mapping[str, Any]] = [r["load"] for _, r in runs if isinstance(r.get("load"), Mapping)]
    load = {k: float(x[k]) for k, x in (("start", loads[0]), ("end", loads[-1])) if k in x} if loads else {}
    if load:
        out["load"] = load
    if any(r.get("simulated_meter") for _, r in runs):
        out["simulated_meter"] = True
    windows = [
        w.duration_s for events, _ in runs for w in windows_from_events(events) if w.kind != "concurrency"
    ]
    out["intervals"] = len(windows)
    if windows:
        out["shortest_window_s"] = round(min(windows), 3)
        out["rehearsal"] = min(windows) < SPEC_WINDOW_S
    return out


def suite_document(
    suite: str,
    run: str,
    t_ms: int,
    worklets: Sequence[WorkletResult],
    reference: Mapping[str, Any] | None = None,
    interrupted: str | None = None,
    weights: Mapping[str, float] = WEIGHTS,
    measured: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The suite's result message (schema/v1/suite.schema.json). reference is an earlier suite result
    to normalise by; None normalises by this run itself (score 1.0). The score is taken over the
    finished worklets only; when one is missing, failed or interrupted the document says so, is not
    valid, and the score (if any can be made) is marked partial. measured is suite_measured's."""
    entries = [worklet_entry(w) for w in worklets]
    done = [w for w, e in zip(worklets, entries, strict=True) if not e.get("partial")]
    doc: dict[str, Any] = {
        "v": 1,
        "kind": "suite",
        "suite": suite,
        "run": run,
        "t": int(t_ms),
        "label": LABEL,
        "complete": interrupted is None and len(done) == len(worklets) and bool(worklets),
        "worklets": entries,
    }
    if interrupted:
        doc["interrupted"] = interrupted[:500]
    if measured:
        doc["measured"] = dict(measured)
    idle = [float(lv["W"]) for w in worklets for lv in w.result.get("levels", []) if lv.get("kind") == "idle"]
    if idle:
        doc["idle_W"] = idle[-1]
    runs = [worklet_run(w.name, w.group, w.result) for w in done]
    try:
        if reference is None:
            ref_runs, ref_name = runs, f"this run ({run})"
        else:
            ref_runs = reference_runs(reference)
            ref_name = f"{reference.get('suite')} run {reference.get('run')}"
        s = suite_score(runs, ref_runs, weights)
    except SuiteError as exc:
        doc["score_refused"] = str(exc)[:500]
    else:
        doc["score"] = {
            "value": s.score,
            "efficiency": s.efficiency,
            "reference": ref_name[:200],
            "groups": s.groups,
            "worklets": s.worklets,
            "weights": s.weights,
            "partial": s.partial or not doc["complete"],
            "missing_groups": list(s.missing_groups),
            "notes": s.notes,
        }
        for e in entries:
            if e["name"] in s.worklets:
                e["efficiency"] = s.worklets[e["name"]]
    doc["valid"] = bool(doc["complete"] and "score" in doc and all(e["valid"] for e in entries))
    return doc
