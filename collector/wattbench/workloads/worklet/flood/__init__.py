"""flood: a streaming triad a = b + s*c over 8 MiB arrays (STREAM's kernel): memory bandwidth."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

N = 8 * 1024 * 1024 // 8  # float64 elements in 8 MiB


def make_unit(seed: int) -> Callable[[], int]:
    rng = np.random.default_rng(seed)
    b, c = rng.random(N), rng.random(N)
    a = np.empty(N)

    def op() -> int:
        np.multiply(c, 3.0, out=a)
        np.add(a, b, out=a)
        return int(a[0]) & 0xFF

    return op
