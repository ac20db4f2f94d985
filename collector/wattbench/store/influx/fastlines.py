"""A sample batch read, checked and written as InfluxDB line protocol in one pass.

The InfluxDB store's one pass (lineproto.LineEncoder), run in the collector's checking processes.
In a checking process a valid sample batch was decoded into dicts and then formatted
row by row; formatting was the larger half of that process's work, most of it Python's float repr.
Here the batch is decoded by msgspec into Structs, checked against the same schema translation as
fastcheck, and written back out by msgspec's encoder, which writes floats in their shortest round-trip
form in C.

The rows are written under a second Struct type of the same fields, in line-protocol order, whose
encoded names are the line protocol around each value (OutRow: msgspec's rename). One translate then
deletes JSON's own bytes and turns two placeholders into a newline and a comma:

    {"000|wb_sample;ch=":"psu1",";dev=bench-a ":"","s=":7,"i;n=":3,"i":"",";W=":231.4,";Wh=":0.5," ":1763709600000}
    000
    wb_sample,ch=psu1,dev=bench-a s=7i,n=3i,W=231.4,Wh=0.5 1763709600000000

The order makes every name a constant: the channel (the tag) first, then a marker field whose name is
",dev=<dev> " and whose value is the empty string, then the required sequence number, the first
field, right after the space; then the other integer fields, each following an integer and so
starting with its "i"; then a second marker, named "i", which ends the last integer whichever it is;
then the float fields, each starting with its comma; then the time, named with the space. Each row's
"000" (ms to the store's us) and newline start the next row's name. (With the floats first, the
first present one brought a comma after the space, which a pass over the text had to take out.) The
contract's patterns keep every byte the translate touches out of device and channel names
(_plain_name), and numbers hold none. Each batch's rows change type in place (`__class__`), which
Python allows between Structs of the same fields: their slots are laid out by name, whatever the order
of the fields, so the type read into keeps the order appliances write in (see _row_type). The compile
step checks that the change works here and gives up the one pass if not. Neither type is tracked by
the garbage collector (msgspec's gc=False): a row holds only strings and numbers, so it is never part
of a cycle, and a batch's 200 rows no longer count towards the collections they used to set off.

Like fastcheck, this path may only say "valid". It answers None, and the caller runs the complete
check, for anything it cannot vouch for: a refusal by msgspec, a surrogate escape, a key count that
does not match the ':' bytes of the text (a duplicate key, or a marker sent by a device), a row
with only the required keys (minProperties), a row with flags (f; a clock-step flag moves the
time, see layout.sub_us), a payload dev other than the topic's, or a sample from the future.
tests/collector/test_fastlines.py holds its lines to the points the row-by-row formatter writes and
its acceptance to the reference check's.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

import msgspec

from ...core.fastcheck import REFUSED, SURROGATE_ESCAPE, Translator, Untranslatable, translate_pattern
from ..base import BatchColumns, Encoded, OnePass
from ..layout import SAMPLE_FLOATS, SAMPLE_INTS

# Lines carry microseconds so that a sample stamped inside the overlap after a backward clock step can
# sit beside the earlier sample of the same millisecond instead of overwriting it (see layout.sub_us).
# The one pass writes the time as the sample's ms and "000".
PRECISION = "us"

MARKER = "_d"  # the field that becomes the device tag; no contract key starts with "_"
CLOSER = "_i"  # the field that ends the integers with their "i"
TAG, FIRST_INT, TIME = "c", "s", "t"  # the channel tag, the required integer, the time (ms)
# Devices whose row type for writing out is kept: about 6 KB each. Past this many the types are made
# again as batches come, at about 25 us a batch.
OUT_TYPES_KEPT = 2048
FLAGS = "f"  # an integer whose clock-step bit moves the time: rows with it go the row-by-row way
ENERGY = "Wh"  # the energy counter, which accounting follows per channel


def _count_set(obj: Any) -> int:
    """Keys that were present in the JSON object a Struct was decoded from, nested objects included."""
    n = 0
    for name in obj.__struct_fields__:
        value = getattr(obj, name)
        if value is msgspec.UNSET:
            continue
        n += 1
        if isinstance(value, msgspec.Struct):
            n += _count_set(value)
    return n


# What must never reach a line inside a name: line protocol's separators, and what the JSON text and
# its replacements use. The contract's patterns exclude all of these; _plain_name checks that they do.
_NOT_IN_NAMES = ' ,="{}:;|\\\n\té'


def _plain_name(node: dict[str, Any]) -> bool:
    """The string schema's pattern, as msgspec checks it, refuses every name holding one of
    _NOT_IN_NAMES, wherever it sits."""
    pattern = node.get("pattern")
    if node.get("type") != "string" or not pattern:
        return False
    probe = re.compile(translate_pattern(pattern))
    return not any(
        probe.search(text) for ch in _NOT_IN_NAMES for text in (ch, f"a{ch}", f"{ch}a", f"a{ch}a", f"0{ch}0")
    )


class RowTypes(NamedTuple):
    """How a sample row is read and written: the Struct it is decoded into, its fields in line order
    (the Struct written out has them so), the integer fields after the first, and the channel's type."""

    row: Any
    line_order: list[str]
    later_ints: list[str]
    tag: Any


