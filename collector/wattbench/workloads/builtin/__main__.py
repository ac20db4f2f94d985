"""`python -m wattbench.workloads.builtin --ops N`: run N built-in transactions on one core and print
"ops=N". The concurrency mode's default job, and a sample command for the command adapter."""

from __future__ import annotations

import argparse
import sys

from ...argtypes import number, whole
from .standalone import run_ops
from .transaction import make_unit


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m wattbench.workloads.builtin")
    p.add_argument("--ops", type=whole(at_least=0), help="transactions to run, then exit")
    p.add_argument("--seconds", type=number(above=0), help="run for this long instead")
    p.add_argument(
        "--rate", type=number(at_least=0), default=0.0, help="paced arrivals per second (0 = flat out)"
    )
    p.add_argument("--seed", type=whole(), default=1)
    p.add_argument(
        "--every", type=number(above=0), default=0.5, help="print the running count this often (s)"
    )
    args = p.parse_args(argv)
    if args.ops is None and args.seconds is None:
        p.error("give --ops or --seconds")
    run_ops(make_unit(args.seed), args.ops, args.seconds, args.rate, args.seed, args.every)
    return 0


if __name__ == "__main__":
    sys.exit(main())
