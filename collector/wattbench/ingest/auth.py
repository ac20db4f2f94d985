"""Verification of HMAC-signed sample batches (firmware/wattbench_fw/sign.py makes them).

The device signs the batch bytes as serialised without "mac" and then inserts `,"mac":"<64 hex>"`
before the final brace. Undoing that insertion byte-exactly gives back the signed bytes, so the check
needs no JSON canonicalisation. Keys never appear in logs, reprs or reject details.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from collections.abc import Mapping
from pathlib import Path

import wattbench_schema as contract

_SUFFIX = re.compile(rb',"mac":"([0-9a-f]{64})"\}\s*$')


class AuthError(ValueError):
    """The batch is unsigned where a key is configured, or its signature does not match."""


def split_signed(raw: bytes) -> tuple[bytes, str | None]:
    """(signed bytes, mac hex) of a payload; mac is None when the payload carries none."""
    m = _SUFFIX.search(raw)
    if not m:
        return raw, None
    return raw[: m.start()] + b"}", m.group(1).decode()


def sign(raw: bytes, key: bytes) -> bytes:
    """Host-side signing, byte-compatible with the firmware (used by host tools and tests)."""
    if not raw.endswith(b"}"):
        raise ValueError("payload must be a JSON object")
    mac = hmac.new(key, raw, hashlib.sha256).hexdigest().encode()
    return raw[:-1] + b',"mac":"' + mac + b'"}'


class Verifier:
    """Per-device keys. Devices without a key pass unchecked unless `require` is set."""

    def __init__(self, keys: Mapping[str, bytes], require: bool = False) -> None:
        self._keys = dict(keys)
        self.require = require

    def __repr__(self) -> str:
        return f"Verifier(devices={sorted(self._keys)}, require={self.require})"

    @property
    def devices(self) -> list[str]:
        return sorted(self._keys)

    def check(self, dev: str, raw: bytes) -> None:
        """Raise AuthError with a reason safe to publish; return silently when acceptable."""
        key = self._keys.get(dev)
        signed, mac = split_signed(raw)
        if key is None:
            if self.require:
                raise AuthError(f"no key configured for device {dev!r} and signatures are required")
            return
        if mac is None:
            raise AuthError(f"device {dev!r} has a key but the batch is not signed")
        expected = hmac.new(key, signed, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, mac):
            raise AuthError(f"HMAC-SHA256 signature of device {dev!r} does not match")

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], require: bool = False) -> Verifier:
        """A JSON file {"device-id": "hex key", ...}; it should be readable by the collector only. A
        ValueError's message leaves the file to the caller to name, as the user gave it."""
        p = Path(path)
        # strict: a device given twice (a hand-merged file) would be checked against its last key
        # without a word, and its batches signed with the other refused
        try:
            doc = contract.strict_loads(p.read_bytes())
        except contract.DecodeError as exc:
            raise ValueError(f"not JSON ({exc})") from None
        if not isinstance(doc, dict):
            raise ValueError("expected an object mapping device ids to hex keys")
        keys: dict[str, bytes] = {}
        for dev, hexkey in doc.items():
            try:
                keys[str(dev)] = bytes.fromhex(str(hexkey))
            except ValueError:
                raise ValueError(f"the key of device {dev!r} is not hex") from None
            if not keys[str(dev)]:
                raise ValueError(f"the key of device {dev!r} is empty")
        return cls(keys, require)
