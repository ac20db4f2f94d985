"""Concurrency mode, in the style of cluster throughput studies: for each N in a list, start N copies of
a job at once; the measurement window runs from the start until the last copy finishes. Throughput is
jobs per second, reported relative to the smallest N, and energy per job is average power times the
window divided by the jobs completed.
"""

from __future__ import annotations

import logging
import re
import sys
import time
from collections.abc import Mapping
from typing import Any

from ...argtypes import workers_problem
from ...core.plan import Phase, Plan, copies_problem, parse_copies
from ..base import PlanRequest, SettingError, WorkloadDefaults, check_keys, setting
from ..command.runner import DEFAULT_PATTERN, CommandProcess, fill, require_program
from ..jobs import fixed_work, jobs_plan

log = logging.getLogger(__name__)


class ConcurrencyWorkload(WorkloadDefaults):
    name = "concurrency"
    ops_unit = "jobs"
    window = "until_done"
    overrun_s = 0.0
    calibrates = False

    def __init__(self, job: str = "builtin:20000", shell: bool = False, cwd: str | None = None) -> None:
        work = fixed_work(job)
        self.job = job
        self.fixed = work is not None
        if work is not None:
            job = work.command(sys.executable, work.ops, "{copy}")
            shell = False
        self.template = job
        self.shell = shell
        self.cwd = cwd
        self._procs: list[CommandProcess] = []
        self._phase: Phase | None = None
        self._done = 0
        self._started = 0.0

        self._pattern = re.compile(DEFAULT_PATTERN, re.IGNORECASE)
        fill(self.template, self.shell, load=1, target=1, rate=0, level="c1", duration=1, copy=1, copies=1)

    SETTINGS = ("job", "shell", "cwd")
    # Read by the sweep's plan (the copies of each phase and the longest window), not by the workload.
    PLAN_SETTINGS = ("copies", "timeout_s")

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ConcurrencyWorkload:
        own = {k: v for k, v in config.items() if k not in cls.PLAN_SETTINGS}
        check_keys(cls.name, own, cls.SETTINGS)
        kinds = {"job": (str,), "shell": (bool,), "cwd": (str,)}
        return cls(**{key: setting(cls.name, own, key, kinds[key], None) for key in own})

    def command_line(self) -> str | None:
        return self.template

    def preflight(self) -> None:
        require_program(self.template, self.shell, self.cwd)

    def plan(self, request: PlanRequest) -> Plan | None:
        given = request.options.get("copies")
        copies = parse_copies(given) if given else request.config.get("copies", [1, 2, 4, 6, 8])
        problem = (
            copies_problem(copies) if isinstance(copies, (list, tuple)) else "copy counts must be a list"
        )
        if not problem and self.fixed:
            # Fixed work is an interpreter a copy, all on this host's cores: 1000 of them are some 20 GB
            # of memory and a machine that does nothing else. A command's copies may wait on I/O or on
            # other hosts, and are the user's to count.
            many = workers_problem(max(copies), "copies")
            problem = many and f"{max(copies)} copies of {self.job}: {many}"
        if problem:
            raise SettingError("copies", problem)
        return jobs_plan(tuple(copies), request)

    def open(self) -> None:
        self.preflight()

    def start_phase(self, phase: Phase, rate: float | None) -> None:
        self._phase = phase

    def start_measure(self) -> None:
        phase = self._phase
        if phase is None or phase.kind != "concurrency":
            self._procs = []  # active idle: nothing runs
            return
        n = int(phase.copies or 1)
        self._started = time.monotonic()
        for i in range(n):
            argv = fill(
                self.template,
                self.shell,
                load=100,
                target=1,
                rate=0,
                level=phase.name,
                duration=phase.timing.measure_s,
                copy=i + 1,
                copies=n,
            )
            self._procs.append(CommandProcess(argv, self.shell, self._pattern, False, self.cwd))

    def measure_done(self) -> bool:
        return all(not p.running for p in self._procs)

    def end_measure(self) -> int:
        ok = 0
        for p in self._procs:
            if p.running:
                log.warning("%s: a copy was still running when the window closed; stopped", self._phase)
                p.stop()
                continue
            if p.proc.returncode == 0:
                ok += 1
            else:
                log.warning(
                    "%s: a copy failed, %s", self._phase.name if self._phase else "?", p.describe_failure()
                )
        self._done += ok
        self._procs = []
        return ok

    def end_phase(self) -> None:
        for p in self._procs:
            p.stop()
        self._procs = []

    def completed(self) -> int:
        return self._done + sum(1 for p in self._procs if not p.running and p.proc.returncode == 0)

    def close(self) -> None:
        self.end_phase()

    def running(self) -> int | None:
        return sum(1 for p in self._procs if p.running)
