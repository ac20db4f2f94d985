"""Cluster-load sweeps through Slurm: at each level a fraction of the cluster's nodes' worth of jobs is
submitted with sbatch, placed compact (each job on one node) or spread (each job's tasks spread over
the nodes), and the window lasts until Slurm says the last one ended. Throughput is jobs completed per
second; Slurm's own records (job id, state, exit code, nodes, start, end) go with every window.

The job is the same in both placements: `tasks` tasks (a node's CPUs by default) of the command, each
started by srun inside the job, so compact and spread differ only in where Slurm puts them.

With unit "slots" a level is a fraction of the partition's CPUs instead: that many one-task jobs, each
named to a node (slot_nodes), filling one node's CPUs before the next (compact) or dealt out over the
nodes (spread). Slurm has no per-job way to ask for the least loaded node, so the sweep names it.
"""

from __future__ import annotations

import logging
import os
import shlex
import sys
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...core.plan import DEFAULT_CLUSTER_LEVELS, Phase, Plan, jobs_per_level, parse_fractions
from ..base import PlanRequest, WorkloadDefaults, WorkloadError, check_keys, setting
from ..jobs import fixed_work, jobs_plan
from .client import JobRecord, Node, Slurm, SlurmError, task_ops

log = logging.getLogger(__name__)

PLACEMENTS = ("compact", "spread")
UNITS = ("nodes", "slots")


def slot_nodes(cluster: list[Node], jobs: int, placement: str) -> list[str]:
    """The node of each of `jobs` one-task jobs: compact fills each node's CPUs in the partition's
    order before the next; spread deals one job to each node in turn, skipping nodes already full.
    Jobs beyond the partition's CPUs wait for a slot on the node they are named to, as in Slurm."""
    free = [n.cpus for n in cluster]
    out: list[str] = []
    i = 0
    for _ in range(jobs):
        if not any(free):
            free = [n.cpus for n in cluster]  # more jobs than CPUs: a second round, queued by Slurm
        if placement == "compact":
            i = next(k for k, f in enumerate(free) if f > 0)
        else:
            while free[i % len(cluster)] == 0:
                i += 1
            i %= len(cluster)
        free[i] -= 1
        out.append(cluster[i].name)
        if placement != "compact":
            i += 1
    return out


POLL_S = 0.5
# How long scancel may take to empty the queue of the sweep's jobs before the sweep says so.
CANCEL_WAIT_S = 30.0


