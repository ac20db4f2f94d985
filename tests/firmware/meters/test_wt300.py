"""Yokogawa WT300 series over SCPI: the numeric output format (<NR3> fields, "NAN" when data does not
exist, "INF" on over-range, 9.91E+37 / 9.9E+37 in numeric form), range setup and instrument checks."""

from __future__ import annotations

import math

import pytest

from wattbench_devkit.mocks.machine import UART
from wattbench_fw import contract, meters
from wattbench_fw.errors import ConfigError, FrameError, SensorError
from wattbench_fw.meters.wt300 import WT300, parse_reply, parse_value, range_text, setup_commands
from wattbench_fw.sampler import clean

KIND = "wt300"


ITEMS = ("W", "V", "A", "PF", "Hz")


def test_wt300_value_markers() -> None:
    assert parse_value("104.75E+00") == 104.75
    assert parse_value("-0.38E+00") == -0.38
    assert parse_value("NAN") == "nan"
    assert parse_value("INF") == "inf" and parse_value("-INF") == "inf"
    assert parse_value("9.91E+37") == "nan" and parse_value("+9.9E+37") == "inf"
    assert parse_value("-9.9E+37") == "inf"
    assert parse_value("-NAN") == "nan" and parse_value("+nan") == "nan"  # no data, never a float NaN
    for garbage in ("", "12.3X", "O.L", "\x00"):
        with pytest.raises(FrameError):
            parse_value(garbage)
    assert range_text(300, "V") == "300V" and range_text(0.5, "A") == "0.5A"


def test_wt300_reply_parsing() -> None:
    vals, flags = parse_reply(b"52.310E+00,104.75E+00,0.49941E+00,1.0000E+00,50.003E+00\r\n", ITEMS)
    assert flags == 0 and vals == {"W": 52.31, "V": 104.75, "A": 0.49941, "PF": 1.0, "Hz": 50.003}
    vals, flags = parse_reply("INF,230.10E+00,INF,NAN,50.000E+00", ITEMS)  # current over range
    assert flags == contract.FLAG_OVER_RANGE and vals == {"V": 230.1, "Hz": 50.0}
    assert parse_reply("NAN,230.10E+00,NAN,NAN,NAN", ITEMS) == ({}, contract.FLAG_MISSED)
    assert parse_reply("9.9E+37,230.10E+00,1.0E+00,1.0E+00,5.0E+01", ITEMS)[1] == contract.FLAG_OVER_RANGE
    for bad in ("52.3E+00,104.7E+00", "52.3E+00;104.7E+00;1;1;50", b"\xff\xfe,1,1,1,1"):
        with pytest.raises(FrameError):
            parse_reply(bad, ITEMS)


def test_wt300_setup_fixes_ranges_and_reads() -> None:
    uart = UART(1)
    uart.expect(b"*IDN?\n", b"YOKOGAWA,WT310,C2QD12345,F1.03\r\n")
    for _ in setup_commands(ITEMS, 300, 5):
        uart.expect(None, None)
    uart.expect(b"*OPC?\n", b"1\n")
    meter = WT300(uart, items=ITEMS, v_range=300, a_range=5)
    meter.setup()
    sent = [w.decode().strip() for w in uart.written]
    assert ":NUMERIC:NORMAL:ITEM1 P,1" in sent and ":NUMERIC:NORMAL:ITEM4 LAMB,1" in sent
    assert sent.index(":INPUT:VOLTAGE:AUTO OFF") < sent.index(":INPUT:VOLTAGE:RANGE 300V")
    assert ":INPUT:CURRENT:RANGE 5A" in sent and meter.model == "WT310"
    assert meter.info()["range"] == {"auto": False, "V": 300, "A": 5}
    uart.expect(b":NUMERIC:NORMAL:VALUE?\n", b"52.310E+00,229.85E+00,0.23712E+00,0.9598E+00,50.003E+00\n")
    vals, flags = meter.read()
    assert flags == 0 and vals["W"] == 52.31
    assert math.isclose(vals["u"], 0.001 + 0.001 * 1500 / 52.31)
    meter.set_range(a_range=10)
    uart.expect(b":NUMERIC:NORMAL:VALUE?\n", b"52.310E+00,229.85E+00,0.23712E+00,0.9598E+00,50.003E+00\n")
    assert meter.read()[1] == contract.FLAG_RANGE_CHANGE
    uart.expect(b":NUMERIC:NORMAL:VALUE?\n", b"52.310E+00,229.8")  # cut off mid-line
    with pytest.raises(FrameError):
        meter.read()


def test_wt300_refuses_another_instrument() -> None:
    uart = UART(1)
    uart.expect(b"*IDN?\n", b"KEYSIGHT,34465A,MY123,A.02\n")
    with pytest.raises(SensorError):
        WT300(uart).setup()


def test_negative_power_from_an_analyzer_is_flagged_not_sent() -> None:
    vals, flags = parse_reply("-12.300E+00,230.00E+00,0.0535E+00,-1.0000E+00,50.000E+00", ITEMS)
    vals, flags = clean(vals, flags)
    assert flags == contract.FLAG_REVERSE and "W" not in vals and vals["V"] == 230.0


# ---- options from the configuration ----------------------------------------------------------


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        ({"items": [["W"]]}, r"item a list not one of"),
        ({"items": ["W", "W"]}, r"item 'W' listed twice"),
        ({"v_range": float("inf")}, r"v_range .* got inf$"),
        ({"eol": 5}, r"eol must be one of"),
    ],
)
def test_bad_options_are_config_errors_naming_the_option(opts: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        meters.create(KIND, None, opts)


@pytest.mark.parametrize(
    "opts",
    [
        {"items": ["W", "A"], "v_range": 600, "a_range": 0.5, "element": 3, "eol": b"\r\n"},
    ],
)
def test_sane_options_are_accepted(opts: dict[str, object]) -> None:
    assert meters.create(KIND, None, opts).KIND == KIND
