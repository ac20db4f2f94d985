"""Sampler timing drift over 10 000 scheduled samples, compared with one sample period.

Runs the firmware's real Sampler (deadline scheduling on the monotonic microsecond counter) on this
host at --hz, recording when each read actually happened, and a naive loop that sleeps one period
after each read (what a "read; sleep(period)" firmware does). Drift is how far the read of sample N
lands from start + N x period; the deadline scheduler's should stay under one period, the naive
loop's grows with N.

    python bench/bench_sampler_drift.py [--hz 1000] [--n 10000]
"""

from __future__ import annotations

import statistics

from wattbench_fw import port
from wattbench_fw.clock import HostClock
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
    from wattbench.cli.options import Parser

    ap = Parser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hz", type=number(above=0), default=1000.0)
    ap.add_argument("--n", type=whole(at_least=2), default=10_000)
    args = ap.parse_args()
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


if __name__ == "__main__":
    main()
