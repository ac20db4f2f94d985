"""lu: a 200 x 200 dense system solved by LU factorisation with partial pivoting (numpy's solve,
LAPACK gesv), the right-hand side changed each time."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def make_unit(seed: int) -> Callable[[], int]:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((200, 200)) + 200 * np.eye(200)  # well conditioned
    b = rng.standard_normal(200)

    def op() -> int:
        b[0] += 1.0
        x = np.linalg.solve(a, b)
        return int(abs(x[0]) * 1000) & 0xFF

    return op
