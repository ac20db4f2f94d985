"""Does the built-in workload reach each target load? A full plan (3 calibration intervals, 100 % … 10 %,
active idle) through the real driver, on all cores; prints target against achieved per level.

    python bench/bench_workload_pacing.py [--measure 30] [--pre 10] [--post 5] [--workers N]
    python bench/bench_workload_pacing.py --worklet all [--measure 8] [--file PATH --size-mb N]
    python bench/bench_workload_pacing.py --top 3 [--measure 8] [--workers N]

--worklet NAME (repeat, or all) runs each worklet (collector/wattbench/workloads/worklet/) instead of
the transaction mix: 3 calibration intervals, then the loads SERT sweeps its group at (cpu 100, 75, 50,
25 %; memory and storage 100, 50 %; --levels for others), no idle; it ends with one line per worklet:
its worst deviation and the fewest ops a window counted (arrivals are exponential, so a window's count
varies by about 1/sqrt(count): ±2 % needs some 10 000 ops in the window to hold reliably).

--top ROUNDS drives the workload directly, without the driver: each round is 3 calibrations, then 100 %
and 90 % of the calibrated rate (the mean of the last two), 1 s before each window; it prints each
level's actual load. The top level is where a mismatch between calibration and pacing shows first.

Actual load = achieved ops/s ÷ calibrated ops/s (as SPECpower_ssj2008 reports it). The ±2 % check is
shown both ways: relative to the target (wattbench's default) and in load points.
"""

from __future__ import annotations

import os
import time

from wattbench.core.plan import Phase, Timing, parse_levels, specpower_plan
from wattbench.sweep.driver import Driver
from wattbench.sweep.progress import LogDisplay
from wattbench.sweep.publish import MemorySink
from wattbench.sweep.suite import GROUP_LEVELS
from wattbench.workloads.builtin.workers import BuiltinWorkload
from wattbench.workloads.worklet import WORKLETS, WorkletWorkload


class Quiet(LogDisplay):
    def note(self, text: str) -> None:
        print("  " + text, flush=True)


def main() -> None:
    import signal

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # kill ends the run the way Ctrl-C does: workers stopped

    signal.signal(signal.SIGTERM, stop)
    from wattbench.argtypes import number, whole
    from wattbench.cli.parser import Parser

    ap = Parser()
    ap.add_argument("--measure", type=number(above=0), default=30.0)
    ap.add_argument("--pre", type=number(at_least=0), default=10.0)
    ap.add_argument("--post", type=number(at_least=0), default=5.0)
    ap.add_argument("--gap", type=number(at_least=0), default=2.0)
    ap.add_argument("--workers", type=whole(at_least=1), default=None)
    ap.add_argument("--top", type=whole(at_least=0), default=0, metavar="ROUNDS")
    ap.add_argument("--worklet", action="append", choices=[*WORKLETS, "all"], help="a worklet, or all")
    ap.add_argument("--file", default="wattbench-worklet.dat", help="the storage worklets' file")
    ap.add_argument("--size-mb", type=whole(at_least=1), default=1024, help="the storage worklets' file size")
    ap.add_argument("--levels", help="worklets: target loads (default: SERT's for the worklet's group)")
    args = ap.parse_args()
    if args.top:
        top(args.top, args.measure, args.workers)
        return

    plan = specpower_plan(timing=Timing(args.pre, args.measure, args.post, args.gap))
    if not args.worklet:
        sweep(BuiltinWorkload(workers=args.workers), plan)
        return
    names = list(WORKLETS) if "all" in args.worklet else args.worklet
    summary = []
    for name in names:
        options = {"file": args.file, "size_mb": args.size_mb} if WORKLETS[name][0] == "storage" else {}
        group = WORKLETS[name][0]
        loads = parse_levels(args.levels) if args.levels else GROUP_LEVELS[group]
        plan = specpower_plan(3, loads, False, Timing(args.pre, args.measure, args.post, args.gap))
        print(f"\n== worklet {name} ({group}): one op is {WORKLETS[name][2]}")
        worst, fewest = sweep(WorkletWorkload(name, workers=args.workers, options=options), plan)
        summary.append((name, worst, fewest))
    print(f"\n{'worklet':>11} {'worst rel. dev':>15} {'fewest ops':>11} {'1/sqrt':>7}  ±2%")
    for name, worst, fewest in summary:
        noise = fewest**-0.5 if fewest else float("nan")
        print(
            f"{name:>11} {worst * 100:14.2f}% {fewest:11,} {noise * 100:6.2f}%  {'pass' if worst <= 0.02 else 'FAIL'}"
        )


