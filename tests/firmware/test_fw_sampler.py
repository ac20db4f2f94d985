"""Sampler: deadline scheduling without drift, missed slots numbered and flagged, aggregation,
calibration and the rule that nothing is made up."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from wattbench_fw import contract
from wattbench_fw.errors import CRCError, NoReply
from wattbench_fw.sampler import MAX_CATCHUP_SLOTS, Channel, Sampler, clean, rate_millihz

EPOCH_US = 1_763_709_600_000_000


class FakeTime:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


class Seq:
    def __init__(self) -> None:
        self.next = 0

    def take(self) -> int:
        self.next += 1
        return self.next - 1


class FixedClock:
    """UTC = epoch + monotonic; never unsynced."""

    def __init__(self, known: bool = True) -> None:
        self.known = known
        self.pending: list[int] = []

    def utc_us(self, mono: int) -> int | None:
        return EPOCH_US + mono if self.known else None

    def sample_flags(self) -> int:
        return self.pending.pop(0) if self.pending else 0


class Script:
    """Driver returning scripted results; each read can also advance fake time."""

    QUANTITIES = ("W", "V")

    def __init__(self, t: FakeTime, results: list[Any] | None = None, cost_us: int = 0) -> None:
        self.t = t
        self.results = list(results or [])
        self.cost_us = cost_us
        self.reads = 0

    def setup(self) -> None:
        pass

    def read(self) -> tuple[dict[str, float], int]:
        self.reads += 1
        self.t.now += self.cost_us
        if self.results:
            r = self.results.pop(0)
            if isinstance(r, Exception):
                raise r
            return r
        return {"W": 100.0 + self.reads, "V": 230.0}, 0


def make(hz: float = 10, agg: int = 1, results: list[Any] | None = None, cost_us: int = 0, **kw: Any):
    t = FakeTime()
    drv = Script(t, results, cost_us)
    ch = Channel("psu1", drv, hz, agg, **kw)
    s = Sampler([ch], Seq(), FixedClock(), t)
    s.start()
    return t, ch, s


def test_deadlines_do_not_drift_over_10000_samples() -> None:
    t, ch, s = make(hz=7)  # 142857.142... us: not a whole number of microseconds
    rng = random.Random(1)
    rows = []
    while len(rows) < 10_000:
        # the loop wakes up late by up to half a period, and reads take time
        t.now = ch.next_due + rng.randrange(0, 70_000)
        rows += s.poll()
    assert [r["s"] for r in rows] == list(range(len(rows)))
    assert all("f" not in r for r in rows)
    # slot k is due at k/7 s exactly; sample 10000 is due exactly 10000/7 s after start
    assert ch.due(10_000) == 10_000 * 1_000_000_000 // 7_000
    assert abs(ch.next_due - ch.due(len(rows))) == 0


def test_non_integer_rates_are_exact() -> None:
    assert rate_millihz(0.5) == 500 and rate_millihz(1000) == 1_000_000
    _, ch, _ = make(hz=0.5)
    assert ch.due(3) == 6_000_000
    with pytest.raises(ValueError):
        rate_millihz(0)


def test_timestamps_are_read_midpoints() -> None:
    t, _ch, s = make(hz=10, cost_us=20_000)
    t.now = 0
    (row,) = s.poll()
    assert row["t"] == (EPOCH_US + 10_000) // 1000  # half-way through the 20 ms read


def test_overrun_skips_and_flags_slots_with_sequence_numbers() -> None:
    t, ch, s = make(hz=10)
    t.now = 0
    rows = s.poll()
    t.now = 350_000  # the loop stalled for 3.5 periods
    rows += s.poll()
    seqs = [r["s"] for r in rows]
    assert seqs == [0, 1, 2, 3]
    assert [r.get("f", 0) for r in rows] == [0, contract.FLAG_MISSED, contract.FLAG_MISSED, 0]
    assert set(rows[1]) == {"s", "t", "c", "f"}  # missed: no values invented
    assert rows[1]["t"] == (EPOCH_US + 100_000) // 1000  # stamped at its scheduled time
    assert ch.missed_slots == 2 and ch.reads == 2


def test_very_long_stall_restarts_the_schedule() -> None:
    t, ch, s = make(hz=1000)
    s.poll()
    t.now = (MAX_CATCHUP_SLOTS + 500) * 1000 + 10
    rows = s.poll(limit=10_000)
    assert len(rows) == 1 and ch.lost_slots > MAX_CATCHUP_SLOTS
    assert ch.next_due > t.now


def test_meter_errors_become_flags() -> None:
    results = [NoReply("x"), CRCError("x"), OSError(5), ValueError("driver bug"), ({"W": 1.0}, 0)]
    t, ch, s = make(hz=10, results=results)
    rows = []
    for _ in range(5):
        rows += s.poll()
        t.now = ch.next_due
    assert [r.get("f") for r in rows] == [
        contract.FLAG_MISSED,
        contract.FLAG_CRC,
        contract.FLAG_MISSED,
        contract.FLAG_SENSOR_ERROR,
        None,
    ]
    assert all(set(r) == {"s", "t", "c", "f"} for r in rows[:4])


def test_aggregation_mean_min_max() -> None:
    reads = [({"W": w, "V": 12.0, "A": w / 12}, 0) for w in (10.0, 20.0, 30.0, 40.0)]
    t, ch, s = make(hz=10, agg=4, results=reads)
    rows = []
    while not rows:
        rows += s.poll()
        t.now = ch.next_due
    (row,) = rows
    assert row["W"] == 25.0 and row["Wmin"] == 10.0 and row["Wmax"] == 40.0 and row["n"] == 4
    assert row["t"] == (EPOCH_US + (0 + 75_000) // 2) // 1000  # window midpoint
    assert "f" not in row


def test_aggregation_partial_and_empty_windows() -> None:
    reads = [
        ({"W": 10.0}, 0),
        NoReply("x"),
        ({"W": 30.0}, 0),
        ({"W": 20.0}, 0),
        NoReply("x"),
        CRCError("x"),
        NoReply("x"),
        NoReply("x"),
    ]
    t, ch, s = make(hz=10, agg=4, results=reads)
    rows = []
    while len(rows) < 2:
        rows += s.poll()
        t.now = ch.next_due
    assert rows[0]["n"] == 3 and rows[0]["W"] == 20.0 and rows[0]["f"] == contract.FLAG_PARTIAL
    assert rows[1]["f"] == contract.FLAG_MISSED | contract.FLAG_CRC and "W" not in rows[1]
    assert [r["s"] for r in rows] == [0, 1]


def test_clean_applies_calibration_and_rounds() -> None:
    vals, flags = clean(
        {"W": 100.0, "Wmin": 90.0, "Wmax": 110.0, "n": 3, "V": 229.99999}, 0, gain=1.01, offset=-0.5
    )
    assert flags == 0
    assert vals == {"W": 100.5, "Wmin": 90.4, "Wmax": 110.6, "n": 3, "V": 230.0}


@pytest.mark.parametrize(
    ("vals", "expect_vals", "expect_flags"),
    [
        ({"W": math.nan, "V": 230.0}, {"V": 230.0}, contract.FLAG_OVER_RANGE),
        ({"W": math.inf}, {}, contract.FLAG_OVER_RANGE),
        ({"W": 2e7, "V": 230.0}, {"V": 230.0}, contract.FLAG_OVER_RANGE),
        ({"W": -3.0, "A": 0.01, "V": 12.0, "u": 0.01}, {"V": 12.0}, contract.FLAG_REVERSE),
        ({"PF": 1.5, "W": 10.0}, {"W": 10.0}, contract.FLAG_OVER_RANGE),
        ({"RH": 101.0}, {}, contract.FLAG_OVER_RANGE),
        ({"u": 0.01}, {}, contract.FLAG_SENSOR_ERROR),  # no quantity at all
        ({}, {}, contract.FLAG_SENSOR_ERROR),
    ],
)
def test_clean_never_invents_values(
    vals: dict[str, float], expect_vals: dict[str, float], expect_flags: int
) -> None:
    assert clean(vals, 0) == (expect_vals, expect_flags)


def test_flag_without_values_drops_everything() -> None:
    assert clean({"W": 1.0}, contract.FLAG_CRC) == ({}, contract.FLAG_CRC)


def test_clock_flags_and_unknown_time() -> None:
    t = FakeTime()
    ch = Channel("psu1", Script(t), 10)
    clock = FixedClock(known=False)
    s = Sampler([ch], Seq(), clock, t)
    s.start()
    clock.pending = [contract.FLAG_UNSYNCED | contract.FLAG_CLOCK_STEP]
    rows = s.poll()
    assert rows[0]["t"] is None and rows[0]["_m"] == 0 and rows[0]["f"] == 24
    assert not s.resolve_pending(rows)
    clock.known = True
    assert s.resolve_pending(rows)
    assert rows[0]["t"] == EPOCH_US // 1000 and "_m" not in rows[0]


def test_two_channels_share_one_sequence_in_time_order() -> None:
    t = FakeTime()
    a = Channel("a", Script(t), 10)
    b = Channel("b", Script(t), 5)
    s = Sampler([a, b], Seq(), FixedClock(), t)
    s.start()
    rows = []
    for step in range(0, 1_000_001, 50_000):
        t.now = step
        rows += s.poll()
    assert [r["s"] for r in rows] == list(range(len(rows)))
    assert [r["t"] for r in rows] == sorted(r["t"] for r in rows)
    assert sum(r["c"] == "a" for r in rows) == 11 and sum(r["c"] == "b" for r in rows) == 6


def test_failed_setup_is_retried_and_flagged() -> None:
    class Flaky(Script):
        tries = 0

        def setup(self) -> None:
            Flaky.tries += 1
            if Flaky.tries < 3:
                raise OSError(19)

    t = FakeTime()
    ch = Channel("x", Flaky(t), 10)
    s = Sampler([ch], Seq(), FixedClock(), t)
    s.start()
    rows = []
    for _ in range(3):
        rows += s.poll()
        t.now = ch.next_due
    assert [r.get("f") for r in rows] == [contract.FLAG_SENSOR_ERROR, None, None]


def test_late_allowance_reads_late_instead_of_missing() -> None:
    t = FakeTime()
    ch = Channel("x", Script(t), 1000, max_late_us=50_000)
    s = Sampler([ch], Seq(), FixedClock(), t)
    s.start()
    t.now = 3_500  # 3.5 periods late, well inside the 50 ms allowance
    rows = s.poll()
    assert len(rows) == 4 and all("f" not in r and "W" in r for r in rows)
    # The real read time, not the deadlines; reads in one millisecond are spread 1 ms apart so that
    # (dev, ch, t) stays unique in storage.
    first = (EPOCH_US + 3_500) // 1000
    assert [r["t"] for r in rows] == [first, first + 1, first + 2, first + 3]
    t.now = 100_000  # beyond the allowance: those slots are missed
    rows = s.poll(limit=1000)
    # slots due at 4..50 ms are more than 50 ms old: missed; 51..100 ms are read late
    assert sum(r.get("f") == contract.FLAG_MISSED for r in rows) == 47
    assert sum("W" in r for r in rows) == 50
    assert ch.next_due > t.now - 50_000


def test_timestamps_of_a_channel_strictly_increase_and_backward_steps_are_flagged() -> None:
    t = FakeTime()
    ch = Channel("x", Script(t), 10)
    s = Sampler([ch], Seq(), FixedClock(), t)
    s.start()
    # a late read whose midpoint passed the next deadline, then that next slot read on time
    assert ch.stamp(1000, 0) == (1000, 0)
    assert ch.stamp(999, 0) == (1001, 0), "a small inversion is nudged after the previous sample"
    assert ch.stamp(1001, 0) == (1002, 0)
    # the clock stepped back by 2 s: true time kept, flagged until it passes the last issued time
    assert ch.stamp(-998, 0) == (-998, 8)
    assert ch.stamp(950, 0) == (950, 8), "still in the overlap: flagged, not nudged"
    assert ch.stamp(1002, 0) == (1002, 8)
    assert ch.stamp(1003, 0) == (1003, 0)
    assert ch.stamp(1003, 0) == (1004, 0), "jitter after the overlap is nudged again"
