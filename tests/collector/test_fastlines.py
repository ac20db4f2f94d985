"""The one-pass way from a sample batch to line protocol (ingest.fastlines) writes the points the
row-by-row formatter writes, and answers only for batches the complete check accepts.

Lines are compared as points (measurement, tags, typed fields, time), not as text: the one-pass way
writes tags and fields in the layout's order, the row-by-row formatter in the device's key order,
and InfluxDB stores the same point from either. A real InfluxDB reads the one-pass text back to the
same values, exponent forms included.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given, settings

import wattbench_schema as contract
from wattbench.ingest.validate import Accepted, Validator
from wattbench.store import layout
from wattbench.store.influx import LineEncoder, lineproto
from wattbench.store.influx.fastlines import compile_sample_lines

from .test_fastcheck import BATCH, mutated_batches

LINES = compile_sample_lines(contract.inline_refs("samples"))
T0 = 1_763_709_600_000
RECV = T0 + 60_000
LATEST = RECV + Validator().future_tolerance_ms
TOPIC = contract.topic_for("samples", dev="bench-a")

Point = tuple[str, frozenset[tuple[str, str]], tuple[tuple[str, str, float], ...], int]


def points(text: str) -> list[Point]:
    """Lines as points: fields typed ("i" integer or "f" float) and in name order. wb_sample lines need
    no unescaping: the contract keeps spaces, commas, '=' and quotes out of names."""
    out = []
    for line in text.split("\n"):
        key, fields, t = line.split(" ")
        measurement, *tags = key.split(",")
        typed = []
        for kv in fields.split(","):
            name, value = kv.split("=")
            typed.append((name, "i", int(value[:-1])) if value.endswith("i") else (name, "f", float(value)))
        out.append(
            (measurement, frozenset(tuple(tag.split("=")) for tag in tags), tuple(sorted(typed)), int(t))
        )
    return out


def same_bits(a: list[Point], b: list[Point]) -> bool:
    """Equal points, and each float the very same double (-0.0 is not 0.0)."""
    if a != b:
        return False
    return all(
        repr(x[2]) == repr(y[2]) for p, q in zip(a, b, strict=True) for x, y in zip(p[2], q[2], strict=True)
    )


def row_by_row(raw: bytes) -> list[Point]:
    doc = contract.strict_loads(raw)
    return points(lineproto.sample_block(doc["dev"], doc["samples"]))


def complete_check(raw: bytes, topic: str = TOPIC) -> bool:
    return isinstance(Validator().check(topic, raw, RECV), Accepted)


def one_pass(raw: bytes, dev: str = "bench-a") -> str | None:
    """The one-pass lines, held to the complete check and the row-by-row points whenever it answers."""
    assert LINES is not None
    found = LINES(raw, dev, LATEST)
    text = None if found is None else found.data.decode()
    if text is not None:
        assert complete_check(raw, contract.topic_for("samples", dev=dev)), raw[:300]
        assert same_bits(points(text), row_by_row(raw)), (text[:300], raw[:300])
    return text


def raw_of(doc: dict[str, Any], **dumps: Any) -> bytes:
    return json.dumps(doc, **({"separators": (",", ":")} | dumps)).encode()


def test_the_contract_schema_is_translated() -> None:
    assert LINES is not None


def _row(schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema["properties"]["samples"]["items"]["$ref"]
    return schema["$defs"][ref.rsplit("/", 1)[1]]


@pytest.mark.parametrize(
    "change",
    [
        # a channel or device name that could hold a separator of the line
        lambda s: _row(s)["properties"]["c"].update(pattern="^[a-z0-9 ]{1,24}$"),
        lambda s: _row(s)["properties"]["c"].update(pattern="^[a-z0-9,=]{1,24}$"),
        lambda s: s["properties"]["dev"].update(pattern="^[a-z0-9:]{1,32}$"),
        lambda s: s["properties"]["dev"].pop("pattern"),
        # a key the line has no place for, another required key, another minProperties
        lambda s: _row(s)["properties"].update(note={"type": "string"}),
        lambda s: _row(s)["required"].append("W"),
        lambda s: _row(s).update(minProperties=5),
        lambda s: s.update(additionalProperties=True),
    ],
)
def test_a_schema_this_way_cannot_write_leaves_every_batch_to_the_complete_check(change: Any) -> None:
    schema = json.loads(json.dumps(contract.inline_refs("samples")))
    change(schema)
    assert compile_sample_lines(schema) is None


def test_a_batch_becomes_its_lines() -> None:
    text = one_pass(raw_of(BATCH))
    assert text == (
        f"wb_sample,ch=psu1,dev=bench-a s=1i,W=231.5,V=229.8,A=1.01,u=0.005 {T0}000\n"
        f"wb_sample,ch=rail12v,dev=bench-a s=2i,n=100i,W=96.25,Wmin=95.9,Wmax=96.7 {T0 + 100}000"
    )


@pytest.mark.parametrize(
    "vec", [v for v in contract.vectors() if v.schema == "samples"], ids=lambda v: v.name
)
def test_every_vector_is_written_as_the_row_by_row_points_or_left_alone(vec: contract.Vector) -> None:
    text = one_pass(vec.raw, vec.topic.split("/")[3])
    if not vec.valid:
        assert text is None


def test_whitespace_key_order_and_integers_in_number_fields() -> None:
    doc = json.loads(json.dumps(BATCH))
    doc["samples"][0] = dict(reversed(list(doc["samples"][0].items())))
    doc["samples"][0]["W"] = 231  # a JSON integer in a number field is stored as the float
    text = one_pass(raw_of(doc, indent=2, separators=(", ", " : ")))
    assert text is not None and ",W=231.0," in text


def test_generated_rows_are_written_as_the_row_by_row_points() -> None:
    """Every batch the complete check accepts, with no flags and a reading in every row, is answered."""
    rnd = random.Random(7)
    floats = sorted(layout.SAMPLE_FLOATS)
    # within every number field's bounds: awkward doubles, integers, the signed zero
    values = [0.0, -0.0, 1, 0.1, 1e-7, 5e-324, 2.5e-308, 0.30000000000000004, 0.5, 0.999999999999]
    for _ in range(300):
        rows = []
        for i in range(rnd.randint(1, 8)):
            row: dict[str, Any] = {"s": i, "t": T0 + i, "c": rnd.choice(["psu1", "ac", "gpu_0", "a.b-c"])}
            for k in rnd.sample(floats, rnd.randint(0, 4)):
                row[k] = rnd.choice(values)
            if rnd.random() < 0.3 or len(row) == 3:
                row["n"] = rnd.randint(1, 1000)
            items = list(row.items())
            rnd.shuffle(items)  # key order is the device's
            rows.append(dict(items))
        raw = raw_of(dict(BATCH, samples=rows))
        assert complete_check(raw)
        assert one_pass(raw) is not None, raw


@pytest.mark.parametrize(
    "raw",
    [
        # a duplicate key, in a row and at the top
        b'{"v":1,"dev":"bench-a","boot":1,"clk":{"sync":"ntp"},"samples":[{"s":1,"t":1763709600000,"c":"x","W":1.0,"W":2.0}]}',
        b'{"v":1,"dev":"bench-a","dev":"bench-a","boot":1,"clk":{"sync":"ntp"},"samples":[{"s":1,"t":1763709600000,"c":"x","W":1.0}]}',
        # a marker field sent by a device, with its own value and with the one written out
        b'{"v":1,"dev":"bench-a","boot":1,"clk":{"sync":"ntp"},"samples":[{"s":1,"t":1763709600000,"c":"x","W":1.0,"_d":0}]}',
        b'{"v":1,"dev":"bench-a","boot":1,"clk":{"sync":"ntp"},"samples":[{"s":1,"t":1763709600000,"c":"x","W":1.0,"_d":7}]}',
        b'{"v":1,"dev":"bench-a","boot":1,"clk":{"sync":"ntp"},"samples":[{"s":1,"t":1763709600000,"c":"x","W":1.0,"_d":""}]}',
        b'{"v":1,"dev":"bench-a","boot":1,"clk":{"sync":"ntp"},"samples":[{"s":1,"t":1763709600000,"c":"x","W":1.0,"_i":""}]}',
        b'{"v":1,"dev":"bench-a","boot":1,"clk":{"sync":"ntp"},"samples":[{"s":1,"t":1763709600000,"c":"x","n":2,"_i":""}]}',
        # a key the schema does not name, in a row, in clk, at the top
        b'{"v":1,"dev":"bench-a","boot":1,"clk":{"sync":"ntp"},"samples":[{"s":1,"t":1763709600000,"c":"x","W":1.0,"Q":1}]}',
        b'{"v":1,"dev":"bench-a","boot":1,"clk":{"sync":"ntp","x":1},"samples":[{"s":1,"t":1763709600000,"c":"x","W":1.0}]}',
        b'{"v":1,"dev":"bench-a","boot":1,"clk":{"sync":"ntp"},"samples":[{"s":1,"t":1763709600000,"c":"x","W":1.0}],"x":1}',
        # only the required keys (minProperties), alone and beside a good row
        b'{"v":1,"dev":"bench-a","boot":1,"clk":{"sync":"ntp"},"samples":[{"s":1,"t":1763709600000,"c":"x"}]}',
        b'{"v":1,"dev":"bench-a","boot":1,"clk":{"sync":"ntp"},"samples":[{"s":1,"t":1763709600000,"c":"x","W":1.0},{"s":2,"t":1763709600001,"c":"x"}]}',
        # flags: a clock-step flag moves the time, so flagged rows are written row by row
        b'{"v":1,"dev":"bench-a","boot":1,"clk":{"sync":"ntp"},"samples":[{"s":1,"t":1763709600000,"c":"x","W":1.0,"f":0}]}',
        # another device's batch on this device's topic
        b'{"v":1,"dev":"bench-b","boot":1,"clk":{"sync":"ntp"},"samples":[{"s":1,"t":1763709600000,"c":"x","W":1.0}]}',
        # a sample from the future
        b'{"v":1,"dev":"bench-a","boot":1,"clk":{"sync":"ntp"},"samples":[{"s":1,"t":1863709600000,"c":"x","W":1.0}]}',
        # a surrogate escape, invalid UTF-8, a ':' inside a string
        b'{"v":1,"dev":"bench-a","boot":1,"clk":{"sync":"ntp"},"mac":"\\ud800","samples":[{"s":1,"t":1763709600000,"c":"x","W":1.0}]}',
        b'{"v":1,"dev":"bench-a","boot":1,"clk":{"sync":"ntp"},"mac":"\xff","samples":[{"s":1,"t":1763709600000,"c":"x","W":1.0}]}',
        b'{"v":1,"dev":"bench-a","boot":1,"clk":{"sync":"ntp"},"mac":"a:b","samples":[{"s":1,"t":1763709600000,"c":"x","W":1.0}]}',
        # 1.0 where an integer belongs, NaN, a number out of bounds, no rows
        b'{"v":1,"dev":"bench-a","boot":1,"clk":{"sync":"ntp"},"samples":[{"s":1.0,"t":1763709600000,"c":"x","W":1.0}]}',
        b'{"v":1,"dev":"bench-a","boot":1,"clk":{"sync":"ntp"},"samples":[{"s":1,"t":1763709600000,"c":"x","W":NaN}]}',
        b'{"v":1,"dev":"bench-a","boot":1,"clk":{"sync":"ntp"},"samples":[{"s":1,"t":1763709600000,"c":"x","W":1e400}]}',
        b'{"v":1,"dev":"bench-a","boot":1,"clk":{"sync":"ntp"},"samples":[]}',
        # a channel name the contract refuses, one that would break the line
        b'{"v":1,"dev":"bench-a","boot":1,"clk":{"sync":"ntp"},"samples":[{"s":1,"t":1763709600000,"c":"x y","W":1.0}]}',
        b'{"v":1,"dev":"bench-a","boot":1,"clk":{"sync":"ntp"},"samples":[{"s":1,"t":1763709600000,"c":"x\\n","W":1.0}]}',
        # ... and in a later row only (channels are checked once per name in a batch)
        b'{"v":1,"dev":"bench-a","boot":1,"clk":{"sync":"ntp"},"samples":[{"s":1,"t":1763709600000,"c":"x","W":1.0},{"s":2,"t":1763709600000,"c":"X","W":1.0}]}',
    ],
)
def test_these_go_the_complete_way(raw: bytes) -> None:
    assert one_pass(raw) is None


def test_a_row_with_only_an_integer_reading_is_written_and_one_without_any_is_not() -> None:
    """The sequence number and the time are written side by side only in a row without a reading."""
    row = {"s": 1, "t": T0, "c": "x"}
    assert (
        one_pass(raw_of(dict(BATCH, samples=[dict(row, n=5)])))
        == f"wb_sample,ch=x,dev=bench-a s=1i,n=5i {T0}000"
    )
    assert one_pass(raw_of(dict(BATCH, samples=[row]))) is None


def test_more_devices_than_the_kept_row_types_are_still_written_right(monkeypatch: Any) -> None:
    from wattbench.store.influx import fastlines

    monkeypatch.setattr(fastlines, "OUT_TYPES_KEPT", 2)
    lines = compile_sample_lines(contract.inline_refs("samples"))
    assert lines is not None
    for round_ in range(2):
        for dev in ("dev-a", "dev-b", "dev-c", "dev-a"):
            found = lines(raw_of(dict(BATCH, dev=dev)), dev, LATEST)
            assert found is not None and found.data.count(f",dev={dev} ".encode()) == 2, (round_, dev)


def test_rows_over_the_limit_go_the_complete_way() -> None:
    rows = [{"s": i, "t": T0 + i, "c": "x", "W": 1.0} for i in range(501)]
    assert one_pass(raw_of(dict(BATCH, samples=rows))) is None
    assert one_pass(raw_of(dict(BATCH, samples=rows[:500]))) is not None


def test_the_validator_leaves_signed_fleets_and_other_topics_to_the_complete_check(tmp_path: Any) -> None:
    from wattbench.ingest.auth import Verifier

    raw = raw_of(BATCH)
    assert Validator(encoder=LineEncoder()).encoded(TOPIC, raw, RECV) is not None
    assert (
        Validator(verifier=Verifier({}, require=True), encoder=LineEncoder()).encoded(TOPIC, raw, RECV)
        is None
    )
    assert (
        Validator(encoder=LineEncoder()).encoded(contract.topic_for("status", dev="bench-a"), raw, RECV)
        is None
    )
    assert Validator(encoder=LineEncoder()).encoded("not/a/topic", raw, RECV) is None
    assert Validator(max_payload_bytes=len(raw) - 1, encoder=LineEncoder()).encoded(TOPIC, raw, RECV) is None


@settings(max_examples=600, deadline=None, derandomize=True)
@given(raw=mutated_batches())
def test_an_answer_implies_the_complete_check_accepts_generated_batches(raw: bytes) -> None:
    one_pass(raw)


def test_influxdb_reads_the_lines_back_to_the_same_values(influxdb: Any) -> None:
    """Exponent forms as msgspec writes them (1e-7, 5e-324) and -0.0 reach the database as the very
    doubles the device sent."""
    values = [1e-7, 5e-324, 2.5e-308, -0.0, 0.30000000000000004, 9999999.999999998, 1e13]
    rows = [{"s": i, "t": T0 + i, "c": "psu1", "Wh": v, "PF": -v / 1e13} for i, v in enumerate(values)]
    raw = raw_of(dict(BATCH, samples=rows))
    text = one_pass(raw)
    assert text is not None
    import urllib.request

    req = urllib.request.Request(f"{influxdb.url}/write?db={influxdb.db}&precision=u", data=text.encode())
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.status == 204
    got = influxdb.query('SELECT "Wh", "PF", "s" FROM "wb_sample" ORDER BY time')
    assert [r["s"] for r in got] == list(range(len(values)))
    assert [r["Wh"] for r in got] == values
    assert [r["PF"] for r in got] == [-v / 1e13 for v in values]
    assert all(type(r["s"]) is int for r in got)
