"""A channel's samples over a time range, as every store returns them and alignment reads them."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Series:
    """Samples of one device channel over a time range, in time order.

    t_ms and seq are int64; flags is int64 (0 where the sample had none); each requested quantity
    is float64 with NaN where the sample did not carry it (a flagged read). Nothing is interpolated.
    """

    dev: str
    ch: str
    t_ms: np.ndarray
    seq: np.ndarray
    flags: np.ndarray
    values: dict[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.t_ms.size)
