"""What every sample store offers, in two halves. The collector writes through a `SampleSink`;
alignment, scoring, reports and `wattbench status` read through a `StoreReader`, so they work the same
on the embedded SQLite store, on InfluxDB and on any backend registered in `store/__init__.py`.

`Store` is both halves, and the whole contract: code that holds a store calls these methods and no
others, never asks which kind of store it holds, and every backend implements every one of them (a
test checks them with mypy). What a backend stores sample rows as is its own business: a sink may
hand the collector a `SampleEncoder`, which its checking processes run on accepted batches, and the
collector passes what it made back to write_samples without knowing what it is.

Times are epoch milliseconds of the clock that stamped them (samples: the device's; health, rejects,
status: the collector's). Every time range is inclusive at both ends.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol, TypedDict

from ..core.series import Series


class StoreError(RuntimeError):
    """The store cannot be used: not reachable, not there, or not a store.

    permanent tells a writer whether trying the same write again can help: False (the default) for an
    outage, True when the store refused the data itself."""

    permanent: bool = False
    # How the user named the store when not by an option (a variable, a key in a file), for the
    # message: the option is theirs to see, a variable exported long ago is not.
    said: str = ""


# How the stores' own errors begin when they already say which store they mean (sqlite.py, influx/).
_NAMED = ("store ", "no store ", "InfluxDB at ")


def failure_text(exc: BaseException, name: str | None = None, said: str = "") -> str:
    """A store's error as one line that names the store once: most errors name it themselves ("store
    PATH: ...", "InfluxDB at URL ..."); the others get `name` (or "store") in front. said (else the
    error's own): the variable or file key that named the store, put first."""
    text = str(exc)
    if not text.startswith(_NAMED):
        text = f"store {name}: {text}" if name else f"store: {text}"
    said = said or (exc.said if isinstance(exc, StoreError) else "")
    return f"{said}: {text}" if said else text


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


class BatchColumns(NamedTuple):
    """A sample batch as a one-pass encoder read it, in columns: what the collector's accounting
    digests (ingest.plainbatch.plain_batch) without reading the rows again. wh holds `absent` for a
    row without an energy counter."""

    boot: int
    clk: dict[str, Any]
    s: list[int]
    c: list[str]
    t: list[int]
    wh: list[Any]
    absent: object


class Encoded(NamedTuple):
    """A valid sample batch read, checked and encoded in one pass: the sink's bytes for its rows, and
    the rows in columns."""

    data: bytes
    columns: BatchColumns


# (payload, the topic's device, latest acceptable sample time in ms) -> the batch, or None when this
# way cannot vouch for it (the complete check then decides, and encode() writes the rows).
OnePass = Callable[[bytes, str, int], Encoded | None]


class SampleEncoder(Protocol):
    """How a sink wants accepted sample batches made into its bytes, off the collector's main process.
    It is pickled into the collector's checking processes, so it holds no connection and no lock."""

    def encode(self, dev: str, rows: Sequence[dict[str, Any]]) -> bytes:
        """The rows of a validated batch of device dev, as write_samples takes them."""

    def one_pass(self, schema: dict[str, Any]) -> OnePass | None:
        """For the sample-batch schema (refs inlined), a function that reads, checks and encodes a
        batch in one pass, saying only "valid" or "cannot vouch"; None when there is none for it."""


class SampleSink(Protocol):
    """The write side of a store. Writes are buffered until flush() and idempotent: the same
    (measurement, tags, time) written twice is stored once."""

    def start_writing(self) -> SampleEncoder | None:
        """Called once by a long-running writer (the collector) before its first write: the sink loads
        what its writes need now rather than at the first write, and gives the encoder that makes
        write_samples' `encoded` argument, or None when it takes rows only."""

    # ------------------------------------------------------------------ writes (buffered)

    def write_samples(
        self, dev: str, samples: Sequence[dict[str, Any]], encoded: bytes | None = None
    ) -> None:
        """Rows of a validated sample batch of device dev (the `samples` array of the contract).
        encoded: the same rows as this sink's encoder made them, or None (the sink encodes the rows)."""

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

    def close(self) -> None:
        """Flush what is buffered, as far as the store can take it, and release the store. InfluxDB
        logs what it could not send; the SQLite file raises as flush() does."""


class StoreReader(Protocol):
    """The query side of a store. Reads see what has been flushed, by this or any other writer. A
    read that the store cannot answer (down, refused, damaged, unreadable) raises StoreError."""

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

    def newest_samples(self, devices: Sequence[str]) -> dict[str, int]:
        """When each of the given devices took its newest stored sample (device clock, epoch ms); a
        device with no stored sample is left out. A collector goes on writing health points for a
        device that has stopped, so this, not the newest health point, is when it was last heard."""

    def offset_history(self, devices: Sequence[str], start_ms: int, end_ms: int) -> list[OffsetPoint]:
        """Every wb_health point of the given devices in start_ms..end_ms that carries a clock offset,
        oldest first (ties by dev, then collector); [] for no devices."""

    def rejects(self, limit: int = 50) -> list[StoredReject]:
        """The newest `limit` stored rejects, newest first."""

    def close(self) -> None:
        """Release the store (a reader that also writes flushes first, as SampleSink.close)."""


class Store(SampleSink, StoreReader, Protocol):
    """A whole store, both halves: what a backend implements and open_store gives."""


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


def file_path(spec: str | None) -> str | None:
    """The file of the embedded store this address names (a plain path or sqlite://path), else None."""
    if spec is not None and "://" in spec and not spec.startswith("sqlite://"):
        return None
    path = spec[len("sqlite://") :] if spec and spec.startswith("sqlite://") else spec
    return path or "wattbench.sqlite"


def missing_folder(spec: str | None) -> Path | None:
    """The folder a new file store would go in, when that folder is not there. A store is never made
    in a folder of its own making: a typo in the folder's name would leave the samples in a store
    nobody reads."""
    path = file_path(spec)
    if path is None or path == ":memory:":
        return None
    folder = Path(path).expanduser().parent
    return None if folder.is_dir() else folder
