"""Maxim DS18B20 1-Wire temperature sensor.

Convert T (0x44) takes up to 750 ms at 12 bits, so read() collects the result of the conversion
started by the previous read() and starts the next one: it never blocks, and the value lags by one
sample period. Read Scratchpad (0xBE) returns 9 bytes; byte 8 is the Dallas/Maxim CRC-8
(polynomial x^8+x^5+x^4+1, reflected 0x8C, init 0) of bytes 0-7. Temperature is a signed 16-bit
value in 1/16 degC (0x0191 = +25.0625, 0xFF5E = -10.125). 0x0550 (+85) is the power-on value and
means no conversion has completed yet.
"""

from wattbench_fw import port
from wattbench_fw.errors import CRCError, FrameError, NoReply, SensorError

CMD_CONVERT = 0x44
CMD_READ_SCRATCH = 0xBE
CMD_SKIP_ROM = 0xCC
POWER_ON_RAW = 0x0550
CONVERT_MS = 750


def crc8_maxim(data):
    crc = 0
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x8C if crc & 1 else crc >> 1
    return crc


def decode_scratchpad(buf):
    """Temperature in degC from the 9 scratchpad bytes; the raw word is returned too."""
    if len(buf) != 9:
        raise FrameError("expected 9 bytes, got %d" % len(buf))
    if all(b == 0xFF for b in buf):
        raise NoReply("no sensor answered (bus reads all ones)")
    if crc8_maxim(buf[0:8]) != buf[8]:
        raise CRCError("DS18B20 CRC mismatch")
    raw = buf[0] | (buf[1] << 8)
    value = raw - 0x10000 if raw & 0x8000 else raw
    return value / 16, raw


def parse_rom(text):
    """ROM code from 16 hex digits (as printed by a bus scan), or None for skip-ROM."""
    if not text:
        return None
    text = text.replace(":", "").replace(" ", "")
    if len(text) != 16:
        raise ValueError("ROM must be 16 hex digits")
    return bytes(int(text[i : i + 2], 16) for i in range(0, 16, 2))


class DS18B20:
    KIND = "ds18b20"
    QUANTITIES = ("T",)

    def __init__(self, ow, rom=None):
        self.ow = ow
        self.rom = parse_rom(rom) if isinstance(rom, str) else rom
        self._buf = bytearray(9)
        self._converting_since = None

    def _select(self):
        if not self.ow.reset():
            raise NoReply("no presence pulse on the 1-Wire bus")
        if self.rom is None:
            self.ow.writebyte(CMD_SKIP_ROM)
        else:
            self.ow.select_rom(self.rom)

    def _start(self):
        self._select()
        self.ow.writebyte(CMD_CONVERT)
        self._converting_since = port.ticks_ms()

    def setup(self):
        self._start()

    def info(self):
        return {"model": "DS18B20"}

    def read(self):
        started = self._converting_since
        if started is None or port.ticks_diff(port.ticks_ms(), started) < CONVERT_MS:
            # Sampling faster than the conversion allows: report the slot as missed.
            if started is None:
                self._start()
            raise NoReply("conversion not finished")
        self._select()
        self.ow.writebyte(CMD_READ_SCRATCH)
        self.ow.readinto(self._buf)
        try:
            self._start()
        except NoReply:
            self._converting_since = None  # retried on the next read
        t, raw = decode_scratchpad(self._buf)
        if raw == POWER_ON_RAW:
            raise SensorError("power-on value: conversion did not run")
        return {"T": t}, 0
