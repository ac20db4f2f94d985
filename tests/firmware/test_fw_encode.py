"""Payload encoding: the firmware's hand-written encoder reproduces every valid samples vector of
the contract, and everything it publishes validates against schema/."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wattbench_schema as schema
from wattbench_fw import encode
from wattbench_fw.contract import BOUNDS, ROW_KEYS
from wattbench_fw.sampler import DECIMALS, clean

SAMPLE_VECTORS = [v for v in schema.vectors("valid") if v.schema == "samples"]


def close(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return (
            isinstance(b, list) and len(a) == len(b) and all(close(x, y) for x, y in zip(a, b, strict=True))
        )
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=0)
    return a == b


def reencode(payload: dict[str, Any]) -> bytes:
    rows = [encode.row(r) for r in payload["samples"]]
    raw = encode.batch(payload["dev"], payload["boot"], payload["clk"], rows)
    if "mac" in payload:
        raw = raw[:-1] + b',"mac":"' + payload["mac"].encode() + b'"}'
    return raw


@pytest.mark.parametrize("vec", SAMPLE_VECTORS, ids=lambda v: v.name)
def test_vectors_reencode_identically(vec: schema.Vector) -> None:
    raw = reencode(vec.payload)
    decoded = schema.strict_loads(raw)
    assert close(decoded, vec.payload)
    schema.jsonschema_validator("samples").validate(decoded)


def test_integral_floats_lose_the_point() -> None:
    assert encode.row({"s": 1, "t": 1763709600000, "c": "a", "W": 50.0, "Hz": 50.0, "PF": 0.95}) == (
        '{"s":1,"t":1763709600000,"c":"a","W":50,"PF":0.95,"Hz":50}'
    )
    assert encode.num(-0.0) == "0" and encode.num(1e-05) == "1e-05"


def test_status_meta_and_will_validate() -> None:
    clk = {"sync": "ntp", "age": 3.5, "off": -1.25, "err": 2.0, "ppm": 12.5, "steps": 0}
    status = encode.status(
        "bench-a",
        "online",
        t_ms=1763709600000,
        reason="boot",
        fw="0.1.0",
        boot=3,
        up=1.5,
        seq=1000,
        buf={"ram": 1, "flash": 2, "dropped": 0},
        clk=clk,
        rssi=-60,
        mem=1234,
    )
    schema.jsonschema_validator("status").validate(schema.strict_loads(status))
    will = schema.strict_loads(encode.will("bench-a"))
    assert will == {"v": 1, "dev": "bench-a", "state": "offline"}
    schema.jsonschema_validator("status").validate(will)
    chans = [
        {"c": "psu1", "meter": "pzem004t", "q": ["W", "V"], "hz": 1, "model": "PZEM-004T-100A", "acc": 0.005}
    ]
    meta = encode.meta("bench-a", "0.1.0", "esp32", chans, t_ms=1763709600000, hmac=True)
    schema.jsonschema_validator("meta").validate(schema.strict_loads(meta))


QUANTITY = st.floats(allow_nan=True, allow_infinity=True, width=64)


@settings(max_examples=300, deadline=None)
@given(
    vals=st.dictionaries(st.sampled_from([k for k in ROW_KEYS if k != "n"]), QUANTITY, max_size=8),
    flags=st.integers(0, 511),
    seq=st.integers(0, 2**53 - 1),
)
def test_whatever_a_meter_returns_the_batch_validates(vals: dict[str, float], flags: int, seq: int) -> None:
    clean_vals, clean_flags = clean(vals, flags)
    row = dict(clean_vals, s=seq, t=1763709600000, c="psu1")
    if clean_flags:
        row["f"] = clean_flags
    raw = encode.batch("bench-a", 1, {"sync": "host"}, [encode.row(row)])
    doc = schema.strict_loads(raw)
    schema.jsonschema_validator("samples").validate(doc)
    for key, value in clean_vals.items():
        lo, hi = BOUNDS.get(key, (1, 1e6))
        assert lo <= value <= hi
        if key in DECIMALS:
            assert round(value, DECIMALS[key]) == value


@pytest.mark.parametrize("n", [0, 1, 2, 40])
def test_a_batch_signed_as_it_is_encoded_is_the_signed_payload(n: int) -> None:
    """encode.batch with a signer writes payload and signature in one allocation (a board's heap may
    not hold two copies of a batch); the bytes are those Signer.sign gives for the unsigned batch."""
    from wattbench_fw.sign import Signer

    signer = Signer(b"device-key")
    clk = {"sync": "ntp", "age": 3, "off": 0.2}
    rows: list[str | bytes] = [
        encode.row({"s": i, "t": 1767225600000 + i, "c": "psu1", "W": 250.5}) for i in range(n)
    ]
    rows = [r.encode() if i % 2 else r for i, r in enumerate(rows)]  # text and bytes rows alike
    unsigned = encode.batch("bench-a", 3, clk, rows)
    signed = encode.batch("bench-a", 3, clk, rows, signer)
    assert signed == signer.sign(unsigned)
