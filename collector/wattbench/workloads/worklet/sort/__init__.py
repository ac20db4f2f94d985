"""sort: 5 000 random integers sorted (Python's Timsort on a fresh shuffled copy each time)."""

from __future__ import annotations

import random
from collections.abc import Callable


def make_unit(seed: int) -> Callable[[], int]:
    rng = random.Random(seed)
    data = [rng.randrange(1 << 30) for _ in range(5000)]

    def op() -> int:
        rng.shuffle(data)
        out = sorted(data)
        return out[len(out) // 2]

    return op
