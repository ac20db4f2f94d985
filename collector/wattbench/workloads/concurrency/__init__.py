"""The concurrency workload (see README.md); the class is ConcurrencyWorkload in runner.py. This module
declares its options of `wattbench sweep` and stays light: every command reads it."""

from __future__ import annotations

from ...argtypes import checked_by
from ...core.plan import parse_copies
from ..base import Option

# The job both workloads that run whole jobs take (jobs.py): one declaration, listed by each.
JOB = Option(
    "--job",
    "concurrency, slurm: command per copy or task, builtin:N or worklet:NAME:N (builtin:20000)",
    key="job",
    metavar="JOB",
    chooses=True,
    program=True,
)

OPTIONS = (
    JOB,
    Option(
        "--copies",
        "concurrency: copy counts (1,2,4,6,8)",
        type=checked_by(parse_copies, "copies"),
        metavar="LIST",
        chooses=True,
    ),
)
