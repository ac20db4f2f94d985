"""Each channel of a device's stream, in sequence order: its time must move on (the store keys a
sample by device, channel and ms, so a repeated ms overwrites) and its energy counter must not go
back (EnergyStep). The state is one list per channel, [last number, its time, last energy, its
clock-step flag], kept by DeviceAccount (accounting.py) and saved with it. Here is what a plain
batch's digest does to it; a batch's rows are held to the same rule by DeviceAccount, in the one pass
it makes over them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .plainbatch import ENERGY_SLACK_WH, PlainBatch

Channels = dict[str, list[Any]]


@dataclass(slots=True)
class EnergyStep:
    """An energy counter that went down between two samples of one channel, in sequence order."""

    dev: str
    ch: str
    seq: int
    before: float
    after: float

    def detail(self) -> str:
        return (
            f"energy counter of channel {self.ch!r} went back from {self.before:g} Wh to {self.after:g} Wh "
            f"at s={self.seq}"
        )


def plain_repeats(chans: Channels, rows: PlainBatch) -> int | None:
    """How many channels' first row of a plain batch is not later than their previous one; None when
    the batch does not simply follow (a late row of an older sequence space came last, or an energy
    counter went back at its start), and its rows must be checked one by one."""
    repeats = 0
    for ch, t0, _t1, wh0, _s1, _wh1 in rows.chans:
        last = chans.get(ch)
        if last is not None:
            if last[0] >= rows.first_s:
                return None
            if wh0 is not None and last[2] is not None and wh0 < last[2] - ENERGY_SLACK_WH:
                return None
            if t0 <= last[1]:
                repeats += 1
    return repeats


def follow_plain(chans: Channels, rows: PlainBatch) -> None:
    """Move each channel on to the last row of a plain batch that plain_repeats let through."""
    for ch, _t0, t1, _wh0, s1, wh1 in rows.chans:
        last = chans.get(ch)
        if last is None:
            chans[ch] = [s1, t1, wh1, 0]
        else:
            last[0] = s1
            last[1] = t1
            if wh1 is not None:
                last[2] = wh1
            last[3] = 0