def _row_type(translator: Translator, row: dict[str, Any]) -> RowTypes | None:
    """The Struct types of a sample row, or None when the row schema is not the shape this module
    writes. The Struct takes any string as the channel: its pattern costs as much as the rest of the
    decode when msgspec runs it on every row, and a batch has only a few channels, so the caller
    checks each distinct one against the channel's type instead."""
    props: dict[str, Any] = row.get("properties", {})
    required = set(row.get("required", ()))
    if required != {TAG, FIRST_INT, TIME} or row.get("additionalProperties") is not False:
        return None
    if row.get("minProperties", len(required) + 1) != len(required) + 1:
        return None
    floats = [k for k in props if k in SAMPLE_FLOATS]
    ints = [k for k in props if k in SAMPLE_INTS and k not in (FIRST_INT, FLAGS)]
    if set(props) - {TAG, TIME, FIRST_INT, FLAGS, *floats, *ints}:
        return None  # a key with no place in the line
    if not _plain_name(translator.resolve(props[TAG])):
        return None

    def field(k: str) -> tuple[Any, ...]:
        if k == TAG:
            return (TAG, str)
        if k in required:
            return (k, translator.type_of(props[k], ()))
        return (k, translator.type_of(props[k], ()) | msgspec.UnsetType, msgspec.UNSET)

    # Read in the schema's order, which is the order appliances write (firmware encode.row): msgspec
    # looks for each key from the field after the last one found, so keys in field order are found at
    # once, where the line's order had it search most of the row's fields for each key.
    # forbid_unknown_fields: a row with flags, or with a key the schema does not name, is refused here.
    # kw_only lets required fields follow ones with defaults.
    readable = [field(k) for k in props if k != FLAGS] + [(MARKER, str, ""), (CLOSER, str, "")]
    row_type = msgspec.defstruct("LineRow", readable, kw_only=True, forbid_unknown_fields=True, gc=False)
    line_order = [TAG, MARKER, FIRST_INT, *ints, CLOSER, *floats, TIME]
    return RowTypes(row_type, line_order, ints, translator.type_of(props[TAG], ()))


def _same_after_retype(row_type: Any, out_type: Any, ints: list[str]) -> bool:
    """Every field of a row holds the same value after the row changes type. The two types list their
    fields in different orders; were the slots ever laid out in field order instead of by name, values
    would silently change places, so the one pass is given up unless each one stays where it was."""
    values: dict[str, Any] = {}
    for k, name in enumerate(row_type.__struct_fields__):
        if name in (TAG, MARKER, CLOSER):
            values[name] = f"v{k}"
        elif name in (FIRST_INT, TIME, *ints):
            values[name] = k + 1
        else:
            values[name] = k + 0.5
    row = row_type(**values)
    row.__class__ = out_type
    return all(getattr(row, name) == value for name, value in values.items())


