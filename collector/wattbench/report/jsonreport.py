"""The JSON report (schema/v1/report.schema.json): the run's result message (result.schema.json) as it
is stored and published, the units of its figures, what was measured (system under test, calibration,
timing, inlet), and the per-node power, gaps and clock offsets when the run was scored here rather
than read back from the store."""

from __future__ import annotations

import json
import math
from typing import Any

from ..core.contract import validate
from .measured import measured, result_ops_label, units


def report_dict(evaluation: Any, detail: bool = True) -> dict[str, Any]:

    out: dict[str, Any] = {
        "v": 1,
        "result": dict(evaluation.result),
        "units": units(result_ops_label(evaluation.result)),
        "measured": measured(evaluation),
    }
    if not detail or not evaluation.aligned:
        return out
    nodes = {}
    gaps = []
    for wp in evaluation.aligned:
        nw = {k: v for k, v in wp.node_watts.items() if math.isfinite(v)}
        if nw:
            nodes[wp.window.phase] = nw
        for g in wp.gaps:
            gaps.append(
                {
                    "phase": g.phase,
                    "channel": f"{g.dev}/{g.ch}",
                    "kind": g.kind,
                    "start": g.start_ms,
                    "end": g.end_ms,
                    "missing": g.missing,
                }
            )
    out["detail"] = {
        "node_W": nodes,
        "gaps": gaps,
        "clock_offsets_ms": evaluation.measured_offsets_ms,
        "applied_offsets_ms": evaluation.offsets_ms,
    }
    if any(t.steps for t in evaluation.clock.values()):
        # Which offset each window was moved by only varies when a clock stepped: then show both.
        out["detail"]["clock_stretches"] = {
            dev: clock_stretches(track) for dev, track in evaluation.clock.items() if track.steps
        }
        windows = {}
        for wp in evaluation.aligned:
            offs = {c.spec.dev: c.offset_ms for c in wp.channels}
            if any(offs.values()):
                windows[wp.window.phase] = offs
        out["detail"]["window_offsets_ms"] = windows
    return out


def clock_stretches(track: Any) -> list[dict[str, Any]]:
    """Each stretch of steady clock: from when (host ms; an unplaced step gives the interval it lies in)
    and its offset."""
    out = []
    for k, offset in enumerate(track.offsets()):
        row: dict[str, Any] = {"offset_ms": offset if math.isfinite(offset) else None}
        if k:
            step = track.steps[k - 1]
            row["from_ms"] = step.hi_ms if step.pinned else [step.lo_ms, step.hi_ms]
        out.append(row)
    return out


def to_json(evaluation: Any, detail: bool = True) -> str:

    return json.dumps(validate("report", report_dict(evaluation, detail)), indent=2, allow_nan=False)
