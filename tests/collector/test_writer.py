"""The Writer's durability rules on their own: no broker, no threads, a clock the test moves.

The store is the real SQLite store and the spools are real spool directories. A small subclass of
each only adds what cannot be had on demand: an outage, a refusal for good (as InfluxDB's HTTP 400),
a full disk.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from wattbench.ingest import records as rec
from wattbench.ingest import writer as writer_mod
from wattbench.ingest.pipeline import Batch
from wattbench.ingest.writer import NotDurable, Writer
from wattbench.spool import Spool, SpoolError
from wattbench.store.influx import StoreRejected, StoreUnavailable
from wattbench.store.sqlite import SqliteStore

T0 = 1_763_760_000_000
RETRY_S = 2.0
POISON = "poison"


class ManualClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.ms = T0

    def monotonic(self) -> float:
        return self.now

    def wall_ms(self) -> int:
        return self.ms

    def advance(self, seconds: float) -> None:
        self.now += seconds
        self.ms += int(seconds * 1000)


class FlakyStore(SqliteStore):
    """The SQLite store with an outage switch. `accept_writes` lets that many write calls through
    before the outage shows (a connection lost mid-batch); samples of device POISON are refused for
    good, the way InfluxDB refuses a field type conflict."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.down = False
        self.accept_writes: int | None = None
        self.flushes = 0
        self.refusals = 0

    def write_samples(self, dev: str, samples: Sequence[dict[str, Any]], lines: bytes | None = None) -> None:
        if dev == POISON:
            self.refusals += 1
            raise StoreRejected("InfluxDB refused the write (HTTP 400): field type conflict")
        if self.down:
            if self.accept_writes is None or self.accept_writes <= 0:
                raise StoreUnavailable("store unreachable: connection refused")
            self.accept_writes -= 1
        super().write_samples(dev, samples)

    def flush(self) -> None:
        self.flushes += 1
        if self.down:
            raise StoreUnavailable("store unreachable: connection refused")
        super().flush()


class FillableSpool(Spool):
    """A spool whose disk can be declared full."""

    full = False

    def append(self, payload: bytes, t_ms: int | None = None) -> None:
        if self.full:
            raise SpoolError(f"cannot write to spool {self.dir}: [Errno 28] No space left on device")
        super().append(payload, t_ms)


def rows(n: int, start: int = 0, ch: str = "psu1", watts: float = 100.0) -> list[dict[str, Any]]:
    return [{"s": start + i, "t": T0 + 100 * (start + i), "c": ch, "W": watts + i} for i in range(n)]


def batch(*parts: tuple[str, list[dict[str, Any]]]) -> Batch:
    b = Batch()
    for dev, rs in parts:
        b.records.append(rec.samples(dev, rs))
        b.samples += len(rs)
    b.messages = len(parts)
    return b


def frames(sp: Spool) -> list[list[rec.Record]]:
    """What a spool holds, without consuming it."""
    return [rec.decode(f.payload) for f in sp.read(max_bytes=1 << 30)]


def watts(store: SqliteStore, dev: str, ch: str = "psu1") -> list[float]:
    return [float(w) for w in store.series(dev, ch, T0, T0 + 10**9).values["W"]]


class Rig:
    def __init__(self, tmp_path: Path) -> None:
        self.clock = ManualClock()
        self.store = FlakyStore(tmp_path / "wb.sqlite")
        self.spool = FillableSpool(tmp_path / "spool")
        self.deadletter = Spool(tmp_path / "spool" / "deadletter")
        self.writer = Writer(self.store, self.spool, self.deadletter, retry_s=RETRY_S, clock=self.clock)

    def close(self) -> None:
        self.spool.close()
        self.deadletter.close()
        self.store.close()


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    r = Rig(tmp_path)
    yield r
    r.close()


def test_store_up_writes_the_batch_and_counts_it(rig: Rig) -> None:
    rig.writer.write(batch(("bench-a", rows(100)), ("bench-b", rows(20))))
    rig.writer.write(Batch())  # a commit that carries only acknowledgements
    assert rig.store.count_samples() == 120
    s = rig.writer.stats
    assert (s.commits, s.stored_samples) == (2, 120)
    assert (s.spooled_frames, s.store_errors, s.deadletter_frames) == (0, 0, 0)
    assert rig.spool.empty and not rig.writer.store_down and not rig.writer.replay_due()


