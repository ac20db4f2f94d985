"""The paced level's arrival stream (workloads/builtin/arrivals.py), alone: every gap is exponential, a
window's count varies far less than independent Poisson gaps allow, every process that holds the stream
computes the same gaps, and a claim drops what is before the window or too far behind. Pure arithmetic
on a fixed seed, plus one two-process check that the stream is served once."""

from __future__ import annotations

import math
import multiprocessing as mp
import random
import statistics

import pytest

from wattbench.workloads.builtin.arrivals import BLOCK, MAX_LAG_S, ArrivalStream, StratifiedGaps, max_lag_s


def test_each_gap_is_unit_exponential() -> None:
    gaps = [StratifiedGaps(3).unit(k) for k in range(BLOCK * 200)]
    assert statistics.fmean(gaps) == pytest.approx(1.0, abs=0.01)
    # Kolmogorov-Smirnov distance against 1 - exp(-x): 12,800 draws, the 1 % critical value is ~0.0144.
    xs = sorted(gaps)
    n = len(xs)
    d = max(max((i + 1) / n - (1 - math.exp(-x)), (1 - math.exp(-x)) - i / n) for i, x in enumerate(xs))
    assert d < 0.0144


def test_a_block_is_one_draw_per_slice_and_shuffled() -> None:
    gaps = StratifiedGaps(5).block(0)
    slices = sorted(int((1 - math.exp(-g)) * BLOCK) for g in gaps)
    assert slices == list(range(BLOCK))
    assert gaps != sorted(gaps)


def test_the_count_in_a_window_varies_far_less_than_poisson() -> None:
    # 6,000 arrivals a window (the demo's 10 % level): Poisson counts spread by 1/sqrt(6000) = 1.3 %.
    rate, window, windows = 600.0, 10.0, 200
    strat = StratifiedGaps(11)
    rng = random.Random(11)
    counts_s, counts_p, k = [], [], 0
    t_s = t_p = 0.0
    for w in range(windows):
        end = (w + 1) * window
        c_s = c_p = 0
        while True:
            nxt = t_s + strat.unit(k) / rate
            if nxt >= end:
                break
            t_s, k, c_s = nxt, k + 1, c_s + 1
        while True:
            nxt = t_p + rng.expovariate(rate)
            if nxt >= end:
                break
            t_p, c_p = nxt, c_p + 1
        counts_s.append(c_s)
        counts_p.append(c_p)
    target = rate * window
    spread_s = statistics.pstdev(counts_s) / target
    spread_p = statistics.pstdev(counts_p) / target
    assert 0.009 < spread_p < 0.017
    assert spread_s < 0.004
    # The worst window of 200 stays well inside the ±2 % check.
    assert max(abs(c - target) for c in counts_s) / target < 0.01


def test_every_holder_of_the_seed_computes_the_same_gaps() -> None:
    a, b = StratifiedGaps(42), StratifiedGaps(42)
    forward = [a.unit(k) for k in range(300)]
    # b jumps around: a later block, then back; it must agree gap for gap.
    assert b.unit(250) == forward[250]
    assert [b.unit(k) for k in range(300)] == forward
    assert StratifiedGaps(43).unit(0) != forward[0]


def test_claims_walk_the_stream_in_order() -> None:
    s = ArrivalStream(mp.get_context("spawn"), seed=1)
    assert s.claim(0.0) is None  # not started
    s.start(rate=100.0, now=10.0)
    gaps = StratifiedGaps(1)
    due = [s.claim(10.0) for _ in range(5)]
    expect, t = [], 10.0
    for k in range(5):
        t += gaps.unit(k) / 100.0
        expect.append(t)
    assert due == pytest.approx(expect)
    s.stop()
    assert s.claim(20.0) is None


def test_a_claim_drops_what_is_before_the_window_or_too_far_behind() -> None:
    s = ArrivalStream(mp.get_context("spawn"), seed=2)
    s.start(rate=1000.0, now=0.0)
    s.open_window(5.0)
    first = s.claim(5.0)
    assert first is not None and 5.0 < first < 5.0 + 0.05  # restarts one gap after the window's start
    # Fall 3 s behind: the next arrival is one gap after now - the lag bound (1 s at 1000/s: 1000
    # arrivals), not the backlog.
    lag = max_lag_s(1000.0)
    assert lag == 1.0
    late = s.claim(9.0)
    assert late is not None and 9.0 - lag < late < 9.0 - lag + 0.05
    # Within the lag the stream keeps its own times.
    nxt = s.claim(late + 0.1)
    assert nxt is not None and late < nxt < late + 0.05


