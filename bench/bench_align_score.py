"""Alignment and scoring of a one-hour run: 64 power channels at 10 Hz (2.3 million samples).

Prints the wall time of align + score + compliance + result assembly, the peak memory allocated while
doing it (tracemalloc, numpy included) and the process's peak RSS (data included). Goal: < 1 s and
< 500 MB. Measured twice in one run: with a constant clock offset per device, and with one device's
clock stepping mid-run (its offset is then a ClockTrack from health points every 5 s, and all of that
device's channels are held at once to place the step).

    python bench/bench_align_score.py [--channels 64] [--hz 10] [--repeat 3]
    python bench/bench_align_score.py --channels 1024 --repeat 3   # 256 nodes x 4 channels (goal < 10 s)
"""

from __future__ import annotations

import resource
import time
import tracemalloc

import numpy as np

from wattbench.core.align import ChannelSpec
from wattbench.core.clocktrack import ClockTrack
from wattbench.core.evaluate import evaluate
from wattbench.core.plan import Timing, specpower_plan
from wattbench.store.base import Series

T0 = 1_767_225_600_000


def events_for(plan, t0: int) -> list[dict]:  # type: ignore[no-untyped-def]
    ev: list[dict] = []

    def add(event: str, phase: str, t: float, **kw: object) -> None:
        ev.append({"v": 1, "run": "bench", "n": len(ev), "t": int(t), "event": event, "phase": phase, **kw})

    add("run_start", "run", t0, kind="run", workload="builtin")
    cal = 10_000.0
    for p, ps, ms, me, pe in plan.offsets():
        kw: dict = {"kind": p.kind}
        if p.kind in ("target", "idle"):
            kw["target"] = p.target
        add("phase_start", p.name, t0 + ps * 1000, **kw)
        add("measure_start", p.name, t0 + ms * 1000, **kw)
        load = 1.0 if p.kind == "calibration" else (p.target or 0.0)
        add("measure_end", p.name, t0 + me * 1000, ops=int(cal * load * p.timing.measure_s), **kw)
        add("phase_end", p.name, t0 + pe * 1000, **kw)
    add("run_end", "run", ev[-1]["t"], kind="run")
    return ev


def main() -> None:
    from wattbench.argtypes import number, whole
    from wattbench.cli.parser import Parser

    ap = Parser()
    ap.add_argument("--channels", type=whole(at_least=1), default=64)
    ap.add_argument("--hz", type=number(above=0, at_most=1000), default=10.0)
    ap.add_argument("--repeat", type=whole(at_least=1), default=3)
    args = ap.parse_args()

    # 14 intervals laid out to fill one hour: 25 s ramps, 200 s windows, 7 s gaps.
    plan = specpower_plan(timing=Timing(25, 200, 25, 7))
    events = events_for(plan, T0)
    span_ms = events[-1]["t"] - T0
    step = 1000.0 / args.hz
    t = np.round(np.arange(T0 - 5000, T0 + span_ms + 5000, step)).astype(np.int64)
    rng = np.random.default_rng(1)
    data: dict[tuple[str, str], Series] = {}
    specs = []
    for i in range(args.channels):
        dev, ch = f"rack{i // 16}", f"psu{i % 16}"
        w = 150.0 + 20.0 * np.sin(t / 7.0e4 + i) + rng.normal(0, 1.0, t.size)
        u = np.full(t.size, 0.005)
        data[(dev, ch)] = Series(
            dev, ch, t, np.arange(t.size, dtype=np.int64), np.zeros(t.size, np.int64), {"W": w, "u": u}
        )
        specs.append(ChannelSpec(dev, ch, node=f"node{i // 4}", hz=args.hz))
    samples = sum(len(s) for s in data.values())

    def fetch(dev: str, ch: str, start: int, end: int, fields: tuple[str, ...]) -> Series:
        # A store hands back fresh arrays for the range asked; slicing views would flatter the figure.
        s = data[(dev, ch)]
        i0, i1 = np.searchsorted(s.t_ms, [start, end + 1])
        return Series(dev, ch, s.t_ms[i0:i1].copy(), s.seq[i0:i1].copy(), s.flags[i0:i1].copy(),
                      {f: s.values[f][i0:i1].copy() for f in fields if f in s.values})  # fmt: skip

    # rack1's clock steps +500 ms half-way through; the first reading after it carries the flag.
    mid = T0 + span_ms // 2
    for ch in range(16):
        s = data[("rack1", f"psu{ch}")]
        k = int(np.searchsorted(s.t_ms, mid + 620))
        s.flags[k] = 8
    health = [
        {
            "t": h,
            "collector": "c",
            "offset_ms": -(120.0 if h < mid + 2000 else 620.0),
            "clk_steps": int(h >= mid + 2000),
        }
        for h in range(T0 - 60_000, T0 + span_ms + 60_000, 5000)
    ]
    cases = {
        "constant offsets": {"rack1": 120.0},
        "rack1 clock stepped mid-run": {"rack1": ClockTrack.from_health(health)},
    }
    print(
        f"run: {span_ms / 3.6e6:.2f} h, {args.channels} channels at {args.hz:g} Hz, {samples:,} samples, 14 windows"
    )
    # A server's rack: under a second. A cluster of 256 nodes with 4 channels each: under 10 s.
    goal_s = 1.0 if args.channels <= 64 else 10.0
    for name, offsets in cases.items():
        times = []
        peak = 0
        for _ in range(args.repeat):
            tracemalloc.start()
            t0 = time.perf_counter()
            ev = evaluate("bench", events, fetch, specs, offsets, now_ms=T0 + span_ms)
            times.append(time.perf_counter() - t0)
            peak = max(peak, tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
        print(
            f"{name}: overall {ev.result['overall']:.3f}, {len(ev.result['levels'])} levels, valid={ev.valid}"
        )
        print(
            f"  align+score+checks: best {min(times):.3f} s, worst {max(times):.3f} s over {args.repeat} runs"
            f" (goal < {goal_s:g} s)"
        )
        print(f"  peak allocated while scoring (tracemalloc): {peak / 2**20:.1f} MB (goal < 500 MB)")
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(f"process peak RSS, data included: {rss_mb:.1f} MB")


if __name__ == "__main__":
    main()
