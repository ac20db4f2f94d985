"""How often is `wattbench demo` VALID on this machine? Runs the demo N times in a row and prints, per run,
VALID or INVALID with the demo's one-line reason and how long it took, then "K of N VALID".

    python bench/bench_demo_validity.py [--runs 10] [demo options, e.g. --measure 10 --nice 10]

Other work on the machine takes cores from the demo's workload, so the load average and the number of
cores are printed at the start and the end: a figure from a busy machine says little about a quiet one.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def _one_run(demo_args: list[str], workdir: Path, k: int) -> tuple[str, float]:
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
        return lines[-1], took
    last = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or ["no output"])[-1]
    return f"ERROR: the demo exited with {proc.returncode}: {last}", took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10, help="demo runs in a row (10)")
    args, demo_args = ap.parse_known_args()
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    # A demo option it would refuse is refused here, once, not after every run.
    from wattbench import demo

    check = argparse.ArgumentParser(prog=f"{ap.prog} (demo options)")
    demo.add_arguments(check)
    check.parse_args(demo_args)
    print(f"start: {_load()}", flush=True)
    valid = 0
    with tempfile.TemporaryDirectory(prefix="wattbench-demo-bench-") as tmp:
        for k in range(1, args.runs + 1):
            before = os.getloadavg()[0]
            line, took = _one_run(demo_args, Path(tmp), k)
            valid += line == "VALID"
            print(
                f"run {k}/{args.runs}: {line} ({took:.0f} s, load average {before:.2f} at its start)",
                flush=True,
            )
    print(f"{valid} of {args.runs} VALID", flush=True)
    print(f"end: {_load()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
