"""Per-device accounting: gaps, duplicates, late arrivals, reboots, clock offset, rate."""

from __future__ import annotations

import json
import random
import time

from hypothesis import given, settings
from hypothesis import strategies as st

import wattbench_schema as contract
from wattbench.ingest.accounting import DeviceAccount
from wattbench.ingest.pipeline import Pipeline
from wattbench.ingest.seqtrack import MAX_HOLES, SeqTracker

T0 = 1_763_760_000_000


def batch(seqs: list[int], boot: int = 1, step_ms: int = 10, ch: str = "psu1", **extra: object) -> dict:
    rows = [{"s": s, "t": T0 + s * step_ms, "c": ch, "W": 100.0, **extra} for s in seqs]
    return {"v": 1, "dev": "d", "boot": boot, "clk": {"sync": "ntp", "age": 3.0, "err": 2.5}, "samples": rows}


def seqs_of(rows: list[dict]) -> list[int]:
    return [r["s"] for r in rows]


def test_in_order_stream_has_no_gaps_or_duplicates() -> None:
    a = DeviceAccount("d")
    for k in range(10):
        kept, _ = a.admit(batch(list(range(k * 50, k * 50 + 50))), T0 + k * 500 + 520)
        assert len(kept) == 50
    h = a.health()
    assert (h["received"], h["stored"], h["duplicates"], h["gaps"], h["missing"], h["out_of_order"]) == (
        500,
        500,
        0,
        0,
        0,
        0,
    )
    assert a.seq.hole_count() == 0


def test_gap_then_late_fill_then_duplicate() -> None:
    a = DeviceAccount("d")
    a.admit(batch([0, 1, 2]), T0)
    a.admit(batch([6, 7]), T0)  # 3, 4, 5 missing
    assert (a.gaps, a.missing) == (1, 3)
    kept, _ = a.admit(batch([4]), T0)  # arrives late: kept, no longer missing
    assert seqs_of(kept) == [4] and (a.missing, a.out_of_order) == (2, 1)
    kept, _ = a.admit(batch([4, 7, 3]), T0)  # 4 and 7 seen before; 3 fills the hole
    assert seqs_of(kept) == [3] and a.duplicates == 2 and a.missing == 1
    assert a.seq.starts == [5] and a.seq.ends == [5]


def test_whole_batch_redelivered_is_dropped_as_duplicates() -> None:
    a = DeviceAccount("d")
    b = batch(list(range(100)))
    a.admit(b, T0)
    kept, _ = a.admit(b, T0)
    assert kept == [] and a.duplicates == 100 and a.stored == 100


def test_samples_before_the_first_one_seen_are_kept_not_called_duplicates() -> None:
    a = DeviceAccount("d")  # a fresh collector joining a running stream
    a.admit(batch([100, 101]), T0)
    kept, _ = a.admit(batch([50, 51]), T0)  # redelivered older messages
    assert seqs_of(kept) == [50, 51] and a.duplicates == 0 and a.out_of_order == 2


def test_reboot_that_keeps_the_sequence_counts_lost_samples_as_a_gap() -> None:
    a = DeviceAccount("d")
    a.admit(batch([0, 1, 2], boot=1), T0)
    kept, _ = a.admit(batch([5, 6], boot=2), T0)  # 3 and 4 were in RAM when power went
    assert seqs_of(kept) == [5, 6] and a.reboots == 1 and (a.gaps, a.missing) == (1, 2)


def test_reboot_that_restarts_the_sequence_does_not_drop_everything() -> None:
    a = DeviceAccount("d")
    a.admit(batch(list(range(100)), boot=1), T0)
    kept, _ = a.admit(batch([0, 1, 2], boot=2), T0 + 1000)
    assert seqs_of(kept) == [0, 1, 2] and a.seq_resets == 1 and a.duplicates == 0
    kept, _ = a.admit(batch([50], boot=1), T0)  # a late batch from before the reboot: kept
    assert seqs_of(kept) == [50]


def test_energy_counter_going_back_is_reported_in_sequence_order() -> None:
    a = DeviceAccount("d")
    b = batch([0, 1, 2])
    for r, wh in zip(b["samples"], [10.0, 10.5, 9.0], strict=True):
        r["Wh"] = wh
    _, steps = a.admit(b, T0)
    assert len(steps) == 1 and (steps[0].before, steps[0].after, steps[0].seq) == (10.5, 9.0, 2)
    assert "went back" in steps[0].detail()
    late = batch([1])
    late["samples"][0]["Wh"] = 1.0
    _, steps = a.admit(late, T0)  # a duplicate, and older anyway: no judgement from it
    assert steps == []


