"""The sequence numbers seen from one device: the highest, and the holes below it (SeqTracker).

Sequence numbers are per device, strictly increasing across channels and reboots (samples.schema.json),
so what is missing is a set of holes below the highest number seen. DeviceAccount (accounting.py) asks
it whether a number fills a hole or was seen before, and takes out of it the numbers a device never
handed out.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

MAX_HOLES = 10_000  # per device in memory; a status file keeps the newest 1 000


class SeqTracker:
    """The highest sequence number seen and the holes (inclusive ranges) below it.

    Each hole remembers the gap it is part of (the first number of the jump that opened it), because
    a sample that lands in the middle of a gap splits it: the gap is filled only once no piece of it
    is left.
    """

    __slots__ = ("ends", "floor", "high", "origins", "starts")

    def __init__(self) -> None:
        self.high = -1
        self.floor = -1  # numbers below it are no longer tracked: never called duplicate
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.origins: list[int] = []

    def hole_count(self) -> int:
        return len(self.starts)

    def gap_count(self) -> int:
        """Gaps with a number still missing (a split gap counts once)."""
        return len(set(self.origins))

    def add_hole(self, start: int, end: int) -> None:
        self.starts.append(start)
        self.ends.append(end)
        self.origins.append(start)
        if len(self.starts) > MAX_HOLES:
            # Forget the oldest holes; a late sample from them is then kept without question.
            drop = len(self.starts) - MAX_HOLES
            self.floor = self.ends[drop - 1] + 1
            del self.starts[:drop]
            del self.ends[:drop]
            del self.origins[:drop]

    def _closed(self, origin: int, i: int) -> bool:
        """True when the gap `origin` has no piece left next to index i (pieces of one gap are
        neighbours) and none of it was forgotten (then it is never called filled)."""
        for j in (i - 1, i):
            if 0 <= j < len(self.origins) and self.origins[j] == origin:
                return False
        return origin >= self.floor

    def fill(self, s: int) -> int:
        """Remove s from the holes: 0 when s was not missing (a duplicate), 1 when it filled part of a
        gap, 2 when it was the gap's last missing number."""
        i = bisect_right(self.starts, s) - 1
        if i < 0 or s > self.ends[i]:
            return 0
        a, b, o = self.starts[i], self.ends[i], self.origins[i]
        if a == b:
            del self.starts[i]
            del self.ends[i]
            del self.origins[i]
            return 2 if self._closed(o, i) else 1
        if s == a:
            self.starts[i] = a + 1
        elif s == b:
            self.ends[i] = b - 1
        else:
            self.ends[i] = s - 1
            self.starts.insert(i + 1, s + 1)
            self.ends.insert(i + 1, b)
            self.origins.insert(i + 1, o)
        return 1

    def remove_range(self, lo: int, hi: int) -> tuple[int, list[int]]:
        """Take [lo, hi] out of the holes (numbers known never to have been handed out).

        Returns how many missing numbers that removed and the gaps left with no piece at all."""
        if hi < lo:
            return 0, []
        removed = 0
        touched: set[int] = set()
        starts: list[int] = []
        ends: list[int] = []
        origins: list[int] = []
        for a, b, o in zip(self.starts, self.ends, self.origins, strict=True):
            if b < lo or a > hi:
                starts.append(a)
                ends.append(b)
                origins.append(o)
                continue
            touched.add(o)
            removed += min(b, hi) - max(a, lo) + 1
            if a < lo:
                starts.append(a)
                ends.append(lo - 1)
                origins.append(o)
            if b > hi:
                starts.append(hi + 1)
                ends.append(b)
                origins.append(o)
        self.starts, self.ends, self.origins = starts, ends, origins
        left = set(origins)
        return removed, sorted(o for o in touched if o not in left)

    def state(self, max_holes: int = 1000) -> dict[str, Any]:
        """The newest max_holes holes; older ones are forgotten (the floor moves past them), which
        only means a late sample from them would be kept rather than judged."""
        drop = max(0, len(self.starts) - max_holes)
        floor = self.ends[drop - 1] + 1 if drop else self.floor
        return {
            "high": self.high,
            "floor": floor,
            "holes": [
                [a, b, o]
                for a, b, o in zip(self.starts[drop:], self.ends[drop:], self.origins[drop:], strict=True)
            ],
        }

    @classmethod
    def from_state(cls, doc: dict[str, Any]) -> SeqTracker:
        out = cls()
        out.high = int(doc.get("high", -1))
        out.floor = int(doc.get("floor", -1))
        for hole in doc.get("holes", [])[-MAX_HOLES:]:
            # [start, end] from older state files: each hole is then its own gap
            out.starts.append(int(hole[0]))
            out.ends.append(int(hole[1]))
            out.origins.append(int(hole[2]) if len(hole) > 2 else int(hole[0]))
        return out
