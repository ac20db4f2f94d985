"""stress-ng as the workload: one stressor on N workers, counted as the bogo ops its metrics report
gives for the window. stress-ng cannot pace itself to a rate: each level runs at the load the stressor
takes as a duty cycle (--<stressor>-load, the cpu stressor only), or flat out, and the sweep's load
check says how far that is from the target."""

from __future__ import annotations

import re
from typing import Any, ClassVar

from ...argtypes import workers_problem
from ..base import WorkloadError
from ..tools import ToolWorkload, report_error

# "stress-ng: metrc: [pid] cpu    1475   2.00   1.43   0.01   736.08   1024.04" (0.15; "info:" before)
ROW = r"^stress-ng: (?:metrc|info):\s+\[\d+\]\s+{name}\s+([0-9]+)\s+[0-9.]+"


class StressNgWorkload(ToolWorkload):
    name = "stressng"
    ops_unit = "bogo-ops"
    TOOL = "stress-ng"
    DEFAULTS: ClassVar[dict[str, Any]] = {"stressor": "cpu", "workers": 0, "method": ""}
    SETTINGS = tuple(DEFAULTS)
    INTEGER_RATE = False

    def check(self, settings: dict[str, Any]) -> None:
        if not re.match(r"^[a-z0-9-]{1,32}$", settings["stressor"]):
            raise WorkloadError("stress-ng workload: stressor must be a stressor name such as cpu or vm")
        if settings["workers"] < 0:
            raise WorkloadError("stress-ng workload: workers must be 0 (one per core) or more")
        if problem := workers_problem(settings["workers"]):
            raise WorkloadError(f"stress-ng workload: workers {settings['workers']}: {problem}")
        if settings["method"] and not re.match(r"^[a-z0-9_-]{1,32}$", settings["method"]):
            raise WorkloadError("stress-ng workload: method must be a method name")

    def template(self, settings: dict[str, Any]) -> str:
        s = settings["stressor"]
        words = [f"stress-ng --{s} {settings['workers']} --timeout {{duration}}s --metrics-brief --stdout"]
        if s == "cpu":
            words.append("--cpu-load {load}")
        if settings["method"]:
            words.append(f"--{s}-method {settings['method']}")
        return " ".join(words)

    def parse_report(self, text: str) -> float:
        rows = re.findall(ROW.format(name=re.escape(self.settings["stressor"])), text, re.MULTILINE)
        if len(rows) != 1:
            raise report_error(
                "stress-ng", f"no metrics row for the {self.settings['stressor']} stressor", text
            )
        return float(rows[0])