def test_samples_in_the_same_millisecond_are_counted() -> None:
    a = DeviceAccount("d")
    b = batch([0, 1, 2, 3])
    b["samples"][2]["t"] = b["samples"][1]["t"]
    a.admit(b, T0)
    assert a.t_repeats == 1


def test_clock_offset_and_rate() -> None:
    a = DeviceAccount("d")
    # 100 Hz, batches of 50 sent 40 ms after their newest sample, the device clock 200 ms behind
    for k in range(20):
        seqs = list(range(k * 50, k * 50 + 50))
        newest = T0 + seqs[-1] * 10
        jitter = 0 if k == 7 else random.Random(k).randint(1, 30)
        a.admit(batch(seqs), newest + 200 + 40 + jitter)
    assert a.offset_ms == 240.0
    assert a.rate_hz is not None and abs(a.rate_hz - 100.0) < 1.0
    h = a.health()
    assert h["clk_age"] == 3.0 and h["clk_err"] == 2.5


def _stepping_stream(counted: bool) -> tuple[DeviceAccount, list[float]]:
    """10 Hz, 1 s batches received 30 ms after their newest sample; the device clock steps 2 s ahead
    after batch 5 and back after batch 40. Returns the offset estimate after every batch."""
    a = DeviceAccount("d")
    estimates = []
    ahead = 0
    steps = 0
    newest_t = None
    for k in range(60):
        if k in (5, 40):
            ahead = 2000 if k == 5 else 0
            steps += 1
        seqs = list(range(k * 10, k * 10 + 10))
        host = [T0 + s * 100 for s in seqs]
        rows = [{"s": s, "t": h + ahead, "c": "psu1", "W": 100.0} for s, h in zip(seqs, host, strict=True)]
        if k in (5, 40):
            for r in rows:
                if r is rows[0] or (newest_t is not None and r["t"] <= newest_t):
                    r["f"] = 8  # the firmware's clock_step flag: the first row after a step and any overlap
        newest_t = max([r["t"] for r in rows] + ([newest_t] if newest_t is not None else []))
        clk: dict = {"sync": "ntp", "age": 3.0}
        if counted and steps:
            clk["steps"] = steps
        doc = {"v": 1, "dev": "d", "boot": 1, "clk": clk, "samples": rows}
        a.admit(doc, host[-1] + 30)
        estimates.append(a.offset_ms)
    return a, estimates


def test_clock_step_restarts_the_offset_estimate() -> None:
    for counted in (True, False):
        a, est = _stepping_stream(counted)
        # Right after each step the estimate is the new clock's, not the minimum over the old one's.
        assert est[4] == 30.0 and est[5] == -1970.0 and est[39] == -1970.0, counted
        assert est[40] == 30.0 and est[59] == 30.0, counted
        assert a.steps_seen == 2 and a.health()["clk_steps"] == 2, counted


def test_shared_mode_keeps_dedup_but_reports_no_gaps() -> None:
    a = DeviceAccount("d", track_gaps=False)
    a.admit(batch([0, 1]), T0)
    a.admit(batch([10, 11]), T0)  # the messages in between went to the other collector
    kept, _ = a.admit(batch([0, 5]), T0)
    assert seqs_of(kept) == [5] and a.duplicates == 1
    assert "gaps" not in a.health() and "missing" not in a.health()


def test_state_round_trip_continues_the_count() -> None:
    a = DeviceAccount("d")
    a.admit(batch([0, 1, 2, 7, 8]), T0)
    b = DeviceAccount.from_state(a.state())
    kept, _ = b.admit(batch([8, 3, 9]), T0)
    assert seqs_of(kept) == [3, 9] and b.duplicates == 1 and b.missing == 3 and b.received == 8


