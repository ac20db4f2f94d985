"""The storage layout (schema/influx-layout.md, schema/v1/influx.json) as every backend maps it: the
measurements and their field types, a sample's storage key, and each message's fields, with its whole
document kept in doc, doc1, ... so a reader gets back exactly what was written."""

from __future__ import annotations

import json
import re
from typing import Any

import wattbench_schema as contract

from .base import StoreError

LAYOUT = contract.influx_layout()["measurements"]
SAMPLE_FIELDS = LAYOUT["wb_sample"]["fields"]
SAMPLE_FLOATS = frozenset(k for k, t in SAMPLE_FIELDS.items() if t == "float")
SAMPLE_INTS = frozenset(k for k, t in SAMPLE_FIELDS.items() if t == "int")


def sub_us(row: dict[str, Any]) -> int:
    """Microseconds added to a sample's millisecond time in its storage key.

    0 for every ordinary sample, so both routes (collector and Telegraf) write identical points. A
    sample flagged clock_step may carry a time the device already used before its clock jumped back;
    it gets 1 + seq mod 999, which is deterministic (a replay lands on the same point) and keeps it
    from replacing the earlier sample. Readers at millisecond precision see both at the same ms."""
    f = row.get("f")
    if f and int(f) & contract.FLAG_CLOCK_STEP:
        return 1 + int(row["s"]) % 999
    return 0


def status_fields(status: dict[str, Any]) -> dict[str, Any]:
    buf = status.get("buf") or {}
    clk = status.get("clk") or {}
    return {
        "state": status.get("state"),
        "boot": status.get("boot"),
        "seq": status.get("seq"),
        "buf_ram": buf.get("ram"),
        "buf_flash": buf.get("flash"),
        "dropped": buf.get("dropped"),
        "up": status.get("up"),
        "clk_sync": clk.get("sync"),
        "clk_age": clk.get("age"),
        "clk_err": clk.get("err"),
        "rssi": status.get("rssi"),
    }


# InfluxDB documents a 64 KiB limit on a string field. A document longer than that is written across
# doc, doc1, doc2, ... of the same point, each part at most MAX_DOC_CHARS once escaped for line
# protocol, with the number of parts in doc_parts.
MAX_DOC_CHARS = 60000
DOC_PARTS = "doc_parts"
# Per measurement, the fields that continue another (doc1, doc2, ... continue doc), as the layout has them.
FIELD_PARTS = {
    m: {base: re.compile(rx) for base, rx in spec.get("field_parts", {}).items()}
    for m, spec in LAYOUT.items()
}


def _escaped_len(text: str) -> int:
    # Line protocol escapes '"' and '\\' in a string field with a backslash; nothing else in it grows.
    return len(text) + text.count('"') + text.count("\\")


def split_doc(text: str, limit: int = MAX_DOC_CHARS) -> list[str]:
    """The text cut into parts that each stay within limit characters once escaped. Parts are cut from
    the text before escaping, and each part is escaped on its own, so a cut never falls inside an
    escape sequence. The last part may be empty only when the whole text is."""
    parts: list[str] = []
    start, n = 0, len(text)
    while True:
        end = min(start + limit, n)
        over = _escaped_len(text[start:end]) - limit
        while over > 0:
            # A character weighs one or two once escaped: dropping half the excess (rounded up) can
            # never drop more than needed, so the part ends as late as the limit allows.
            end -= (over + 1) // 2
            over = _escaped_len(text[start:end]) - limit
        parts.append(text[start:end])
        if end >= n:
            return parts
        start = end


def _within_limit(text: str) -> str | None:
    """A plain string field as it is, or None when it would pass the limit: only the doc is split, and
    the doc holds everything such a field repeats."""
    return text if _escaped_len(text) <= MAX_DOC_CHARS else None


def doc_fields(text: str) -> dict[str, Any]:
    """The doc fields of a point for one compact JSON document: doc, doc1, ... and doc_parts."""
    parts = split_doc(text)
    fields: dict[str, Any] = {"doc": parts[0]}
    for i, part in enumerate(parts[1:], 1):
        fields[f"doc{i}"] = part
    fields[DOC_PARTS] = len(parts)
    return fields


