"""random: one 4 KiB read at a random aligned offset of a file (size_mb, 1024 MiB by default), with
O_DIRECT where the filesystem allows it (direct = false reads through the page cache, knowingly)."""

from __future__ import annotations

import os
import random as rnd
from collections.abc import Callable

from .._storage import open_file

BLOCK = 4096


def make_unit(
    seed: int, file: str = "wattbench-worklet.dat", size_mb: int = 1024, direct: bool = True
) -> Callable[[], int]:
    fd, buf, blocks = open_file(file, size_mb, direct, BLOCK)
    rng = rnd.Random(seed)

    def op() -> int:
        return os.preadv(fd, [buf], rng.randrange(blocks) * BLOCK)

    return op
