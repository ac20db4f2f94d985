"""How often is `wattbench demo` VALID on this machine? Runs the demo N times in a row and prints, per run,
VALID or INVALID with the demo's one-line reason, the load at its start, the throughput of each
calibration interval and their spread, and each level's actual load against its target (with the share
of its arrivals it did not serve, where the machine fell behind); then "K of N VALID".

    python bench/bench_demo_validity.py [--runs 10] [--probe 30] [--probe-cores 1] [demo options]

Two things decide whether a level can be held within ±2 %, and both are printed:
- other work on the machine, which takes cores from the workload: the load average at each run's start,
  and the CPU that processes other than the bench and its demos used over a second just before it (the
  load average still carries the previous run for a minute or more; that figure does not);
- whether the machine's own speed holds still, which a load average does not show. A virtual machine
  whose host is busy, or a CPU that changes its clock, does more work in one second than in the next.
  Before the runs, one core (or --probe-cores of them at once, 0 for all) runs flat out for --probe
  seconds, a second of the built-in transaction and a second of a hash in C in turn, and the spread of each is printed: when the transaction's rate
  moves and the hash's does not, the host's speed for interpreter work moved (caches and cores shared
  with its other guests); each run's calibration spread (the two intervals
  that make the calibrated throughput, (max - min) / mean) shows the same thing inside the run. A run
  whose spread is beyond the tolerance cannot be held within it by any pacing, so the result is also
  given for the runs whose calibration held still.

Each run also says where the CPU went while it ran: its workers, the demo's own process (broker,
collector, appliance and driver), every other process, and steal (the time a hypervisor gave this
virtual machine's cores to others), each as a mean in cores and the range of its 10 s means.

Ctrl-C ends it with one line and exit status 130, the demo it was running stopped, and no figures.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

try:
    from wattbench_devkit.benchrun import run_main
except ImportError as exc:  # a hint on one line, not a traceback
    print(
        f"bench_demo_validity: {exc}. Install the development kit (in the checkout): "
        "python -m pip install -e . -e ./devkit",
        file=sys.stderr,
    )
    sys.exit(2)

TOLERANCE = 0.02  # the demo's load tolerance: the limit of a real sweep


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def _probe_counts(seconds: float) -> dict[str, list[int]]:
    """One core flat out, alternating a second of the built-in transaction with a second of a hash in C
    (SHA-256 of 1 MiB: no interpreter, no allocation), each counted second by second."""
    import hashlib

    from wattbench.workloads.builtin.transaction import OrderGenerator, transaction

    gen = OrderGenerator(1 + os.getpid())
    block = bytes(1 << 20)
    kinds = {"transaction": lambda: transaction(gen), "hash in C": lambda: hashlib.sha256(block).digest()}
    counts: dict[str, list[int]] = {k: [] for k in kinds}
    for i in range(max(2, round(seconds))):
        name = list(kinds)[i % 2]
        work = kinds[name]
        n = 0
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            work()
            n += 1
        counts[name].append(n)
    return counts


def _probe(seconds: float, cores: int = 1) -> str:
    """The probe on `cores` cores at once, their counts added second by second. When the transaction's
    rate moves and the hash's does not, what moved is the host's speed for interpreter work (caches and
    cores shared with its other guests), not this machine's load or the demo's code; when both move,
    the clock did. On every core at once, as the demo's workers run, it also shows what one core
    alone does not: whether the host holds the speed of all of this machine's cores together."""
    if cores == 1:
        per_core = [_probe_counts(seconds)]
    else:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(cores) as pool:
            per_core = list(pool.map(_probe_counts, [seconds] * cores))
    counts = {
        name: [sum(c[name][i] for c in per_core) for i in range(len(got))]
        for name, got in per_core[0].items()
    }
    parts = []
    for name, got in counts.items():
        mean = statistics.fmean(got)
        cv = statistics.pstdev(got) / mean * 100 if mean else 0.0
        text = f"{name} {min(got):,} to {max(got):,} a second (mean {mean:,.0f}, variation {cv:.1f} %)"
        # Five of its seconds span 10 s of the probe.
        tens = [statistics.fmean(got[i : i + 5]) for i in range(0, len(got) - 4, 5)]
        if len(tens) >= 2:
            spread = (max(tens) - min(tens)) / statistics.fmean(tens) * 100
            text += f", its 10 s means {spread:.1f} % apart"
        parts.append(text)
    return "; ".join(parts)