def test_state_round_trip_keeps_channels_and_clock_steps() -> None:
    a = DeviceAccount("d")
    first = batch([0, 1], Wh=5.0)
    first["clk"]["steps"] = 1
    a.admit(first, T0)
    stepped = batch([2, 3], Wh=5.0)
    stepped["clk"]["steps"] = 2
    a.admit(stepped, T0 + 1000)
    assert a.steps_seen == 1
    b = DeviceAccount.from_state(json.loads(json.dumps(a.state())))
    # The channel's energy is remembered: a counter going back after the restart is still caught.
    same = batch([4], Wh=4.0)
    same["clk"]["steps"] = 2
    _, steps = b.admit(same, T0 + 2000)
    assert len(steps) == 1 and b.steps_seen == 1
    # A step made while the collector was down shows as the device's own count moving on, and the
    # count in wb_health goes on from where it was.
    later = batch([5])
    later["clk"]["steps"] = 3
    b.admit(later, T0 + 3000)
    assert b.steps_seen == 2 and b.health()["clk_steps"] == 2


def test_state_from_an_older_collector_is_read() -> None:
    a = DeviceAccount("d")
    a.admit(batch([0, 1], Wh=5.0), T0)
    doc = json.loads(json.dumps(a.state()))
    doc["channels"] = {ch: v[:3] for ch, v in doc["channels"].items()}  # before the flag was kept
    del doc["dev_steps"], doc["clk_steps"]
    b = DeviceAccount.from_state(doc)
    _, steps = b.admit(batch([2], Wh=4.0), T0 + 1000)
    assert len(steps) == 1 and b.steps_seen == 0


def test_hole_list_is_bounded_and_forgotten_holes_never_drop_data() -> None:
    t = SeqTracker()
    t.high = 0
    for k in range(MAX_HOLES + 10):
        t.add_hole(2 * k + 1, 2 * k + 1)
    assert t.hole_count() == MAX_HOLES and t.floor > 0
    a = DeviceAccount("d")
    a.seq = t
    a.seq.high = 2 * (MAX_HOLES + 10)
    kept, _ = a.admit(batch([1]), T0)  # below the floor: unknown, kept
    assert seqs_of(kept) == [1]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 300), min_size=1, max_size=400), st.randoms(use_true_random=False))
def test_every_sequence_number_is_kept_exactly_once_whatever_the_order(
    seqs: list[int], rnd: random.Random
) -> None:
    """Property: whatever the arrival order and duplication, the rows kept are each distinct
    sequence number exactly once, and missing counts the holes still open below the highest seen."""
    a = DeviceAccount("d")
    kept_all: list[int] = []
    i = 0
    while i < len(seqs):
        n = rnd.randint(1, 20)
        kept, _ = a.admit(batch(seqs[i : i + n]), T0)
        kept_all += seqs_of(kept)
        i += n
    first = seqs[0]
    # every sequence number is kept; only those below the first one seen (history the collector
    # never saw) may be kept more than once, and the store's idempotent keys absorb that
    assert set(kept_all) == set(seqs)
    above = [s for s in kept_all if s >= first]
    assert len(above) == len(set(above))
    assert a.duplicates == len([s for s in seqs if s >= first]) - len(set(above))
    expected_missing = len(set(range(first, max(seqs) + 1)) - set(seqs))
    assert a.missing == expected_missing


def test_saved_state_keeps_the_newest_holes_and_stays_safe() -> None:
    a = DeviceAccount("d")
    a.admit(batch(list(range(0, 6000, 2))), T0)  # every odd number missing: 2999 holes
    b = DeviceAccount.from_state(a.state())
    assert b.seq.hole_count() == 1000
    # 1: in a forgotten hole, kept unjudged; 5999: new; 5997: fills a kept hole; 5998: seen before
    kept, _ = b.admit(batch([1, 5999, 5997, 5998]), T0)
    assert seqs_of(kept) == [1, 5999, 5997] and b.duplicates == 1  # 5998 was seen


def shutdown(boot: int, seq: int) -> dict:
    """The retained status a clean stop publishes: `seq` is the next number that boot would have used."""
    return {"v": 1, "dev": "d", "state": "offline", "reason": "shutdown", "boot": boot, "seq": seq}


def test_clean_restart_jump_to_the_next_reserved_block_is_not_a_loss() -> None:
    a = DeviceAccount("d")
    a.admit(batch(list(range(57)), boot=1), T0)
    a.note_status(shutdown(1, 57))
    # The new boot starts at the next reserved block: 57..99 were never handed out.
    kept, _ = a.admit(batch([100, 101], boot=2), T0 + 5000)
    assert seqs_of(kept) == [100, 101] and a.reboots == 1
    assert (a.gaps, a.missing, a.unassigned) == (0, 0, 43)
    assert a.seq.hole_count() == 0


