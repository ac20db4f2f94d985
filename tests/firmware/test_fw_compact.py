"""The compact flash form of a samples batch: it rebuilds the exact bytes encode.batch (and the
signer) made, for the contract's vectors and for realistic AC and DC batches; what it cannot rebuild
exactly is kept as text, never approximated; a damaged record is an error, not a wrong payload."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

import wattbench_schema as schema
from wattbench_fw import compact, encode
from wattbench_fw.sign import Signer

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "firmware" / "spool-v1"
CLK = {"sync": "ntp", "age": 42.5, "off": -3.2, "err": 4.1, "ppm": 11.7, "steps": 0}
T0 = 1_763_709_600_000


def ac_row(i: int) -> dict[str, Any]:
    return {
        "s": 100_000 + i,
        "t": T0 + i * 25,
        "c": f"psu{i % 4}",
        "W": round(231.4 + (i % 17) * 0.3, 1),
        "V": round(229.8 + (i % 3) * 0.1, 1),
        "A": round(1.012 + (i % 5) * 0.001, 3),
        "PF": 0.99,
        "Hz": 50.0,
        "Wh": round(1234.5 + i * 0.0064, 4),
        "u": 0.005,
    }


def dc_row(i: int) -> dict[str, Any]:
    return {
        "s": 7 + i,
        "t": T0 + i * 100,
        "c": "rail12v",
        "W": round(96.25 + (i % 13) * 0.013, 3),
        "V": 12.031,
        "A": round(8.0002 + (i % 7) * 0.0011, 4),
        "n": 100,
        "Wmin": 95.91,
        "Wmax": 96.702,
    }


def batch(rows: list[dict[str, Any]], dev: str = "bench-a", clk: dict[str, Any] | None = None) -> bytes:
    return encode.batch(dev, 3, CLK if clk is None else clk, [encode.row(r) for r in rows])


def roundtrip(payload: bytes) -> bytes:
    packed = compact.pack(payload)
    assert packed is not None
    assert compact.unpack(packed) == payload
    return packed


def encoded_vectors() -> list[tuple[str, bytes]]:
    out = []
    for vec in schema.vectors("valid"):
        if vec.schema != "samples":
            continue
        p = vec.payload
        out.append(
            (vec.name, encode.batch(p["dev"], p["boot"], p["clk"], [encode.row(r) for r in p["samples"]]))
        )
    return out


@pytest.mark.parametrize(
    ("name", "payload"), encoded_vectors(), ids=lambda x: x if isinstance(x, str) else ""
)
def test_contract_vectors_rebuild_byte_for_byte(name: str, payload: bytes) -> None:
    assert len(roundtrip(payload)) < len(payload), name


def test_every_valid_vector_as_stored_rebuilds_or_is_refused() -> None:
    """The vectors' own JSON text is not what encode writes (other key order, spaces, a "mac"):
    packing gives either the exact bytes back or None, never something else."""
    for vec in schema.vectors("valid"):
        for text in (json.dumps(vec.payload), json.dumps(vec.payload, separators=(",", ":"))):
            packed = compact.pack(text.encode())
            assert packed is None or compact.unpack(packed) == text.encode(), vec.name


def test_signed_batches_keep_their_mac() -> None:
    signed = Signer(b"k" * 32).sign(batch([dc_row(i) for i in range(40)]))
    packed = roundtrip(signed)
    assert signed[-70:].decode() in packed.decode("latin-1")  # the signature, kept as text
    assert len(packed) < len(signed) // 4


@pytest.mark.parametrize(("make", "rows"), [(ac_row, 40), (dc_row, 40), (ac_row, 500), (dc_row, 10)])
def test_realistic_batches_are_at_least_four_times_smaller(make: Any, rows: int) -> None:
    payload = batch([make(i) for i in range(rows)])
    packed = roundtrip(payload)
    assert len(payload) / len(packed) >= 4, (len(payload), len(packed))


def test_the_previous_spools_batches_rebuild() -> None:
    for item in json.loads((FIXTURE / "expected.json").read_text()):
        roundtrip(item["payload"].encode())


@pytest.mark.parametrize(
    "odd",
    [
        {"u": 1e-05},  # exponent form
        {"W": 0.1 + 0.2},  # seventeen decimals: exact, only costly
        {"Wh": 9_999_999_999_999.9999},
        {"PF": -0.5},
        {"T": -12.25, "RH": 0.0},
        {"W": 1e7, "A": 0.00001},
        {"n": 1_000_000},
    ],
)
def test_odd_values_come_back_exactly(odd: dict[str, Any]) -> None:
    rows = [dc_row(i) for i in range(5)]
    rows[2].update(odd)
    payload = batch(rows)
    roundtrip(payload)


@pytest.mark.parametrize(
    "row_text",
    [
        '{"s":1,"t":1763709600000,"c":"x","W":1.5,"X":2}',  # a key outside the contract
        '{"s":1,"t":1763709600000,"c":"x","V":1.5,"W":2}',  # another key order
        '{"s":1,"t":1763709600000,"c":"x","W":1.50}',  # a trailing zero
        '{"s":1,"t":1763709600000,"c":"x","W":-0}',
        '{"s":1,"t":1763709600000,"c":"x","W":+1}',
        '{"s":1,"t":1763709600000,"c":"x","f":0}',
        '{"s":1.0,"t":1763709600000,"c":"x"}',
        '{"s":1,"t":1763709600000,"c":"x","W":1,"W":2}',
        '{"t":1763709600000,"s":1,"c":"x"}',
        '{"s":1,"t":1763709600000,"c":"x","W":"1"}',
        '{"s":1,"t":1763709600000,"c":"x","W":1e3}',
        '{"s":1,"t":1763709600000,"c":"x","W":[1]}',
        '{"s":1,"t":1763709600000,"c":"x, y","W":1}',
        '{"s":1,"t":1763709600000,"c":"x","W":1,"T":{"a":1}}',
        '{"s":1, "t":1763709600000,"c":"x"}',
        "{}",
    ],
)
def test_rows_it_cannot_rebuild_are_kept_as_text(row_text: str) -> None:
    rows = [encode.row(dc_row(i)) for i in range(3)]
    for at in (0, 1, 3):
        payload = encode.batch("bench-a", 3, CLK, [*rows[:at], row_text, *rows[at:]])
        roundtrip(payload)


@pytest.mark.parametrize(
    "payload",
    [
        b'{"v":1,"dev":"a","boot":0,"clk":{"sync":"gps","age":1},"samples":[{"s":1,"t":2,"c":"x"}]}',
        b'{"v":1,"dev":"a","boot":0,"extra":1,"clk":{},"samples":[{"s":1,"t":2,"c":"x"}]}',
        b'{"v":1,"dev":"a","boot":0,"clk":{"age":1e-07},"samples":[{"s":1,"t":2,"c":"x"}]}',
        b'{"v":1,"dev":"a","boot":0,"clk":{},"samples":[{"s":1,"t":2,"c":"x"}],"mac":"zz"}',
        b'{"v":1,"dev":"a","boot":0,"clk":{},"samples":[{"s":1,"t":2,"c":"x"}],"mac":"' + b"A" * 64 + b'"}',
        b'{"v":1,"dev":"a","boot":0,"clk":{},"samples":[{"s":1,"t":2,"c":"x"}],"x":1}',
        b'{"clk":{},"v":1,"dev":"a","boot":0,"samples":[{"s":1,"t":2,"c":"x"}]}',
        b'{"v":1,"dev":"a","boot":-1,"clk":{},"samples":[{"s":1,"t":2,"c":"x"}]}',
    ],
)
def test_heads_and_tails_it_cannot_rebuild_are_kept_as_text(payload: bytes) -> None:
    roundtrip(payload)


@pytest.mark.parametrize("payload", [b"", b"x" * 100, b'{"samples":[]}', b"\xff\xfe", b'{"samples":[}'])
def test_what_is_not_a_batch_is_not_packed(payload: bytes) -> None:
    assert compact.pack(payload) is None


def test_every_truncation_and_a_bad_version_are_errors() -> None:
    packed = roundtrip(batch([ac_row(i) for i in range(8)]))
    for cut in range(len(packed)):
        with pytest.raises(ValueError):
            compact.unpack(packed[:cut])
    with pytest.raises(ValueError):
        compact.unpack(bytes([99]) + packed[1:])
    with pytest.raises(ValueError):
        compact.unpack(packed + b"\x00")


def test_random_batches_rebuild_byte_for_byte() -> None:
    rng = random.Random(19)
    keys = ("W", "V", "A", "PF", "Hz", "Wh", "T", "RH", "u", "n", "Wmin", "Wmax")
    for _ in range(300):
        rows = []
        s = rng.randrange(0, 2**53)
        t = rng.randrange(1_577_836_800_000, 4_102_444_800_000)
        for _ in range(rng.randrange(1, 30)):
            s += rng.choice((1, 1, 1, 2, -5))
            t += rng.choice((0, 100, 25, -3, 100_000))
            r: dict[str, Any] = {"s": max(s, 0), "t": t, "c": rng.choice(("a", "psu1", "rail-3.3v"))}
            for key in rng.sample(keys, rng.randrange(0, len(keys))):
                if key == "n":
                    r[key] = rng.randrange(1, 1_000_001)
                elif key == "PF":
                    r[key] = round(rng.uniform(-1, 1), rng.randrange(0, 5))
                else:
                    r[key] = round(rng.uniform(0, 10 ** rng.randrange(0, 8)), rng.randrange(0, 6))
            if rng.random() < 0.2:
                r["f"] = rng.randrange(1, 65536)
            rows.append(r)
        clk = {"sync": rng.choice(("ntp", "host", "free", "recv")), "age": round(rng.uniform(0, 1e5), 2)}
        if rng.random() < 0.5:
            clk.update(
                off=round(rng.uniform(-500, 500), 3), err=rng.uniform(0, 10), steps=rng.randrange(0, 9)
            )
        payload = batch(rows, dev=rng.choice(("a", "bench-a", "x" * 32)), clk=clk)
        if rng.random() < 0.3:
            payload = Signer(b"key").sign(payload)
        roundtrip(payload)
