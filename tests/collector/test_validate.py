"""The collector's validator against the shared vectors and the rules a schema cannot express."""

from __future__ import annotations

import json

import pytest

import wattbench_schema as contract
from wattbench.ingest.validate import Accepted, Rejected, Validator, decode

RECV = 1_800_000_000_000  # receive time (2027) later than every vector timestamp
SAMPLES = "wattbench/v1/dev/bench-a/samples"


@pytest.fixture(scope="module")
def validator() -> Validator:
    return Validator()


def _batch(**over: object) -> dict[str, object]:
    doc: dict[str, object] = {
        "v": 1,
        "dev": "bench-a",
        "boot": 1,
        "clk": {"sync": "ntp"},
        "samples": [{"s": 1, "t": RECV - 1000, "c": "psu1", "W": 100.0}],
    }
    doc.update(over)
    return doc


@pytest.mark.parametrize("vec", contract.vectors("valid"), ids=lambda v: v.name)
def test_valid_vectors_pass(validator: Validator, vec: contract.Vector) -> None:
    out = validator.check(vec.topic, vec.raw, RECV)
    assert isinstance(out, Accepted), out
    assert out.payload == vec.payload


@pytest.mark.parametrize("vec", contract.vectors("invalid"), ids=lambda v: v.name)
def test_invalid_vectors_are_rejected_with_a_reason(validator: Validator, vec: contract.Vector) -> None:
    out = validator.check(vec.topic, vec.raw, RECV)
    assert isinstance(out, Rejected), vec.why
    assert out.reason in ("decode", "schema", "version", "future", "stale")
    if vec.stage == "decode":
        assert out.reason == "decode"
    notice = out.notice(RECV)
    assert not list(contract.jsonschema_validator("reject").iter_errors(notice)), notice
    assert len(notice["detail"]) > 10


def test_reasons_say_what_is_wrong(validator: Validator) -> None:
    def reason(vec_name: str) -> tuple[str, str]:
        vec = next(v for v in contract.vectors("invalid") if v.name == vec_name)
        out = validator.check(vec.topic, vec.raw, RECV)
        assert isinstance(out, Rejected)
        return out.reason, out.detail

    assert reason("samples_unknown_version")[0] == "version"
    assert reason("samples_time_far_future")[0] == "future"
    assert reason("samples_time_epoch_2000")[0] == "stale"
    assert "never set" in reason("samples_time_epoch_2000")[1]
    assert reason("samples_duplicate_key") == ("decode", "not strict JSON: duplicate key 'v'")
    assert "samples[0].W" in reason("samples_negative_power")[1]


def test_device_in_payload_must_match_the_topic(validator: Validator) -> None:
    raw = contract.dumps(_batch(dev="bench-b"))
    out = validator.check(SAMPLES, raw, RECV)
    assert isinstance(out, Rejected) and out.reason == "mismatch"
    assert "bench-b" in out.detail and "bench-a" in out.detail


def test_timestamps_ahead_of_the_receive_time_are_refused(validator: Validator) -> None:
    limit = contract.topics()["limits"]["future_tolerance_ms"]
    ok = _batch(samples=[{"s": 1, "t": RECV + limit, "c": "psu1", "W": 1.0}])
    late = _batch(samples=[{"s": 1, "t": RECV + limit + 1, "c": "psu1", "W": 1.0}])
    assert isinstance(validator.check(SAMPLES, contract.dumps(ok), RECV), Accepted)
    out = validator.check(SAMPLES, contract.dumps(late), RECV)
    assert isinstance(out, Rejected) and out.reason == "future" and "ahead" in out.detail


def test_size_and_topic_limits(validator: Validator) -> None:
    big = b" " * (contract.topics()["limits"]["max_payload_bytes"] + 1)
    out = validator.check(SAMPLES, big, RECV)
    assert isinstance(out, Rejected) and out.reason == "size"
    out = validator.check("wattbench/v1/dev/bench-a/other", b"{}", RECV)
    assert isinstance(out, Rejected) and out.reason == "topic"


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\x00\xff",
        b"[" * 100_000,
        b'{"v":' + b"1" * 5000 + b"}",
        b'{"v":' + b"[" * 2000 + b"]" * 2000 + b"}",
        b'{"v":1,"dev":"bench-a","boot":1,"clk":{"sync":"ntp"},"samples":[{"s":1,"t":1,"c":"\\ud800"}]}',
        json.dumps(_batch()).encode()[:-1],
    ],
    ids=["empty", "binary", "deep", "long-int", "deep-version", "lone-surrogate", "truncated"],
)
def test_garbage_is_a_rejection_never_an_exception(validator: Validator, raw: bytes) -> None:
    out = validator.check(SAMPLES, raw, RECV)
    assert isinstance(out, Rejected) and out.reason in ("decode", "version", "schema")
    assert len(out.notice(RECV)["detail"]) <= 500


def test_fast_decoder_agrees_with_the_contract_decoder() -> None:
    for vec in contract.vectors():
        try:
            expected = contract.strict_loads(vec.raw)
        except contract.DecodeError:
            with pytest.raises(contract.DecodeError):
                decode(vec.raw)
            continue
        assert decode(vec.raw) == expected
    # a ':' inside a string does not hide a duplicate key from the fast path
    with pytest.raises(contract.DecodeError):
        decode(b'{"a":"x:y","a":1}')
    assert decode(b'{"a":"x:y","b":1}') == {"a": "x:y", "b": 1}


def test_signed_batches_are_checked_when_the_device_has_a_key() -> None:
    from wattbench.ingest.auth import Verifier, sign

    key = b"0123456789abcdef"
    v = Validator(verifier=Verifier({"bench-a": key}))
    raw = contract.dumps(_batch())
    assert isinstance(v.check(SAMPLES, sign(raw, key), RECV), Accepted)
    out = v.check(SAMPLES, raw, RECV)
    assert isinstance(out, Rejected) and out.reason == "auth" and "not signed" in out.detail
    tampered = sign(raw, key).replace(b"100.0", b"900.0")
    out = v.check(SAMPLES, tampered, RECV)
    assert isinstance(out, Rejected) and out.reason == "auth"
    assert key.hex() not in out.detail
