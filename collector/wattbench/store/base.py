"""What every sample store offers. The collector writes through it; alignment, scoring, reports and
`wattbench status` read through it, so they work the same on the embedded SQLite store and on InfluxDB.

`Store` is the whole contract: code that holds a store calls these methods and no others, never asks
which kind of store it holds, and both stores implement every one of them (a test checks both with
mypy). Times are epoch milliseconds of the clock that stamped them (samples: the device's; health,
rejects, status: the collector's). Every time range is inclusive at both ends.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TypedDict

from ..core.series import Series


class StoreError(RuntimeError):
    """The store cannot be used: not reachable, not there, or not a store.

    permanent tells a writer whether trying the same write again can help: False (the default) for an
    outage, True when the store refused the data itself."""

    permanent: bool = False


class StoreMissing(StoreError):
    """A store that was to be read does not exist (reading never creates one)."""


class SequenceCheck(TypedDict):
    """One device's stored samples against its sequence numbers (schema/v1/status-report, `verify`)."""

    dev: str
    count: int  # samples stored
    first: int | None  # lowest sequence number stored
    last: int | None  # highest sequence number stored
    missing: int  # numbers from first to last with no stored sample


class OffsetPoint(TypedDict):
    """One clock offset estimate of a device, from a wb_health point."""

    dev: str
    collector: str
    t: int  # collector clock, ms
    offset_ms: float  # the collector's receive time minus sample time: host minus device
    clk_steps: int | None  # clock steps the collector process has seen so far; None if not counted


class StoredReject(TypedDict):
    """One refused message as wb_reject keeps it; a field the notice did not carry is None."""

    reason: str
    collector: str
    t: int  # collector clock, ms
    topic: str | None
    dev: str | None
    detail: str | None
    size: int | None  # payload bytes


class Store(Protocol):
    """A sample store. Writes are buffered until flush() and idempotent: the same (measurement, tags,
    time) written twice is stored once. Reads see what has been flushed, by this or any other writer.
    A read that the store cannot answer (down, refused, damaged, unreadable) raises StoreError."""

    # True when the store writes InfluxDB line protocol: write_samples then takes the rows' lines made
    # elsewhere (the collector formats them in its checking processes, off its main process).
    line_protocol: bool

    # ------------------------------------------------------------------ writes (buffered)

    def write_samples(self, dev: str, samples: Sequence[dict[str, Any]], lines: bytes | None = None) -> None:
        """Rows of a validated sample batch of device dev (the `samples` array of the contract).
        lines: the same rows as `lineproto.sample_block(dev, samples)` made them, UTF-8 encoded (the
        form they are sent in), or None; a store without line_protocol ignores it."""

    def write_phase(self, event: dict[str, Any]) -> None:
        """A validated phase event."""

    def write_result(self, result: dict[str, Any]) -> None:
        """A validated run result: one point per level and one `overall` point holding the whole
        message."""

    def write_status(self, status: dict[str, Any], t_ms: int) -> None:
        """A validated status message of a device as the collector received it at t_ms."""

    def write_health(self, collector: str, dev: str, fields: dict[str, float | int], t_ms: int) -> None:
        """One wb_health point: collector's accounting of dev at t_ms (collector clock). Fields not in
        the layout (schema/v1/influx.json) are not stored."""

    def write_reject(self, collector: str, reject: dict[str, Any]) -> None:
        """A validated reject notice of the collector (its `t` is the point's time)."""

    def write_meta(self, meta: dict[str, Any], t_ms: int) -> None:
        """A validated metadata document of a device as the collector received it at t_ms."""

    def pending(self) -> int:
        """How many buffered writes flush() has yet to make durable: 0 means none. The unit is the
        store's own (rows or lines), so only zero compares between stores."""

    def discard(self) -> None:
        """Forget every buffered write without storing it (the caller keeps them elsewhere, e.g. in
        the spool)."""

    def flush(self) -> None:
        """Block until everything written so far is durable. On failure the buffer is emptied and the
        error raised, and none of the buffer may be assumed stored: the caller keeps its own copy and
        writes it again (writes are idempotent). InfluxDB raises StoreError (permanent=True when it
        refused the data); the SQLite file raises sqlite3.Error and keeps nothing of the buffer."""

    def ping(self) -> bool:
        """Whether the store answers now: False, not an exception, when it does not."""

    # ------------------------------------------------------------------ reads

    def series(
        self, dev: str, ch: str, start_ms: int, end_ms: int, fields: tuple[str, ...] = ("W",)
    ) -> Series:
        """Samples of dev/ch with start_ms <= t <= end_ms (inclusive; callers choose strictness), in
        time order. fields are sample quantities (W, V, A, ...); another name raises ValueError."""

    def channels(self, start_ms: int, end_ms: int) -> list[tuple[str, str]]:
        """(dev, ch) pairs with at least one sample in start_ms..end_ms, sorted."""

    def phases(self, run: str) -> list[dict[str, Any]]:
        """Phase events of a run, ordered by n (then time); [] for an unknown run."""

    def runs(self) -> list[str]:
        """Run ids that have phase events, newest (by first event) first."""

    def result(self, run: str) -> dict[str, Any] | None:
        """The newest stored result of a run; None when the run has none. A result stored without the
        whole message (written by something else, e.g. Telegraf) is rebuilt from its points."""

    def meta_history(self, start_ms: int, end_ms: int) -> list[tuple[int, dict[str, Any]]]:
        """Device metadata in effect during the span, as (store time, document), oldest first: for each
        device the last document stored at or before start_ms and every later one up to end_ms."""

    def count_samples(self, dev: str | None = None) -> int:
        """Samples stored, of one device or (None) of all."""

    def sequence_check(self, dev: str | None = None) -> list[SequenceCheck]:
        """Per device (one device, or every one for None or ""), sorted by device: samples stored
        against the span of their sequence numbers. Sequence numbers span all channels of a device, so
        this is the store's own answer to "did everything arrive exactly once"."""

    def health(self) -> list[dict[str, Any]]:
        """The latest wb_health point of every (dev, collector), sorted by (dev, collector). Each row
        holds dev, collector, t (collector clock, ms) and the layout's fields that the point carries;
        a field it does not carry is absent."""

    def offset_history(self, devices: Sequence[str], start_ms: int, end_ms: int) -> list[OffsetPoint]:
        """Every wb_health point of the given devices in start_ms..end_ms that carries a clock offset,
        oldest first (ties by dev, then collector); [] for no devices."""

    def rejects(self, limit: int = 50) -> list[StoredReject]:
        """The newest `limit` stored rejects, newest first."""

    def close(self) -> None:
        """Flush what is buffered, as far as the store can take it, and release the store. InfluxDB
        logs what it could not send; the SQLite file raises as flush() does."""


def in_effect(rows: list[tuple[int, dict[str, Any]]], start_ms: int) -> list[tuple[int, dict[str, Any]]]:
    """From (time, document) rows up to a span's end, oldest first: what applied during the span, i.e.
    per device the last one at or before start_ms and all later ones."""
    before: dict[str, int] = {}
    for i, (t, doc) in enumerate(rows):
        if t <= start_ms:
            before[str(doc.get("dev"))] = i
    return [
        (t, doc) for i, (t, doc) in enumerate(rows) if t > start_ms or before.get(str(doc.get("dev"))) == i
    ]