@dataclass
class Run:
    """One demo: its verdict line and what its JSON report says of calibration and levels."""

    line: str
    took_s: float
    load1: float
    others: float  # cores used by other processes just before it
    calibration: list[float] = field(default_factory=list)
    # (target, actual, share of its arrivals not served in the window)
    levels: list[tuple[float, float | None, float | None]] = field(default_factory=list)
    cpu: str = ""  # CpuWatch.summary()

    @property
    def valid(self) -> bool:
        return self.line.startswith("VALID")

    def spread(self) -> float | None:
        from wattbench.core.plan import calibration_spread

        return calibration_spread(self.calibration)


def read_report(
    workdir: Path, store: Path
) -> tuple[list[float], list[tuple[float, float | None, float | None]]]:
    """The calibration intervals' ops/s and each target level's (target, actual, unserved share), from
    the JSON report of the run in its store (the run's own store: its one run is the latest)."""
    from wattbench.core.evaluate import levels_from_result

    argv = [sys.executable, "-m", "wattbench.cli", "report", "latest", "--store", str(store), "--json"]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=workdir)
    try:
        doc = json.loads(proc.stdout)
        cal = [float(c["ops_per_s"]) for c in doc["measured"]["calibration"]]
        levels = [
            (float(lv.target), lv.actual, lv.unserved_share)
            for lv in levels_from_result(doc["result"])
            if lv.kind == "target" and lv.target is not None
        ]
    except (ValueError, KeyError, TypeError):
        return [], []
    return cal, levels


class CpuWatch:
    """Where the machine's CPU went while a demo ran, second by second: its worker processes, the demo's
    own process (broker, collector, appliance, driver: one process, many threads), every other process,
    and the time the hypervisor gave this virtual machine's cores to others (steal). The first three
    are in cores; steal too."""

    PARTS = ("workers", "demo process", "other processes", "steal")

    def __init__(self, pid: int) -> None:
        import psutil

        self._demo = psutil.Process(pid)
        self._bench = psutil.Process()
        self.samples: list[tuple[float, ...]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _read(self) -> tuple[float, float, float, dict[int, float], float]:
        """The time, the machine's busy CPU seconds, steal, each demo process's CPU seconds, the bench's."""
        import psutil

        from wattbench.sweep.cpuuse import machine_busy_s, steal_s

        tree: dict[int, float] = {}
        try:
            procs = [self._demo, *self._demo.children(recursive=True)]
        except psutil.Error:
            procs = []
        for p in procs:
            try:
                t = p.cpu_times()
            except psutil.Error:
                continue
            tree[p.pid] = t.user + t.system
        bench = self._bench.cpu_times()
        return time.monotonic(), machine_busy_s(), steal_s(), tree, bench.user + bench.system

    def _loop(self) -> None:
        prev = self._read()
        while not self._stop.wait(1.0):
            now = self._read()
            dt = now[0] - prev[0]
            # Per process, for those seen both times: a worker that ends takes its time with it.
            delta = {pid: now[3][pid] - prev[3][pid] for pid in now[3].keys() & prev[3].keys()}
            demo = delta.get(self._demo.pid, 0.0)
            workers = sum(v for pid, v in delta.items() if pid != self._demo.pid)
            steal = now[2] - prev[2]
            others = (now[1] - prev[1]) - demo - workers - (now[4] - prev[4]) - steal
            self.samples.append((workers / dt, demo / dt, max(0.0, others) / dt, steal / dt))
            prev = now

    def start(self) -> CpuWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def summary(self) -> str:
        """Each part's mean over the run and the range of its 10 s means (the last of what is left)."""
        if not self.samples:
            return ""
        cells = []
        for i, name in enumerate(self.PARTS):
            values = [s[i] for s in self.samples]
            tens = [statistics.fmean(values[j : j + 10]) for j in range(0, len(values), 10)]
            cells.append(f"{name} {statistics.fmean(values):.2f} ({min(tens):.2f} to {max(tens):.2f})")
        return "  CPU, cores (10 s means): " + ", ".join(cells)


def one_run(demo_args: list[str], workdir: Path, k: int) -> Run:
    from wattbench.sweep.cpuuse import other_cpu_use

    load1 = os.getloadavg()[0]
    others = other_cpu_use(1.0)
    store = workdir / f"demo-{k}.sqlite"
    argv = [
        sys.executable,
        "-m",
        "wattbench.cli",
        "demo",
        "--quiet",
        "--html",
        str(workdir / f"demo-{k}.html"),
        "--store",
        str(store),
        *demo_args,
    ]
    t0 = time.monotonic()
    # Its own session, so that a terminal's Ctrl-C reaches the bench alone, which stops the demo.
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=workdir, start_new_session=True
    )
    watch = CpuWatch(proc.pid).start()
    try:
        out, err = proc.communicate()
    except BaseException:
        watch.stop()
        proc.send_signal(signal.SIGINT)  # the demo's own way out: it stops its workers and services
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise
    took = time.monotonic() - t0
    watch.stop()
    lines = [ln[len("demo result: ") :] for ln in out.splitlines() if ln.startswith("demo result: ")]
    if proc.returncode in (0, 1) and lines:  # 0 valid, 1 invalid
        cal, levels = read_report(workdir, store)
        return Run(lines[-1], took, load1, others, cal, levels, watch.summary())
    last = (err.strip().splitlines() or out.strip().splitlines() or ["no output"])[-1]
    return Run(f"ERROR: the demo exited with {proc.returncode}: {last}", took, load1, others)


