"""The collector's fast acceptance check never accepts what the contract's schema refuses.

It is a translation of the schema into msgspec types, used only to say "valid" quickly; a refusal
always goes to the reference check (fastjsonschema). So the one property that matters is soundness:
fast-accepted implies schema-accepted, over the shared vectors and over generated near-misses. The
one-pass form (compile_fast_decode) must also return the very document the strict decoder reads.
"""

from __future__ import annotations

import json
from typing import Any

import fastjsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wattbench_schema as contract
from wattbench.core.fastcheck import SURROGATE_ESCAPE, compile_fast, compile_fast_decode, count_keys
from wattbench.ingest.validate import Validator, decode

REFERENCE = {name: fastjsonschema.compile(contract.inline_refs(name)) for name in contract.SCHEMA_NAMES}
FAST = {name: compile_fast(contract.inline_refs(name)) for name in contract.SCHEMA_NAMES}
FAST_DECODE = {name: compile_fast_decode(contract.inline_refs(name)) for name in contract.SCHEMA_NAMES}


def same_document(a: Any, b: Any) -> bool:
    """Equal, and of the same JSON type throughout, except that an integer may stand as the equal float
    (the one difference the one-pass decode may make, in number fields)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(same_document(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(same_document, a, b))
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b and (type(a) is type(b) or type(a) is float)
    return type(a) is type(b) and a == b


def fast_decode_is_sound(name: str, raw: bytes) -> Any:
    """The one-pass decode's document, checked against the strict decoder and the reference."""
    fast = FAST_DECODE[name]
    assert fast is not None
    doc = fast(raw)
    if doc is not None:
        strict = decode(raw)  # must not raise: the fast decode read strict JSON
        assert reference_accepts(name, strict)
        assert same_document(doc, strict), (doc, strict)
    return doc


def reference_accepts(name: str, doc: Any) -> bool:
    try:
        REFERENCE[name](doc)
    except fastjsonschema.JsonSchemaValueException:
        return False
    return True


def test_the_sample_batch_schema_is_translated() -> None:
    # The hot path: if this ever stops translating, the collector silently loses most of its speed.
    assert FAST["samples"] is not None


@pytest.mark.parametrize(
    "vec", [v for v in contract.vectors() if FAST.get(v.schema) is not None], ids=lambda v: v.name
)
def test_fast_accept_implies_the_schema_accepts_every_vector(vec: contract.Vector) -> None:
    fast = FAST[vec.schema]
    assert fast is not None
    try:
        doc = decode(vec.raw)
    except contract.DecodeError:
        return  # refused before any schema check
    if fast(vec.raw, doc):
        assert reference_accepts(vec.schema, doc), vec.why
    if vec.valid and vec.schema == "samples":
        assert fast(vec.raw, doc), "a valid sample batch should take the fast path"


@pytest.mark.parametrize(
    "vec", [v for v in contract.vectors() if v.schema == "samples"], ids=lambda v: v.name
)
def test_the_one_pass_decode_reads_what_the_strict_decoder_reads(vec: contract.Vector) -> None:
    doc = fast_decode_is_sound("samples", vec.raw)
    if vec.valid and doc is None:
        # Only a ':' inside a string or a surrogate escape may send a valid batch the slow way.
        strict = decode(vec.raw)
        assert count_keys(strict) != vec.raw.count(b":") or SURROGATE_ESCAPE.search(vec.raw), vec.why


@pytest.mark.parametrize(
    "raw",
    [
        # a key the schema does not name: msgspec skips it, the key count does not
        b'{"v":1,"dev":"a","boot":1,"clk":{"sync":"ntp"},"samples":[{"s":1,"t":1700000000000,"c":"x","W":1,"zz":2}]}',
        b'{"v":1,"dev":"a","boot":1,"clk":{"sync":"ntp","x":1},"samples":[{"s":1,"t":1700000000000,"c":"x","W":1}]}',
        b'{"v":1,"dev":"a","boot":1,"clk":{"sync":"ntp"},"samples":[{"s":1,"t":1700000000000,"c":"x","W":1}],"x":0}',
        # a duplicate key, at each level
        b'{"v":1,"dev":"a","boot":1,"clk":{"sync":"ntp"},"samples":[{"s":1,"t":1700000000000,"c":"x","W":1,"W":2}]}',
        b'{"v":1,"dev":"a","dev":"b","boot":1,"clk":{"sync":"ntp"},"samples":[{"s":1,"t":1700000000000,"c":"x","W":1}]}',
        # an escaped lone surrogate
        b'{"v":1,"dev":"a","boot":1,"clk":{"sync":"ntp"},"samples":[{"s":1,"t":1700000000000,"c":"\\ud800","W":1}]}',
        # no reading in a row (minProperties), NaN, a float sequence number, a version as float
        b'{"v":1,"dev":"a","boot":1,"clk":{"sync":"ntp"},"samples":[{"s":1,"t":1700000000000,"c":"x"}]}',
        b'{"v":1,"dev":"a","boot":1,"clk":{"sync":"ntp"},"samples":[{"s":1,"t":1700000000000,"c":"x","W":NaN}]}',
        b'{"v":1,"dev":"a","boot":1,"clk":{"sync":"ntp"},"samples":[{"s":1.0,"t":1700000000000,"c":"x","W":1}]}',
        b'{"v":1.0,"dev":"a","boot":1,"clk":{"sync":"ntp"},"samples":[{"s":1,"t":1700000000000,"c":"x","W":1}]}',
        # invalid UTF-8 inside a string, and nesting deeper than any schema level
        b'{"v":1,"dev":"\x8a","boot":1,"clk":{"sync":"ntp"},"samples":[{"s":1,"t":1700000000000,"c":"x","W":1}]}',
        b'{"v":1,"dev":"a","boot":1,"clk":{"sync":"ntp"},"samples":[{"s":1,"t":1700000000000,"c":"x","W":1}],"x":'
        + b"[" * 100_000
        + b"]" * 100_000
        + b"}",
        b"[1]",
        b'{"v":1,"dev":"a","boot":1,"clk":{"sync":"ntp"},"samples":[{"s":1,"t":1700000000000,"c":"x","W":1}]',
    ],
)
def test_the_one_pass_decode_leaves_these_to_the_strict_way(raw: bytes) -> None:
    assert FAST_DECODE["samples"] is not None
    assert FAST_DECODE["samples"](raw) is None


