"""What the sweep driver needs from a workload."""

from __future__ import annotations

from typing import Protocol

from ..sweep.plan import Phase


class WorkloadError(RuntimeError):
    """The workload cannot run (bad command, worker died): the sweep stops with a clear message."""


class Workload(Protocol):
    """A source of work the driver walks through the phases of a plan.

    window is "fixed" when the measurement window lasts its planned time, or "until_done" when it
    closes as soon as the work finishes (the plan's measure time is then the longest it may take).
    calibrates says whether the workload needs calibration intervals to find its top rate.
    """

    name: str
    window: str
    calibrates: bool

    def open(self) -> None:
        """Start workers; called once before the first phase."""

    def start_phase(self, phase: Phase, rate: float | None) -> None:
        """Begin the phase's load: rate None = as fast as possible (calibration), 0 = idle, else ops/s."""

    def start_measure(self) -> None: ...

    def measure_done(self) -> bool:
        """True when an "until_done" window may close now."""

    def end_measure(self) -> int:
        """Ops completed inside the measurement window."""

    def end_phase(self) -> None:
        """Stop the phase's load."""

    def completed(self) -> int:
        """Ops completed since open(), for the live achieved rate."""

    def close(self) -> None:
        """Stop everything; safe to call twice and after a failure."""
