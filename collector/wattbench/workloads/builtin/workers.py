"""The built-in workload's worker processes and their ssj-style pacing.

One process per core (processes, not threads: the interpreter lock would serialise threads). At a
target load, transactions arrive at target x calibrated rate with exponential gaps, in one stream that
every worker serves (arrivals.py: how the gaps are drawn, and why one stream); each worker claims the
next arrival, waits until it is due and runs it, so a transaction that starts late does not shift the
ones after it and the long-run rate stays on target. Work is never throttled by sleeping a fixed duty
cycle. Each worker counts completed transactions in its own slot of a shared array, which the driver
sums at the window edges.

The stream does not burst to catch up where that would distort a window: arrivals not yet started when
a measurement window opens are dropped, so the ramp-up's backlog is not worked off inside the window,
and it never runs more than a bounded lag behind (arrivals.max_lag_s). A server that cannot keep up therefore shows a lower
actual load instead of making it up later.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import multiprocessing as mp
import os
import select
import signal
import time
from collections.abc import Callable, Iterator, Mapping
from importlib import import_module
from multiprocessing.connection import Connection
from typing import Any

from ...argtypes import workers_problem
from ...core.plan import Phase
from ...signals import sigint_ignored
from ..base import WorkloadDefaults, WorkloadError, check_keys, setting
from .arrivals import ArrivalStream, StreamLockError, max_lag_s

# How early a transaction may start: below this, waiting costs more (wake-up latency) than it is worth,
# and a Poisson schedule does not notice a few tens of microseconds.
EARLY_S = 50e-6
# Waits longer than this sleep on the command pipe (millisecond resolution) and finish with a precise
# sleep; shorter ones sleep precisely. A millisecond-resolution wait alone would oversleep every short
# gap, and at high load those lost fractions of a millisecond add up to lost throughput.
COARSE_S = 3e-3
__all__ = ["BuiltinWorkload", "max_lag_s"]


def _fine_timer() -> None:
    """Ask Linux for 1 ns timer slack so short sleeps end on time (the default slack is 50 us)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(29, 1, 0, 0, 0)  # PR_SET_TIMERSLACK
    except (OSError, AttributeError):
        pass


def _worker(
    index: int,
    conn: Connection,
    counters: Any,
    stream: ArrivalStream,
    unit: tuple[str, dict[str, Any]],
    seed: int,
    nice: int,
) -> None:
    """unit: (module, settings): the module's make_unit(seed, **settings) builds the callable that does
    one op's work (the transaction, or a worklet's)."""
    # The driver owns Ctrl-C: it stops the workers itself after publishing the abort.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _fine_timer()
    if nice > 0:
        os.nice(nice)

    try:
        work = import_module(unit[0]).make_unit(seed * 1000 + index, **unit[1])
    except Exception as exc:  # reported to the driver, which names it: never a silent dead worker
        with contextlib.suppress(OSError, EOFError):
            conn.send(("failed", f"{type(exc).__name__}: {exc}"))
        return
    try:
        conn.send(("ready", os.getpid()))
        _loop(index, conn, counters, stream, work)
    except (EOFError, OSError):
        return  # the driver is gone: nothing left to count for


def _loop(
    index: int, conn: Connection, counters: Any, stream: ArrivalStream, work: Callable[[], Any]
) -> None:
    mono = time.monotonic
    sleep = time.sleep
    # A poll object on the pipe checks for commands in well under a microsecond (Connection.poll builds
    # a selector on every call).
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN)
    mode = "idle"
    due: float | None = None  # the arrival this worker has claimed and not yet run
    while True:
        msg = None
        if mode == "idle":
            msg = conn.recv()
        else:  # paced
            if due is None:
                due = stream.claim(mono())
                if due is None:  # lock busy or stream stopped: look at the commands, then try again
                    if poller.poll(1):
                        msg = conn.recv()
            if due is not None:
                wait = due - mono()
                if wait <= EARLY_S:
                    work()
                    counters[index] += 1
                    due = None
                    if poller.poll(0):
                        msg = conn.recv()
                elif wait > COARSE_S:
                    if poller.poll(int((wait - 2e-3) * 1000)):
                        msg = conn.recv()
                else:
                    sleep(wait - EARLY_S)
        if msg is None:
            continue
        if msg[0] == "stop":
            return
        mode = msg[0]
        due = None


# Thread-pool sizes of the numerical libraries a worker's op may use (numpy's OpenBLAS, MKL, OpenMP).
_POOL_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


