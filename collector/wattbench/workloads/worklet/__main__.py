"""`python -m wattbench.workloads.worklet NAME --ops N`: N ops of one worklet on one core, flat out,
printing the running count ("ops=N") and the total at exit. A job of fixed work for concurrency and
cluster sweeps (`job = "worklet:sha256:2000"`), with the same op the worklet's paced runs count."""

from __future__ import annotations

import argparse
import sys
from importlib import import_module

from ...argtypes import number, whole
from ...exits import Exit
from ..builtin.standalone import run_ops
from . import WORKLETS, WorkletWorkload


def _option(text: str) -> tuple[str, object]:
    key, eq, value = text.partition("=")
    if not eq or key not in WorkletWorkload.OPTION_TYPES:
        raise argparse.ArgumentTypeError(
            f"give KEY=VALUE with KEY one of {', '.join(WorkletWorkload.OPTION_TYPES)}"
        )
    kind = WorkletWorkload.OPTION_TYPES[key][0]
    if kind is bool:
        if value not in ("true", "false"):
            raise argparse.ArgumentTypeError(f"{key} is true or false")
        return key, value == "true"
    try:
        return key, kind(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{key} must be {kind.__name__}") from None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m wattbench.workloads.worklet")
    p.add_argument("worklet", choices=list(WORKLETS))
    p.add_argument("--ops", type=whole(at_least=0), required=True, help="ops to run, then exit")
    p.add_argument("--seed", type=whole(), default=1)
    p.add_argument("--option", action="append", type=_option, default=[], metavar="KEY=VALUE")
    p.add_argument(
        "--every", type=number(above=0), default=0.5, help="print the running count this often (s)"
    )
    args = p.parse_args(argv)
    try:
        op = import_module(f"{__package__}.{args.worklet}").make_unit(args.seed, **dict(args.option))
    except (OSError, ValueError) as exc:
        print(f"worklet {args.worklet}: {exc}", file=sys.stderr)
        return Exit.USAGE
    run_ops(op, args.ops, every=args.every)
    return 0


if __name__ == "__main__":
    sys.exit(main())
