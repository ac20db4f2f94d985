"""capacity: 65 536 random reads across the worker's whole array (size_mb, 256 MiB by default): the
work leaves the caches, so it measures memory latency at the capacity the option sets."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def make_unit(seed: int, size_mb: int = 256) -> Callable[[], int]:
    if not 1 <= size_mb <= 1 << 20:
        raise ValueError("size_mb must be 1 to 1048576")
    rng = np.random.default_rng(seed)
    data = np.arange(size_mb * 1024 * 1024 // 8, dtype=np.int64)

    def op() -> int:
        idx = rng.integers(0, data.size, 65536)
        return int(data[idx].sum()) & 0xFF

    return op
