"""`python -m wattbench.workloads.builtin --ops N`: run N built-in transactions on one core and print
"ops=N". The concurrency mode's default job, and a sample command for the command adapter."""

from __future__ import annotations

import argparse
import sys
import time

from .arrivals import StratifiedGaps, max_lag_s
from .transaction import OrderGenerator, transaction


def main(argv: list[str] | None = None) -> int:

    p = argparse.ArgumentParser(prog="python -m wattbench.workloads.builtin")
    p.add_argument("--ops", type=int, help="transactions to run, then exit")
    p.add_argument("--seconds", type=float, help="run for this long instead")
    p.add_argument("--rate", type=float, default=0.0, help="paced arrivals per second (0 = flat out)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--every", type=float, default=0.5, help="print the running count this often (s)")
    args = p.parse_args(argv)
    if args.ops is None and args.seconds is None:
        p.error("give --ops or --seconds")
    gen = OrderGenerator(args.seed)
    # The same exponential gaps, drawn in stratified blocks, as the workers' stream (arrivals.py).
    gaps = StratifiedGaps(args.seed)
    k = 0
    done = 0
    lag = max_lag_s(args.rate)
    start = time.monotonic()
    next_print = start + args.every
    next_t = start + (gaps.unit(k) / args.rate if args.rate > 0 else 0.0)
    try:
        while True:
            now = time.monotonic()
            if args.ops is not None and done >= args.ops:
                break
            if args.seconds is not None and now - start >= args.seconds:
                break
            if args.rate > 0 and now < next_t:
                time.sleep(min(next_t - now, 0.05))
                continue
            if args.rate > 0 and now - next_t > lag:
                # As the workers do: a stall is not made up in a burst (see arrivals.py).
                k += 1
                next_t = now - lag + gaps.unit(k) / args.rate
                continue
            transaction(gen)
            done += 1
            if args.rate > 0:
                k += 1
                next_t += gaps.unit(k) / args.rate
            if now >= next_print:
                print(f"ops={done}", flush=True)
                next_print = now + args.every
    except KeyboardInterrupt:
        pass
    print(f"ops={done}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
