"""The digest of a sample batch whose rows are plain (PlainBatch, plain_batch): made in a checking
process, so that the collector accounts for the batch (DeviceAccount.admit_plain) without reading its
rows again.
"""

from __future__ import annotations

from operator import ge, gt
from typing import Any, NamedTuple

# An energy counter that goes back by no more than this between two samples of a channel is not a
# step; plain_batch and DeviceAccount.admit allow the same, so both ways account for a batch alike.
ENERGY_SLACK_WH = 1e-9


class PlainBatch(NamedTuple):
    """A sample batch as accounting needs it when its rows are plain (see plain_batch)."""

    boot: int
    clk: dict[str, Any]
    first_s: int  # the rows' numbers are first_s, first_s + 1, ... in row order
    count: int
    newest_t: int  # the last row's time
    # Per channel: name, first and last time, first and last energy (None: no row has one), last number
    chans: tuple[tuple[str, int, int, float | None, int, float | None], ...]


def plain_batch(
    boot: int,
    clk: dict[str, Any],
    s: list[int],
    c: list[str],
    t: list[int],
    wh: list[Any],
    absent: object = None,
) -> PlainBatch | None:
    """The digest of a sample batch, its rows given as columns (number, channel, time, energy or
    `absent`), when they are plain: numbered one after another, the channels in the same turn
    throughout, each channel's time rising, and its energy counter given in every row or in none and
    never going back. None otherwise. Made in a checking process (ingest.parallel), so that the
    collector can account for the batch without reading its rows again (DeviceAccount.admit_plain).
    Flags are not looked at: the caller gives only rows without any."""
    n = len(s)
    if not n or s != list(range(s[0], s[0] + n)):
        return None
    k = len(set(c))
    if len(set(c[:k])) != k or c[k:] != c[: n - k]:
        return None
    chans = []
    for j in range(k):
        times = t[j::k]
        if not all(map(gt, times[1:], times)):
            return None
        energy = wh[j::k]
        try:
            # Rising outright, else within the slack that admit() allows. Every value is compared (by
            # the first when it passes, else by the second's list), so a missing one always raises.
            rising = all(map(ge, energy[1:], energy)) or all(
                map(ge, energy[1:], [w - ENERGY_SLACK_WH for w in energy])
            )
        except TypeError:  # a row without energy: fine only if no row of the channel has it
            if energy.count(absent) != len(energy):
                return None
            rising = True
        if not rising:
            return None
        last = j + (n - 1 - j) // k * k
        first_wh = None if wh[j] is absent else wh[j]
        last_wh = None if wh[last] is absent else wh[last]
        chans.append((c[j], t[j], t[last], first_wh, s[last], last_wh))
    return PlainBatch(boot, clk, s[0], n, t[-1], tuple(chans))
