"""The slurm workload (see README.md); the class is SlurmWorkload in workload.py, which imports Slurm's
client. This module declares its options of `wattbench sweep` and stays light: every command reads
it."""

from __future__ import annotations

from ...argtypes import checked_by
from ...core.plan import parse_fractions
from ..base import Option
from ..concurrency import JOB

CLUSTER_ONLY = "for cluster sweeps only; add --workload slurm"

OPTIONS = (
    JOB,
    Option(
        "--placement",
        "slurm: each job on one node (compact), or its tasks spread over the nodes",
        key="placement",
        choices=("compact", "spread"),
        elsewhere=CLUSTER_ONLY,
    ),
    Option(
        "--cluster-unit",
        "slurm: levels count the partition's nodes (a node's work per job) or its CPUs (one task per job)",
        key="unit",
        choices=("nodes", "slots"),
        elsewhere=CLUSTER_ONLY,
    ),
    Option(
        "--cluster-levels",
        "slurm: levels as fractions of the partition's nodes or CPUs (1/8,1/4,1/2,3/4,1)",
        type=checked_by(parse_fractions, "cluster levels"),
        metavar="LIST",
        elsewhere=CLUSTER_ONLY,
    ),
)