def compile_sample_lines(schema: dict[str, Any], measurement: str = "wb_sample") -> OnePass | None:
    """lines(raw, dev, latest_ms) for a sample-batch schema (refs inlined), or None when the schema is
    not one this module can translate."""
    translator = Translator(schema)
    props: dict[str, Any] = schema.get("properties", {})
    try:
        items = translator.resolve(props["samples"]["items"])
        shaped = _row_type(translator, items)
        if shaped is None or schema.get("additionalProperties") is not False or PRECISION != "us":
            return None  # "us": the time is written as the sample's ms and "000"
        if not _plain_name(translator.resolve(props["dev"])):
            return None
        row_type, fields, later_ints, tag_type = shaped
        has_energy = ENERGY in row_type.__struct_fields__
        # The batch as the schema has it, its rows read into the row type.
        translator.overrides[("samples", "*")] = row_type
        batch_type = translator.type_of(schema, ())
        if "samples" not in schema.get("required", ()) or translator.post:
            return None  # minProperties outside the rows: not expressible here
        decoder = msgspec.json.Decoder(batch_type)
    except (Untranslatable, KeyError, TypeError, ValueError):
        return None

    def out_name(k: str, dev: str) -> str:
        if k == TAG:
            return f"000|{measurement};ch="
        if k == MARKER:
            return f";dev={dev} "
        if k == FIRST_INT:
            return f"{k}="
        if k == CLOSER:
            return "i"
        if k == TIME:
            return " "
        return f"i;{k}=" if k in later_ints else f";{k}="

    def make_out_type(dev: str) -> Any:
        names = {k: out_name(k, dev) for k in fields}
        return msgspec.defstruct(
            "OutRow", [(k, object) for k in fields], kw_only=True, rename=names, gc=False
        )

    out_types: dict[str, Any] = {}

    def out_type(dev: str) -> Any:
        try:
            return out_types[dev]
        except KeyError:
            if len(out_types) >= OUT_TYPES_KEPT:
                out_types.clear()
            made = out_types[dev] = make_out_type(dev)
            return made

    encode_rows = msgspec.json.Encoder().encode_lines
    try:  # the type change the rows go through; a Python or msgspec that refuses it gets no one pass
        probe = row_type(c="x", s=1, t=2)
        probe.__class__ = out_type("d")
        if (
            encode_rows([probe])
            != b'{"000|' + measurement.encode() + b';ch=":"x",";dev=d ":"","s=":1,"i":""," ":2}\n'
        ):
            return None
        if not _same_after_retype(row_type, out_type("d"), later_ints):
            return None
    except (TypeError, ValueError, msgspec.ValidationError):
        return None
    convert = msgspec.convert
    # Deleted: JSON's own bytes (every comma is JSON's: the names use ';'). Mapped: the placeholders.
    to_lines = bytes.maketrans(b";|", b",\n")
    json_only = b'{}":,\n'
    # A row holding only the required keys: the sequence number, the second marker and the time in a
    # row. The plain search first, for a row without floats: rare.
    no_floats = b'"i":""," ":'
    bare = re.compile(
        re.escape(b'"' + FIRST_INT.encode() + b'=":') + rb"-?\d+," + re.escape(no_floats)
    ).search
    surrogate = SURROGATE_ESCAPE.search

    def lines(raw: bytes, dev: str, latest_ms: int) -> Encoded | None:
        # A batch without a backslash holds no escape at all: one memchr instead of the pattern's scan.
        if b"\\" in raw and surrogate(raw):
            return None
        try:
            batch: Any = decoder.decode(raw)  # a LineBatch, defined above at run time
        except REFUSED:
            return None
        if batch.dev != dev:
            return None
        rows = batch.samples
        channels = [r.c for r in rows]
        try:
            for name in set(channels):
                convert(name, tag_type)
        except msgspec.ValidationError:
            return None
        out = out_type(dev)
        for r in rows:
            r.__class__ = out
        encoded = encode_rows(rows)
        body = encoded.translate(to_lines, json_only)
        # One ':' per key in the text: the batch's own and its objects' keys, and the rows' keys as
        # written out, less the two markers written in every row. The rows' keys are counted from
        # what the translate deleted, without a pass of their own: a row of k keys loses 4k + 8 bytes
        # (its braces and newline, each name's quotes and ':', the commas between pairs, the quotes
        # of the channel and of the markers' empty values). Their values are numbers and channel
        # names and their names hold the device's name, both checked against patterns that refuse
        # every deleted byte (_plain_name), so nothing else is deleted.
        rows_keys, odd = divmod(len(encoded) - len(body) - 8 * len(rows), 4)
        keys = _count_set(batch) + rows_keys - 2 * len(rows)
        if odd or keys != raw.count(b":") or (no_floats in encoded and bare(encoded)):
            return None
        times = [r.t for r in rows]
        if max(times) > latest_ms:
            return None
        if not body.isascii():  # not with the contract's patterns (_plain_name); never a refusal
            return None
        # The first row's name starts with the "000" and newline of a row before it; the last row's
        # time gets its own.
        block = body[4:] + b"000"
        energy = [r.Wh for r in rows] if has_energy else [msgspec.UNSET] * len(rows)
        columns = BatchColumns(
            batch.boot,
            msgspec.to_builtins(batch.clk),
            [r.s for r in rows],
            channels,
            times,
            energy,
            msgspec.UNSET,
        )
        return Encoded(block, columns)

    return lines
