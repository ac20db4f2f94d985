"""The arrival stream of a paced level: exponential gaps drawn in stratified blocks, served by all workers.

Two things decide whether a level lands within ±2 % of its target, apart from the machine itself.

How many transactions arrive in the window. With gaps drawn independently the count is a Poisson count,
whose relative spread is 1/sqrt(count). In a 10 s window at 10 % load on a small machine (about 6,000
arrivals) that is ±1.3 %, so the ±2 % check fails by chance alone about one time in eight, though the
machine and the meter did nothing wrong. SPECpower's 240 s windows hide this; a short window does not.
So the gaps are drawn in blocks of BLOCK: one uniform from each of BLOCK equal slices of (0, 1), in a
random order, each turned into a gap by the exponential's inverse. Every gap is still exponentially
distributed, with the same short-range burstiness as before, but a block's total varies about as much as
one gap does rather than BLOCK gaps, so the count in a window is within a few tenths of a percent of its
target.

Who serves them. With a schedule per worker, a worker whose core is also busy with something else (the
broker, the collector, the driver) falls behind at 100 % while the other cannot take over its arrivals:
the level loses half the difference between the two. One stream that every worker takes its next
arrival from is a server with one queue, as a real one is: whichever worker is free serves the earliest
arrival.

The stream lives in shared memory (next arrival time, rate, index, window start) behind one lock. A
worker claims the next arrival, sleeps until it is due and runs it. It never runs more than MAX_LAG_S
or MAX_LAG_ARRIVALS behind, whichever is longer: older arrivals are dropped, so a stall is not made up
in a burst. When a window opens, the
driver records its start and arrivals due before it are dropped, so a ramp-up's backlog is not worked
off inside the window. Everyone takes the lock with a timeout, so a worker stopped or killed while
holding it cannot hang the sweep: a worker goes back to its command pipe, the driver reports it; and
opening a window is one store that needs no lock.

What a window did not serve is counted (unserved): the arrivals dropped by the lag bound after the
window opened, and those due but not yet started when it closes. At a target load the window's count
is its arrivals less these, so when a level falls short of its target they say it was the machine
that fell behind its calibrated rate, and by how much, rather than the pacing or the arrival count.
"""

from __future__ import annotations

import math
import random
from typing import Any

# Gaps per stratified block. Larger blocks cut the count's spread further (a block's total varies about
# as one gap does, so the spread over n arrivals is about sqrt(n / BLOCK) gaps) but make each block's
# permutation longer; 64 takes the 10 % level of a 10 s window from ±1.3 % to about ±0.2 %.
BLOCK = 64
# The furthest the stream runs behind: arrivals older than the later of these two are dropped when
# the next is claimed. At 100 % the backlog of a server that keeps pace is a random walk of about
# sqrt(arrivals) ops: a fraction of a second of fast ops (the transaction mix, hashes), but seconds of
# slow ones (a compression of 64 KiB takes 4 ms a core), so a bound in time alone dropped the walk's
# peaks and a slow worklet's 100 % level came out 2-4 % short. MAX_LAG_ARRIVALS is some 10 standard
# deviations of a 20 s window's walk at 500 ops/s; a stall of the machine longer than that is still not
# made up.
MAX_LAG_S = 0.25
MAX_LAG_ARRIVALS = 1000


def max_lag_s(rate: float) -> float:
    """How far behind the stream may run at `rate` arrivals per second before arrivals are dropped."""
    return max(MAX_LAG_S, MAX_LAG_ARRIVALS / rate) if rate > 0 else MAX_LAG_S


# How long a worker waits for the lock before it looks at its command pipe again.
LOCK_WAIT_S = 0.05
# How long the driver waits for it: a claim holds it for microseconds, so this long means a worker
# stopped or died inside one.
DRIVER_LOCK_WAIT_S = 5.0


class StreamLockError(RuntimeError):
    """The stream's lock was held for DRIVER_LOCK_WAIT_S: a worker stopped or died while claiming."""


_NEXT, _RATE, _INDEX, _WINDOW, _DROPPED = range(5)


class StratifiedGaps:
    """Unit-mean exponential gaps, the k-th the same in every process that uses the same seed.

    Block b is drawn from a generator seeded with (seed, b), so a worker can compute any gap of the
    stream without the others' state; the current block is kept, the stream only moves forward."""

    def __init__(self, seed: int, block: int = BLOCK) -> None:
        if block < 1:
            raise ValueError("block must be >= 1")
        self.seed = seed
        self.size = block
        self._b = -1
        self._gaps: list[float] = []

    def block(self, b: int) -> list[float]:
        """The gaps of block b: one draw from each slice of (0, 1), shuffled, through -ln(1 - u)."""
        rng = random.Random(f"wattbench-arrivals:{self.seed}:{b}")
        m = self.size
        gaps = [-math.log1p(-(i + rng.random()) / m) for i in range(m)]
        rng.shuffle(gaps)
        return gaps

    def unit(self, k: int) -> float:
        b, i = divmod(k, self.size)
        if b != self._b:
            self._gaps = self.block(b)
            self._b = b
        return self._gaps[i]


