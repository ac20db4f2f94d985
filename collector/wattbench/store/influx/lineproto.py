"""InfluxDB line protocol for the wattbench layout (schema/v1/influx.json).

wb_sample lines are built directly from the sample rows: at thousands of rows per second the cost of a
Point object per row would dominate. Tag values need no escaping there because the contract's device
and channel patterns exclude space, comma, '=' and quotes. The low-volume measurements go through
influxdb_client.Point, which escapes strings properly, with every field cast to the type the layout
names so that a JSON 231 never lands as an integer in a float field.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..base import OnePass
from ..layout import (
    SAMPLE_FLOATS,
    SAMPLE_INTS,
    layout_field_type,
    meta_fields,
    phase_fields,
    result_points,
    status_fields,
    sub_us,
)
from .fastlines import compile_sample_lines

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
    import influxdb_client  # noqa: F401  # late: start-up


def point_line(measurement: str, tags: dict[str, str], fields: dict[str, Any], t_ms: int) -> str | None:
    """One line of a low-volume measurement, or None when it has no field left to write."""
    from influxdb_client import Point, WritePrecision  # late: start-up

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


class LineEncoder:
    """The InfluxDB store's SampleEncoder: a batch's wb_sample lines, UTF-8, the form they are sent
    in. It holds nothing, so it pickles to its name; its one pass is store/influx/fastlines.py."""

    def encode(self, dev: str, rows: Sequence[dict[str, Any]]) -> bytes:
        return sample_block(dev, rows).encode()

    def one_pass(self, schema: dict[str, Any]) -> OnePass | None:
        return compile_sample_lines(schema)
