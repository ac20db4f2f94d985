"""Where each boot of a device stopped and started: the numbers between were never handed out.

The firmware reserves sequence numbers in blocks and a new boot starts at the next reservation. A
clean stop says where it stopped (its `shutdown` status carries `seq`, the next number it would have
used); the numbers from there up to the first one seen from a later boot are unassigned. DeviceAccount
(accounting.py) takes them out of its holes and keeps the counts.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

BOOTS_KEPT = 8  # boots whose announced end and first number are remembered
SKIPPED_KEPT = 256  # ranges judged never handed out, remembered in case a number from one turns up


@dataclass(slots=True)
class Restarts:
    """Each boot's announced end and lowest number seen, and the ranges judged never handed out."""

    ends: dict[int, int] = field(default_factory=dict)  # boot -> next number it would have used
    firsts: dict[int, int] = field(default_factory=dict)  # boot -> lowest number seen from it
    skipped: list[list[int]] = field(default_factory=list)  # [lo, hi] ranges judged never handed out

    def clear(self) -> None:
        self.ends.clear()
        self.firsts.clear()
        self.skipped.clear()

    def note_end(self, boot: int, end: int) -> None:
        self.ends[boot] = end
        _trim(self.ends)

    def note_first(self, boot: int, first: int) -> bool:
        """True when first is the lowest number seen from the boot so far."""
        if first >= self.firsts.get(boot, first + 1):
            return False
        self.firsts[boot] = first
        _trim(self.firsts)
        return True

    def between(self) -> Iterator[tuple[int, int]]:
        """[end, next first - 1] for each boot with an announced end and a later boot seen."""
        for boot, end in self.ends.items():
            later = [s for b, s in self.firsts.items() if b > boot]
            if later:
                yield end, min(later) - 1

    def skip(self, lo: int, hi: int) -> None:
        self.skipped.append([lo, hi])
        del self.skipped[:-SKIPPED_KEPT]

    def turned_up(self, s: int) -> bool:
        """True when s lies in a range judged never handed out: it was, after all, and leaves the
        range."""
        for i, (lo, hi) in enumerate(self.skipped):
            if lo <= s <= hi:
                pieces = [p for p in ([lo, s - 1], [s + 1, hi]) if p[0] <= p[1]]
                self.skipped[i : i + 1] = pieces
                return True
        return False

    def state(self) -> dict[str, Any]:
        return {
            "ends": [[b, e] for b, e in self.ends.items()],
            "firsts": [[b, f] for b, f in self.firsts.items()],
            "skipped": [list(r) for r in self.skipped],
        }

    @classmethod
    def from_state(cls, doc: dict[str, Any]) -> Restarts:
        out = cls()
        out.ends = {int(b): int(e) for b, e in doc.get("ends") or []}
        out.firsts = {int(b): int(f) for b, f in doc.get("firsts") or []}
        out.skipped = [[int(lo), int(hi)] for lo, hi in (doc.get("skipped") or [])[-SKIPPED_KEPT:]]
        return out


def _trim(by_boot: dict[int, int]) -> None:
    """Keep the newest BOOTS_KEPT boots."""
    for boot in sorted(by_boot)[:-BOOTS_KEPT]:
        del by_boot[boot]
