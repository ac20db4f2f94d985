"""The ranges and accuracy of each meter kind as an analyzer has them, for `wattbench ptd`, as each meter
folder states them in its analyzer.json (firmware/wattbench_fw/meters/<kind>/, read through
wattbench.meterinfo), naming the datasheet its figures come from. The firmware's table stays free of
these numbers, since a board keeps that table in RAM; tests/ptd/test_ranges.py checks that every power
meter kind has them.

A row's accuracy is ±(reading % of the reading + range % of the range), the range being the power
range, volts range × amps range, as analyzer datasheets state it. A sample's uncertainty is then
reading + range × (V range × A range) / W: it grows as the load falls on a fixed range, which is why
an analyzer needs ranges that fit the load and why PTDaemon warns above 1 %.

The arithmetic is pure; the rows are read once, from the installed package's data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..meterinfo import described_kinds, meter_info


@dataclass(frozen=True)
class MeterRanges:
    """kind: the firmware's meter kind. volts and amps: the ranges, smallest first; an empty tuple for
    amps means the channel's own full scale, from its meta message (`range.A`, a shunt's). reading and
    range: the accuracy, as fractions. dc: the meter measures DC. datasheet: where the figures are."""

    kind: str
    volts: tuple[float, ...]
    amps: tuple[float, ...]
    reading: float
    range: float
    dc: bool
    datasheet: str

    def with_amps(self, full_scale: float) -> MeterRanges:
        return MeterRanges(
            self.kind, self.volts, (full_scale,), self.reading, self.range, self.dc, self.datasheet
        )


@dataclass(frozen=True)
class NoRanges:
    """A meter kind that has no ranges an analyzer's ranging could honour; why is said in one line."""

    kind: str
    why: str


def _row(kind: str, doc: dict[str, Any]) -> MeterRanges | NoRanges:
    if doc.get("ranges", True) is None:
        return NoRanges(kind, str(doc.get("why") or f"meter kind {kind!r} has no ranges"))
    return MeterRanges(
        kind,
        tuple(float(v) for v in doc["volts"]),
        tuple(float(a) for a in doc["amps"]),
        float(doc["reading"]),
        float(doc["range"]),
        bool(doc["dc"]),
        str(doc["datasheet"]),
    )


def _table() -> dict[str, MeterRanges | NoRanges]:
    """One row per meter kind that describes itself (and per model where the model changes the ranges:
    "kind:model"), from each meter folder's analyzer.json."""
    out: dict[str, MeterRanges | NoRanges] = {}
    for kind in described_kinds():
        doc = meter_info(kind)
        out[kind] = _row(kind, doc)
        for model, over in (doc.get("models") or {}).items():
            out[f"{kind}:{model}"] = _row(kind, {**doc, **over})
    return out


TABLE: dict[str, MeterRanges | NoRanges] = _table()


def lookup(kind: str, model: str | None = None, full_scale_a: float | None = None) -> MeterRanges | NoRanges:
    """The row of a meter kind (its model's row when there is one); a kind that has none has no ranges.
    A row whose current range is the channel's own takes full_scale_a, and has no ranges without it."""
    row = TABLE.get(f"{kind}:{model}") if model else None
    if row is None:
        row = TABLE.get(kind, NoRanges(kind, f"meter kind {kind!r} has no ranges in wattbench's table"))
    if isinstance(row, MeterRanges) and not row.amps:
        if full_scale_a is None or not full_scale_a > 0:
            return NoRanges(kind, f"{kind}: its meta message states no current range (range.A, the shunt's)")
        return row.with_amps(full_scale_a)
    return row


def next_range(steps: tuple[float, ...], value: float) -> float | None:
    """The smallest step that holds value, as an analyzer picks the next range up; None above them all."""
    for step in steps:
        # A value that is a step, written with float noise (0.50000000001), is that step.
        if value <= step * (1 + 1e-9):
            return step
    return None


def uncertainty(row: MeterRanges, watts: float, volts_range: float, amps_range: float) -> float | None:
    """The relative uncertainty of a reading of `watts` on those ranges; None when it cannot be
    evaluated (no power drawn)."""
    if not watts > 0:
        return None
    return row.reading + row.range * volts_range * amps_range / watts
