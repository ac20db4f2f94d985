"""Meter and sensor drivers against byte sequences and register values from the devices' documents.

Published frames used as fixed points: the PZEM-004T read request 01 04 00 00 00 0A 70 0D (and
F8 04 00 00 00 0A 64 64 for the general address), the energy reset 01 42 80 11 / F8 42 C2 41; the
INA226 data sheet's configure/measure/calculate example (10 A through 2 mOhm at 12 V: shunt 1F40h,
bus 2570h, calibration A00h, current 2710h, power 12B8h); the WT300-series numeric output format
(<NR3> fields, "NAN" when data does not exist, "INF" on over-range, 9.91E+37 / 9.9E+37 in numeric
form); the SHT3x CRC example (BE EF -> 92) and the DS18B20 temperature/data table. Reply frames are
built from the documented register maps and then corrupted in every way a line can corrupt them.
"""

from __future__ import annotations

import math

import pytest

from wattbench_devkit.mocks.machine import I2C, UART
from wattbench_devkit.mocks.onewire import OneWire
from wattbench_fw import contract, modbus
from wattbench_fw.errors import CRCError, FrameError, NoReply, SensorError
from wattbench_fw.meters.ina226 import INA226, calibration, config_word
from wattbench_fw.meters.ina228 import INA228, adc_config_word, charge_coulombs, s20, shunt_cal
from wattbench_fw.meters.pzem004t import PZEM004T, decode_measurement
from wattbench_fw.meters.wt300 import WT300, parse_reply, parse_value, range_text, setup_commands
from wattbench_fw.sampler import clean
from wattbench_fw.sensors.ds18b20 import DS18B20, crc8_maxim, decode_scratchpad
from wattbench_fw.sensors.sht3x import SHT3x, crc8
from wattbench_fw.sensors.sht3x import decode as sht_decode


def crc16_bitwise(data: bytes) -> int:
    """Reference CRC-16/MODBUS, bit by bit (the firmware uses a table)."""
    crc = 0xFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc


def frame(body: bytes) -> bytes:
    c = crc16_bitwise(body)
    return body + bytes((c & 0xFF, c >> 8))


def pzem_reply(addr: int, regs: list[int]) -> bytes:
    body = bytes((addr, 0x04, 2 * len(regs))) + b"".join(r.to_bytes(2, "big") for r in regs)
    return frame(body)


READ_1 = bytes.fromhex("01040000000a700d")
# 229.8 V, 1.012 A, 231.4 W, 1234 Wh, 50.0 Hz, PF 0.99, no alarm
REGS = [2298, 1012, 0, 2314, 0, 1234, 0, 500, 99, 0]
REPLY_1 = pzem_reply(1, REGS)


# ---- Modbus / CRC ------------------------------------------------------------------------------


def test_crc_matches_published_frames() -> None:
    assert modbus.read_request(1, 4, 0, 10) == READ_1
    assert modbus.read_request(0xF8, 4, 0, 10) == bytes.fromhex("f8040000000a6464")
    assert modbus.with_crc(b"\x01\x42") == bytes.fromhex("01428011")
    assert modbus.with_crc(b"\xf8\x42") == bytes.fromhex("f842c241")
    for data in (b"", b"\x00", bytes(range(256)), REPLY_1[:-2]):
        assert modbus.crc16(data) == crc16_bitwise(data)


def test_decode_measurement_scaling() -> None:
    v = decode_measurement(REGS)
    assert v == {"V": 229.8, "A": 1.012, "W": 231.4, "Wh": 1234, "Hz": 50.0, "PF": 0.99, "alarm": False}
    # 32-bit values are sent low word first
    big = decode_measurement([2200, 0x86A0, 0x0001, 0x2710, 0x0001, 0xFFFF, 0x0098, 600, 100, 0xFFFF])
    assert big["A"] == 100.0 and big["W"] == 7553.6 and big["Wh"] == 0x98FFFF and big["alarm"]


def test_pzem_read_over_uart() -> None:
    uart = UART(2)
    uart.expect(READ_1, REPLY_1)
    vals, flags = PZEM004T(uart, addr=1).read()
    assert flags == 0
    assert vals == {"V": 229.8, "A": 1.012, "W": 231.4, "Wh": 1234, "Hz": 50.0, "PF": 0.99, "u": 0.005}


def test_pzem_stale_bytes_are_drained_before_the_request() -> None:
    uart = UART(2)
    uart.inject(b"\x00\xff\x13")  # a late reply fragment from an earlier timeout
    uart.expect(READ_1, REPLY_1)
    vals, flags = PZEM004T(uart, addr=1).read()
    assert flags == 0 and vals["W"] == 231.4


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (REPLY_1[:7] + bytes((REPLY_1[7] ^ 0x04,)) + REPLY_1[8:], CRCError),  # one flipped bit
        (REPLY_1[:-1] + bytes((REPLY_1[-1] ^ 0xFF,)), CRCError),  # CRC byte damaged
        (REPLY_1[:12], FrameError),  # truncated: the rest never came
        (pzem_reply(2, REGS), FrameError),  # another meter answered
        (pzem_reply(1, REGS[:9]), FrameError),  # wrong register count
        (frame(b"\x01\x84\x02"), SensorError),  # Modbus exception: illegal address
        (b"", NoReply),  # silence
    ],
    ids=["bitflip", "crc-byte", "truncated", "wrong-address", "wrong-length", "exception", "silence"],
)
def test_pzem_corrupted_replies_raise_the_right_error(reply: bytes, error: type) -> None:
    uart = UART(2)
    uart.expect(READ_1, reply)
    with pytest.raises(error):
        PZEM004T(uart, addr=1, timeout_ms=30).read()


