"""Peacefair PZEM-004T v3.0 AC energy meter, Modbus-RTU over a UART (9600 8N1).

Input registers 0x0000-0x0009 (read with function 0x04):
voltage 0.1 V; current 0.001 A (32 bit, low word first); power 0.1 W (32 bit, low word first);
energy 1 Wh (32 bit, low word first); frequency 0.1 Hz; power factor 0.01; alarm (0xFFFF = alarm).
Holding register 0x0002 is the slave address (1-247), written with function 0x06; function 0x42
resets the energy counter. Address 0xF8 reaches a single meter whatever its address.
"""

from wattbench_fw import modbus, serialio
from wattbench_fw.contract import FLAG_OVER_RANGE
from wattbench_fw.errors import FrameError

GENERAL_ADDRESS = 0xF8
REG_COUNT = 10
HOLD_ALARM_THRESHOLD = 0x0001
HOLD_ADDRESS = 0x0002
RESET_ENERGY = 0x42
# Measuring range of current by hardware variant (datasheet section 1.2.1).
MAX_AMPS = {"10A": 10.0, "100A": 100.0}


def _u32(lo, hi):
    return (hi << 16) | lo


def decode_measurement(regs):
    """Quantities from the 10 input registers (integers in, floats out, no rounding)."""
    if len(regs) != REG_COUNT:
        raise FrameError("expected %d registers" % REG_COUNT)
    return {
        "V": regs[0] / 10,
        "A": _u32(regs[1], regs[2]) / 1000,
        "W": _u32(regs[3], regs[4]) / 10,
        "Wh": _u32(regs[5], regs[6]),
        "Hz": regs[7] / 10,
        "PF": regs[8] / 100,
        "alarm": regs[9] == 0xFFFF,
    }


def reset_energy_request(addr):
    return modbus.with_crc(bytes((addr, RESET_ENERGY)))


def parse_reset_energy_reply(frame, addr):
    """The meter echoes the 4-byte request; an error reply is addr, 0xC2, code, CRC."""
    if len(frame) == 4:
        if not modbus.crc_ok(frame):
            from wattbench_fw.errors import CRCError

            raise CRCError("bad CRC")
        if frame[0] != addr or frame[1] != RESET_ENERGY:
            raise FrameError("unexpected reset reply")
        return True
    modbus.check_reply(frame, addr, RESET_ENERGY)
    raise FrameError("unexpected reset reply length %d" % len(frame))


class PZEM004T:
    KIND = "pzem004t"
    QUANTITIES = ("W", "V", "A", "PF", "Hz", "Wh")

    def __init__(self, uart, addr=0x01, variant="100A", timeout_ms=200, acc=0.005):
        # The option checks are imported here, not at the top: a module-level name would keep
        # the meter table's module in a board's RAM after boot (device.boot releases it).
        from wattbench_fw.meters import choice, integer, number

        if not isinstance(addr, int) or isinstance(addr, bool) or not 1 <= addr <= 0xF8:
            raise ValueError("addr must be 1-247, or 248 for a single meter")
        self.uart = uart
        self.addr = addr
        self.variant = choice("variant", variant, ("10A", "100A"))
        self.max_a = MAX_AMPS[variant]
        self.timeout_ms = integer("timeout_ms", timeout_ms, 0, 60000)
        self.acc = number("acc", acc, 0, 1)
        self._request = modbus.read_request(addr, modbus.READ_INPUT, 0, REG_COUNT)

    def setup(self):
        pass

    def info(self):
        return {"model": "PZEM-004T-" + self.variant, "acc": self.acc}

    def read(self):
        raw = serialio.transact(
            self.uart, self._request, lambda b: modbus.reply_complete(b, REG_COUNT), self.timeout_ms
        )
        regs = modbus.parse_read_reply(raw, self.addr, modbus.READ_INPUT, REG_COUNT)
        vals = decode_measurement(regs)
        del vals["alarm"]
        flags = 0
        if vals["A"] > self.max_a:
            # Outside the measuring range the current and everything derived from it is unreliable.
            for q in ("A", "W", "PF"):
                del vals[q]
            flags |= FLAG_OVER_RANGE
        else:
            vals["u"] = self.acc
        return vals, flags

    def reset_energy(self):
        raw = serialio.transact(
            self.uart,
            reset_energy_request(self.addr),
            lambda b: len(b) >= 4 and (b[1] == RESET_ENERGY or len(b) >= 5),
            self.timeout_ms,
        )
        return parse_reset_energy_reply(raw, self.addr)

    def set_address(self, new_addr):
        """Write a new slave address (1-247); talks to the current address and then uses the new one."""
        if not 1 <= new_addr <= 247:
            raise ValueError("address must be 1-247")
        req = modbus.write_single_request(self.addr, HOLD_ADDRESS, new_addr)
        raw = serialio.transact(
            self.uart, req, lambda b: len(b) >= 8 or (len(b) >= 5 and b[1] & 0x80), self.timeout_ms
        )
        modbus.check_reply(raw, self.addr, modbus.WRITE_SINGLE)
        if bytes(raw) != bytes(req):
            raise FrameError("address write not echoed")
        self.addr = new_addr
        self._request = modbus.read_request(new_addr, modbus.READ_INPUT, 0, REG_COUNT)
        return new_addr

    def read_address(self):
        req = modbus.read_request(self.addr, modbus.READ_HOLDING, HOLD_ADDRESS, 1)
        raw = serialio.transact(self.uart, req, lambda b: modbus.reply_complete(b, 1), self.timeout_ms)
        return modbus.parse_read_reply(raw, self.addr, modbus.READ_HOLDING, 1)[0]