def test_a_window_counts_what_it_did_not_serve_and_nothing_from_before_it() -> None:
    """At a target load a window's count is its arrivals less the unserved ones, so a level short of
    its target can say the machine fell behind (the drops of the lag bound and the queue at its end)."""
    rate = 1000.0
    s = ArrivalStream(mp.get_context("spawn"), seed=3)
    s.start(rate=rate, now=0.0)
    s.open_window(5.0)
    # Five seconds of arrivals before the window never belonged to it.
    assert s.unserved(5.0) == 0
    first = s.claim(5.0)
    assert first is not None
    # Nothing claimed for 0.5 s: every arrival due by then is queued, about 500 of them, exactly as
    # many as the claims then walk through.
    queued = s.unserved(5.5)
    assert 450 < queued < 550
    walked = 0
    while (due := s.claim(5.5)) is not None and due <= 5.5:
        walked += 1
    assert walked == queued
    # Served, they are no longer unserved (the claim past 5.5 is held, not yet due).
    assert s.unserved(5.5) == 0
    # Fall behind to 8.0: the lag bound (1 s) drops the arrivals from 5.5 to 7.0, about 1500, which
    # stay counted once the workers are back at the head of the stream.
    head = s.claim(8.0)
    assert head is not None and 7.0 < head < 7.05
    assert 1450 < s.unserved(head) < 1550
    # A new window starts its count again.
    s.open_window(9.0)
    s.claim(9.0)
    assert s.unserved(9.0) == 0


@pytest.mark.parametrize("speed", [0.95, 0.85, 0.6])
def test_a_server_that_keeps_falling_behind_accounts_for_every_arrival(speed: float) -> None:
    """A machine slower than the level for the whole window: the lag bound drops arrivals claim after
    claim, and served plus unserved must still be the window's arrivals. Each drop counted the span
    it skipped from the rate but not the due arrival it started from, so a demo's 80 % level that fell
    behind reported 95 % of its arrivals (served 67.7 % of calibrated, 10.8 % unserved)."""
    rate, span = 5000.0, 10.0  # the lag bound is 0.25 s: even 5 % behind reaches it mid-window
    s = ArrivalStream(mp.get_context("spawn"), seed=5)
    s.start(rate=rate, now=0.0)
    window = 3.0
    s.open_window(window)
    end = window + span
    now, served = window, 0
    while True:
        due = s.claim(now)
        assert due is not None
        now = max(now, due) + 1.0 / (rate * speed)  # one server, exactly `speed` of the rate
        if now > end:
            break
        served += 1
    arrivals = rate * span
    assert served < speed * arrivals * 1.01
    assert served + s.unserved(end) == pytest.approx(arrivals, rel=0.01)


def test_calibration_counts_nothing_unserved() -> None:
    s = ArrivalStream(mp.get_context("spawn"), seed=4)
    s.start(rate=math.inf, now=0.0)
    s.open_window(1.0)
    for now in (1.0, 1.5, 3.0):
        s.claim(now)
    assert s.unserved(3.0) == 0


def test_the_lag_bound_is_a_time_for_fast_streams_and_a_count_for_slow_ones() -> None:
    """A slow op's backlog at 100 % walks for seconds; a bound in time alone dropped the walk's peaks
    and left a slow worklet's 100 % level 2-4 % short of its target."""
    assert max_lag_s(100_000.0) == MAX_LAG_S  # the transaction mix, hashes: a quarter second
    assert max_lag_s(500.0) == pytest.approx(2.0)  # compress: 1000 arrivals
    assert max_lag_s(math.inf) == MAX_LAG_S  # calibration


def _claim_many(stream: ArrivalStream, n: int, out: mp.Queue) -> None:
    got = []
    while len(got) < n:
        t = stream.claim(0.0)
        if t is not None:
            got.append(t)
    out.put(got)


def test_two_processes_share_one_stream_and_never_serve_an_arrival_twice() -> None:
    ctx = mp.get_context("spawn")
    s = ArrivalStream(ctx, seed=9)
    s.start(rate=1.0, now=0.0)  # far in the future at now=0: nothing is dropped
    out: mp.Queue = ctx.Queue()
    procs = [ctx.Process(target=_claim_many, args=(s, 500, out)) for _ in range(2)]
    for p in procs:
        p.start()
    got = out.get(timeout=60) + out.get(timeout=60)
    for p in procs:
        p.join(timeout=30)
    gaps = StratifiedGaps(9)
    t, expect = 0.0, []
    for k in range(1000):
        t += gaps.unit(k)
        expect.append(t)
    assert sorted(got) == pytest.approx(expect)