class ArrivalStream:
    """One paced level's arrivals, shared by the driver and every worker process.

    Made by the driver from a multiprocessing context before the workers start, and handed to each
    worker as a process argument (its shared array and lock travel with it)."""

    def __init__(self, ctx: Any, seed: int) -> None:
        self._state = ctx.RawArray("d", 5)
        self._lock = ctx.Lock()
        self._seed = seed
        self._gaps = StratifiedGaps(seed)
        self._state[_NEXT] = math.inf

    def __getstate__(self) -> dict[str, Any]:
        return {"state": self._state, "lock": self._lock, "seed": self._seed}

    def __setstate__(self, d: dict[str, Any]) -> None:
        self._state = d["state"]
        self._lock = d["lock"]
        self._seed = d["seed"]
        self._gaps = StratifiedGaps(d["seed"])

    # ---- the driver's side ----------------------------------------------------------------------

    def _driver_lock(self) -> None:
        if not self._lock.acquire(timeout=DRIVER_LOCK_WAIT_S):
            raise StreamLockError(
                f"a worker has held the arrival stream for over {DRIVER_LOCK_WAIT_S:g} s (stopped or died)"
            )

    def start(self, rate: float, now: float) -> None:
        """Begin a level at `rate` arrivals per second, its first arrival one gap after `now`. An
        infinite rate is calibration: every arrival is due at once, and the workers take them as fast
        as they can, through the same claims as at a paced level."""
        if not rate > 0:
            raise ValueError("rate must be > 0")
        self._driver_lock()
        try:
            s = self._state
            s[_RATE] = rate
            s[_INDEX] = 0.0
            s[_WINDOW] = now
            s[_DROPPED] = 0.0
            s[_NEXT] = now + self._gaps.unit(0) / rate
        finally:
            self._lock.release()

    def open_window(self, now: float) -> None:
        """A measurement window opens at `now`: arrivals due before it are not served inside it. The
        next claim moves the stream up to `now` (one float store, so no lock is needed). The drop count
        starts again; a claim racing with this may count its drop in the old window, which moves a
        diagnostic by one arrival, never the window's count of ops."""
        self._state[_DROPPED] = 0.0
        self._state[_WINDOW] = now

    def stop(self) -> None:
        """No more arrivals: a claim after this returns None."""
        self._driver_lock()
        try:
            self._state[_NEXT] = math.inf
        finally:
            self._lock.release()

    def unserved(self, now: float) -> int:
        """Arrivals of the window not served by `now`: those the lag bound dropped since the window
        opened, and those due by `now` that no worker has claimed yet (the queue). The queue is counted
        gap by gap as the claims would walk it, or from the rate when it is longer than the lag bound
        (a stall). A read without the lock: a claim in flight moves it by one arrival."""
        s = self._state
        t, rate, k, window = s[_NEXT], s[_RATE], int(s[_INDEX]), s[_WINDOW]
        queued = 0
        if rate > 0 and rate != math.inf and max(t, window) <= now:
            if now - max(t, window) > max_lag_s(rate):
                # The due arrival at t (when inside the window) and the span after it, as a claim counts it.
                queued = round((now - max(t, window)) * rate + (1 if t >= window else 0))
            else:
                if t < window:  # the next claim restarts the stream one gap after the window opened
                    k += 1
                    t = window + self._gaps.unit(k) / rate
                while t <= now:
                    queued += 1
                    k += 1
                    t += self._gaps.unit(k) / rate
        return round(s[_DROPPED]) + queued

    def claimed(self) -> int:
        """How many arrivals this level has handed out or dropped so far (its index in the stream)."""
        return int(self._state[_INDEX])

    # ---- a worker's side ------------------------------------------------------------------------

    def claim(self, now: float) -> float | None:
        """Take the next arrival: its due time, or None if the lock was busy (look at commands, then try
        again) or the stream is stopped. Arrivals before the window's start or older than the lag bound
        are dropped here: the stream restarts one gap after the later of the two moments, which for
        exponential gaps leaves the same process after it."""
        if not self._lock.acquire(timeout=LOCK_WAIT_S):
            return None
        try:
            s = self._state
            t = s[_NEXT]
            rate = s[_RATE]
            if t == math.inf or not rate > 0:
                return None
            k = int(s[_INDEX])
            window = s[_WINDOW]
            floor = max(window, now - max_lag_s(rate))
            if t < floor:
                # Arrivals due inside the window and older than the lag bound are the window's and
                # were not served; those before the window opened never belonged to it. Their number
                # from the rate: walking every gap would hold the lock through a long stall.
                # The due arrival at t is one of them (when inside the window), and the span after it
                # holds (floor - t) * rate more on average: counting the span alone missed one arrival
                # a drop, and a machine that kept falling behind drops at almost every claim.
                if rate != math.inf and floor > window:
                    s[_DROPPED] += (floor - max(t, window)) * rate + (1.0 if t >= window else 0.0)
                k += 1
                t = floor + self._gaps.unit(k) / rate
            k += 1
            s[_INDEX] = float(k)
            s[_NEXT] = t + self._gaps.unit(k) / rate
            return t
        finally:
            self._lock.release()