def test_clean_restart_announced_after_the_jump_is_still_not_a_loss() -> None:
    a = DeviceAccount("d")
    a.admit(batch(list(range(57)), boot=1), T0)
    a.admit(batch([100, 101], boot=2), T0 + 5000)
    assert (a.gaps, a.missing) == (1, 43)  # nothing says yet where boot 1 stopped
    a.note_status(shutdown(1, 57))
    assert (a.gaps, a.missing, a.unassigned) == (0, 0, 43)
    b = DeviceAccount.from_state(json.loads(json.dumps(a.state())))
    assert (b.gaps, b.missing, b.unassigned, b.seq.hole_count()) == (0, 0, 43, 0)


def test_clean_restart_with_samples_still_in_flash_counts_only_those_until_they_arrive() -> None:
    a = DeviceAccount("d")
    a.admit(batch(list(range(50)), boot=1), T0)
    a.note_status(shutdown(1, 57))  # 50..56 were written to flash at the stop
    a.admit(batch([100, 101], boot=2), T0 + 5000)
    assert (a.gaps, a.missing, a.unassigned) == (1, 7, 43)
    kept, _ = a.admit(batch(list(range(50, 57)), boot=1), T0 + 5100)  # sent after the restart
    assert seqs_of(kept) == list(range(50, 57)) and a.duplicates == 0
    assert (a.gaps, a.gaps_filled, a.missing) == (1, 1, 0)
    assert a.summary()["gaps_open"] == 0


def test_power_cut_without_a_shutdown_status_still_counts_the_jump() -> None:
    # Nothing tells how far the cut boot got, so the jump stays missing (an upper bound).
    a = DeviceAccount("d")
    a.admit(batch(list(range(57)), boot=1), T0)
    a.note_status({"v": 1, "dev": "d", "state": "offline"})  # the last will: no seq
    a.admit(batch([100], boot=2), T0 + 5000)
    assert (a.gaps, a.missing, a.unassigned) == (1, 43, 0)


def test_gaps_filled_later_are_told_apart_from_open_ones() -> None:
    a = DeviceAccount("d")
    a.admit(batch([0, 1]), T0)
    a.admit(batch([5, 6]), T0)  # hole 2..4
    a.admit(batch([9]), T0)  # hole 7..8
    a.admit(batch([3]), T0)  # splits the first hole: still open
    assert (a.gaps, a.gaps_filled, a.summary()["gaps_open"]) == (2, 0, 2)
    a.admit(batch([4, 2]), T0)
    assert (a.gaps, a.gaps_filled, a.summary()["gaps_open"], a.missing) == (2, 1, 1, 2)
    h = a.health()
    assert (h["gaps"], h["gaps_filled"]) == (2, 1)
    b = DeviceAccount.from_state(json.loads(json.dumps(a.state())))
    b.admit(batch([7, 8]), T0)
    assert (b.gaps, b.gaps_filled, b.summary()["gaps_open"], b.missing) == (2, 2, 0, 0)


def test_rate_is_not_inflated_by_late_batches() -> None:
    a = DeviceAccount("d")
    # 100 Hz in batches of 50; batches 5..9 are held back (an outage) and arrive after batch 19.
    order = [k for k in range(20) if not 5 <= k <= 9] + list(range(5, 10))
    for k in order:
        seqs = list(range(k * 50, k * 50 + 50))
        a.admit(batch(seqs), T0 + 20 * 500 + 40)
        assert a.rate_hz is None or abs(a.rate_hz - 100.0) < 1.0, (k, a.rate_hz)
    assert a.rate_hz is not None and abs(a.rate_hz - 100.0) < 1.0


def test_rate_restarts_at_a_reboot_rather_than_count_the_skipped_block() -> None:
    a = DeviceAccount("d")
    a.admit(batch(list(range(0, 50))), T0)
    a.admit(batch(list(range(50, 100))), T0)
    for first in (1000, 1050):
        after = batch(list(range(first, first + 50)), boot=2)
        for r in after["samples"]:
            r["t"] = T0 + (r["s"] - 900) * 10  # the clock went on; the numbers jumped
        a.admit(after, T0)
    assert a.rate_hz is not None and abs(a.rate_hz - 100.0) < 1.0