class SlurmWorkload(WorkloadDefaults):
    name = "slurm"
    ops_unit = "jobs"
    window = "until_done"
    overrun_s = 0.0
    calibrates = False

    SETTINGS = (
        "job",
        "partition",
        "placement",
        "unit",
        "tasks",
        "python",
        "output_dir",
        "sbatch_args",
        "slurm_conf",
    )
    # Read by the sweep's plan (each level's job count and the longest window), not by the workload.
    PLAN_SETTINGS = ("levels", "timeout_s")

    def __init__(
        self,
        job: str = "builtin:20000",
        partition: str | None = None,
        placement: str = "compact",
        unit: str = "nodes",
        tasks: int = 0,
        python: str | None = None,
        output_dir: str = "wattbench-slurm",
        sbatch_args: str = "",
        slurm_conf: str | None = None,
        slurm: Slurm | None = None,
    ) -> None:
        if placement not in PLACEMENTS:
            raise WorkloadError(
                f"slurm workload: placement must be one of {', '.join(PLACEMENTS)}, got {placement!r}"
            )
        if tasks < 0:
            raise WorkloadError("slurm workload: tasks must be 0 (a node's CPUs) or more")
        if unit not in UNITS:
            raise WorkloadError(f"slurm workload: unit must be nodes or slots, got {unit!r}")
        if unit == "slots" and tasks > 1:
            raise WorkloadError("slurm workload: with unit slots each job is one slot: one task per job")
        self.placement = placement
        self.unit = unit
        self.partition = partition
        self.tasks_setting = tasks
        self.python = python or sys.executable
        self.output_dir = Path(output_dir)
        try:
            self.sbatch_args = shlex.split(sbatch_args)
        except ValueError as exc:
            raise WorkloadError(f"slurm workload: sbatch_args: {exc}") from None
        # Fixed work (builtin:N, worklet:NAME:N) is split over the tasks in wrap(), so a job is the
        # same work whatever its placement; anything else is the command every task runs.
        self._work = fixed_work(job)
        if self._work is None and not job.strip():
            raise WorkloadError("slurm workload: job is empty")
        self.template = job
        self.slurm = slurm or Slurm(env={"SLURM_CONF": slurm_conf} if slurm_conf else {})
        self.cluster: list[Node] = []
        self._slot_plan: tuple[int, list[str]] = (0, [])  # a level's job count and each job's node
        self.use_sacct = False
        self._phase: Phase | None = None
        self._ids: list[str] = []
        self._all_ids: list[str] = []
        self._records: list[JobRecord] = []
        self._done = 0
        self._queued: list[str] = []
        self._polled = 0.0

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> SlurmWorkload:
        own = {k: v for k, v in config.items() if k not in cls.PLAN_SETTINGS}
        check_keys(cls.name, own, cls.SETTINGS)
        kinds: dict[str, tuple[type, ...]] = {
            "job": (str,),
            "partition": (str,),
            "placement": (str,),
            "unit": (str,),
            "tasks": (int,),
            "python": (str,),
            "output_dir": (str,),
            "sbatch_args": (str,),
            "slurm_conf": (str,),
        }
        return cls(
            **{key: setting(cls.name, own, key, kinds[key], None) for key in own if own[key] is not None}
        )

    # ------------------------------------------------------------------ before the run
    def probe(self) -> list[Node]:
        """Ask Slurm for the partition's nodes (and whether accounting answers): a controller that is
        down, or a partition that does not exist, stops the sweep before its plan is made."""
        conf = self.slurm.env.get("SLURM_CONF") or os.environ.get("SLURM_CONF")
        if conf and not os.path.isfile(conf):
            # Slurm's commands retry a missing configuration for half a minute before they say so.
            raise WorkloadError(f"slurm: no Slurm configuration at {conf} (SLURM_CONF or slurm_conf)")
        try:
            self.cluster = self.slurm.nodes(self.partition)
            self.use_sacct = self.slurm.accounting()
        except SlurmError as exc:
            raise WorkloadError(f"slurm: {exc}") from None
        cpus = min(n.cpus for n in self.cluster)
        if self.tasks_setting > cpus and self.placement == "compact" and self.unit == "nodes":
            raise WorkloadError(
                f"slurm workload: a job of {self.tasks_setting} tasks does not fit on one node of {cpus} CPUs (compact)"
            )
        return self.cluster

    @property
    def tasks(self) -> int:
        """Tasks per job: one for a slot; the setting, or the CPUs of the smallest node (a node's worth
        of work)."""
        if self.unit == "slots":
            return 1
        if self.tasks_setting:
            return self.tasks_setting
        return min(n.cpus for n in self.cluster) if self.cluster else 1

    def level_jobs(self, levels: str | list[Any] | None) -> tuple[int, ...]:
        if isinstance(levels, list):
            levels = ",".join(str(x) for x in levels)
        if not self.cluster:
            self.probe()
        try:
            fractions = parse_fractions(levels or DEFAULT_CLUSTER_LEVELS)
        except ValueError as exc:
            raise WorkloadError(f"slurm workload: {exc}") from None
        size = len(self.cluster) if self.unit == "nodes" else sum(n.cpus for n in self.cluster)
        return jobs_per_level(fractions, size)

    def plan(self, request: PlanRequest) -> Plan | None:
        # Each level's jobs from the partition's size, which Slurm is asked for now: a controller
        # that does not answer stops the sweep here, before anything runs.
        levels = request.options.get("cluster_levels") or request.config.get("levels")
        return jobs_plan(self.level_jobs(levels), request)

    def nodes(self) -> list[str] | None:
        return [n.name for n in self.cluster]

    def command_line(self) -> str | None:
        return self.template

    def sbatch_argv(self, phase: str, copy: int, copies: int) -> list[str]:
        """sbatch's arguments for one job of a level (without --parsable)."""
        nodes = len(self.cluster) or 1
        tasks = self.tasks
        if self.unit == "slots" and self.cluster:
            if self._slot_plan[0] != copies:  # once per level, not once per job
                self._slot_plan = (copies, slot_nodes(self.cluster, copies, self.placement))
            node = self._slot_plan[1][copy - 1]
            where = ["--nodes=1", "--ntasks=1", f"--nodelist={node}"]
        elif self.placement == "compact":
            where = ["--nodes=1", f"--ntasks={tasks}"]
        else:
            # Over as many nodes as there are tasks, up to all of them; Slurm deals the tasks out.
            span = max(1, min(nodes, tasks))
            where = [f"--nodes={span}", f"--ntasks={tasks}", "--spread-job", "--distribution=cyclic"]
        out = self.output_dir / f"{phase}-{copy}-%j.out"
        argv = [
            f"--job-name=wattbench-{phase}-{copy}",
            f"--output={out}",
            "--open-mode=truncate",
            *(["--partition", self.partition] if self.partition else []),
            *where,
            *self.sbatch_args,
        ]
        return [*argv, "--wrap", self.wrap(phase, copy, copies, tasks)]

    def wrap(self, phase: str, copy: int, copies: int, tasks: int) -> str:
        """The batch script's one line: srun starts the tasks where Slurm placed them."""
        if self._work is not None:
            per_task = max(1, -(-self._work.ops // tasks))
            cmd = self._work.command(self.python, per_task, f'"$((SLURM_PROCID + {copy * 1000}))"', 3600)
        else:
            cmd = self.template.format(copy=copy, copies=copies, level=phase, tasks=tasks)
        # --label prefixes each line with its task, so each task's last op count can be told apart.
        return f"srun --kill-on-bad-exit=1 --label sh -c {shlex.quote(cmd)}"

    # ------------------------------------------------------------------ the Workload protocol
    def open(self) -> None:
        if not self.cluster:
            self.probe()
        try:
            self.output_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise WorkloadError(
                f"slurm workload: cannot make {self.output_dir}: {exc.strerror or exc}"
            ) from None
        if self._work is None:
            try:
                self.template.format(copy=1, copies=1, level="c1", tasks=1)
            except (KeyError, IndexError, ValueError) as exc:
                raise WorkloadError(
                    f"slurm workload: bad job template {self.template!r} ({exc}); placeholders: copy, copies, level, tasks"
                ) from None

    def start_phase(self, phase: Phase, rate: float | None) -> None:
        self._phase = phase

    def start_measure(self) -> None:
        phase = self._phase
        self._ids, self._records = [], []
        if phase is None or phase.kind != "concurrency":
            return  # active idle: no job runs
        n = int(phase.copies or 1)
        for i in range(n):
            try:
                jid = self.slurm.submit(self.sbatch_argv(phase.name, i + 1, n))
            except SlurmError as exc:
                self.cancel_all()
                raise WorkloadError(f"slurm: {exc}") from None
            self._ids.append(jid)
            self._all_ids.append(jid)
        self._queued = list(self._ids)
        self._polled = 0.0
        log.info("%s: submitted jobs %s (%s, %s)", phase.name, ",".join(self._ids), self.placement, self.unit)

    def measure_done(self) -> bool:
        if not self._ids:
            return True
        now = time.monotonic()
        if now - self._polled >= POLL_S:
            self._polled = now
            try:
                self._queued = self.slurm.queued(self._ids)
            except SlurmError as exc:
                log.warning("squeue: %s", exc)
        return not self._queued

    def end_measure(self) -> int:
        if not self._ids:
            return 0
        if self._queued:
            log.warning(
                "%s: jobs %s still queued or running when the window closed; cancelled",
                self._phase,
                self._queued,
            )
            self.slurm.cancel(self._queued)
        try:
            found = self.slurm.jobs(self._ids, self.use_sacct)
        except SlurmError as exc:
            raise WorkloadError(f"slurm: cannot read the jobs' records: {exc}") from None
        records = [found.get(j, JobRecord(j, "UNKNOWN")) for j in self._ids]
        self._records = [self._with_ops(r, i + 1) if r.ok else r for i, r in enumerate(records)]
        ok = sum(1 for r in self._records if r.ok)
        for r in self._records:
            if not r.ok:
                log.warning(
                    "job %s ended %s (exit %s) on %s", r.id, r.state, r.exit_code, ",".join(r.nodes) or "-"
                )
        self._done += ok
        return ok

    def _with_ops(self, record: JobRecord, copy: int) -> JobRecord:
        """The record with the ops its tasks reported (each task's last count, summed), when its output
        file can be read here and has counts; as it was otherwise."""
        phase = self._phase.name if self._phase else "?"
        path = self.output_dir / f"{phase}-{copy}-{record.id}.out"
        try:
            text = path.read_text(errors="replace")
        except OSError:
            return record
        ops = task_ops(text)
        return record if ops is None else replace(record, ops=ops)

    def end_phase(self) -> None:
        self._ids, self._queued = [], []

    def completed(self) -> int:
        return self._done

    def running(self) -> int | None:
        return len(self._queued) if self._phase is not None and self._phase.kind == "concurrency" else None

    def window_jobs(self) -> list[dict[str, Any]]:
        return [r.to_dict() for r in self._records]

    def cancel_all(self) -> list[str]:
        """scancel every job this sweep submitted that Slurm still has queued or running, and wait until
        squeue no longer lists them; returns the ones still listed after CANCEL_WAIT_S (none, normally)."""
        left = self._all_ids
        try:
            left = self.slurm.queued(self._all_ids)
            if left:
                self.slurm.cancel(left)
            deadline = time.monotonic() + CANCEL_WAIT_S
            while left and time.monotonic() < deadline:
                time.sleep(0.2)
                left = self.slurm.queued(left)
        except SlurmError as exc:
            log.error("slurm: could not cancel jobs %s: %s", ",".join(left), exc)
            return list(left)
        if left:
            log.error("slurm: jobs %s still queued %g s after scancel", ",".join(left), CANCEL_WAIT_S)
        return list(left)

    def close(self) -> None:
        self.cancel_all()
        self._ids, self._queued = [], []
