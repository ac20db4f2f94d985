"""compress: zlib at level 6 on a 64 KiB block of generated text, then decompressed and checked."""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable

WORDS = "order invoice shipment pallet carton sensor reading voltage current power energy".split()


def make_unit(seed: int) -> Callable[[], int]:
    rng = random.Random(seed)
    blocks = [
        " ".join(rng.choice(WORDS) + str(rng.randrange(1000)) for _ in range(9000)).encode()[:65536]
        for _ in range(8)
    ]
    state = [0]

    def op() -> int:
        state[0] = (state[0] + 1) % len(blocks)
        packed = zlib.compress(blocks[state[0]], 6)
        if zlib.decompress(packed) != blocks[state[0]]:
            raise RuntimeError("compress worklet: the round trip changed the data")
        return len(packed)

    return op
