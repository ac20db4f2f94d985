"""DS18B20: the data sheet's temperature/data table, the 1-Wire CRC and the pipelined conversions."""

from __future__ import annotations

import pytest

from wattbench_devkit.mocks.onewire import OneWire
from wattbench_fw.errors import CRCError, NoReply, SensorError
from wattbench_fw.sensors.ds18b20 import DS18B20, crc8_maxim, decode_scratchpad

KIND = "ds18b20"


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