def describe(run: Run, k: int, n: int) -> list[str]:
    """The lines printed for one run."""
    lines = [
        f"run {k}/{n}: {run.line}",
        f"  start: load average {run.load1:.2f}, other processes {run.others:.2f} cores; {run.took_s:.0f} s",
    ]
    if run.calibration:
        spread = run.spread()
        rates = " / ".join(f"{r:,.0f}" for r in run.calibration)
        lines.append(
            f"  calibration: {rates} ops/s"
            + (f", spread {spread * 100:.1f} % (the intervals used)" if spread is not None else "")
        )
    if run.levels:
        cells = [
            f"{t * 100:g} %: {'-' if a is None else f'{a * 100:.1f} %'}"
            # Below 0.05 % it would print as 0.0 %: a handful of arrivals queued at the window's end.
            + (f" ({u * 100:.1f} % of its arrivals not served)" if u and u >= 0.0005 else "")
            for t, a, u in run.levels
        ]
        lines.append("  actual load: " + ", ".join(cells))
    if run.cpu:
        lines.append(run.cpu)
    return lines


def main() -> int:
    from wattbench.argtypes import number, whole
    from wattbench.cli.parser import Parser

    ap = Parser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=whole(at_least=1), default=10, help="demo runs in a row (10)")
    ap.add_argument(
        "--probe",
        type=number(at_least=0),
        default=30.0,
        help="seconds of the speed probe before the runs (30; 0: none)",
    )
    ap.add_argument(
        "--probe-cores",
        type=whole(at_least=0),
        default=1,
        help="cores the probe runs on at once (1; 0: every core, as the demo's workers do)",
    )
    args, demo_args = ap.parse_known_args()
    # A demo option it would refuse is refused here, once, not after every run.
    from wattbench.cli import demo

    check = Parser(prog=f"{ap.prog} (demo options)")
    demo.add_arguments(check)
    check.parse_args(demo_args)
    print(f"start: {_load()}", flush=True)
    if args.probe > 0:
        cores = args.probe_cores or os.cpu_count() or 1
        where = "one core" if cores == 1 else f"{cores} cores, their counts added,"
        print(
            f"{where} flat out for {args.probe:g} s, a second of each in turn: {_probe(args.probe, cores)}",
            flush=True,
        )
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="wattbench-demo-bench-") as tmp:
        for k in range(1, args.runs + 1):
            run = one_run(demo_args, Path(tmp), k)
            runs.append(run)
            for line in describe(run, k, args.runs):
                print(line, flush=True)
    steady = [r for r in runs if (s := r.spread()) is not None and s <= TOLERANCE]
    print(f"{sum(r.valid for r in runs)} of {args.runs} VALID", flush=True)
    print(
        f"{sum(r.valid for r in steady)} of {len(steady)} VALID among the runs whose calibration spread "
        f"was at most {TOLERANCE * 100:g} %",
        flush=True,
    )
    print(f"end: {_load()}", flush=True)
    return 0


if __name__ == "__main__":
    run_main("bench_demo_validity", main)
