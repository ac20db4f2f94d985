"""MQTT payloads on the collector: any bytes on any topic end in an acceptance or a counted reject
with a reason from the contract, never an exception; the shared valid vectors still pass."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

import wattbench_schema as contract
from wattbench_devkit.fuzz import targets as t
from wattbench_devkit.fuzz.crashes import tolerate
from wattbench_devkit.fuzz.mutate import DrawSource

from .profiles import fuzz

CONTRACT_TOPICS = [
    contract.topic_for(name, dev="bench-a", run="20261121T072000Z-a1b2", source="c1")
    for name in contract.topics()["topics"]
]

topics = st.one_of(
    st.sampled_from(CONTRACT_TOPICS + [v.topic for v in t.valid_vectors()]),
    st.builds(
        lambda kind, dev: f"wattbench/v1/dev/{dev}/{kind}",
        st.sampled_from(["samples", "status", "meta"]),
        st.text(min_size=0, max_size=70),
    ),
    st.text(max_size=120),  # MQTT topics are UTF-8: hypothesis text has no lone surrogates
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=30,
)


@pytest.mark.parametrize("vec", t.valid_vectors(), ids=lambda v: v.name)
def test_every_valid_vector_accepts(vec: contract.Vector) -> None:
    assert (
        t.run_validate((vec.topic, vec.raw, t.RECV_LATE_MS)) == f"accept:{contract.match_topic(vec.topic)[0]}"
    )


@pytest.mark.parametrize("vec", t.invalid_vectors(), ids=lambda v: v.name)
def test_every_invalid_vector_rejects_with_a_reason(vec: contract.Vector) -> None:
    label = t.run_validate((vec.topic, vec.raw, t.RECV_LATE_MS))
    assert label.startswith("reject:")
    if vec.stage == "decode":
        assert label == "reject:decode"


@fuzz(ci=1000)
@given(st.binary(max_size=400))
def test_strict_loads_takes_any_bytes(raw: bytes) -> None:
    def run(raw: bytes) -> str:
        try:
            contract.strict_loads(raw)
        except contract.DecodeError as exc:
            assert str(exc), "DecodeError without a message"
            return "error:DecodeError"
        return "ok"

    tolerate(run, raw)


@fuzz(ci=500)
@given(json_values)
def test_strict_loads_reads_what_json_writes(doc: object) -> None:
    raw = json.dumps(doc, allow_nan=True).encode()
    try:
        out = contract.strict_loads(raw)
    except contract.DecodeError:
        assert b"NaN" in raw or b"Infinity" in raw, "strict decoder refused plain JSON"
        return
    assert json.dumps(out, allow_nan=True) == json.dumps(doc, allow_nan=True)


@fuzz(ci=1000)
@given(topics, st.binary(max_size=600), st.sampled_from([t.RECV_LATE_MS, t.RECV_EARLY_MS]))
def test_validator_takes_any_bytes_on_any_topic(topic: str, raw: bytes, recv: int) -> None:
    tolerate(t.run_validate, (topic, raw, recv))


@fuzz(ci=1000)
@given(st.data())
def test_validator_takes_mutated_vectors(data: st.DataObject) -> None:
    inp = t.gen_payload(DrawSource(data))
    tolerate(t.run_validate, inp)


@fuzz(ci=500)
@given(st.sampled_from(CONTRACT_TOPICS), json_values)
def test_validator_takes_any_json_document(topic: str, doc: object) -> None:
    tolerate(t.run_validate, (topic, json.dumps(doc).encode(), t.RECV_LATE_MS))


@fuzz(ci=600)
@given(st.data())
def test_pipeline_counts_every_message_and_stores_what_it_accepts(data: st.DataObject) -> None:
    tolerate(t.run_pipeline, t.gen_pipeline(DrawSource(data)))


@fuzz(ci=1000)
@given(st.binary(max_size=300), st.binary(max_size=80), st.integers(0, 1 << 20))
def test_hmac_split_and_verify_take_any_bytes(raw: bytes, key: bytes, flip: int) -> None:
    tolerate(t.run_auth, (raw, key, flip))


@fuzz(ci=600)
@given(st.data())
def test_hmac_signed_vectors_round_trip_and_detect_bit_flips(data: st.DataObject) -> None:
    tolerate(t.run_auth, t.gen_auth(DrawSource(data)))