def sweep(wl: BuiltinWorkload, plan: object) -> tuple[float, int]:
    """The plan through the real driver; prints each level and returns the worst relative deviation and
    the fewest ops a target window counted."""
    print(
        f"{wl.workers} worker processes on {os.cpu_count()} cores; {plan.duration_s() / 60:.1f} min planned"
    )
    print("load average before: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    t0 = time.monotonic()
    rec = Driver("pacing-bench", plan, wl, MemorySink(), display=Quiet()).run()  # type: ignore[arg-type]
    took = time.monotonic() - t0
    cal = rec.calibrated or 0.0
    starts = {e["phase"]: e for e in rec.events if e["event"] == "measure_start"}
    print(
        f"\ncalibration intervals: {', '.join(f'{r:,.0f}' for r in rec.calibration)} ops/s -> calibrated {cal:,.0f} ops/s"
    )
    print(
        f"{'level':>6} {'target':>7} {'target ops/s':>13} {'achieved':>10} {'actual':>8} {'rel. dev':>9} {'points':>7}  ±2%"
    )
    worst = 0.0
    fewest = 0
    for e in rec.events:
        if e["event"] != "measure_end" or e.get("kind") != "target":
            continue
        secs = (e["t"] - starts[e["phase"]]["t"]) / 1000.0
        achieved = e["ops"] / secs
        target = e["target"]
        actual = achieved / cal
        rel = actual / target - 1.0
        pts = actual - target
        worst = max(worst, abs(rel))
        fewest = e["ops"] if not fewest else min(fewest, e["ops"])
        ok = "pass" if abs(rel) <= 0.02 else "FAIL"
        print(
            f"{e['phase']:>6} {target * 100:6.0f}% {target * cal:13,.0f} {achieved:10,.0f} {actual * 100:7.2f}% "
            f"{rel * 100:+8.2f}% {pts * 100:+6.2f}  {ok}"
        )
    print(
        f"worst relative deviation {worst * 100:.2f}%; run took {took / 60:.1f} min; interrupted: {rec.interrupted}"
    )
    # Other work on the machine takes cores from the workload; the load average says how much there was.
    print("load average after: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    return worst, fewest


def top(rounds: int, measure: float, workers: int | None) -> None:
    timing = Timing(1.0, measure, 0.0, 0.0)
    wl = BuiltinWorkload(workers=workers, nice=10)
    print(f"{wl.workers} worker processes on {os.cpu_count()} cores, {measure:g} s windows")
    print("load average before: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))

    def run(name: str, kind: str, target: float | None, rate: float | None) -> float:
        wl.start_phase(Phase(name, kind, timing, target=target), rate)
        time.sleep(1.0)
        wl.start_measure()
        t = time.monotonic()
        time.sleep(measure)
        n = wl.end_measure()
        rate_now = n / (time.monotonic() - t)
        wl.end_phase()
        return rate_now

    wl.open()
    try:
        for r in range(rounds):
            cals = [run(f"cal{i + 1}", "calibration", None, None) for i in range(3)]
            cal = (cals[1] + cals[2]) / 2
            spread = max(cals[1:]) / min(cals[1:]) - 1
            l100 = run("l100", "target", 1.0, cal) / cal
            l90 = run("l90", "target", 0.9, 0.9 * cal) / cal
            print(
                f"round {r + 1}: calibrations {', '.join(f'{c:,.0f}' for c in cals)} ops/s (spread "
                f"{spread * 100:.1f} %); 100 % -> {l100 * 100:.1f} %, 90 % -> {l90 * 100:.1f} %",
                flush=True,
            )
    finally:
        wl.close()
    print("load average after: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
