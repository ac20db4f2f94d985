"""How often is `wattbench demo` VALID on this machine? Runs the demo N times in a row and prints, per run,
VALID or INVALID with the demo's one-line reason, how far apart its calibration intervals were and how
long it took, then "K of N VALID".

    python bench/bench_demo_validity.py [--runs 10] [--probe 30] [demo options, e.g. --measure 10]

Two things decide whether a level can be held within ±2 %, and both are printed:
- other work on the machine, which takes cores from the workload: the load average and the number of
  cores at the start and the end;
- whether the machine's own speed holds still, which a load average does not show. A virtual machine
  whose host is busy, or a CPU that changes its clock, does more work in one second than in the next.
  Before the runs, one core runs the built-in transaction flat out for --probe seconds and its
  throughput is printed second by second in summary; each run's calibration spread (the two intervals
  that make the calibrated throughput, (max - min) / mean) shows the same thing inside the run. A run
  whose spread is beyond the tolerance cannot be held within it by any pacing, so the result is also
  given for the runs whose calibration held still.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TOLERANCE = 0.02  # the demo's load tolerance: the limit of a real sweep


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def _probe(seconds: float) -> str:
    """One core flat out on the built-in transaction, counted second by second."""
    from wattbench.workloads.builtin.transaction import OrderGenerator, transaction

    gen = OrderGenerator(1)
    counts = []
    for _ in range(max(1, round(seconds))):
        n = 0
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            transaction(gen)
            n += 1
        counts.append(n)
    mean = statistics.fmean(counts)
    cv = statistics.pstdev(counts) / mean * 100 if mean else 0.0
    text = f"{min(counts):,} to {max(counts):,} ops/s a second (mean {mean:,.0f}, variation {cv:.1f} %)"
    tens = [statistics.fmean(counts[i : i + 10]) for i in range(0, len(counts) - 9, 10)]
    if len(tens) >= 2:
        spread = (max(tens) - min(tens)) / statistics.fmean(tens) * 100
        text += f"; its 10 s means {min(tens):,.0f} to {max(tens):,.0f} ({spread:.1f} % apart)"
    return text


def _spread(workdir: Path, k: int, stdout: str) -> float | None:
    """The run's calibration spread, from its own stored report."""
    from wattbench.core.plan import calibration_spread

    run = None
    for ln in stdout.splitlines():
        if "wattbench report " in ln:
            run = ln.split("wattbench report ", 1)[1].split()[0]
    if run is None:
        return None
    argv = [
        sys.executable,
        "-m",
        "wattbench.cli",
        "report",
        run,
        "--store",
        str(workdir / f"demo-{k}.sqlite"),
    ]
    proc = subprocess.run([*argv, "--json"], capture_output=True, text=True, cwd=workdir)
    try:
        rates = [c["ops_per_s"] for c in json.loads(proc.stdout)["measured"]["calibration"]]
    except (ValueError, KeyError, TypeError):
        return None
    return calibration_spread(rates)


def _one_run(demo_args: list[str], workdir: Path, k: int) -> tuple[str, float, float | None]:
    t0 = time.monotonic()
    argv = [
        sys.executable,
        "-m",
        "wattbench.cli",
        "demo",
        "--quiet",
        "--html",
        str(workdir / f"demo-{k}.html"),
    ]
    argv += ["--store", str(workdir / f"demo-{k}.sqlite"), *demo_args]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=workdir)
    took = time.monotonic() - t0
    lines = [ln[len("demo result: ") :] for ln in proc.stdout.splitlines() if ln.startswith("demo result: ")]
    if proc.returncode in (0, 1) and lines:  # 0 valid, 1 invalid
        return lines[-1], took, _spread(workdir, k, proc.stdout)
    last = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or ["no output"])[-1]
    return f"ERROR: the demo exited with {proc.returncode}: {last}", took, None


def main() -> int:
    from wattbench.argtypes import number, whole
    from wattbench.cli.options import Parser

    ap = Parser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=whole(at_least=1), default=10, help="demo runs in a row (10)")
    ap.add_argument(
        "--probe",
        type=number(at_least=0),
        default=30.0,
        help="seconds of the one-core speed probe before the runs (30; 0: none)",
    )
    args, demo_args = ap.parse_known_args()
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    # A demo option it would refuse is refused here, once, not after every run.
    from wattbench.cli import demo

    check = Parser(prog=f"{ap.prog} (demo options)")
    demo.add_arguments(check)
    check.parse_args(demo_args)
    print(f"start: {_load()}", flush=True)
    if args.probe > 0:
        print(f"one core flat out for {args.probe:g} s: {_probe(args.probe)}", flush=True)
    valid = steady = steady_valid = 0
    with tempfile.TemporaryDirectory(prefix="wattbench-demo-bench-") as tmp:
        for k in range(1, args.runs + 1):
            before = os.getloadavg()[0]
            line, took, spread = _one_run(demo_args, Path(tmp), k)
            valid += line.startswith("VALID")
            if spread is not None and spread <= TOLERANCE:
                steady += 1
                steady_valid += line.startswith("VALID")
            cal = f"calibration spread {spread * 100:.1f} %, " if spread is not None else ""
            print(
                f"run {k}/{args.runs}: {line} ({cal}{took:.0f} s, load average {before:.2f} at its start)",
                flush=True,
            )
    print(f"{valid} of {args.runs} VALID", flush=True)
    print(
        f"{steady_valid} of {steady} VALID among the runs whose calibration spread was at most "
        f"{TOLERANCE * 100:g} %",
        flush=True,
    )
    print(f"end: {_load()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
