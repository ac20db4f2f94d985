"""InfluxDB line protocol for the wattbench layout (schema/v1/influx.json).

wb_sample lines are built directly from the sample rows: at thousands of rows per second the cost of a
Point object per row would dominate. Tag values need no escaping there because the contract's device
and channel patterns exclude space, comma, '=' and quotes. The low-volume measurements go through
influxdb_client.Point, which escapes strings properly, with every field cast to the type the layout
names so that a JSON 231 never lands as an integer in a float field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import wattbench_schema as contract

from .base import StoreError

LAYOUT = contract.influx_layout()["measurements"]
# Lines carry microseconds so that a sample stamped inside the overlap after a backward clock step can
# sit beside the earlier sample of the same millisecond instead of overwriting it (see sub_us).
PRECISION = "us"
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


# %-format templates of whole wb_sample lines by a row's keys in order, with DEV_MARK for the device.
# One C-level format per row instead of one per field: the rows of a stream all have the same keys.
_TEMPLATES: dict[tuple[str, ...], str | None] = {}
MAX_TEMPLATES = 256  # key orders are the device's choice: never trust the network with memory
DEV_MARK = "\x00"


def _template(shape: tuple[str, ...]) -> str | None:
    """The line of a row with these keys, as a %-format of the row, or None for a shape the
    per-field path must write (flags may move the time, see sub_us)."""
    if "f" in shape or "t" not in shape or "c" not in shape:
        return None
    fields = []
    for k in shape:
        if k in SAMPLE_FLOATS:
            fields.append(f"{k}=%({k})r")
        elif k in SAMPLE_INTS:
            # %d writes an integral float as the integer it is, as the per-field path does
            fields.append(f"{k}=%({k})di")
    return f"wb_sample,ch=%(c)s,dev={DEV_MARK} {','.join(fields)} %(t)d000"


def _field_line(prefix: str, row: dict[str, Any]) -> str:
    fields = []
    for k, v in row.items():
        if k in SAMPLE_FLOATS:
            # repr of a float round-trips; a JSON integer in a float field prints without a
            # decimal point, which line protocol also reads as float.
            fields.append(f"{k}={v!r}")
        elif k in SAMPLE_INTS:
            fields.append(f"{k}={int(v)}i")
    return f"{prefix}{','.join(fields)} {int(row['t']) * 1000 + sub_us(row)}"


def sample_lines(dev: str, rows: Sequence[dict[str, Any]], out: list[str]) -> None:
    """Append one wb_sample line per row. Rows are validated contract rows."""
    append = out.append
    formats: dict[tuple[str, ...], str | None] = {}
    mark = dev.replace("%", "%%")
    for row in rows:
        shape = tuple(row)
        try:
            fmt = formats[shape]
        except KeyError:
            if shape in _TEMPLATES:
                template = _TEMPLATES[shape]
            else:
                template = _template(shape)
                if len(_TEMPLATES) < MAX_TEMPLATES:
                    _TEMPLATES[shape] = template
            fmt = formats[shape] = None if template is None else template.replace(DEV_MARK, mark)
        if fmt is None:
            append(_field_line(f"wb_sample,ch={row['c']},dev={dev} ", row))
        else:
            append(fmt % row)


def sample_block(dev: str, rows: Sequence[dict[str, Any]]) -> str:
    """The rows' wb_sample lines as one block, newline-separated (none after the last)."""
    out: list[str] = []
    sample_lines(dev, rows, out)
    return "\n".join(out)


def _cast(measurement: str, fields: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in fields.items():
        if v is None:
            continue
        kind = layout_field_type(measurement, k)
        if kind == "float":
            out[k] = float(v)
        elif kind == "int":
            out[k] = int(v)
        elif kind == "bool":
            out[k] = bool(v)
        elif kind == "string":
            out[k] = str(v)
    return out


def load_point_writer() -> None:
    """Import what point_line needs now. influxdb-client takes about 0.3 s of CPU to import, so a
    long-running writer (the collector) pays for it while it starts rather than at its first health
    line, with messages streaming in behind it; a report that only reads never pays for it."""
    import influxdb_client  # noqa: F401


def point_line(measurement: str, tags: dict[str, str], fields: dict[str, Any], t_ms: int) -> str | None:
    """One line of a low-volume measurement, or None when it has no field left to write."""
    from influxdb_client import Point, WritePrecision

    cast = _cast(measurement, fields)
    if not cast:
        return None
    point = Point(measurement)
    for k, v in tags.items():
        if v is not None and v != "":
            point.tag(k, str(v))
    for k, v in cast.items():
        point.field(k, v)
    point.time(int(t_ms) * 1000, WritePrecision.US)
    line: str = point.to_line_protocol()
    return line


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


def status_line(status: dict[str, Any], t_ms: int) -> str | None:
    return point_line("wb_status", {"dev": status["dev"]}, status_fields(status), t_ms)


def phase_line(event: dict[str, Any]) -> str | None:
    tags = {"run": event["run"], "phase": event["phase"], "event": event["event"]}
    return point_line("wb_phase", tags, phase_fields(event), event["t"])


def result_lines(result: dict[str, Any]) -> list[str]:
    lines = [point_line("wb_result", tags, fields, result["t"]) for tags, fields in result_points(result)]
    return [line for line in lines if line]


def health_line(collector: str, dev: str, fields: dict[str, float | int], t_ms: int) -> str | None:
    return point_line("wb_health", {"dev": dev, "collector": collector}, dict(fields), t_ms)


def meta_line(meta: dict[str, Any], t_ms: int) -> str | None:
    return point_line("wb_meta", {"dev": meta["dev"]}, meta_fields(meta), t_ms)


def reject_line(collector: str, reject: dict[str, Any]) -> str | None:
    fields = {
        "topic": reject.get("topic"),
        "dev": reject.get("dev"),
        "detail": reject.get("detail"),
        "size": reject.get("size"),
    }
    return point_line("wb_reject", {"reason": reject["reason"], "collector": collector}, fields, reject["t"])
