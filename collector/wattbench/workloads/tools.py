"""What the ready-made tool workloads (fio, sysbench, stress-ng, bonnie++) share: each is the command
workload with its command line built from a few settings, report "total" (the tool runs for the
measurement window and its closing report gives the count), and a parser of that report. A tool that
is missing, or a report without the count, stops the level with the reason, never a count of 0."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

from ..core.plan import Phase
from .base import WorkloadError, check_keys, setting
from .command.runner import CommandWorkload


class ToolWorkload(CommandWorkload):
    """A subclass gives name, TOOL, DEFAULTS (setting -> default, which also fixes its type), the
    template(settings) of its command line and parse_report(text)."""

    name = "tool"
    TOOL = ""
    DEFAULTS: ClassVar[dict[str, Any]] = {}
    # The tool takes its rate as a whole number (fio's rate_iops, sysbench's --rate): rounded up, so
    # a level is never asked for less than its share, and 0 stays "flat out".
    INTEGER_RATE = True
    # The tool is told to run for the window: as a command in total mode, it has REPORT_OVERRUN_S more
    # to start and print its report (CommandWorkload sets it).

    def __init__(self, **settings: Any) -> None:
        self.settings = {**self.DEFAULTS, **settings}
        self.check(self.settings)
        super().__init__(self.template(self.settings), report="total", parse=self.parse_report)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ToolWorkload:
        check_keys(cls.name, config, cls.DEFAULTS)
        given = {}
        for key, default in cls.DEFAULTS.items():
            kinds: tuple[type, ...] = (type(default),) if not isinstance(default, float) else (float,)
            given[key] = setting(cls.name, config, key, kinds, default)
        return cls(**given)

    def check(self, settings: dict[str, Any]) -> None:
        """Refuse settings out of range (WorkloadError naming the setting)."""

    def template(self, settings: dict[str, Any]) -> str:
        raise NotImplementedError

    def parse_report(self, text: str) -> float:
        raise NotImplementedError

    def _values(self, phase: Phase, rate: float | None, duration: float) -> dict[str, Any]:
        values = super()._values(phase, rate, duration)
        if self.INTEGER_RATE and values["rate"]:
            values["rate"] = max(1, math.ceil(values["rate"]))
        # Whole seconds for tools that take no fraction (sysbench --time, stress-ng --timeout).
        values["duration"] = max(1, round(duration))
        return values


def report_error(tool: str, why: str, text: str) -> WorkloadError:
    tail = " | ".join(line.strip() for line in text.strip().splitlines()[-2:])[:200]
    return WorkloadError(f"{tool}: {why}" + (f" (it printed: {tail})" if tail else " (it printed nothing)"))
