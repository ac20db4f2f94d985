"""INA228: 20- and 40-bit register scaling, shunt calibration and the diagnostic flags, from the data
sheet's register map."""

from __future__ import annotations

import math

import pytest

from wattbench_devkit.mocks.machine import I2C
from wattbench_fw import contract, meters
from wattbench_fw.errors import ConfigError
from wattbench_fw.meters.ina228 import INA228, adc_config_word, charge_coulombs, s20, shunt_cal

KIND = "ina228"


LSB_228 = 16.384 / 2**19  # 31.25 uA


def ina228_bus(current_a: float = 8.0, diag: int = 0x0002) -> I2C:
    def reg24(v20: int) -> bytes:
        return ((v20 & 0xFFFFF) << 4).to_bytes(3, "big")

    bus = I2C(0)
    bus.add(
        0x40,
        {
            0x05: reg24(round(12.0 / 195.3125e-6)),
            0x07: reg24(round(current_a / LSB_228)),
            0x08: round(abs(current_a) * 12.0 / (3.2 * LSB_228)).to_bytes(3, "big"),
            0x09: round(54000 / (16 * 3.2 * LSB_228)).to_bytes(5, "big"),
            0x0A: (round(-3600 / LSB_228) & (2**40 - 1)).to_bytes(5, "big"),
            0x0B: diag.to_bytes(2, "big"),
            0x3E: b"\x54\x49",
            0x3F: b"\x22\x81",
        },
    )
    return bus


def test_ina228_register_scaling() -> None:
    assert s20(0x800000) == -(2**19) and s20(0x7FFFF0) == 2**19 - 1 and s20(0x000010) == 1
    assert shunt_cal(LSB_228, 0.002) == 819  # 13107.2e6 x 31.25e-6 x 0.002 = 819.2
    assert shunt_cal(LSB_228, 0.002, adc_range=1) == 3276
    assert adc_config_word(16, 1052, 1052, 1052) == 0xFB6A
    assert math.isclose(charge_coulombs((2**40) - 32, LSB_228), -32 * LSB_228)


def test_ina228_read() -> None:
    bus = ina228_bus()
    meter = INA228(bus, shunt_ohm=0.002, max_a=16.384, avg=16)
    meter.setup()
    assert (0x40, 0x02, (819).to_bytes(2, "big")) in bus.writes
    vals, flags = meter.read()
    assert flags == 0
    assert math.isclose(vals["V"], 12.0)
    assert math.isclose(vals["A"], 8.0)
    assert math.isclose(vals["W"], 96.0)
    assert math.isclose(vals["Wh"], 15.0)  # 54000 J
    assert math.isclose(meter.read_charge(), -3600, rel_tol=1e-9)


def test_ina228_reverse_and_overflow() -> None:
    vals, flags = INA228(ina228_bus(current_a=-8.0), max_a=16.384).read()
    assert flags == contract.FLAG_REVERSE and "W" not in vals and math.isclose(vals["V"], 12.0)
    vals, flags = INA228(ina228_bus(diag=1 << 9), max_a=16.384).read()
    assert flags == contract.FLAG_OVER_RANGE and "W" not in vals


# ---- options from the configuration ----------------------------------------------------------


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        ({"shunt_ohm": float("inf")}, r"shunt_ohm .* got inf$"),
        ({"max_a": 10**400}, r"max_a"),
        ({"adc_range": 2}, r"adc_range must be one of 0, 1, false, true, got 2$"),
        ({"reset_energy": "no"}, r"reset_energy must be one of false, true"),
    ],
)
def test_bad_options_are_config_errors_naming_the_option(opts: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        meters.create(KIND, None, opts)


@pytest.mark.parametrize(
    "opts",
    [
        {"shunt_ohm": 0.015, "max_a": 10, "adc_range": 1, "reset_energy": True},
    ],
)
def test_sane_options_are_accepted(opts: dict[str, object]) -> None:
    assert meters.create(KIND, None, opts).KIND == KIND
