"""HMAC-SHA256 signing of sample batches.

MicroPython ships hashlib.sha256 but no hmac module, so the RFC 2104 construction is written out here.
The signature covers the exact bytes of the batch as serialised without its "mac" key; it is then
inserted before the closing brace, which keeps the message plain JSON for every other reader.
"""

import hashlib

try:
    from binascii import hexlify
except ImportError:  # pragma: no cover - every supported port has binascii
    from ubinascii import hexlify

_BLOCK = 64
_MAC_PREFIX = b',"mac":"'


def _pad(key, byte):
    return bytes((k ^ byte) for k in key) + bytes((byte,)) * (_BLOCK - len(key))


class Signer:
    """Signs payloads with one device key (bytes, any length)."""

    def __init__(self, key):
        if not key:
            raise ValueError("empty HMAC key")
        if len(key) > _BLOCK:
            key = hashlib.sha256(key).digest()
        # The padded keys are fixed per device: build them once, not per batch.
        self._inner = _pad(key, 0x36)
        self._outer = _pad(key, 0x5C)

    def digest(self, data):
        return self.digest_chunks((data,))

    def digest_chunks(self, chunks):
        """The HMAC of the chunks' concatenation, without making it: encode.batch signs a batch from
        its rows and writes payload and signature in one allocation."""
        inner = hashlib.sha256(self._inner)
        for chunk in chunks:
            inner.update(chunk)
        outer = hashlib.sha256(self._outer)
        outer.update(inner.digest())
        return outer.digest()

    def mac_member(self, chunks):
        """',"mac":"<hex>"' for the JSON object whose bytes, without "mac", are the chunks joined."""
        return _MAC_PREFIX + hexlify(self.digest_chunks(chunks)) + b'"'

    def sign(self, payload):
        """payload: bytes of a JSON object without "mac". Returns the signed bytes."""
        if not payload.endswith(b"}"):
            raise ValueError("payload must be a JSON object")
        return payload[:-1] + self.mac_member((payload,)) + b"}"
