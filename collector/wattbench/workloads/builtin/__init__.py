"""The built-in transactional workload (see README.md); the class is BuiltinWorkload in workers.py.
This module declares its options of `wattbench sweep` and stays light: every command reads it."""

from __future__ import annotations

from ...argtypes import worker_count
from ..base import Option

OPTIONS = (
    Option(
        "--workers",
        "builtin: worker processes (one per core)",
        key="workers",
        type=worker_count,
        metavar="N",
    ),
)
