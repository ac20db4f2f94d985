"""The collector's fast acceptance check never accepts what the contract's schema refuses.

It is a translation of the schema into msgspec types, used only to say "valid" quickly; a refusal
always goes to the reference check (fastjsonschema). So the one property that matters is soundness:
fast-accepted implies schema-accepted, over the shared vectors and over generated near-misses.
"""

from __future__ import annotations

import json
from typing import Any

import fastjsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wattbench_schema as contract
from wattbench.ingest.fastcheck import compile_fast
from wattbench.ingest.validate import Validator, decode

REFERENCE = {name: fastjsonschema.compile(contract.inline_refs(name)) for name in contract.SCHEMA_NAMES}
FAST = {name: compile_fast(contract.inline_refs(name)) for name in contract.SCHEMA_NAMES}


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
    ["s", "t", "c", "W", "V", "A", "PF", "Hz", "Wh", "T", "RH", "u", "n", "Wmin", "Wmax", "f", "x", ""]
)


@settings(max_examples=600, deadline=None, derandomize=True)
@given(
    row=st.integers(0, 1),
    key=keys,
    value=json_values,
    drop=st.booleans(),
    top=st.sampled_from(["v", "dev", "boot", "clk", "samples", "mac", "extra"]),
    top_value=json_values,
    touch_top=st.booleans(),
)
def test_fast_accept_implies_the_schema_accepts_generated_batches(
    row: int, key: str, value: Any, drop: bool, top: str, top_value: Any, touch_top: bool
) -> None:
    doc = json.loads(json.dumps(BATCH))
    if drop:
        doc["samples"][row].pop(key, None)
    else:
        doc["samples"][row][key] = value
    if touch_top:
        doc[top] = top_value
    raw = json.dumps(doc, separators=(",", ":"), allow_nan=False).encode()
    try:
        parsed = decode(raw)
    except contract.DecodeError:
        return
    fast = FAST["samples"]
    assert fast is not None
    if fast(raw, parsed):
        assert reference_accepts("samples", parsed)
