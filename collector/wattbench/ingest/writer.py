"""The durability policy: every batch ends up in the store, in the spool, or in the dead letters.

- While the store answers and the spool is empty, a batch is written to the store and flushed.
- When the store fails, the half-sent writes are dropped and the batch goes to the spool; so does
  every later batch, behind it, so that the order of writes is kept.
- Every `retry_s` the spool is replayed from its oldest frame; once the store takes it, the replay
  goes on in order until the spool is empty, then batches go straight to the store again.
- A write the store refuses for good (its error says `permanent`) cannot be retried: its records are
  kept in the dead-letter spool for inspection instead of blocking everything behind them. In a
  replay the refused batch is found by going on batch by batch, so only it is set aside.
- When the spool cannot be written either (disk full), the batch goes straight to the store if that
  is back; if not, NotDurable is raised and the caller must not acknowledge the batch.

The writer has no threads and no broker: the caller hands it batches and gives it time to replay.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..spool import Spool, SpoolError
from ..store.base import StoreError
from . import records as rec
from .pipeline import Batch

if TYPE_CHECKING:
    from ..store import SampleSink

log = logging.getLogger("wattbench.cli.collect")

# How much of the spool one replay step reads and writes in one store flush.
REPLAY_CHUNK_BYTES = 4 << 20


class NotDurable(RuntimeError):
    """Neither the store nor the spool could keep a batch: acknowledge none of its messages."""


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds for timeouts (retry delay, replay budget)."""

    def wall_ms(self) -> int:
        """Wall-clock time in ms, for the outage records."""


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def wall_ms(self) -> int:
        return int(time.time() * 1000)


@dataclass
class WriterStats:
    commits: int = 0
    stored_samples: int = 0
    spooled_frames: int = 0
    spooled_samples: int = 0
    replayed_frames: int = 0
    replayed_samples: int = 0
    deadletter_frames: int = 0
    store_errors: int = 0
    last_store_error: str = ""
    outages: list[dict[str, Any]] = field(default_factory=list)

    def figures(self) -> dict[str, Any]:
        """As the status file and counters() show them: the last five outages only."""
        return {
            "commits": self.commits,
            "stored_samples": self.stored_samples,
            "spooled_frames": self.spooled_frames,
            "spooled_samples": self.spooled_samples,
            "replayed_frames": self.replayed_frames,
            "replayed_samples": self.replayed_samples,
            "deadletter_frames": self.deadletter_frames,
            "store_errors": self.store_errors,
            "last_store_error": self.last_store_error,
            "outages": [dict(o) for o in self.outages[-5:]],
        }


def is_permanent(exc: BaseException) -> bool:
    """Stores mark errors that a retry cannot cure (e.g. InfluxDB's HTTP 400) as StoreError with
    `permanent` set; anything else, whatever its type, counts as "not stored now" and is retried from
    the spool."""
    return isinstance(exc, StoreError) and exc.permanent


