"""PZEM-004T v3.0 (Modbus RTU over a UART) against its published frames: the read request
01 04 00 00 00 0A 70 0D (and F8 04 00 00 00 0A 64 64 for the general address) and the energy reset
01 42 80 11 / F8 42 C2 41. Reply frames are built from the documented register map and then corrupted in
every way a line can corrupt them."""

from __future__ import annotations

import pytest

from wattbench_devkit.mocks.machine import UART
from wattbench_fw import contract, meters, modbus
from wattbench_fw.errors import ConfigError, CRCError, FrameError, NoReply, SensorError
from wattbench_fw.meters.pzem004t import PZEM004T, decode_measurement

KIND = "pzem004t"


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


# ---- options from the configuration ----------------------------------------------------------


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        ({"addr": "1"}, r"addr must be 1-247"),
        ({"variant": []}, r"variant must be one of '10A', '100A', got a list$"),
        ({"timeout_ms": 1.5}, r"timeout_ms must be an integer"),
    ],
)
def test_bad_options_are_config_errors_naming_the_option(opts: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        meters.create(KIND, None, opts)


@pytest.mark.parametrize(
    "opts",
    [
        {"addr": 248, "variant": "10A", "timeout_ms": 0, "acc": 0},
    ],
)
def test_sane_options_are_accepted(opts: dict[str, object]) -> None:
    assert meters.create(KIND, None, opts).KIND == KIND
