"""Modbus-RTU framing: CRC-16/MODBUS, request building and reply parsing. Pure functions, no I/O."""

from wattbench_fw.errors import CRCError, FrameError, SensorError

READ_HOLDING = 0x03
READ_INPUT = 0x04
WRITE_SINGLE = 0x06


def _table():
    t = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
        t.append(crc)
    return t


_TABLE = _table()


def crc16(data, crc=0xFFFF):
    """CRC-16/MODBUS (reflected polynomial 0xA001, init 0xFFFF), sent low byte first."""
    tbl = _TABLE
    for b in data:
        crc = (crc >> 8) ^ tbl[(crc ^ b) & 0xFF]
    return crc


def with_crc(frame):
    c = crc16(frame)
    return bytes(frame) + bytes((c & 0xFF, c >> 8))


def crc_ok(frame):
    if len(frame) < 4:
        return False
    c = crc16(frame[:-2])
    return frame[-2] == (c & 0xFF) and frame[-1] == (c >> 8)


def read_request(addr, function, start, count):
    return with_crc(bytes((addr, function, start >> 8, start & 0xFF, count >> 8, count & 0xFF)))


def write_single_request(addr, register, value):
    return with_crc(bytes((addr, WRITE_SINGLE, register >> 8, register & 0xFF, value >> 8, value & 0xFF)))


def read_reply_length(count):
    """Bytes in a normal reply to a read of `count` registers."""
    return 5 + 2 * count


EXCEPTION_REPLY_LENGTH = 5


class ModbusException(SensorError):
    """The slave answered with an exception code (function | 0x80)."""

    def __init__(self, function, code):
        super().__init__("modbus exception %d on function 0x%02x" % (code, function))
        self.function = function
        self.code = code


def check_reply(frame, addr, function):
    """Validate address, CRC and exception replies common to every function."""
    if len(frame) < EXCEPTION_REPLY_LENGTH:
        raise FrameError("short frame (%d bytes)" % len(frame))
    if not crc_ok(frame):
        raise CRCError("bad CRC")
    if frame[0] != addr:
        raise FrameError("reply from address %d, expected %d" % (frame[0], addr))
    if frame[1] == function | 0x80:
        raise ModbusException(function, frame[2])
    if frame[1] != function:
        raise FrameError("reply function 0x%02x, expected 0x%02x" % (frame[1], function))


def parse_read_reply(frame, addr, function, count):
    """Registers (list of 16-bit ints) from a read-registers reply, or a MeterError."""
    if len(frame) >= 2 and not frame[1] & 0x80 and len(frame) != read_reply_length(count):
        raise FrameError("%d-byte reply, expected %d" % (len(frame), read_reply_length(count)))
    check_reply(frame, addr, function)
    if len(frame) != read_reply_length(count) or frame[2] != 2 * count:
        raise FrameError("reply carries %d bytes, expected %d registers" % (frame[2], count))
    return [(frame[3 + 2 * i] << 8) | frame[4 + 2 * i] for i in range(count)]


def reply_complete(buf, count):
    """True once `buf` holds a whole normal or exception reply to a read of `count` registers."""
    if len(buf) >= 2 and buf[1] & 0x80:
        return len(buf) >= EXCEPTION_REPLY_LENGTH
    return len(buf) >= read_reply_length(count)
