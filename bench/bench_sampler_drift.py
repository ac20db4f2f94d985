"""Sampler timing drift over 10 000 scheduled samples, compared with one sample period.

Runs the firmware's real Sampler (deadline scheduling on the monotonic microsecond counter) on this
host at --hz, recording when each read actually happened, and a naive loop that sleeps one period
after each read (what a "read; sleep(period)" firmware does). Drift is how far the read of sample N
lands from start + N x period; the deadline scheduler's should stay under one period, the naive
loop's grows with N.

    python bench/bench_sampler_drift.py [--hz 1000] [--n 10000]

--unix runs the same Sampler under MicroPython 1.27.0's unix port (32-bit, heap fixed at the esp32
profile's 93,584 bytes; scripts/provision.sh builds it) instead of CPython: per channel count (1, 2
and 4), how late reads begin at --hz for --seconds, and the highest per-channel rate of a ladder at
which at most 0.1 % of the slots are missed (--rung, 3 s). The meter is a stand-in that answers at once, so the figures are
the sampler's own cost on this host's CPU, not a board's: see docs/firmware.md for how they relate to
a 240 MHz ESP32.

    python bench/bench_sampler_drift.py --unix [--hz 10] [--seconds 10] [--rung 3]
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
from pathlib import Path

from wattbench_fw import port
from wattbench_fw.host import HostClock
from wattbench_fw.sampler import Channel, Sampler


class Recorder:
    QUANTITIES = ("W",)

    def __init__(self, mono: port.Mono) -> None:
        self.mono = mono
        self.channel: Channel | None = None
        self.times: list[tuple[int, int]] = []  # (slot, monotonic us at the read)

    def setup(self) -> None:
        pass

    def read(self) -> tuple[dict[str, float], int]:
        assert self.channel is not None
        self.times.append((self.channel.k, self.mono.now()))
        return {"W": 1.0}, 0


class Seq:
    next = 0

    def take(self) -> int:
        self.next += 1
        return self.next - 1


def deadline_run(hz: float, n: int) -> tuple[list[int], int, int]:
    mono = port.Mono()
    rec = Recorder(mono)
    ch = Channel("c", rec, hz)
    rec.channel = ch
    sampler = Sampler([ch], Seq(), HostClock(), mono.now)
    sampler.start()
    rows = 0
    while rows < n:
        rows += len(sampler.poll(limit=n - rows))
        wait = ch.next_due - mono.now()
        if wait > 0:
            port.sleep_us(wait)
    devs = [t - ch.due(k) for k, t in rec.times]
    return devs, ch.missed_slots, len(rec.times)


def naive_run(hz: float, n: int) -> list[int]:
    mono = port.Mono()
    period = 1e6 / hz
    start = mono.now()
    devs = []
    for k in range(n):
        devs.append(mono.now() - start - round(k * period))
        port.sleep_us(int(period))
    return devs


def slope_us_per_sample(devs: list[int]) -> float:
    """Least-squares trend of the deviation, per read."""
    ks = range(len(devs))
    return statistics.linear_regression(ks, devs).slope


def main() -> None:
    from wattbench.argtypes import number, whole
    from wattbench.cli.parser import Parser

    ap = Parser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hz", type=number(above=0), default=1000.0)
    ap.add_argument("--n", type=whole(at_least=2), default=10_000)
    ap.add_argument("--unix", action="store_true", help="time the Sampler on MicroPython's unix port")
    ap.add_argument(
        "--seconds", type=number(above=0), default=10.0, help="--unix: seconds at --hz per channel count"
    )
    ap.add_argument(
        "--rung", type=number(above=0), default=3.0, help="--unix: seconds at each rate of the ladder"
    )
    args = ap.parse_args()
    if args.unix:
        sys.exit(unix_port(args.hz if "--hz" in sys.argv else 10.0, args.seconds, args.rung))
    period = 1e6 / args.hz
    devs, missed, reads = deadline_run(args.hz, args.n)
    naive = naive_run(args.hz, args.n)
    print(f"rate {args.hz:g} Hz, period {period:.1f} us, {args.n} scheduled samples")
    trend = slope_us_per_sample(devs) * args.n
    print("deadline scheduler (firmware):")
    print(
        f"  drift over {args.n} samples (trend of read time minus deadline): {trend:.1f} us = "
        f"{trend / period:.3f} periods -> under one period: {'yes' if abs(trend) < period else 'NO'}"
    )
    print(
        f"  read lateness (scheduling jitter, does not accumulate): median {statistics.median(devs):.0f} us, "
        f"last {devs[-1]} us, max {max(devs)} us"
    )
    print(f"  slots missed because the host was busy (flagged, numbered): {missed} of {missed + reads}")
    print("naive read-then-sleep(period) loop:")
    trend = slope_us_per_sample(naive) * args.n
    print(f"  drift over {args.n} samples: {trend:.0f} us = {trend / period:.1f} periods")


def unix_port(hz: float, seconds: float, rung: float) -> int:
    try:
        from wattbench_devkit import sampler_timing as st
        from wattbench_devkit import unix
    except ImportError as exc:  # a hint on one line, not a traceback
        print(
            f"bench_sampler_drift: {exc}. Install the development kit (in the checkout): python -m pip install -e . -e ./devkit",
            file=sys.stderr,
        )
        return 2

    reason = unix.unix_available()
    if reason:
        print(f"bench_sampler_drift: {reason}", file=sys.stderr)
        return 2
    lib = unix.compile_lib(Path(tempfile.mkdtemp(prefix="wattbench-sampler-")))
    heap = unix.ESP32_HEAP
    print(f"MicroPython {unix.VERSION} unix port, 32-bit, -X heapsize={heap} (the esp32 profile's heap)")
    print("load average before: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    print(
        f"{'channels':>8} {'Hz/ch':>6} {'reads':>7} {'missed':>6} {'late mean':>10} {'late p50':>12} "
        f"{'late p99':>12} {'late max':>9} {'min free B':>10} {'highest sustained Hz/ch':>24}"
    )
    for channels in (1, 2, 4):
        doc = st.timing(lib, hz, channels, seconds, heap)
        best, runs = st.highest_sustained(lib, channels, rung, heap)
        top = f"{best:,.0f}" if best is not None else "none"
        if runs and not st.sustained(runs[-1]):
            top += f" ({runs[-1]['missed']} of {runs[-1]['slots']} missed at {runs[-1]['hz']:,.0f})"
        print(
            f"{channels:>8} {hz:>6g} {doc['reads']:>7} {doc['missed']:>6} {doc['late_mean_us']:>7.0f} us "
            f"{st.percentile(doc, 0.5):>12} {st.percentile(doc, 0.99):>12} {doc['late_max_us']:>6} us "
            f"{doc['heap_free_min']:>10} {top:>24}"
        )
    print("load average after: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    return 0


if __name__ == "__main__":
    main()
