"""aes: AES-256-CBC encryption and decryption of a 64 KiB block (cryptography, OpenSSL), the block
changed by one byte each time and checked after the round trip."""

from __future__ import annotations

import random
from collections.abc import Callable

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes


def make_unit(seed: int) -> Callable[[], int]:
    rng = random.Random(seed)
    block = bytearray(rng.randbytes(65536))
    cipher = Cipher(algorithms.AES(rng.randbytes(32)), modes.CBC(rng.randbytes(16)))
    state = [0]

    def op() -> int:
        state[0] = (state[0] + 1) & 0xFFFF
        block[state[0]] ^= 0xFF
        enc = cipher.encryptor()
        sealed = enc.update(bytes(block)) + enc.finalize()
        dec = cipher.decryptor()
        opened = dec.update(sealed) + dec.finalize()
        if opened[state[0]] != block[state[0]]:
            raise RuntimeError("AES round trip gave other bytes back")
        return sealed[0]

    return op