class Writer:
    """Store, spool and dead letters of one collector. Not thread-safe: one caller thread."""

    def __init__(
        self,
        store: SampleSink,
        spool: Spool,
        deadletter: Spool,
        *,
        retry_s: float = 2.0,
        clock: Clock | None = None,
    ) -> None:
        self.store = store
        self.spool = spool
        self.deadletter = deadletter
        self.retry_s = float(retry_s)
        self.clock: Clock = clock or SystemClock()
        self.stats = WriterStats()
        self.store_down = False
        self._next_retry = 0.0

    # ------------------------------------------------------------------ writing

    def write(self, batch: Batch) -> None:
        """Make the batch durable (store, spool or dead letters) before returning.

        Raises NotDurable when neither store nor spool can keep it."""
        records = batch.records
        if records:
            if self.spool.empty and not self.store_down:
                exc = self._try_store(records, batch.samples)
                if exc is not None:
                    if is_permanent(exc):
                        self._deadletter(records, exc)
                    else:
                        self._store_failed(exc)
                        self._spool(records, batch.samples)
            else:
                self._spool(records, batch.samples)
        self.stats.commits += 1

    def _spool(self, records: list[rec.Record], samples: int) -> None:
        try:
            self.spool.append(rec.encode(records))
        except SpoolError as exc:
            # The spool is full (or broken). New batches go to its tail only to keep the replay in
            # order; storage is idempotent and keyed by time, so when the store can take this batch
            # now, writing it ahead of the older spooled ones loses nothing.
            if self._store_directly(records, samples):
                log.warning("spool full (%s): batch written straight to the store", exc)
                return
            raise NotDurable(f"{exc}; stopping without acknowledging") from None
        self.stats.spooled_frames += 1
        self.stats.spooled_samples += samples

    def _store_directly(self, records: list[rec.Record], samples: int) -> bool:
        if self.store_down and self.clock.monotonic() < self._next_retry:
            return False
        exc = self._try_store(records, samples)
        if exc is not None:
            self._store_failed(exc)
            return False
        return True

    def _try_store(self, records: list[rec.Record], samples: int) -> Exception | None:
        """Write and flush; on failure drop the half-sent writes and return the error."""
        try:
            rec.apply(self.store, records)
            self.store.flush()
        except Exception as exc:  # any store failure means "not stored"; callers decide what next
            self.store.discard()
            return exc
        self.stats.stored_samples += samples
        return None

    def _store_failed(self, exc: Exception) -> None:
        self.stats.store_errors += 1
        self.stats.last_store_error = str(exc)
        self._next_retry = self.clock.monotonic() + self.retry_s
        if not self.store_down:
            self.store_down = True
            self.stats.outages.append({"start_ms": self.clock.wall_ms(), "error": str(exc)})
            log.warning("store unavailable (%s): spooling to %s until it is back", exc, self.spool.dir)

    def _deadletter(self, records: list[rec.Record], exc: Exception) -> None:
        self.stats.deadletter_frames += 1
        log.error(
            "the store refused %d records for good (%s); kept in %s for inspection",
            len(records),
            exc,
            self.deadletter.dir,
        )
        try:
            self.deadletter.append(rec.encode(records))
        except OSError as err:
            log.error("cannot keep refused records: %s", err)

    # ------------------------------------------------------------------ replay

    @property
    def spooled(self) -> bool:
        """The spool holds frames not yet in the store."""
        return not self.spool.empty

    def replay_due(self) -> bool:
        """There is something to replay and the retry delay after the last store failure is over."""
        return not self.spool.empty and self.clock.monotonic() >= self._next_retry

    def replay(self, budget_s: float, yield_to: Callable[[], bool] | None = None) -> None:
        """Replay the spool in order into the store for up to budget_s, stopping at the first failure.

        yield_to() is asked after every step; when it answers true the replay stops there (new
        batches are waiting) and resumes at the next call."""
        deadline = self.clock.monotonic() + budget_s
        chunk_bytes = REPLAY_CHUNK_BYTES
        while not self.spool.empty and self.clock.monotonic() < deadline:
            frames = self.spool.read(max_bytes=chunk_bytes)
            if not frames:
                return
            samples = 0
            try:
                for frame in frames:
                    if frame.payload:
                        samples += rec.apply(self.store, rec.decode(frame.payload))
                self.store.flush()
            except Exception as exc:
                self.store.discard()
                if not is_permanent(exc):
                    self._store_failed(exc)
                    return
                refused = [frame for frame in frames if frame.payload]
                if len(refused) > 1:
                    # A frame is one batch, which the store takes or refuses as a whole, as it does
                    # on a direct write: go on frame by frame so that only the refused batch is set
                    # aside, not the good ones spooled around it.
                    chunk_bytes = 1
                    continue
                for frame in refused:
                    self._deadletter(rec.decode(frame.payload), exc)
                samples = 0  # none of it is in the store
                chunk_bytes = REPLAY_CHUNK_BYTES
            self.spool.commit(frames[-1].end)
            self.stats.replayed_frames += len(frames)
            self.stats.replayed_samples += samples
            if self.store_down:
                self.store_down = False
                if self.stats.outages:
                    self.stats.outages[-1]["end_ms"] = self.clock.wall_ms()
                log.warning("store is back: replaying the spool in order")
            if self.spool.empty:
                log.warning(
                    "spool drained: %d frames (%d samples) replayed in all",
                    self.stats.replayed_frames,
                    self.stats.replayed_samples,
                )
            if yield_to is not None and yield_to():
                return  # new data waits; it goes to the spool's tail and the replay resumes next round

    # ------------------------------------------------------------------ figures

    def figures(self) -> dict[str, Any]:
        return self.stats.figures()