def joined_doc(fields: dict[str, Any]) -> str | None:
    """The document a point's fields hold, joined again; None when the point has none (Telegraf writes
    none, and points written before doc_parts existed hold at most one part, in doc).

    A document with a part missing is refused: read as it is, it would look like a smaller run. Parts
    beyond the count are left over from an earlier, longer document at the same point and ignored."""
    count = fields.get(DOC_PARTS)
    if count is None:
        doc = fields.get("doc")
        return None if doc is None else str(doc)
    names = ["doc", *(f"doc{i}" for i in range(1, int(count)))]
    missing = [name for name in names if not isinstance(fields.get(name), str)]
    if int(count) < 1 or missing:
        gone = ", ".join(missing) if missing else "all"
        raise StoreError(f"the stored document is incomplete: {count} parts recorded, missing {gone}")
    return "".join(fields[name] for name in names)


def loaded_doc(fields: dict[str, Any], what: str) -> dict[str, Any] | None:
    """The document of a point as a JSON object, or None when the point has none; a stored document
    that is incomplete or not a JSON object raises StoreError naming what it is (e.g. the run's phase
    event)."""
    try:
        text = joined_doc(fields)
    except StoreError as exc:
        raise StoreError(f"{what}: {exc}") from None
    if text is None:
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        raise StoreError(f"{what}: the stored document is not a JSON object")
    return doc


def layout_field_type(measurement: str, field: str) -> str | None:
    """The layout's type of a field, doc1, doc2, ... included; None for a field the layout lacks."""
    types = LAYOUT[measurement]["fields"]
    if field in types:
        return str(types[field])
    for base, rx in FIELD_PARTS[measurement].items():
        if rx.fullmatch(field):
            return str(types[base])
    return None


def is_doc_field(measurement: str, field: str) -> bool:
    """doc, one of its later parts or doc_parts."""
    if field in ("doc", DOC_PARTS):
        return True
    return any(rx.fullmatch(field) for rx in FIELD_PARTS[measurement].values())


def payload_doc_fields(payload: dict[str, Any]) -> dict[str, Any]:
    """The whole message as JSON, so a reader gets back exactly what was written (the system under
    test, the jobs, the checks, the summary), not only the fields that have their own column."""

    return doc_fields(json.dumps(payload, separators=(",", ":"), allow_nan=False))


def phase_fields(event: dict[str, Any]) -> dict[str, Any]:
    fields = {k: event.get(k) for k in LAYOUT["wb_phase"]["fields"] if k not in ("doc", DOC_PARTS)}
    # A field holds no list: the channels a run names are kept as one comma-separated string (the
    # DEV/CH pattern has no comma), and InfluxStore.phases splits them again.
    channels = fields.get("channels")
    if isinstance(channels, list):
        fields["channels"] = _within_limit(",".join(channels))
    fields.update(payload_doc_fields(event))
    return fields


def meta_doc(meta: dict[str, Any]) -> str:
    return json.dumps(meta, separators=(",", ":"), sort_keys=True)


def meta_fields(meta: dict[str, Any]) -> dict[str, Any]:
    """The whole document is kept (doc), since scoring needs every channel's role, node and meter as
    they were; fw, board and the channel count are there for dashboards."""
    return {
        "fw": meta.get("fw"),
        "board": meta.get("board"),
        "channels": len(meta.get("channels", [])),
        **doc_fields(meta_doc(meta)),
    }


def result_points(result: dict[str, Any]) -> list[tuple[dict[str, str], dict[str, Any]]]:
    """(tags, fields) per level plus the phase=overall point of the run."""
    out = []
    level_fields = [
        k
        for k in LAYOUT["wb_result"]["fields"]
        if k not in ("overall", "valid", "channels", "doc", DOC_PARTS)
    ]
    for level in result.get("levels", []):
        fields = {k: level.get(k) for k in level_fields}
        fields["valid"] = result["valid"]
        out.append(({"run": result["run"], "phase": level["phase"]}, fields))
    overall: dict[str, Any] = {"overall": result["overall"], "valid": result["valid"]}
    if result.get("channels"):
        # The channels a run summed, as compact JSON: a report read back from the store lists them too.
        overall["channels"] = _within_limit(json.dumps(result["channels"], separators=(",", ":")))
    overall.update(payload_doc_fields(result))
    out.append(({"run": result["run"], "phase": "overall"}, overall))
    return out
