"""The JSON report: the run's result message (result.schema.json), plus the per-node power and the gap
list when the run was scored here rather than read back from the store."""

from __future__ import annotations

import json
import math
from typing import Any


def report_dict(evaluation: Any, detail: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = dict(evaluation.result)
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
    return out


def to_json(evaluation: Any, detail: bool = True) -> str:
    return json.dumps(report_dict(evaluation, detail), indent=2, allow_nan=False)
