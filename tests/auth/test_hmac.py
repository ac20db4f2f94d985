"""Payload authentication: the firmware signer and the collector verifier agree byte for byte, follow
RFC 4231, and refuse what they should."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

import wattbench_schema as contract
from wattbench.ingest.auth import AuthError, Verifier, sign, split_signed
from wattbench_fw.sign import Signer

# RFC 4231 test cases 1, 2 and 6 (key longer than the SHA-256 block).
RFC4231 = [
    (b"\x0b" * 20, b"Hi There", "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
    (
        b"Jefe",
        b"what do ya want for nothing?",
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
    ),
    (
        b"\xaa" * 131,
        b"Test Using Larger Than Block-Size Key - Hash Key First",
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
    ),
]


@pytest.mark.parametrize("key,data,expected", RFC4231)
def test_firmware_hmac_matches_rfc4231(key: bytes, data: bytes, expected: str) -> None:
    assert Signer(key).digest(data).hex() == expected


def test_signed_vector_verifies_and_round_trips() -> None:
    vec = next(v for v in contract.vectors("valid") if v.name == "samples_signed_hmac")
    key = bytes.fromhex(vec.extra["hmac_key"])
    dev = vec.payload["dev"]
    Verifier({dev: key}).check(dev, vec.raw)
    signed, mac = split_signed(vec.raw)
    assert mac is not None and Signer(key).sign(signed) == vec.raw == sign(signed, key)


def test_firmware_signature_verifies_on_the_collector() -> None:
    key = b"k" * 16
    for vec in contract.vectors("valid"):
        if vec.schema != "samples" or "mac" in vec.payload:
            continue
        signed = Signer(key).sign(vec.raw)
        assert contract.strict_loads(signed)["mac"] == hmac.new(key, vec.raw, hashlib.sha256).hexdigest()
        Verifier({vec.payload["dev"]: key}).check(vec.payload["dev"], signed)


def test_tampered_unsigned_and_wrong_key_are_refused() -> None:
    key = b"device key"
    raw = contract.dumps(
        {
            "v": 1,
            "dev": "bench-a",
            "boot": 0,
            "clk": {"sync": "host"},
            "samples": [{"s": 1, "t": 1763709600000, "c": "psu1", "W": 100.0}],
        }
    )
    signed = Signer(key).sign(raw)
    v = Verifier({"bench-a": key})
    with pytest.raises(AuthError, match="does not match"):
        v.check("bench-a", signed.replace(b'"W":100.0', b'"W":900.0'))
    with pytest.raises(AuthError, match="not signed"):
        v.check("bench-a", raw)
    with pytest.raises(AuthError, match="does not match"):
        Verifier({"bench-a": b"other key"}).check("bench-a", signed)
    Verifier({}).check("bench-a", raw)
    with pytest.raises(AuthError, match="required"):
        Verifier({}, require=True).check("bench-a", raw)


def test_key_never_appears_in_repr_or_errors(tmp_path) -> None:  # type: ignore[no-untyped-def]
    secret = "00112233445566778899aabbccddeeff"
    path = tmp_path / "keys.json"
    path.write_text(json.dumps({"bench-a": secret}))
    v = Verifier.from_file(path)
    assert secret not in repr(v)
    try:
        v.check("bench-a", b'{"v":1}')
    except AuthError as exc:
        assert secret not in str(exc)
