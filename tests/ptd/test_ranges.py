"""The ranges and accuracy of each meter kind for `wattbench ptd` (collector/wattbench/ptd/ranges.py):
every power meter of the firmware's table has a row, and the uncertainty of a reading is the datasheet's
formula."""

from __future__ import annotations

import pytest

from wattbench.ptd.ranges import TABLE, MeterRanges, NoRanges, lookup, next_range, uncertainty
from wattbench_fw.meters import TABLE as FIRMWARE_TABLE


def test_every_meter_kind_of_the_firmware_has_a_row() -> None:
    meters = {row[0] for row in FIRMWARE_TABLE if row[1] == "meters"}
    kinds = {key.split(":")[0] for key in TABLE}
    assert meters == kinds


def test_rows_are_ordered_and_name_their_datasheet() -> None:
    for key, row in TABLE.items():
        if isinstance(row, NoRanges):
            assert row.why, key
            continue
        assert row.datasheet, key
        for steps in (row.volts, row.amps):
            assert list(steps) == sorted(steps), key
        assert 0 < row.reading < 0.01 and 0 <= row.range < 0.01, key


def test_next_range_up() -> None:
    steps = (0.5, 1.0, 2.0)
    assert next_range(steps, 0.3) == 0.5
    assert next_range(steps, 0.5000000000001) == 0.5
    assert next_range(steps, 0.7551) == 1.0
    assert next_range(steps, 2.5) is None


def test_uncertainty_grows_as_the_load_falls_on_a_range() -> None:
    row = _row("wt300", "WT310E")
    # The WT310E on 300 V x 2 A at 250 W (docs/accuracy.md): 0.25 W + 0.3 W, 0.22 %.
    assert uncertainty(row, 250.0, 300.0, 2.0) == pytest.approx(0.0022)
    assert uncertainty(row, 10.0, 300.0, 2.0) == pytest.approx(0.031)
    assert uncertainty(row, 0.0, 300.0, 2.0) is None


def _row(kind: str, model: str | None = None, full_scale_a: float | None = None) -> MeterRanges:
    row = lookup(kind, model, full_scale_a)
    assert isinstance(row, MeterRanges), row
    return row


def test_model_rows_and_a_shunts_full_scale() -> None:
    assert _row("wt300", "WT310EH").amps[-1] == 40.0
    assert _row("pzem004t", "PZEM-004T-10A").amps == (10.0,)
    assert isinstance(lookup("ina226"), NoRanges)  # no range.A in its meta: no current range
    assert _row("ina226", "INA226", 10.0).amps == (10.0,)
    assert isinstance(lookup("rapl"), NoRanges) and isinstance(lookup("nosuch"), NoRanges)
