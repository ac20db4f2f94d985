"""The live view of a running sweep: the phase, the time left, and the achieved against the target rate."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass
class Status:
    run: str
    workload: str
    index: int  # 0-based phase number
    total: int
    phase: str
    kind: str
    stage: str  # ramp-up | measuring | ramp-down | gap | starting | scoring
    stage_left_s: float
    run_left_s: float
    run_total_s: float
    target: float | None = None
    target_rate: float | None = None
    achieved_rate: float | None = None
    calibrated: float | None = None
    copies_running: int | None = None


class Display(Protocol):
    def start(self) -> None: ...

    def update(self, status: Status) -> None: ...

    def note(self, text: str) -> None:
        """A line that stays (a finished phase's figures)."""

    def stop(self) -> None: ...


def clock(seconds: float) -> str:
    s = max(0, round(seconds))
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def status_lines(st: Status) -> list[str]:
    """The view as plain lines (also what the rich view shows)."""
    what = st.phase
    if st.kind == "target" and st.target is not None:
        what += f" (target {st.target * 100:g}%)"
    elif st.kind == "calibration":
        what += " (calibration, full speed)"
    elif st.kind == "idle":
        what += " (active idle)"
    lines = [
        f"run {st.run} · {st.workload} · phase {st.index + 1}/{st.total} {what}",
        f"{st.stage} · {clock(st.stage_left_s)} left in this part · {clock(st.run_left_s)} left in the run",
    ]
    if st.kind == "concurrency" and st.copies_running is not None:
        lines.append(f"copies running: {st.copies_running}")
    elif st.achieved_rate is not None:
        rate = f"achieved {st.achieved_rate:,.0f} ops/s"
        if st.target_rate:
            rate = (
                f"target {st.target_rate:,.0f} ops/s · "
                + rate
                + f" ({st.achieved_rate / st.target_rate * 100:.1f}%)"
            )
        elif st.kind == "idle":
            rate = "target 0 ops/s · " + rate
        lines.append(rate)
    if st.calibrated:
        lines.append(f"calibrated throughput {st.calibrated:,.0f} ops/s")
    return lines


class RichDisplay:
    def __init__(self, console: Any = None) -> None:
        from rich.console import Console  # late: start-up

        self.console = console or Console(stderr=True)
        self._live: Any = None
        self._status: Status | None = None

    def _render(self) -> Any:
        from rich.console import Group  # late: start-up
        from rich.progress_bar import ProgressBar  # late: start-up
        from rich.text import Text  # late: start-up

        st = self._status
        if st is None:
            return Text("starting…")
        parts: list[Any] = [Text(line) for line in status_lines(st)]
        done = max(0.0, st.run_total_s - st.run_left_s)
        parts.append(ProgressBar(total=max(st.run_total_s, 1e-9), completed=done, width=60))
        return Group(*parts)

    def start(self) -> None:
        from rich.live import Live  # late: start-up

        self._live = Live(
            get_renderable=self._render, console=self.console, refresh_per_second=4, transient=True
        )
        self._live.start()

    def update(self, status: Status) -> None:
        self._status = status

    def note(self, text: str) -> None:
        self.console.print(text)

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None


class LogDisplay:
    """No live view (not a terminal, or --quiet): finished phases go to the log."""

    def __init__(self) -> None:
        self.log = logging.getLogger("wattbench.sweep")
        self.last: Status | None = None

    def start(self) -> None:
        pass

    def update(self, status: Status) -> None:
        self.last = status

    def note(self, text: str) -> None:
        self.log.info("%s", text)

    def stop(self) -> None:
        pass