def test_an_integer_reading_arrives_as_the_equal_float() -> None:
    raw = b'{"v":1,"dev":"a","boot":1,"clk":{"sync":"ntp","age":3},"samples":[{"s":1,"t":1700000000000,"c":"x","W":231}]}'
    doc = fast_decode_is_sound("samples", raw)
    assert doc is not None
    row = doc["samples"][0]
    assert type(row["W"]) is float and row["W"] == 231.0
    assert type(row["s"]) is int and type(row["t"]) is int and type(doc["clk"]["age"]) is float


BATCH = {
    "v": 1,
    "dev": "bench-a",
    "boot": 3,
    "clk": {"sync": "ntp", "age": 4.5, "off": -1.5, "err": 2.0},
    "samples": [
        {"s": 1, "t": 1_763_709_600_000, "c": "psu1", "W": 231.5, "V": 229.8, "A": 1.01, "u": 0.005},
        {"s": 2, "t": 1_763_709_600_100, "c": "rail12v", "W": 96.25, "Wmin": 95.9, "Wmax": 96.7, "n": 100},
    ],
}


@pytest.mark.parametrize(
    "where, value",
    [
        (("samples", 0, "c"), "psu1\n"),  # Python's `$` matches before a final newline; the schema's does not
        (("dev",), "bench-a\n"),
        (("v",), 1.0),  # the schema's const 1 accepts 1.0; the fast path leaves it to the reference
        (("v",), True),
        (("samples", 0, "s"), 2.0),
        (("samples", 0, "W"), True),
        (("samples", 0, "W"), -0.1),
        (("samples", 0, "u"), 1.5),
        (("samples", 0, "PF"), None),
        (("clk", "sync"), "gps"),
        (("samples",), []),
    ],
)
def test_near_misses_are_left_to_the_reference(where: tuple[Any, ...], value: Any) -> None:
    doc = json.loads(json.dumps(BATCH))
    node = doc
    for step in where[:-1]:
        node = node[step]
    node[where[-1]] = value
    raw = json.dumps(doc, separators=(",", ":")).encode()
    fast = FAST["samples"]
    assert fast is not None
    assert not fast(raw, decode(raw))
    assert fast_decode_is_sound("samples", raw) is None


def test_a_row_with_no_reading_is_refused_by_both() -> None:
    doc = json.loads(json.dumps(BATCH))
    doc["samples"][0] = {"s": 1, "t": 1_763_709_600_000, "c": "psu1"}  # minProperties 4
    raw = json.dumps(doc).encode()
    fast = FAST["samples"]
    assert fast is not None
    assert not fast(raw, decode(raw))
    assert not reference_accepts("samples", doc)


def test_the_reasons_are_the_reference_checks() -> None:
    doc = json.loads(json.dumps(BATCH))
    doc["samples"][1]["W"] = -5
    out = Validator().check(
        contract.topic_for("samples", dev="bench-a"), json.dumps(doc).encode(), 1_763_709_700_000
    )
    assert out.reason == "schema" and "samples[1].W must be bigger than or equal to 0" in out.detail


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
keys = st.sampled_from(
    # "_d", "_i": the marker fields of ingest.fastlines (tests/collector/test_fastlines.py uses these batches)
    [
        "s",
        "t",
        "c",
        "W",
        "V",
        "A",
        "PF",
        "Hz",
        "Wh",
        "T",
        "RH",
        "u",
        "n",
        "Wmin",
        "Wmax",
        "f",
        "_d",
        "_i",
        "x",
        "",
    ]
)


@st.composite
def mutated_batches(draw: st.DrawFn) -> bytes:
    """BATCH with one row key set to any JSON value or dropped, and perhaps one top-level key set."""
    doc = json.loads(json.dumps(BATCH))
    row, key = draw(st.integers(0, 1)), draw(keys)
    if draw(st.booleans()):
        doc["samples"][row].pop(key, None)
    else:
        doc["samples"][row][key] = draw(json_values)
    if draw(st.booleans()):
        doc[draw(st.sampled_from(["v", "dev", "boot", "clk", "samples", "mac", "extra"]))] = draw(json_values)
    return json.dumps(doc, separators=(",", ":"), allow_nan=False).encode()


@settings(max_examples=600, deadline=None, derandomize=True)
@given(raw=mutated_batches())
def test_fast_accept_implies_the_schema_accepts_generated_batches(raw: bytes) -> None:
    try:
        parsed = decode(raw)
    except contract.DecodeError:
        return
    fast = FAST["samples"]
    assert fast is not None
    if fast(raw, parsed):
        assert reference_accepts("samples", parsed)
    one_pass = fast_decode_is_sound("samples", raw)
    every_colon_a_key = count_keys(parsed) == raw.count(b":") and not SURROGATE_ESCAPE.search(raw)
    if fast(raw, parsed) and every_colon_a_key:
        assert one_pass is not None, "what the two-pass check accepts, the one-pass decode reads"
