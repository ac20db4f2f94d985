"""Store writes as plain records, so that one batch can go to the store now or to the spool and the
store later, unchanged. A record is (kind, body) with a JSON-ready body."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, overload

from .validate import dumps, loads

if TYPE_CHECKING:
    from ..store.base import SampleSink

Record = tuple[str, Any]


class PayloadRows(Sequence[dict[str, Any]]):
    """The rows of a valid sample batch, read from its payload only when something asks for them.
    The collector's checking processes hand over a batch encoded for the store and what accounting
    needs, so a store with an encoder never makes the collector read the rows again; the spool and
    other stores still get them as the complete check reads them."""

    __slots__ = ("_count", "_raw", "_rows")

    def __init__(self, raw: bytes, count: int) -> None:
        self._raw = raw
        self._count = count
        self._rows: list[dict[str, Any]] | None = None

    def _read(self) -> list[dict[str, Any]]:
        if self._rows is None:
            self._rows = loads(self._raw)["samples"]
        return self._rows

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, i: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, i: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, i: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        return self._read()[i]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self._read())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and self._read() == list(other)

    __hash__ = None  # type: ignore[assignment]


def samples(dev: str, rows: Sequence[dict[str, Any]], encoded: bytes | None = None) -> Record:
    """encoded: the rows already as the store's encoder made them (SampleSink.write_samples), or None."""
    if encoded is None:
        return ("samples", {"dev": dev, "rows": rows})
    return ("samples", {"dev": dev, "rows": rows, "encoded": encoded})


def status(doc: dict[str, Any], t_ms: int) -> Record:
    return ("status", {"doc": doc, "t": t_ms})


def phase(doc: dict[str, Any]) -> Record:
    return ("phase", doc)


def result(doc: dict[str, Any]) -> Record:
    return ("result", doc)


def health(collector: str, dev: str, fields: dict[str, float | int], t_ms: int) -> Record:
    return ("health", {"collector": collector, "dev": dev, "fields": fields, "t": t_ms})


def meta(doc: dict[str, Any], t_ms: int) -> Record:
    return ("meta", {"doc": doc, "t": t_ms})


def reject(collector: str, notice: dict[str, Any]) -> Record:
    return ("reject", {"collector": collector, "notice": notice})


def apply(store: SampleSink, records: list[Record]) -> int:
    """Hand the records to the store's write methods (not flushed); return the sample rows written."""
    n = 0
    for kind, body in records:
        if kind == "samples":
            store.write_samples(body["dev"], body["rows"], body.get("encoded"))
            n += len(body["rows"])
        elif kind == "status":
            store.write_status(body["doc"], body["t"])
        elif kind == "phase":
            store.write_phase(body)
        elif kind == "result":
            store.write_result(body)
        elif kind == "health":
            store.write_health(body["collector"], body["dev"], body["fields"], body["t"])
        elif kind == "meta":
            store.write_meta(body["doc"], body["t"])
        elif kind == "reject":
            store.write_reject(body["collector"], body["notice"])
        else:
            raise ValueError(f"unknown record kind {kind!r}")
    return n


def _spooled(kind: str, body: Any) -> Any:
    # The rows are the record; the encoded form is only the store's, made again when the spool is replayed.
    if kind == "samples":
        return {"dev": body["dev"], "rows": list(body["rows"])}
    return body


def encode(records: list[Record]) -> bytes:
    return dumps([[kind, _spooled(kind, body)] for kind, body in records])


def decode(payload: bytes) -> list[Record]:
    return [(str(kind), body) for kind, body in loads(payload)]


def sample_count(records: list[Record]) -> int:
    return sum(len(body["rows"]) for kind, body in records if kind == "samples")
