"""sequential: the next 1 MiB of a file (size_mb, 1024 MiB by default), from the start again at its end,
with O_DIRECT where the filesystem allows it. Each worker starts at its own place in the file."""

from __future__ import annotations

import os
from collections.abc import Callable

from .._storage import open_file

CHUNK = 1 << 20


def make_unit(
    seed: int, file: str = "wattbench-worklet.dat", size_mb: int = 1024, direct: bool = True
) -> Callable[[], int]:
    fd, buf, chunks = open_file(file, size_mb, direct, CHUNK)
    pos = [seed % chunks]

    def op() -> int:
        pos[0] = (pos[0] + 1) % chunks
        return os.preadv(fd, [buf], pos[0] * CHUNK)

    return op