def test_pzem_errors_map_to_contract_flags() -> None:
    assert CRCError.flag == contract.FLAG_CRC
    assert FrameError.flag == contract.FLAG_CRC
    assert NoReply.flag == contract.FLAG_MISSED
    assert SensorError.flag == contract.FLAG_SENSOR_ERROR


def test_pzem_over_range_current_withholds_power() -> None:
    regs = [2300, 0x2EE0, 0, 0x5DC0, 0x0000, 5, 0, 500, 100, 0]  # 12.000 A on the 10 A variant
    uart = UART(2)
    uart.expect(READ_1, pzem_reply(1, regs))
    vals, flags = PZEM004T(uart, addr=1, variant="10A").read()
    assert flags == contract.FLAG_OVER_RANGE
    assert "W" not in vals and "A" not in vals and vals["V"] == 230.0


def test_pzem_reset_energy_and_address_change() -> None:
    uart = UART(2)
    uart.expect(bytes.fromhex("01428011"), bytes.fromhex("01428011"))
    meter = PZEM004T(uart, addr=1)
    assert meter.reset_energy()
    write = frame(b"\x01\x06\x00\x02\x00\x07")
    uart.expect(write, write)
    assert meter.set_address(7) == 7
    uart.expect(modbus.read_request(7, 4, 0, 10), pzem_reply(7, REGS))
    assert meter.read()[0]["W"] == 231.4
    uart.expect(frame(b"\x07\x42"), frame(b"\x07\xc2\x04"))  # the meter refuses: slave error
    with pytest.raises(SensorError):
        meter.reset_energy()
    with pytest.raises(ValueError):
        meter.set_address(0)


# ---- INA226 ------------------------------------------------------------------------------------


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


# ---- INA228 ------------------------------------------------------------------------------------

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


# ---- WT300 (SCPI) ------------------------------------------------------------------------------

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


# ---- SHT3x -------------------------------------------------------------------------------------


def sht_frame(t_raw: int, rh_raw: int) -> bytes:
    t = t_raw.to_bytes(2, "big")
    h = rh_raw.to_bytes(2, "big")
    return t + bytes((crc8(t),)) + h + bytes((crc8(h),))


def test_sht3x_crc_and_decode() -> None:
    assert crc8(b"\xbe\xef") == 0x92  # data sheet example
    t, rh = sht_decode(sht_frame(0x6666, 0x8000))
    assert math.isclose(t, -45 + 175 * 0x6666 / 65535) and math.isclose(rh, 100 * 0x8000 / 65535)
    bad = bytearray(sht_frame(0x6666, 0x8000))
    bad[4] ^= 0x01
    with pytest.raises(CRCError):
        sht_decode(bytes(bad))


def test_sht3x_over_i2c() -> None:
    bus = I2C(0)
    bus.add(0x44)
    bus.queue_reply(0x44, sht_frame(0x6666, 0x8000))
    sensor = SHT3x(bus)
    sensor.setup()
    vals, flags = sensor.read()
    assert flags == 0 and vals["T"] == 25.0  # 0x6666 is exactly 70 % of full scale
    assert (0x44, None, b"\x24\x00") in bus.writes
    with pytest.raises(OSError):
        sensor.read()  # the chip did not answer


# ---- DS18B20 -----------------------------------------------------------------------------------


def scratchpad(raw: int) -> bytes:
    body = raw.to_bytes(2, "little") + bytes((0x4B, 0x46, 0x7F, 0xFF, 0x0C, 0x10))
    return body + bytes((crc8_maxim(body),))


@pytest.mark.parametrize(
    ("raw", "celsius"),
    [
        (0x07D0, 125.0),
        (0x0191, 25.0625),
        (0x00A2, 10.125),
        (0x0008, 0.5),
        (0x0000, 0.0),
        (0xFFF8, -0.5),
        (0xFF5E, -10.125),
        (0xFE6F, -25.0625),
        (0xFC90, -55.0),
    ],
)
def test_ds18b20_datasheet_temperatures(raw: int, celsius: float) -> None:
    assert decode_scratchpad(scratchpad(raw)) == (celsius, raw)


def test_ds18b20_crc_and_bus_faults() -> None:
    assert crc8_maxim(bytes((0x02, 0x1C, 0xB8, 0x01, 0, 0, 0))) == 0xA2  # Maxim 1-Wire CRC example
    bad = bytearray(scratchpad(0x0191))
    bad[0] ^= 0x10
    with pytest.raises(CRCError):
        decode_scratchpad(bytes(bad))
    with pytest.raises(NoReply):
        decode_scratchpad(b"\xff" * 9)


