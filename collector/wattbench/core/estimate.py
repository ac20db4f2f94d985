"""A software power estimator (Kepler, Scaphandre, a cloud model) against the measured power of a
sweep: per level, the estimate averaged over the level's window beside the level's measured average,
and the estimator's error. Pure: the estimates come in as numbers (cli/estimate.py reads them from
Prometheus)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class EstimateRow:
    phase: str
    measured_W: float
    estimated_W: float | None  # None: the estimator had nothing for the window (why: reason)
    reason: str | None = None

    @property
    def error(self) -> float | None:
        """(estimate - measured) / measured: -0.5 is an estimate of half the wall power."""
        if self.estimated_W is None or not self.measured_W:
            return None
        return (self.estimated_W - self.measured_W) / self.measured_W

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"phase": self.phase, "measured_W": self.measured_W}
        if self.estimated_W is not None:
            out["estimated_W"] = self.estimated_W
            if self.error is not None:
                out["error"] = self.error
        if self.reason:
            out["reason"] = self.reason
        return out


def compare(levels: Sequence[Mapping[str, Any]], estimates: Mapping[str, float | str]) -> list[EstimateRow]:
    """One row per level of a result (its `levels`, which carry the measured W) in the result's order.
    estimates maps a phase to the estimator's average watts over it, or to why there is none."""
    rows = []
    for level in levels:
        phase = str(level["phase"])
        measured = float(level["W"])
        got = estimates.get(phase, "no estimate asked for this level")
        if isinstance(got, str):
            rows.append(EstimateRow(phase, measured, None, got))
        elif not math.isfinite(got) or got < 0:
            rows.append(EstimateRow(phase, measured, None, f"the estimator gave {got!r}"))
        else:
            rows.append(EstimateRow(phase, measured, float(got)))
    return rows


def summary(rows: Sequence[EstimateRow]) -> dict[str, Any]:
    """Over the levels with an estimate: the mean absolute error and the largest one, and the ratio of
    the summed estimate to the summed measurement (what the estimate does to a ∑ops/∑power score: the
    score it implies is the measured score divided by this ratio)."""
    both = [r for r in rows if r.error is not None and r.estimated_W is not None]
    if not both:
        return {"levels": 0}
    errors = [abs(r.error) for r in both if r.error is not None]
    measured = sum(r.measured_W for r in both)
    estimated = sum(r.estimated_W for r in both if r.estimated_W is not None)
    return {
        "levels": len(both),
        "mean_abs_error": sum(errors) / len(errors),
        "max_abs_error": max(errors),
        "power_ratio": estimated / measured if measured else None,
    }
