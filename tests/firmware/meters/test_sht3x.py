"""SHT3x: the data sheet's CRC example (BE EF -> 92), decoding and a read over I2C."""

from __future__ import annotations

import math

import pytest

from wattbench_devkit.mocks.machine import I2C
from wattbench_fw.errors import CRCError
from wattbench_fw.sensors.sht3x import SHT3x, crc8
from wattbench_fw.sensors.sht3x import decode as sht_decode

KIND = "sht3x"


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
