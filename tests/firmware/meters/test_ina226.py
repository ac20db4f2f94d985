"""INA226 against the data sheet's configure/measure/calculate example (10 A through 2 mOhm at 12 V:
shunt 1F40h, bus 2570h, calibration A00h, current 2710h, power 12B8h)."""

from __future__ import annotations

import math

import pytest

from wattbench_devkit.mocks.machine import I2C
from wattbench_fw import contract, meters
from wattbench_fw.errors import ConfigError, SensorError
from wattbench_fw.meters.ina226 import INA226, calibration, config_word

KIND = "ina226"


def ina226_bus(regs: dict[int, int]) -> I2C:
    bus = I2C(0)
    bus.add(0x40, {r: v.to_bytes(2, "big") for r, v in regs.items()})
    return bus


DATASHEET_226 = {
    0x01: 0x1F40,
    0x02: 0x2570,
    0x03: 0x12B8,
    0x04: 0x2710,
    0x06: 0x0008,
    0xFE: 0x5449,
    0xFF: 0x2260,
}


def test_ina226_configuration_words() -> None:
    assert config_word(1, 1100, 1100) == 0x4127  # the power-on default
    assert calibration(0.001, 0.002) == 0x0A00  # data sheet example: 1 mA/bit, 2 mOhm
    with pytest.raises(ValueError):
        config_word(3, 1100, 1100)


def test_ina226_datasheet_example() -> None:
    bus = ina226_bus(DATASHEET_226)
    meter = INA226(bus, shunt_ohm=0.002, current_lsb=0.001, avg=1, vbus_ct_us=1100, vsh_ct_us=1100)
    meter.setup()
    assert (0x40, 0x00, b"\x41\x27") in bus.writes
    assert (0x40, 0x05, b"\x0a\x00") in bus.writes
    vals, flags = meter.read()
    assert flags == 0
    assert math.isclose(vals["V"], 11.98) and math.isclose(vals["A"], 10.0) and math.isclose(vals["W"], 119.8)


def test_ina226_reverse_and_saturation() -> None:
    regs = {**DATASHEET_226, 0x01: 0xE0C0, 0x04: 0xD8F0}  # -20 mV, -10 A
    vals, flags = INA226(ina226_bus(regs), shunt_ohm=0.002, current_lsb=0.001).read()
    assert flags == contract.FLAG_REVERSE and set(vals) == {"V"}
    regs = {**DATASHEET_226, 0x01: 0x7FFF}  # shunt ADC at full scale
    vals, flags = INA226(ina226_bus(regs), shunt_ohm=0.002, current_lsb=0.001).read()
    assert flags == contract.FLAG_OVER_RANGE and "W" not in vals
    regs = {**DATASHEET_226, 0x06: 0x0004}  # math overflow flag
    assert INA226(ina226_bus(regs), shunt_ohm=0.002, current_lsb=0.001).read()[1] == contract.FLAG_OVER_RANGE


def test_ina226_wrong_chip_is_a_sensor_error() -> None:
    regs = {**DATASHEET_226, 0xFF: 0x2270}
    with pytest.raises(SensorError):
        INA226(ina226_bus(regs)).setup()


# ---- options from the configuration ----------------------------------------------------------


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        ({"shunt_ohm": 0}, r"^ina226: shunt_ohm must be a number in \[1e-06, 100.0\], got 0$"),
        ({"max_a": 0}, r"max_a must be a number"),
        ({"max_a": 10**400}, r"max_a .* got an integer of more than 15 digits$"),
        ({"max_a": float("nan")}, r"max_a .* got nan$"),
        ({"shunt_ohm": "0.002"}, r"shunt_ohm .* got '0.002'$"),
        ({"current_lsb": 10**400, "shunt_ohm": "0.002"}, r"shunt_ohm"),
        ({"current_lsb": 0.0001}, r"current_lsb 0.0001 A cannot reach max_a 10 A"),
        ({"shunt_ohm": 100.0}, r"calibration .* out of range"),
        ({"addr": 0x50}, r"addr must be an integer in \[64, 79\]"),
        ({"acc": 2}, r"acc must be a number in \[0, 1\]"),
    ],
)
def test_bad_options_are_config_errors_naming_the_option(opts: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        meters.create(KIND, None, opts)


@pytest.mark.parametrize(
    "opts",
    [
        {"shunt_ohm": 0.1, "max_a": 0.8, "current_lsb": 0.0001, "acc": 0.01},
        {"shunt_ohm": 0.0005, "max_a": 80},
    ],
)
def test_sane_options_are_accepted(opts: dict[str, object]) -> None:
    assert meters.create(KIND, None, opts).KIND == KIND
