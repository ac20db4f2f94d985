"""Store writes as plain records, so that one batch can go to the store now or to the spool and the
store later, unchanged. A record is (kind, body) with a JSON-ready body."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .validate import dumps, loads

if TYPE_CHECKING:
    from ..store.base import Store

Record = tuple[str, Any]


def samples(dev: str, rows: list[dict[str, Any]], lines: str | None = None) -> Record:
    """lines: the rows already as line protocol (Store.write_samples), or None."""
    if lines is None:
        return ("samples", {"dev": dev, "rows": rows})
    return ("samples", {"dev": dev, "rows": rows, "lines": lines})


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


def apply(store: Store, records: list[Record]) -> int:
    """Hand the records to the store's write methods (not flushed); return the sample rows written."""
    n = 0
    for kind, body in records:
        if kind == "samples":
            store.write_samples(body["dev"], body["rows"], body.get("lines"))
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
    # The rows are the record; lines are only their InfluxDB form, made again when the spool is replayed.
    if kind == "samples" and "lines" in body:
        return {"dev": body["dev"], "rows": body["rows"]}
    return body


def encode(records: list[Record]) -> bytes:
    return dumps([[kind, _spooled(kind, body)] for kind, body in records])


def decode(payload: bytes) -> list[Record]:
    return [(str(kind), body) for kind, body in loads(payload)]


def sample_count(records: list[Record]) -> int:
    return sum(len(body["rows"]) for kind, body in records if kind == "samples")
