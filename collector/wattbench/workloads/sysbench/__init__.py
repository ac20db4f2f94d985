"""sysbench as the workload: its cpu, memory or threads test on N threads, paced by sysbench's own
--rate, counted as events completed in the window ("total number of events")."""

from __future__ import annotations

import os
import re
from typing import Any, ClassVar

from ..base import WorkloadError
from ..tools import ToolWorkload, report_error

TESTS = ("cpu", "memory", "threads", "mutex")
EVENTS = re.compile(r"^\s*total number of events:\s*([0-9]+)\s*$", re.MULTILINE)


class SysbenchWorkload(ToolWorkload):
    name = "sysbench"
    ops_unit = "events"
    TOOL = "sysbench"
    DEFAULTS: ClassVar[dict[str, Any]] = {"test": "cpu", "threads": 0, "options": ""}
    SETTINGS = tuple(DEFAULTS)

    def check(self, settings: dict[str, Any]) -> None:
        if settings["test"] not in TESTS:
            raise WorkloadError(f"sysbench workload: test must be one of {', '.join(TESTS)}")
        if not 0 <= settings["threads"] <= 4096:
            raise WorkloadError("sysbench workload: threads must be 0 (one per core) to 4096")
        if not re.match(r"^[A-Za-z0-9_=.\- ]*$", settings["options"]):
            raise WorkloadError("sysbench workload: options must be --name=value words")

    def template(self, settings: dict[str, Any]) -> str:
        threads = settings["threads"] or os.cpu_count() or 1
        extra = f" {settings['options']}" if settings["options"].strip() else ""
        return (
            f"sysbench {settings['test']} --threads={threads} --time={{duration}} --rate={{rate}}{extra} run"
        )

    def parse_report(self, text: str) -> float:
        found = EVENTS.findall(text)
        if len(found) != 1:
            raise report_error("sysbench", "no 'total number of events' in its report", text)
        return float(found[0])