def test_pipeline_hands_the_shutdown_status_to_the_account() -> None:
    now = int(time.time() * 1000)  # the validator refuses batches too far from the receive time
    p = Pipeline("c1")

    def samples(boot: int, seqs: list[int]) -> bytes:
        rows = [{"s": s, "t": now - 1000 + s, "c": "psu1", "W": 1.0} for s in seqs]
        return contract.dumps({"v": 1, "dev": "d", "boot": boot, "clk": {"sync": "ntp"}, "samples": rows})

    p.handle("wattbench/v1/dev/d/samples", samples(1, [0, 1, 2]), now)
    bye = {"v": 1, "dev": "d", "state": "offline", "reason": "shutdown", "boot": 1, "seq": 3, "t": now}
    p.handle("wattbench/v1/dev/d/status", contract.dumps(bye), now)
    p.handle("wattbench/v1/dev/d/samples", samples(2, [10, 11]), now)
    acct = p.accounts.devices["d"]
    assert (acct.gaps, acct.missing, acct.unassigned, acct.reboots) == (0, 0, 7, 1)
    assert p.rejected == 0


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(1, 120), st.booleans(), st.booleans(), st.sets(st.integers(1, 119), max_size=30)
        ),
        min_size=1,
        max_size=5,
    )
)
def test_restarts_count_only_what_was_handed_out_and_lost(
    boots: list[tuple[int, bool, bool, set[int]]],
) -> None:
    """Property, on the firmware's own reservation scheme (persist.Sequence, block 50): after any mix of
    clean stops (whose status arrives before or after the next boot's first batch) and power cuts,
    `missing` is what was handed out and never arrived plus, after each power cut, the rest of the
    block (nothing says it was not handed out); `unassigned` is the rest of the block after each clean
    stop. Each boot's first sample arrives (otherwise its first number is not known)."""
    last_boot = len(boots)
    block = 50
    mark = 0
    messages: list[tuple[str, object]] = []
    expected_missing = expected_unassigned = 0
    pending_status: dict | None = None
    prev_end, prev_clean = 0, False
    for b, (n, clean, status_late, lost) in enumerate(boots, start=1):
        nxt = mark
        mark = nxt + block
        numbers = []
        for _ in range(n):
            numbers.append(nxt)
            nxt += 1
            if nxt >= mark:
                mark = nxt + block
        if b > 1:
            skipped = numbers[0] - prev_end
            if prev_clean:
                expected_unassigned += skipped
            else:
                expected_missing += skipped
        sent = [s for k, s in enumerate(numbers) if k not in lost]
        # A lost tail of the last boot is not known to be missing: nothing higher arrived.
        known = numbers if b < last_boot else [s for s in numbers if s <= sent[-1]]
        expected_missing += len(known) - len([s for s in sent if s in known])
        for i in range(0, len(sent), 7):
            messages.append(("samples", batch(sent[i : i + 7], boot=b)))
            if i == 0 and pending_status is not None:
                messages.append(("status", pending_status))  # arrives after the new boot's first batch
                pending_status = None
        status = shutdown(b, nxt)
        if clean and status_late:
            pending_status = status
        elif clean:
            messages.append(("status", status))
        prev_end, prev_clean = nxt, clean
    if pending_status is not None:
        messages.append(("status", pending_status))
    a = DeviceAccount("d")
    for kind, doc in messages:
        if kind == "status":
            a.note_status(doc)  # type: ignore[arg-type]
        else:
            a.admit(doc, T0)  # type: ignore[arg-type]
    assert (a.missing, a.unassigned) == (expected_missing, expected_unassigned)
    assert a.duplicates == 0 and a.reboots == len(boots) - 1
    assert a.gaps - a.gaps_filled == a.seq.gap_count()


def test_the_saved_state_follows_every_change_and_is_reused_when_there_is_none() -> None:
    # The collector saves every device's state with each commit (up to 20 a second in the
    # low-latency profile): an unchanged device's state is reused, a changed one is always fresh.
    from wattbench.ingest.accounting import Accounts

    accounts = Accounts()
    a = accounts.get("dev-a")
    a.admit(batch([0, 1, 2]), 1_763_709_700_000)
    first = accounts.state()
    again = accounts.state()
    assert again["dev-a"] is first["dev-a"]
    a.admit(batch([5]), 1_763_709_700_100)
    after = accounts.state()["dev-a"]
    assert after["seq"]["high"] == 5 and after["missing"] == 2
    a.note_reject()
    assert accounts.state()["dev-a"]["rejects"] == 1
    a.note_status({"reason": "shutdown", "boot": 1, "seq": 5})
    assert accounts.state()["dev-a"]["ends"] == [[1, 5]]
