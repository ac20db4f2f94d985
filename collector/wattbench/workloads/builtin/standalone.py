"""One process running a unit's ops, alone: a fixed count or a time, flat out or paced by the same
exponential gaps as the workers' stream, printing its running count ("ops=N") as it goes and the total
at exit. The `python -m` commands of the built-in workload and of the worklets run it."""

from __future__ import annotations

import time
from collections.abc import Callable

from .arrivals import StratifiedGaps, max_lag_s


def run_ops(
    op: Callable[[], object],
    ops: int | None = None,
    seconds: float | None = None,
    rate: float = 0.0,
    seed: int = 1,
    every: float = 0.5,
) -> int:
    """Run op until `ops` are done or `seconds` have passed; returns the count (also printed last)."""
    # The same exponential gaps, drawn in stratified blocks, as the workers' stream (arrivals.py).
    gaps = StratifiedGaps(seed)
    k = 0
    done = 0
    lag = max_lag_s(rate)
    start = time.monotonic()
    next_print = start + every
    next_t = start + (gaps.unit(k) / rate if rate > 0 else 0.0)
    try:
        while True:
            now = time.monotonic()
            if ops is not None and done >= ops:
                break
            if seconds is not None and now - start >= seconds:
                break
            if rate > 0 and now < next_t:
                time.sleep(min(next_t - now, 0.05))
                continue
            if rate > 0 and now - next_t > lag:
                # As the workers do: a stall is not made up in a burst (see arrivals.py).
                k += 1
                next_t = now - lag + gaps.unit(k) / rate
                continue
            op()
            done += 1
            if rate > 0:
                k += 1
                next_t += gaps.unit(k) / rate
            if now >= next_print:
                print(f"ops={done}", flush=True)
                next_print = now + every
    except KeyboardInterrupt:
        pass
    print(f"ops={done}", flush=True)
    return done
