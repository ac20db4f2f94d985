"""TI INA226 current/power monitor on I2C, for DC rails.

Registers (16 bit, MSB first): 0x00 configuration (power-on 0x4127), 0x01 shunt voltage (signed,
2.5 uV/LSB), 0x02 bus voltage (1.25 mV/LSB), 0x03 power (25 x Current_LSB), 0x04 current (signed,
Current_LSB), 0x05 calibration = 0.00512 / (Current_LSB x R_shunt), 0x06 mask/enable
(bit 3 conversion ready, bit 2 math overflow), 0xFE manufacturer id 0x5449, 0xFF die id 0x2260.
"""

from wattbench_fw.contract import FLAG_OVER_RANGE, FLAG_REVERSE
from wattbench_fw.errors import SensorError

REG_CONFIG = 0x00
REG_SHUNT = 0x01
REG_BUS = 0x02
REG_POWER = 0x03
REG_CURRENT = 0x04
REG_CAL = 0x05
REG_MASK = 0x06
REG_MFG_ID = 0xFE
REG_DIE_ID = 0xFF
MFG_ID = 0x5449
DIE_ID = 0x2260

ADDRESSES = (0x40, 0x4F)  # set by the A0/A1 straps
# Sane option ranges: a 1 uOhm shunt is below any part sold; 10 kA is beyond any bench rail. The
# bounds keep the calibration arithmetic finite; calibration() then checks the combination.
SHUNT_OHM = (1e-6, 100.0)
MAX_A = (1e-6, 10000.0)

SHUNT_LSB_V = 2.5e-6
BUS_LSB_V = 1.25e-3
POWER_PER_CURRENT_LSB = 25
MASK_OVF = 0x0004
MASK_CVRF = 0x0008

AVERAGES = (1, 4, 16, 64, 128, 256, 512, 1024)
CONVERSION_US = (140, 204, 332, 588, 1100, 2116, 4156, 8244)
MODE_SHUNT_BUS_CONTINUOUS = 7


def config_word(avg=1, vbus_ct_us=1100, vsh_ct_us=1100, mode=MODE_SHUNT_BUS_CONTINUOUS):
    """Configuration register value. Bit 14 always reads 1 (the 0x4127 default has it set)."""
    if avg not in AVERAGES:
        raise ValueError("avg must be one of %r" % (AVERAGES,))
    if vbus_ct_us not in CONVERSION_US or vsh_ct_us not in CONVERSION_US:
        raise ValueError("conversion time must be one of %r us" % (CONVERSION_US,))
    return (
        0x4000
        | AVERAGES.index(avg) << 9
        | CONVERSION_US.index(vbus_ct_us) << 6
        | CONVERSION_US.index(vsh_ct_us) << 3
        | mode
    )


def calibration(current_lsb, shunt_ohm):
    cal = 0.00512 / (current_lsb * shunt_ohm)
    if not 1 <= cal < 0x8000:
        raise ValueError(
            "calibration %.4g out of range 1-32767: choose another current_lsb (or max_a) or shunt_ohm" % cal
        )
    return int(cal)


def s16(x):
    return x - 0x10000 if x & 0x8000 else x


def decode(shunt, bus, current, power, current_lsb):
    """Physical values from raw register words (ints 0-0xFFFF)."""
    return {
        "Vshunt": s16(shunt) * SHUNT_LSB_V,
        "V": bus * BUS_LSB_V,
        "A": s16(current) * current_lsb,
        "W": power * POWER_PER_CURRENT_LSB * current_lsb,
    }


def sample(shunt, bus, current, power, mask, current_lsb):
    """Contract values and flags from one set of register reads."""
    d = decode(shunt, bus, current, power, current_lsb)
    vals = {"V": d["V"]}
    flags = 0
    if mask & MASK_OVF or shunt in (0x7FFF, 0x8000):
        # Saturated shunt ADC or overflowed power arithmetic: current and power are not known.
        return vals, flags | FLAG_OVER_RANGE
    if d["A"] < 0:
        # Reversed flow means miswiring; the contract forbids negative W, so flag it instead.
        return vals, flags | FLAG_REVERSE
    vals["A"] = d["A"]
    vals["W"] = d["W"]
    return vals, flags


class INA226:
    KIND = "ina226"
    QUANTITIES = ("W", "V", "A")

    def __init__(
        self,
        i2c,
        addr=0x40,
        shunt_ohm=0.002,
        max_a=10.0,
        current_lsb=None,
        avg=16,
        vbus_ct_us=1100,
        vsh_ct_us=1100,
        acc=None,
    ):
        # The option checks are imported here, not at the top: a module-level name would keep
        # the meter table's module in a board's RAM after boot (device.boot releases it).
        from wattbench_fw.meters import integer, number

        self.i2c = i2c
        self.addr = integer("addr", addr, ADDRESSES[0], ADDRESSES[1])
        self.shunt_ohm = number("shunt_ohm", shunt_ohm, SHUNT_OHM[0], SHUNT_OHM[1])
        self.max_a = number("max_a", max_a, MAX_A[0], MAX_A[1])
        # Smallest LSB for the range is max_a / 2**15; a caller may round it up to a tidy value.
        smallest = self.max_a / 32768
        if current_lsb is None:
            self.current_lsb = smallest
        else:
            self.current_lsb = number("current_lsb", current_lsb, 0, self.max_a, lo_open=True)
            if self.current_lsb < smallest * (1 - 1e-9):
                raise ValueError(
                    "current_lsb %g A cannot reach max_a %g A: it must be at least max_a / 32768 = %g A"
                    % (self.current_lsb, self.max_a, smallest)
                )
        self.config = config_word(avg, vbus_ct_us, vsh_ct_us)
        self.cal = calibration(self.current_lsb, self.shunt_ohm)
        self.acc = None if acc is None else number("acc", acc, 0, 1)
        self._buf = bytearray(2)

    def _read(self, reg):
        self.i2c.readfrom_mem_into(self.addr, reg, self._buf)
        return (self._buf[0] << 8) | self._buf[1]

    def _write(self, reg, value):
        self.i2c.writeto_mem(self.addr, reg, bytes((value >> 8, value & 0xFF)))

    def setup(self):
        mfg = self._read(REG_MFG_ID)
        die = self._read(REG_DIE_ID)
        if mfg != MFG_ID or die != DIE_ID:
            raise SensorError("not an INA226 at 0x%02x (ids 0x%04x 0x%04x)" % (self.addr, mfg, die))
        self._write(REG_CONFIG, self.config)
        self._write(REG_CAL, self.cal)

    def info(self):
        out = {"model": "INA226", "range": {"A": self.max_a}}
        if self.acc:
            out["acc"] = self.acc
        return out

    def read(self):
        shunt = self._read(REG_SHUNT)
        bus = self._read(REG_BUS)
        current = self._read(REG_CURRENT)
        power = self._read(REG_POWER)
        mask = self._read(REG_MASK)
        vals, flags = sample(shunt, bus, current, power, mask, self.current_lsb)
        if self.acc and "W" in vals:
            vals["u"] = self.acc
        return vals, flags
