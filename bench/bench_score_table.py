"""`wattbench score` on long tables: 10^4, 10^5 and 10^6 rows, the per-row table against the summary.

Each measurement is a fresh process (interpreter start and imports included), so its peak RSS is its
own; the wall time, CPU time (user + system) and peak RSS of each are printed side by side, with the
ratios old ÷ new of CPU time and of memory.

- old: every row drawn as a line of the rich table (what `score` did for any table before it had a
  summary), from the same parsed table;
- new: `wattbench score FILE` as shipped: the first and last rows and the totals above
  report/score.py's SUMMARY_ROWS rows.

Both write to /dev/null at 120 columns. The per-row table of 10^6 rows took 9 minutes and about 4 GB,
so by default it is drawn up to 10^5 rows only (--old-max).

    python bench/bench_score_table.py [--rows 10000,100000,1000000] [--old-max 100000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def write_table(path: Path, rows: int) -> None:
    """rows distinct target loads, power 200..206 W, and Active Idle (as tests/test_score_large_table.py)."""
    with path.open("w") as f:
        f.write("target,actual,ops,power\n")
        for k in range(1, rows + 1):
            f.write(f"{100 * k / rows!r}%,,{3 * k},{200 + k % 7}\n")
        f.write("Active Idle,,0,100\n")


def child_old(path: str) -> None:
    from rich.console import Console

    from wattbench.cli import score as scorefile
    from wattbench.report.table import print_report

    table = scorefile.read_table(Path(path))
    levels = [table.level(i) for i in range(len(table))]
    console = Console(width=120)
    print_report(console, levels, scorefile.totals(table).overall, ops_label="ssj_ops", title=Path(path).name)


def child_new(path: str) -> None:
    from wattbench.cli import main

    main(["score", path])


def measure(mode: str, path: Path) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS in MB) of one child process. On a shared machine the CPU
    time says more than the wall time, which includes waiting for a core."""
    env = {**os.environ, "COLUMNS": "120"}
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, __file__, "--child", mode, str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - t0
    err = proc.stderr.read().decode() if proc.stderr else ""
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise SystemExit(f"{mode} failed on {path.name} (exit {code}): {err[-500:]}")
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} on {os.cpu_count()} cores"


def main() -> None:
    from wattbench.argtypes import whole
    from wattbench.cli.parser import Parser

    ap = Parser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default="10000,100000,1000000", help="table sizes (comma separated)")
    ap.add_argument(
        "--old-max", type=whole(at_least=0), default=100_000, help="largest table drawn row by row"
    )
    ap.add_argument("--child", nargs=2, metavar=("MODE", "FILE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        {"old": child_old, "new": child_new}[args.child[0]](args.child[1])
        return
    sizes = [int(x) for x in args.rows.split(",") if x.strip()]
    print(f"start: {load()}")
    print(
        f"{'rows':>10} | {'old wall':>8} {'old CPU':>8} {'old MB':>7} | {'new wall':>8} {'new CPU':>8} "
        f"{'new MB':>7} | {'CPU':>7} {'memory':>7}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            path = Path(tmp) / f"table-{n}.csv"
            write_table(path, n)
            new_s, new_cpu, new_mb = measure("new", path)
            if n <= args.old_max:
                old_s, old_cpu, old_mb = measure("old", path)
                old = f"{old_s:8.2f} {old_cpu:8.2f} {old_mb:7.0f}"
                ratio = f"{old_cpu / new_cpu:6.1f}× {old_mb / new_mb:6.1f}×"
            else:
                old, ratio = f"{'—':>8} {'—':>8} {'—':>7}", f"{'—':>7} {'—':>7}"
            print(f"{n:>10,} | {old} | {new_s:8.2f} {new_cpu:8.2f} {new_mb:7.0f} | {ratio}", flush=True)
    print(f"end: {load()}")


if __name__ == "__main__":
    main()
