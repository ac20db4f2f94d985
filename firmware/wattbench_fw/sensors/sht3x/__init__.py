"""Sensirion SHT3x (SHT30/31/35) temperature and humidity sensor on I2C.

Single-shot measurement, high repeatability, no clock stretching: command 0x24 0x00, result after
at most 15.5 ms as six bytes: T msb, T lsb, CRC, RH msb, RH lsb, CRC. CRC-8 polynomial 0x31,
init 0xFF (CRC of 0xBE 0xEF is 0x92). T = -45 + 175 x S_T / 65535 degC, RH = 100 x S_RH / 65535 %.
"""

from wattbench_fw import port
from wattbench_fw.errors import CRCError, FrameError

CMD_SINGLE_HIGH = b"\x24\x00"
CMD_SOFT_RESET = b"\x30\xa2"
MEASURE_MS = 16


def crc8(data):
    crc = 0xFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = ((crc << 1) ^ 0x31) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
    return crc


def decode(buf):
    """(T degC, RH %) from the 6 result bytes; CRCError if either word is corrupt."""
    if len(buf) != 6:
        raise FrameError("expected 6 bytes, got %d" % len(buf))
    if crc8(buf[0:2]) != buf[2] or crc8(buf[3:5]) != buf[5]:
        raise CRCError("SHT3x CRC mismatch")
    st = (buf[0] << 8) | buf[1]
    srh = (buf[3] << 8) | buf[4]
    return -45 + 175 * st / 65535, 100 * srh / 65535


class SHT3x:
    KIND = "sht3x"
    QUANTITIES = ("T", "RH")

    def __init__(self, i2c, addr=0x44):
        self.i2c = i2c
        self.addr = addr
        self._buf = bytearray(6)

    def setup(self):
        self.i2c.writeto(self.addr, CMD_SOFT_RESET)
        port.sleep_ms(2)

    def info(self):
        return {"model": "SHT3x"}

    def read(self):
        self.i2c.writeto(self.addr, CMD_SINGLE_HIGH)
        port.sleep_ms(MEASURE_MS)
        self.i2c.readfrom_into(self.addr, self._buf)
        t, rh = decode(self._buf)
        return {"T": t, "RH": rh}, 0
