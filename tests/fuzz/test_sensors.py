"""SHT3x CRC-8 and conversion, DS18B20 scratchpad CRC and sign, for any bytes off the bus."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wattbench_devkit.fuzz import reference as ref
from wattbench_devkit.fuzz import targets as t
from wattbench_devkit.fuzz.crashes import tolerate
from wattbench_devkit.fuzz.mutate import DrawSource
from wattbench_fw.errors import CRCError
from wattbench_fw.sensors import ds18b20, sht3x

from .profiles import fuzz


def test_check_values() -> None:
    assert sht3x.crc8(b"\xbe\xef") == 0x92  # SHT3x datasheet example
    assert ds18b20.crc8_maxim(b"123456789") == 0xA1


@pytest.mark.parametrize(
    "raw,celsius", [(0x07D0, 125.0), (0x0191, 25.0625), (0x0000, 0.0), (0xFF5E, -10.125), (0xFC90, -55.0)]
)
def test_ds18b20_datasheet_temperatures(raw: int, celsius: float) -> None:
    body = raw.to_bytes(2, "little") + bytes(6)
    assert ds18b20.decode_scratchpad(body + bytes((ref.crc8_maxim(body),))) == (celsius, raw)


@fuzz(ci=1000)
@given(st.binary(max_size=12))
def test_sht3x_any_bytes(data: bytes) -> None:
    tolerate(t.run_sensor, ("sht3x", data))


@fuzz(ci=500)
@given(st.integers(0, 0xFFFF), st.integers(0, 0xFFFF))
def test_sht3x_words_with_their_crc_decode_and_every_bit_flip_is_caught(st_raw: int, srh: int) -> None:
    words = [st_raw.to_bytes(2, "big"), srh.to_bytes(2, "big")]
    data = b"".join(w + bytes((ref.crc8_sensirion(w),)) for w in words)
    assert tolerate(t.run_sensor, ("sht3x", data)) == "ok"


@fuzz(ci=1000)
@given(st.binary(max_size=12))
def test_ds18b20_any_bytes(data: bytes) -> None:
    tolerate(t.run_sensor, ("ds18b20", data))


@fuzz(ci=1000)
@given(st.data())
def test_sensor_frames_mutated(data: st.DataObject) -> None:
    tolerate(t.run_sensor, t.gen_sensor(DrawSource(data)))


@fuzz(ci=300)
@given(st.binary(min_size=8, max_size=8), st.integers(0, 71))
def test_ds18b20_single_bit_errors_are_caught(body: bytes, bit: int) -> None:
    data = bytearray(body + bytes((ref.crc8_maxim(body),)))
    data[bit // 8] ^= 1 << (bit % 8)
    if bytes(data) == b"\xff" * 9:
        return
    with pytest.raises(CRCError):
        ds18b20.decode_scratchpad(bytes(data))