def test_store_failing_mid_batch_loses_nothing_and_spools_the_whole_batch(rig: Rig) -> None:
    b = batch(("bench-a", rows(50)), ("bench-b", rows(30)))
    rig.store.down, rig.store.accept_writes = True, 1  # the first record goes out, then the link drops
    rig.writer.write(b)
    assert rig.store.pending() == 0, "the half-sent writes were dropped, not left for a later flush"
    assert rig.store.count_samples() == 0
    assert frames(rig.spool) == [b.records]
    s = rig.writer.stats
    assert (s.commits, s.stored_samples, s.store_errors) == (1, 0, 1)
    assert (s.spooled_frames, s.spooled_samples) == (1, 80)
    assert rig.writer.store_down
    assert s.outages == [{"start_ms": T0, "error": "store unreachable: connection refused"}]
    assert s.last_store_error == "store unreachable: connection refused"
    # The store answers again, but the next batch still goes behind the spooled one: order is kept.
    rig.store.down = False
    flushes = rig.store.flushes
    rig.writer.write(batch(("bench-a", rows(10, start=50))))
    assert rig.store.flushes == flushes and rig.store.count_samples() == 0
    assert rig.writer.stats.spooled_frames == 2


def test_spool_is_replayed_in_order_exactly_once_when_the_store_returns(rig: Rig) -> None:
    rig.store.down = True
    # The same sample key twice, with different values: the later batch must be the one kept.
    rig.writer.write(batch(("bench-a", rows(40, watts=1.0))))
    rig.writer.write(batch(("bench-a", rows(40, watts=2.0))))
    rig.writer.write(batch(("bench-b", rows(25))))
    assert rig.writer.stats.spooled_frames == 3 and rig.writer.stats.store_errors == 1
    assert not rig.writer.replay_due(), "no retry before retry_s"

    rig.clock.advance(RETRY_S)
    assert rig.writer.replay_due()
    rig.writer.replay(budget_s=5.0)  # still down: stops at once, keeps everything, retries later
    assert rig.writer.stats.store_errors == 2 and len(frames(rig.spool)) == 3
    assert rig.writer.stats.replayed_frames == 0 and not rig.writer.replay_due()

    rig.store.down = False
    rig.clock.advance(RETRY_S)
    rig.writer.replay(budget_s=5.0)
    s = rig.writer.stats
    assert rig.spool.empty and not rig.writer.store_down
    assert (s.replayed_frames, s.replayed_samples) == (3, 105) == (s.spooled_frames, s.spooled_samples)
    assert watts(rig.store, "bench-a") == [2.0 + i for i in range(40)]
    assert rig.store.count_samples() == 65
    assert s.outages == [
        {"start_ms": T0, "error": "store unreachable: connection refused", "end_ms": T0 + 4000}
    ]

    # Exactly once: nothing is left to replay, also for a spool opened again after a restart.
    rig.writer.replay(budget_s=5.0)
    assert rig.writer.stats.replayed_frames == 3 and not rig.writer.replay_due()
    rig.spool.close()
    assert Spool(rig.spool.dir).empty
    # Back to direct writes.
    rig.writer.write(batch(("bench-c", rows(5))))
    assert rig.writer.stats.stored_samples == 5 and rig.writer.stats.spooled_frames == 3


def test_replay_gives_way_to_waiting_batches(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer_mod, "REPLAY_CHUNK_BYTES", 1)  # one frame per replay step
    rig.store.down = True
    for k in range(4):
        rig.writer.write(batch(("bench-a", rows(10, start=10 * k))))
    rig.store.down = False
    rig.clock.advance(RETRY_S)
    rig.writer.replay(budget_s=5.0, yield_to=lambda: True)
    assert rig.writer.stats.replayed_frames == 1 and len(frames(rig.spool)) == 3
    assert not rig.writer.store_down and rig.writer.replay_due()
    rig.writer.replay(budget_s=5.0)
    assert rig.spool.empty and rig.store.count_samples() == 40


def test_unwritable_spool_with_the_store_down_refuses_to_acknowledge(rig: Rig) -> None:
    shutil.rmtree(rig.spool.dir)  # the real spool, its directory gone
    rig.store.down = True
    with pytest.raises(NotDurable, match=r"cannot write to spool .*; stopping without acknowledging"):
        rig.writer.write(batch(("bench-a", rows(10))))
    s = rig.writer.stats
    assert (s.commits, s.spooled_frames, s.stored_samples, s.store_errors) == (0, 0, 0, 1)
    assert rig.writer.store_down
    # Until retry_s is over the store is not even tried again.
    flushes = rig.store.flushes
    with pytest.raises(NotDurable):
        rig.writer.write(batch(("bench-a", rows(10))))
    assert rig.store.flushes == flushes and rig.writer.stats.commits == 0