@contextlib.contextmanager
def one_thread_per_worker() -> Iterator[None]:
    """Workers started inside this block run their numerical libraries on one thread. A worker is one
    core's share of the load: a BLAS pool of its own on every core would have the workers fight for the
    cores, and a level's throughput then depends on how their pools collide (an LU worklet measured 7 %
    of its target at 75 % load that way), not on the pacing. Spawned workers read the variables at
    start; the driver's own environment is put back afterwards."""
    saved = {k: os.environ.get(k) for k in _POOL_VARS}
    os.environ.update(dict.fromkeys(_POOL_VARS, "1"))
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class BuiltinWorkload(WorkloadDefaults):
    """The transactional workload on all cores."""

    name = "builtin"
    ops_unit = "ops"
    window = "fixed"
    overrun_s = 0.0
    calibrates = True

    def __init__(
        self,
        workers: int | None = None,
        seed: int = 1,
        min_lines: int = 5,
        max_lines: int = 25,
        nice: int = 0,
    ) -> None:
        self.workers = int(workers or os.cpu_count() or 1)
        if self.workers < 1:
            raise ValueError("workers must be >= 1")
        if problem := workers_problem(self.workers):
            raise ValueError(f"workers {self.workers}: {problem}")
        if not 0 <= nice <= 19:
            raise ValueError("nice must be 0 to 19")
        # Checked here, not first in a worker process, where a bad pair would only show as a dead worker.
        if not 1 <= min_lines <= max_lines:
            raise ValueError(
                f"lines per order need 1 <= min_lines <= max_lines, got {min_lines} and {max_lines}"
            )
        # Above 0, the workers yield the cores to everything else on the machine: for a machine that
        # also runs the broker, collector or appliance (the demo), so the workload cannot starve them.
        self.nice = nice
        self.seed = seed
        self.min_lines = min_lines
        self.max_lines = max_lines
        self._ctx = mp.get_context("spawn")  # no inherited threads or sockets from the driver
        self._stream: ArrivalStream | None = None
        self._procs: list[Any] = []
        self._conns: list[Connection] = []
        self._counters: Any = None
        self._mark = 0
        self._paced = False
        self._unserved: int | None = None

    SETTINGS = ("workers", "seed", "min_lines", "max_lines", "nice")

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> BuiltinWorkload:
        check_keys(cls.name, config, cls.SETTINGS)
        n = {key: setting(cls.name, config, key, (int,), None) for key in cls.SETTINGS}
        try:
            return cls(
                workers=n["workers"] or None,  # 0 or absent: one per core
                seed=1 if n["seed"] is None else n["seed"],
                min_lines=5 if n["min_lines"] is None else n["min_lines"],
                max_lines=25 if n["max_lines"] is None else n["max_lines"],
                nice=n["nice"] or 0,
            )
        except ValueError as exc:
            raise WorkloadError(f"{cls.name} workload: {exc}") from None

    def open(self) -> None:
        self._counters = self._ctx.RawArray("q", self.workers)
        self._stream = ArrivalStream(self._ctx, self.seed)
        with one_thread_per_worker():
            self._start_workers()

    def _start_workers(self) -> None:
        for i in range(self.workers):
            parent, child = self._ctx.Pipe()
            p = self._ctx.Process(
                target=_worker,
                args=(i, child, self._counters, self._stream, self.unit(), self.seed, self.nice),
                name=f"wattbench-{self.name}-{i}",
                daemon=True,
            )
            with sigint_ignored():  # a Ctrl-C meanwhile is raised at its end, with p in the list
                p.start()
                child.close()
                self._procs.append(p)
                self._conns.append(parent)
        for conn, p in zip(self._conns, self._procs, strict=True):
            try:
                if not conn.poll(60):
                    raise EOFError
                reply = conn.recv()
            except (EOFError, OSError):
                self.close()
                raise WorkloadError(f"worker {p.name} did not start (exit code {p.exitcode})") from None
            if reply[0] == "failed":
                self.close()
                raise WorkloadError(f"{self.name} workload: its work cannot start: {reply[1]}")

    def unit(self) -> tuple[str, dict[str, Any]]:
        """What one op is: a module with make_unit(seed, **settings), and the settings."""
        return (
            "wattbench.workloads.builtin.transaction",
            {"min_lines": self.min_lines, "max_lines": self.max_lines},
        )

    def _send(self, msg: tuple[Any, ...]) -> None:
        for conn, p in zip(self._conns, self._procs, strict=True):
            if not p.is_alive():
                raise WorkloadError(f"worker {p.name} exited with {p.exitcode}")
            conn.send(msg)

    def _arrivals(self) -> ArrivalStream:
        if self._stream is None:
            raise WorkloadError("the builtin workload is not open")
        return self._stream

    def start_phase(self, phase: Phase, rate: float | None) -> None:
        self._paced = rate is not None and rate > 0
        self._unserved = None
        if rate is not None and rate <= 0:
            self._send(("idle",))
            return
        # Calibration (rate None) runs the same paced loop on a stream whose every arrival is already
        # due, so the calibrated rate includes each transaction's claim on the shared stream, as every
        # paced level's does. A loop that skipped the claim measured about 2 % more than the paced
        # loop can deliver, and the 100 % level fell short of it.
        # The workers are idle between phases (end_phase), so the stream restarts with no claim in
        # flight.
        try:
            self._arrivals().start(math.inf if rate is None else rate, time.monotonic())
        except StreamLockError as exc:
            raise WorkloadError(f"builtin workload: {exc}") from None
        self._send(("paced",))

    def start_measure(self) -> None:
        self._arrivals().open_window(time.monotonic())
        self._mark = self.completed()

    def measure_done(self) -> bool:
        return False

    def end_measure(self) -> int:
        done = self.completed() - self._mark
        if self._paced:
            self._unserved = self._arrivals().unserved(time.monotonic())
        return done

    def window_unserved(self) -> int | None:
        return self._unserved

    def end_phase(self) -> None:
        self._send(("idle",))
        if self._stream is not None:
            try:
                self._stream.stop()
            except StreamLockError as exc:
                raise WorkloadError(f"builtin workload: {exc}") from None

    def completed(self) -> int:
        if self._counters is None:
            return 0
        return int(sum(self._counters))

    def close(self) -> None:
        for conn in self._conns:
            with contextlib.suppress(OSError, ValueError):
                conn.send(("stop",))
        for p in self._procs:
            p.join(5)
            if p.is_alive():
                p.terminate()
                p.join(2)
        for conn in self._conns:
            with contextlib.suppress(OSError):
                conn.close()
        self._procs.clear()
        self._conns.clear()
