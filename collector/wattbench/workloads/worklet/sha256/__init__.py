"""sha256: the SHA-256 digest of a 64 KiB block, the block changed by one byte each time."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable


def make_unit(seed: int) -> Callable[[], int]:
    block = bytearray(random.Random(seed).randbytes(65536))
    state = [0]

    def op() -> int:
        state[0] = (state[0] + 1) & 0xFFFF
        block[state[0]] ^= 0xFF
        return hashlib.sha256(block).digest()[0]

    return op
