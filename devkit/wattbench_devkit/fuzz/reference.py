"""Independent reference implementations the fuzz targets compare the parsers against.

They are written from the specifications, deliberately in a different form from the code under test:
CRCs as polynomial division over GF(2) (the firmware uses tables or shift registers), two's
complement through int.from_bytes, Modbus replies from the framing rules in order.
"""

from __future__ import annotations


def _polymod(value: int, poly: int) -> int:
    """Remainder of the GF(2) polynomial `value` divided by `poly` (poly includes its top bit)."""
    width = poly.bit_length()
    while value.bit_length() >= width:
        value ^= poly << (value.bit_length() - width)
    return value


def _reflect(value: int, bits: int) -> int:
    return int(f"{value:0{bits}b}"[::-1], 2)


def crc_direct(data: bytes, poly: int, width: int, init: int, reflect: bool) -> int:
    """CRC as the register algorithm computes it: (init * x^n + M(x) * x^w) mod P(x), n = message bits."""
    if reflect:
        data = bytes(_reflect(b, 8) for b in data)
    n = 8 * len(data)
    m = int.from_bytes(data, "big") if data else 0
    crc = _polymod((init << n) ^ (m << width), poly)
    return _reflect(crc, width) if reflect else crc


def crc16_modbus(data: bytes) -> int:
    """CRC-16/MODBUS: x^16 + x^15 + x^2 + 1, reflected, init 0xFFFF, no final xor."""
    return crc_direct(data, 0x18005, 16, 0xFFFF, True)


def crc8_sensirion(data: bytes) -> int:
    """CRC-8 of the SHT3x: x^8 + x^5 + x^4 + 1, not reflected, init 0xFF."""
    return crc_direct(data, 0x131, 8, 0xFF, False)


def crc8_maxim(data: bytes) -> int:
    """Dallas/Maxim 1-Wire CRC-8: x^8 + x^5 + x^4 + 1, reflected, init 0."""
    return crc_direct(data, 0x131, 8, 0x00, True)


# Catalogue check values ("123456789") and the datasheet examples.
assert crc16_modbus(b"123456789") == 0x4B37
assert crc8_sensirion(b"123456789") == 0xF7
assert crc8_sensirion(b"\xbe\xef") == 0x92
assert crc8_maxim(b"123456789") == 0xA1


def signed(raw: int, bits: int) -> int:
    """Two's complement value of the low `bits` bits of raw."""
    nbytes = (bits + 7) // 8
    pad = 8 * nbytes - bits
    value = int.from_bytes(((raw & ((1 << bits) - 1)) << pad).to_bytes(nbytes, "big"), "big", signed=True)
    return value >> pad


def signed_high20_of_24(raw24: int) -> int:
    """INA228 VSHUNT/CURRENT: a 20-bit two's complement value left-aligned in 24 bits (bits 3:0 reserved)."""
    return int.from_bytes(raw24.to_bytes(3, "big"), "big", signed=True) >> 4


class RefError(Exception):
    """The reference parser refuses the frame; `flag_kind` is 'crc' (framing/CRC) or 'exception'."""

    def __init__(self, flag_kind: str, why: str) -> None:
        super().__init__(why)
        self.flag_kind = flag_kind


def modbus_read_reply(frame: bytes, addr: int, function: int, count: int) -> list[int]:
    """Register values of a Modbus-RTU read reply per the Modbus over serial line spec, section 2.5."""
    if len(frame) < 5:
        raise RefError("crc", "shorter than the smallest reply")
    if crc16_modbus(frame[:-2]) != int.from_bytes(frame[-2:], "little"):
        raise RefError("crc", "CRC")
    if frame[0] != addr:
        raise RefError("crc", "address")
    if frame[1] == function | 0x80:
        raise RefError("exception", f"exception code {frame[2]}")
    if frame[1] != function:
        raise RefError("crc", "function")
    if frame[2] != 2 * count or len(frame) != 5 + 2 * count:
        raise RefError("crc", "byte count")
    body = frame[3:-2]
    return [int.from_bytes(body[i : i + 2], "big") for i in range(0, len(body), 2)]
