"""Jobs of fixed work, for the workloads that run whole jobs (concurrency, slurm): `builtin:N` is N
built-in transactions, `worklet:NAME:N` N ops of a worklet; anything else is the user's command line.
One parser, so both workloads take the same job text and refuse the same mistakes."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..core.plan import Plan, concurrency_plan, with_idle_timing
from .base import PlanRequest, WorkloadError
from .worklet import WORKLETS


@dataclass(frozen=True)
class FixedWork:
    """module is what `python -m wattbench.workloads.<module>` runs ("builtin", or "worklet sha256")."""

    module: str
    ops: int

    def command(self, python: str, ops: int, seed: str, every_s: float | None = None) -> str:
        """The command line for `ops` of this work (a share of it, for one task of a job)."""
        every = f" --every {every_s:g}" if every_s else ""
        return f"{shlex.quote(python)} -m wattbench.workloads.{self.module} --ops {int(ops)}{every} --seed {seed}"


def fixed_work(job: str) -> FixedWork | None:
    """The fixed work a job text names; None when it is a command line."""
    if not job.startswith(("builtin:", "worklet:")):
        return None
    kind, _, rest = job.partition(":")
    name, _, count = rest.rpartition(":") if kind == "worklet" else ("", "", rest)
    if kind == "worklet" and name not in WORKLETS:
        raise WorkloadError(f"worklet job: {name!r} is not a worklet; one of {', '.join(WORKLETS)}")
    example = "builtin:20000" if kind == "builtin" else "worklet:sha256:2000"
    try:
        ops = int(count)
    except ValueError:
        raise WorkloadError(f"{kind} job needs an op count, e.g. {example}, not {job!r}") from None
    if ops < 1:
        raise WorkloadError(f"{kind} job needs at least 1 op, e.g. {example}")
    return FixedWork(f"worklet {name}" if name else "builtin", ops)


def jobs_plan(copies: Sequence[int], request: PlanRequest) -> Plan:
    """The plan of a workload that runs whole jobs: each level starts its copies at once and its window
    lasts until the last one ends, at most timeout_s (a setting of the workload file; by default the
    window given, and at least ten minutes)."""
    cap = float(request.config.get("timeout_s", max(request.timing.measure_s, 600.0)))
    plan = concurrency_plan(copies, idle=request.idle, timing=replace(request.timing, measure_s=cap))
    return with_idle_timing(plan, request.timing)