def test_full_spool_sends_the_batch_straight_to_a_store_that_is_back(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    rig.store.down = True
    rig.writer.write(batch(("bench-a", rows(30, watts=1.0))))
    rig.spool.full = True
    rig.store.down = False
    with pytest.raises(NotDurable, match="No space left on device"):
        rig.writer.write(batch(("bench-b", rows(20))))  # the store is back, but not retried yet
    rig.clock.advance(RETRY_S)
    with caplog.at_level(logging.WARNING, logger="wattbench.cli.collect"):
        rig.writer.write(batch(("bench-b", rows(20))))
    assert "spool full" in caplog.text and "written straight to the store" in caplog.text
    s = rig.writer.stats
    assert (s.commits, s.stored_samples, s.spooled_frames) == (2, 20, 1)
    assert rig.store.count_samples("bench-b") == 20 and rig.store.count_samples("bench-a") == 0
    rig.writer.replay(budget_s=5.0)  # the older spooled batch follows: nothing lost
    assert rig.spool.empty and not rig.writer.store_down
    assert watts(rig.store, "bench-a") == [1.0 + i for i in range(30)]


def test_a_refused_batch_goes_to_the_dead_letters_once(rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    poison = batch((POISON, rows(10)))
    with caplog.at_level(logging.ERROR, logger="wattbench.cli.collect"):
        rig.writer.write(poison)
    assert "refused 1 records for good" in caplog.text
    s = rig.writer.stats
    assert (s.deadletter_frames, s.store_errors, s.spooled_frames, s.stored_samples) == (1, 0, 0, 0)
    assert not rig.writer.store_down and rig.spool.empty and not rig.writer.replay_due()
    assert frames(rig.deadletter) == [poison.records]
    assert rig.store.refusals == 1 and rig.store.pending() == 0
    rig.writer.write(batch(("bench-a", rows(10))))  # nothing blocks behind it
    assert rig.store.count_samples() == 10 and rig.store.refusals == 1


def test_a_refused_frame_in_the_spool_is_dead_lettered_not_retried(rig: Rig) -> None:
    rig.store.down = True
    good_before = batch(("bench-a", rows(30)))
    poison = batch((POISON, rows(5)))
    good_after = batch(("bench-b", rows(20)))
    for b in (good_before, poison, good_after):
        rig.writer.write(b)
    rig.store.down = False
    rig.clock.advance(RETRY_S)
    rig.writer.replay(budget_s=5.0)
    refusals = rig.store.refusals
    rig.clock.advance(RETRY_S)
    rig.writer.replay(budget_s=5.0)
    assert rig.store.refusals == refusals, "a refused frame is not tried again"
    assert rig.spool.empty and not rig.writer.store_down
    assert frames(rig.deadletter) == [poison.records]
    # Only the refused batch is kept aside: the batches spooled around it are in the store.
    assert rig.store.count_samples("bench-a") == 30 and rig.store.count_samples("bench-b") == 20
    s = rig.writer.stats
    assert (s.deadletter_frames, s.replayed_frames, s.replayed_samples) == (1, 3, 50)


def test_unwritable_dead_letters_are_reported_not_fatal(rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    shutil.rmtree(rig.deadletter.dir)
    with caplog.at_level(logging.ERROR, logger="wattbench.cli.collect"):
        rig.writer.write(batch((POISON, rows(3))))
    assert "cannot keep refused records" in caplog.text
    assert rig.writer.stats.deadletter_frames == 1 and rig.writer.stats.commits == 1


def test_writing_again_what_is_stored_changes_nothing(rig: Rig, tmp_path: Path) -> None:
    b = batch(("bench-a", rows(60)), ("bench-b", rows(15)))
    rig.writer.write(b)
    rig.writer.write(b)  # a redelivered message
    assert rig.store.count_samples() == 75
    # A crash between a replay and its spool commit: the next start replays frames already stored.
    leftover = Spool(tmp_path / "leftover")
    leftover.append(rec.encode(b.records))
    again = Writer(rig.store, leftover, rig.deadletter, retry_s=RETRY_S, clock=rig.clock)
    assert again.replay_due()
    again.replay(budget_s=5.0)
    leftover.close()
    assert leftover.empty and again.stats.replayed_samples == 75
    assert rig.store.count_samples() == 75
    assert watts(rig.store, "bench-a") == [100.0 + i for i in range(60)]
