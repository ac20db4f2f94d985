"""The ranges and accuracy of each meter kind as an analyzer has them, for `wattbench ptd`: one row per
kind of the firmware's meter table (firmware/wattbench_fw/meters/__init__.py, TABLE), naming the
datasheet its figures come from. The firmware's table stays free of these numbers, since a board keeps
that table in RAM; tests/ptd/test_ranges.py checks that every power meter kind has a row here.

A row's accuracy is ±(reading % of the reading + range % of the range), the range being the power
range, volts range × amps range, as analyzer datasheets state it. A sample's uncertainty is then
reading + range × (V range × A range) / W: it grows as the load falls on a fixed range, which is why
an analyzer needs ranges that fit the load and why PTDaemon warns above 1 %.

Pure data and arithmetic: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

# The WT310E's steps (Yokogawa WT300E series general specifications, Bulletin WT300E-01EN: voltage
# 15/30/60/150/300/600 V; current, 20 A input element, 0.5/1/2/5/10/20 A).
WT310E_VOLTS = (15.0, 30.0, 60.0, 150.0, 300.0, 600.0)
WT310E_AMPS = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0)
# The WT310EH's 40 A element: 1/2/5/10/20/40 A (same bulletin).
WT310EH_AMPS = (1.0, 2.0, 5.0, 10.0, 20.0, 40.0)


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


# One row per meter kind (and per model where the model changes the ranges: "kind:model").
TABLE: dict[str, MeterRanges | NoRanges] = {
    "wt300": MeterRanges(
        "wt300",
        WT310E_VOLTS,
        WT310E_AMPS,
        0.001,
        0.0005,
        False,
        "Yokogawa WT300E series, Bulletin WT300E-01EN: power at 45-66 Hz ±(0.1 % of reading + 0.05 % of range)",
    ),
    "wt300:WT310EH": MeterRanges(
        "wt300",
        WT310E_VOLTS,
        WT310EH_AMPS,
        0.001,
        0.0005,
        False,
        "Yokogawa WT300E series, Bulletin WT300E-01EN: WT310EH, 40 A element, ±(0.1 % of reading + 0.05 % of range)",
    ),
    "pzem004t": MeterRanges(
        "pzem004t",
        (260.0,),
        (100.0,),
        0.005,
        0.0,
        False,
        "Peacefair PZEM-004T V3.0 user manual: 80-260 V, 0-100 A (100 A variant), power ±0.5 % of reading",
    ),
    "pzem004t:PZEM-004T-10A": MeterRanges(
        "pzem004t",
        (260.0,),
        (10.0,),
        0.005,
        0.0,
        False,
        "Peacefair PZEM-004T V3.0 user manual: 80-260 V, 0-10 A (10 A variant), power ±0.5 % of reading",
    ),
    # Current: the shunt's full scale from the channel's meta (range.A). Reading term: shunt gain error
    # ±0.1 % and bus voltage gain error ±0.1 % (maximum), added; range term: the ±10 µV shunt offset of
    # the 81.92 mV full scale, 0.0122 %, rounded up. The shunt's own tolerance comes on top.
    "ina226": MeterRanges(
        "ina226",
        (36.0,),
        (),
        0.002,
        0.000125,
        True,
        "TI INA226 datasheet (SBSS138): 36 V bus, ±81.92 mV shunt, gain errors ±0.1 %, shunt offset ±10 µV",
    ),
    # As the INA226: gain errors ±0.05 % each; the ±1 µV offset of the 163.84 mV full scale.
    "ina228": MeterRanges(
        "ina228",
        (85.0,),
        (),
        0.001,
        0.00001,
        True,
        "TI INA228 datasheet (SBOSA20): 85 V bus, ±163.84 mV shunt, gain errors ±0.05 %, shunt offset ±1 µV",
    ),
    # The simulated meters range and err as a WT310E does, so that a rehearsal picks ranges and warns
    # about uncertainty as it would on the analyzer.
    "sim": MeterRanges(
        "sim",
        WT310E_VOLTS,
        WT310E_AMPS,
        0.001,
        0.0005,
        False,
        "simulated, with the WT310E's ranges and AC accuracy (Bulletin WT300E-01EN)",
    ),
    "simdc": MeterRanges(
        "simdc",
        WT310E_VOLTS,
        WT310E_AMPS,
        0.001,
        0.002,
        True,
        "simulated, with the WT310E's ranges and DC accuracy ±(0.1 % of reading + 0.2 % of range) "
        "(Bulletin WT300E-01EN)",
    ),
    "ipmi": NoRanges(
        "ipmi", "a BMC reports watts only, with no voltage or current ranges and no published accuracy (DCMI)"
    ),
    "redfish": NoRanges(
        "redfish", "a BMC reports watts only, with no voltage or current ranges and no published accuracy"
    ),
    "rapl": NoRanges(
        "rapl", "RAPL is a CPU's energy counter: no ranges, no published accuracy, and not wall power"
    ),
}


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
