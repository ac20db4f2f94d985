"""The command workload (see README.md); the class is CommandWorkload in runner.py. This module
declares its options of `wattbench sweep` and stays light: every command reads it."""

from __future__ import annotations

from ..base import Option

OPTIONS = (
    Option(
        "--cmd",
        "command workload: command line with {load} {rate} {level} …",
        key="run",
        metavar="TEMPLATE",
        chooses=True,
        required="the command workload needs --cmd TEMPLATE (or run = in --workload-config)",
        program=True,
    ),
    Option("--ops-report", "command workload: how ops come back", key="report", choices=("stream", "total")),
    Option("--ops-file", "command workload: read ops from this file", key="ops_file", metavar="PATH"),
)
