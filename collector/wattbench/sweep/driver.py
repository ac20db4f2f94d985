"""Walk a plan: drive the workload through each phase and publish a phase event at every boundary.

Times in events are UTC milliseconds from the host clock; durations are measured on the monotonic clock
so a clock step during a run cannot stretch or shrink a window. Ctrl-C ends the run cleanly: the load
stops, a run_abort event goes out, and the caller scores what was measured as a partial, invalid run.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import signal
import socket
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.contract import validate_phase
from ..core.plan import Phase, Plan, calibrated_rate
from ..workloads.base import Workload, WorkloadError
from .progress import Display, LogDisplay, Status
from .publish import Sink
from .sut import load_average, redact_command, system_facts

log = logging.getLogger(__name__)

TICK_S = 0.25
RATE_WINDOW_S = 3.0


@dataclass
class RunRecord:
    """What the driver did: every event it sent, the calibrated rate, and why it stopped early if it did."""

    run: str
    events: list[dict[str, Any]] = field(default_factory=list)
    calibrated: float | None = None
    calibration: list[float] = field(default_factory=list)
    interrupted: str | None = None
    planned: list[str] = field(default_factory=list)

    @property
    def start_ms(self) -> int | None:
        return self.events[0]["t"] if self.events else None

    @property
    def end_ms(self) -> int | None:
        return self.events[-1]["t"] if self.events else None

    @property
    def measured(self) -> bool:
        """Whether a measurement window has closed: before that the run has nothing to show."""
        return any(e["event"] == "measure_end" for e in self.events)


def new_run_id(now: float | None = None) -> str:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now if now is not None else time.time()))
    return f"{stamp}-{secrets.token_hex(2)}"


class Driver:
    def __init__(
        self,
        run: str,
        plan: Plan,
        workload: Workload,
        sink: Sink,
        display: Display | None = None,
        channels: Sequence[str] = (),
        host: str | None = None,
        ntp_off_ms: float | None = None,
        sut: dict[str, Any] | None = None,
        wall: Callable[[], float] = time.time,
        mono: Callable[[], float] = time.monotonic,
    ) -> None:
        if workload.calibrates and any(p.kind == "target" for p in plan.phases) and not plan.calibrations:
            raise ValueError("target loads need calibration intervals")
        self.run_id = run
        self.plan = plan
        self.workload = workload
        self.sink = sink
        self.display = display or LogDisplay()
        self.channels = [c for c in channels][:256]
        self.host = (host or socket.gethostname())[:64]
        self.ntp_off_ms = ntp_off_ms
        if sut is None:
            sut = system_facts()
        self.sut = sut
        self.wall = wall
        self.mono = mono
        self.record = RunRecord(run, planned=[p.name for p in plan.scored])
        self._rates: deque[tuple[float, int]] = deque()
        self._index = 0
        self._run_t0 = 0.0
        self._sent = 0  # events handed to the sink so far

    # ------------------------------------------------------------------ events
    def _emit(self, event: str, phase: str, **fields: Any) -> dict[str, Any]:
        ev: dict[str, Any] = {
            "v": 1,
            "run": self.run_id,
            "n": len(self.record.events),
            "t": int(self.wall() * 1000),
            "event": event,
            "phase": phase,
        }
        ev.update({k: v for k, v in fields.items() if v is not None})
        validate_phase(ev)  # a malformed event is a bug here, never something to send
        self.record.events.append(ev)
        # Held back until the first window closes: a run that ends before it (a command that fails at
        # once, Ctrl-C in the first ramp-up) measured nothing and must leave no run behind to be
        # listed or taken for `latest`. The events carry their own times, so sending them late
        # changes nothing.
        if event == "measure_end" or self._sent:
            for held in self.record.events[self._sent :]:
                self.sink.phase(held)
            self._sent = len(self.record.events)
        return ev

    def _phase_fields(self, phase: Phase, rate: float | None) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": phase.kind}
        if phase.kind in ("target", "idle"):
            out["target"] = float(phase.target or 0.0)
        if rate is not None:
            out["rate"] = float(min(rate, 1e12))
        if phase.kind == "concurrency":
            out["copies"] = phase.copies
        return out

    # ------------------------------------------------------------------ timing
    def _rate_for(self, phase: Phase) -> float | None:
        if phase.kind == "calibration" or phase.kind == "concurrency":
            return None
        if phase.kind == "idle":
            return 0.0
        if self.record.calibrated is None:
            raise WorkloadError(f"{phase.name}: no calibrated throughput (calibration measured nothing)")
        return float(phase.target or 0.0) * self.record.calibrated

    def _achieved(self) -> float | None:
        now = self.mono()
        self._rates.append((now, self.workload.completed()))
        while len(self._rates) > 2 and now - self._rates[0][0] > RATE_WINDOW_S:
            self._rates.popleft()
        (t0, n0), (t1, n1) = self._rates[0], self._rates[-1]
        return (n1 - n0) / (t1 - t0) if t1 - t0 > 0.5 else None

    def _status(
        self, phase: Phase, stage: str, stage_left: float, elapsed_in_phase: float, rate: float | None
    ) -> None:
        running = self.workload.running()
        self.display.update(
            Status(
                run=self.run_id,
                workload=self.workload.name,
                index=self._index,
                total=len(self.plan.phases),
                phase=phase.name,
                kind=phase.kind,
                stage=stage,
                stage_left_s=stage_left,
                run_left_s=self.plan.remaining_s(self._index, elapsed_in_phase),
                run_total_s=self.plan.duration_s(),
                target=phase.target,
                target_rate=rate if rate else None,
                achieved_rate=self._achieved(),
                calibrated=self.record.calibrated,
                copies_running=running,
            )
        )

    def _wait(
        self,
        seconds: float,
        phase: Phase,
        stage: str,
        phase_t0: float,
        offset_in_phase: float,
        rate: float | None,
        until_done: bool = False,
    ) -> bool:
        """Sleep through one part of a phase, refreshing the view. With until_done, return early (True)
        once the workload says its work is finished."""
        end = self.mono() + seconds
        while True:
            # A workload that has failed stops the run now, not after every remaining phase.
            reason = self.workload.failure()
            if reason:
                raise WorkloadError(reason)
            now = self.mono()
            if until_done and self.workload.measure_done():
                return True
            if now >= end:
                return False
            self._status(phase, stage, end - now, offset_in_phase + (now - phase_t0), rate)
            time.sleep(min(TICK_S, end - now))

    # ------------------------------------------------------------------ the run
    def run(self) -> RunRecord:
        self.display.start()
        current = "run"
        try:
            self._emit(
                "run_start",
                "run",
                kind="run",
                workload=self.workload.name[:64],
                unit=self.workload.ops_unit[:32],
                host=self.host,
                sut=self.sut or None,
                channels=self.channels or None,
                ntp_off=self.ntp_off_ms,
                command=redact_command(self.workload.command_line()),
                load=load_average(),
            )
            self.workload.open()
            self._run_t0 = self.mono()
            for i, phase in enumerate(self.plan.phases):
                self._index = i
                current = phase.name
                self._run_phase(phase, last=i == len(self.plan.phases) - 1)
            self._close_workload()
            self._emit("run_end", "run", kind="run", load=load_average())
        except KeyboardInterrupt:
            self._abort(f"interrupted by operator during {current}")
        except WorkloadError as exc:
            self._abort(f"workload failed during {current}: {exc}")
        finally:
            self.display.stop()
        return self.record

    def _close_workload(self) -> None:
        try:
            self.workload.close()
        except Exception as exc:
            log.warning("stopping the workload: %s", exc)

    def _abort(self, reason: str) -> None:
        # A second Ctrl-C while stopping must not leave workers running or the abort unsent.
        previous = None
        with contextlib.suppress(ValueError):  # not the main thread
            previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            self.record.interrupted = reason
            # A run with a window goes on to be scored, which takes a while: say at once why it
            # stopped. One without a window ends here, and its caller says why in its one line.
            log.log(logging.WARNING if self.record.measured else logging.INFO, "%s", reason)
            with contextlib.suppress(Exception):
                self.workload.end_phase()
            self._close_workload()
            self._emit("run_abort", "run", kind="run", reason=reason[:200], load=load_average())
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)

    def _run_phase(self, phase: Phase, last: bool) -> None:
        rate = self._rate_for(phase)
        fields = self._phase_fields(phase, rate)
        t0 = self.mono()
        timing = phase.timing
        self._emit("phase_start", phase.name, **fields)
        self.workload.start_phase(phase, rate)
        self._rates.clear()
        self._wait(timing.pre_s, phase, "ramp-up", t0, 0.0, rate)

        m0 = self.mono()
        self.workload.start_measure()
        start_ev = self._emit("measure_start", phase.name, **fields)
        # Active idle always lasts its planned window: there is no work whose end could close it.
        until_done = self.workload.window == "until_done" and phase.kind != "idle"
        longest = timing.measure_s + (self.workload.overrun_s if until_done else 0.0)
        finished = self._wait(longest, phase, "measuring", m0, timing.pre_s, rate, until_done=until_done)
        if until_done and not finished:
            log.warning(
                "%s: the work did not finish within %.0f s; the window closes now",
                phase.name,
                longest,
            )
        ops = self.workload.end_measure()
        end_ev = self._emit(
            "measure_end",
            phase.name,
            ops=int(ops),
            jobs=self.workload.window_jobs() or None,
            unserved=self.workload.window_unserved(),
            **fields,
        )
        seconds = (end_ev["t"] - start_ev["t"]) / 1000.0
        self._note(phase, ops, seconds, rate, end_ev.get("unserved"))
        if phase.kind == "calibration" and seconds > 0:
            if ops <= 0:
                # The calibrated throughput would be a mean with a zero in it, and every level's
                # target a fraction of that: a level then reads up to twice its target.
                raise WorkloadError(f"{phase.name} measured no completed ops: the workload did no work")
            self.record.calibration.append(ops / seconds)
            if len(self.record.calibration) == len(self.plan.calibrations):
                self.record.calibrated = calibrated_rate(self.record.calibration, self.plan.calibration_use)
                if not self.record.calibrated > 0:
                    raise WorkloadError("calibration measured no completed ops")

        p0 = self.mono()
        self._wait(timing.post_s, phase, "ramp-down", p0, timing.pre_s + (p0 - m0), rate)
        self.workload.end_phase()
        self._emit("phase_end", phase.name, **fields)
        if not last and timing.gap_s > 0:
            self._rates.clear()  # nothing runs in the gap: no rate to show
            g0 = self.mono()
            self._wait(timing.gap_s, phase, "gap", g0, timing.interval_s, None)

    def _note(
        self, phase: Phase, ops: int, seconds: float, rate: float | None, unserved: int | None = None
    ) -> None:
        achieved = ops / seconds if seconds > 0 else 0.0
        if phase.kind == "concurrency":
            text = f"{phase.name}: {ops}/{phase.copies} jobs in {seconds:.1f} s"
        elif rate:
            text = f"{phase.name}: {achieved:,.0f} ops/s, {achieved / rate * 100:.1f}% of the target {rate:,.0f} ops/s"
            if unserved and seconds > 0:
                text += f", {unserved / (rate * seconds) * 100:.1f}% of its arrivals not served in the window"
        else:
            text = f"{phase.name}: {achieved:,.0f} ops/s"
        self.display.note(text)
