"""sor: one red-black successive over-relaxation sweep (omega 1.25) of a 256 x 256 grid with numpy."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

OMEGA = 1.25


def make_unit(seed: int) -> Callable[[], int]:
    rng = np.random.default_rng(seed)
    g = rng.random((256, 256))
    inner = np.zeros((254, 254), dtype=bool)
    inner[::2, ::2] = inner[1::2, 1::2] = True
    red, black = inner, ~inner

    def op() -> int:
        for mask in (red, black):
            c = g[1:-1, 1:-1]
            avg = 0.25 * (g[:-2, 1:-1] + g[2:, 1:-1] + g[1:-1, :-2] + g[1:-1, 2:])
            c[mask] += OMEGA * (avg[mask] - c[mask])
        return int(g[128, 128] * 1000) & 0xFF

    return op