def test_ds18b20_driver_pipelines_conversions(monkeypatch: pytest.MonkeyPatch) -> None:
    from wattbench_fw import port

    now = [0]
    monkeypatch.setattr(port, "ticks_ms", lambda: now[0])
    ow = OneWire()
    sensor = DS18B20(ow, rom="28ff641e8a1603aa")
    sensor.setup()
    with pytest.raises(NoReply):
        sensor.read()  # asked again before the 750 ms conversion finished
    now[0] = 800
    ow.scratchpads.append(scratchpad(0x0191))
    assert sensor.read() == ({"T": 25.0625}, 0)
    now[0] = 1600
    ow.scratchpads.append(scratchpad(0x0550))
    with pytest.raises(SensorError):
        sensor.read()  # +85 degC power-on value: no conversion happened
    assert ow.sent[:9] == [0x55, 0x28, 0xFF, 0x64, 0x1E, 0x8A, 0x16, 0x03, 0xAA]


# ---- driver options from the configuration -----------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "opts", "message"),
    [
        ("ina226", {"shunt_ohm": 0}, r"^ina226: shunt_ohm must be a number in \[1e-06, 100.0\], got 0$"),
        ("ina226", {"max_a": 0}, r"max_a must be a number"),
        ("ina226", {"max_a": 10**400}, r"max_a .* got an integer of more than 15 digits$"),
        ("ina226", {"max_a": float("nan")}, r"max_a .* got nan$"),
        ("ina226", {"shunt_ohm": "0.002"}, r"shunt_ohm .* got '0.002'$"),
        ("ina226", {"current_lsb": 10**400, "shunt_ohm": "0.002"}, r"shunt_ohm"),
        ("ina226", {"current_lsb": 0.0001}, r"current_lsb 0.0001 A cannot reach max_a 10 A"),
        ("ina226", {"shunt_ohm": 100.0}, r"calibration .* out of range"),
        ("ina226", {"addr": 0x50}, r"addr must be an integer in \[64, 79\]"),
        ("ina226", {"acc": 2}, r"acc must be a number in \[0, 1\]"),
        ("ina228", {"shunt_ohm": float("inf")}, r"shunt_ohm .* got inf$"),
        ("ina228", {"max_a": 10**400}, r"max_a"),
        ("ina228", {"adc_range": 2}, r"adc_range must be one of 0, 1, false, true, got 2$"),
        ("ina228", {"reset_energy": "no"}, r"reset_energy must be one of false, true"),
        ("pzem004t", {"addr": "1"}, r"addr must be 1-247"),
        ("pzem004t", {"variant": []}, r"variant must be one of '10A', '100A', got a list$"),
        ("pzem004t", {"timeout_ms": 1.5}, r"timeout_ms must be an integer"),
        ("wt300", {"items": [["W"]]}, r"item a list not one of"),
        ("wt300", {"items": ["W", "W"]}, r"item 'W' listed twice"),
        ("wt300", {"v_range": float("inf")}, r"v_range .* got inf$"),
        ("wt300", {"eol": 5}, r"eol must be one of"),
        ("sim", {"watts": 10**400}, r"watts"),
        ("sim", {"volts": 0}, r"volts must be a number in \[1, 100000\]"),
        ("sim", {"model": "sine", "period_s": 0}, r"period_s"),
        ("sim", {"model": "steps", "steps": [[10, 100], [0, 50]]}, r"steps\[1\] seconds"),
        ("sim", {"model": "steps", "steps": [[10]]}, r"steps\[0\] must be a \[seconds, watts\] pair"),
        ("sim", {"seed": "x"}, r"seed must be an integer"),
        ("sim", {"clock": 5}, r"clock must be a function"),
        ("sim", {"bogus": 1}, r"^sim options bogus: "),
    ],
)
def test_bad_driver_options_are_config_errors_naming_the_option(
    kind: str, opts: dict[str, object], message: str
) -> None:
    from wattbench_fw import meters
    from wattbench_fw.errors import ConfigError

    with pytest.raises(ConfigError, match=message):
        meters.create(kind, None, opts)


@pytest.mark.parametrize(
    ("kind", "opts"),
    [
        ("ina226", {"shunt_ohm": 0.1, "max_a": 0.8, "current_lsb": 0.0001, "acc": 0.01}),
        ("ina226", {"shunt_ohm": 0.0005, "max_a": 80}),
        ("ina228", {"shunt_ohm": 0.015, "max_a": 10, "adc_range": 1, "reset_energy": True}),
        ("pzem004t", {"addr": 248, "variant": "10A", "timeout_ms": 0, "acc": 0}),
        ("wt300", {"items": ["W", "A"], "v_range": 600, "a_range": 0.5, "element": 3, "eol": b"\r\n"}),
        ("sim", {"model": "steps", "steps": [[1, 0], [2.5, 300]], "watts": 0, "amp": -5, "seed": 7}),
    ],
)
def test_sane_driver_options_are_accepted(kind: str, opts: dict[str, object]) -> None:
    from wattbench_fw import meters

    assert meters.create(kind, None, opts).KIND == kind
