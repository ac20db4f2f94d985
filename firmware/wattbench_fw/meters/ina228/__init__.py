"""TI INA228 85 V, 20-bit power/energy/charge monitor on I2C, for DC rails.

Registers: 0x00 CONFIG (bit 15 reset, bit 14 reset accumulators, bit 4 ADCRANGE), 0x01 ADC_CONFIG
(MODE 15:12, VBUSCT 11:9, VSHCT 8:6, VTCT 5:3, AVG 2:0), 0x02 SHUNT_CAL
(13107.2e6 x CURRENT_LSB x R_shunt, x4 when ADCRANGE=1), 0x04 VSHUNT (24 bit, 20-bit signed value
in bits 23:4; 312.5 nV/LSB or 78.125 nV/LSB), 0x05 VBUS (24 bit, bits 23:4, 195.3125 uV/LSB),
0x06 DIETEMP (7.8125 m degC/LSB), 0x07 CURRENT (24 bit, signed, bits 23:4, CURRENT_LSB),
0x08 POWER (24 bit, 3.2 x CURRENT_LSB W), 0x09 ENERGY (40 bit, 16 x 3.2 x CURRENT_LSB J),
0x0A CHARGE (40 bit two's complement, CURRENT_LSB C), 0x0B DIAG_ALRT, 0x3E manufacturer 0x5449,
0x3F device id (bits 15:4 = 0x228). CURRENT_LSB = max expected current / 2**19.
"""

from wattbench_fw.contract import FLAG_OVER_RANGE, FLAG_REVERSE
from wattbench_fw.errors import SensorError

REG_CONFIG = 0x00
REG_ADC_CONFIG = 0x01
REG_SHUNT_CAL = 0x02
REG_VSHUNT = 0x04
REG_VBUS = 0x05
REG_DIETEMP = 0x06
REG_CURRENT = 0x07
REG_POWER = 0x08
REG_ENERGY = 0x09
REG_CHARGE = 0x0A
REG_DIAG_ALRT = 0x0B
REG_MFG_ID = 0x3E
REG_DEVICE_ID = 0x3F
MFG_ID = 0x5449
DEVICE_ID = 0x228

ADDRESSES = (0x40, 0x4F)  # set by the A0/A1 straps
# Sane option ranges (see the INA226 driver); shunt_cal() then checks the combination.
SHUNT_OHM = (1e-6, 100.0)
MAX_A = (1e-6, 10000.0)

VBUS_LSB_V = 195.3125e-6
VSHUNT_LSB_V = (312.5e-9, 78.125e-9)  # by ADCRANGE
DIETEMP_LSB_C = 7.8125e-3
POWER_FACTOR = 3.2
ENERGY_FACTOR = 16 * 3.2

DIAG_ENERGYOF = 1 << 11
DIAG_CHARGEOF = 1 << 10
DIAG_MATHOF = 1 << 9
DIAG_CNVRF = 1 << 1

AVERAGES = (1, 4, 16, 64, 128, 256, 512, 1024)
CONVERSION_US = (50, 84, 150, 280, 540, 1052, 2074, 4120)
MODE_CONTINUOUS_ALL = 0xF


def adc_config_word(avg=16, vbus_ct_us=1052, vsh_ct_us=1052, temp_ct_us=1052, mode=MODE_CONTINUOUS_ALL):
    if avg not in AVERAGES:
        raise ValueError("avg must be one of %r" % (AVERAGES,))
    for ct in (vbus_ct_us, vsh_ct_us, temp_ct_us):
        if ct not in CONVERSION_US:
            raise ValueError("conversion time must be one of %r us" % (CONVERSION_US,))
    return (
        mode << 12
        | CONVERSION_US.index(vbus_ct_us) << 9
        | CONVERSION_US.index(vsh_ct_us) << 6
        | CONVERSION_US.index(temp_ct_us) << 3
        | AVERAGES.index(avg)
    )


def shunt_cal(current_lsb, shunt_ohm, adc_range=0):
    cal = 13107.2e6 * current_lsb * shunt_ohm * (4 if adc_range else 1)
    if not 1 <= cal < 0x8000:
        raise ValueError("SHUNT_CAL %.4g out of range 1-32767: check shunt_ohm and max_a" % cal)
    return int(cal)


def be(buf):
    """Unsigned big-endian integer from bytes."""
    v = 0
    for b in buf:
        v = (v << 8) | b
    return v


def s20(raw24):
    """Signed 20-bit value held in bits 23:4 of a 24-bit register."""
    v = raw24 >> 4
    return v - (1 << 20) if v & (1 << 19) else v


def u20(raw24):
    return raw24 >> 4


def s40(raw40):
    return raw40 - (1 << 40) if raw40 & (1 << 39) else raw40


def bus_volts(raw24):
    return u20(raw24) * VBUS_LSB_V


def shunt_volts(raw24, adc_range=0):
    return s20(raw24) * VSHUNT_LSB_V[1 if adc_range else 0]


def current_amps(raw24, current_lsb):
    return s20(raw24) * current_lsb


def power_watts(raw24, current_lsb):
    return raw24 * POWER_FACTOR * current_lsb


def energy_joules(raw40, current_lsb):
    return raw40 * ENERGY_FACTOR * current_lsb


def charge_coulombs(raw40, current_lsb):
    return s40(raw40) * current_lsb


def sample(vbus, current, power, energy, diag, current_lsb):
    """Contract values and flags from raw VBUS, CURRENT, POWER (24 bit), ENERGY (40 bit), DIAG_ALRT."""
    vals = {"V": bus_volts(vbus), "Wh": energy_joules(energy, current_lsb) / 3600}
    flags = 0
    if diag & DIAG_MATHOF:
        return vals, flags | FLAG_OVER_RANGE
    amps = current_amps(current, current_lsb)
    if amps < 0:
        return vals, flags | FLAG_REVERSE
    vals["A"] = amps
    vals["W"] = power_watts(power, current_lsb)
    return vals, flags


class INA228:
    KIND = "ina228"
    QUANTITIES = ("W", "V", "A", "Wh")

    def __init__(
        self,
        i2c,
        addr=0x40,
        shunt_ohm=0.002,
        max_a=10.0,
        adc_range=0,
        avg=16,
        vbus_ct_us=1052,
        vsh_ct_us=1052,
        temp_ct_us=1052,
        reset_energy=False,
        acc=None,
    ):
        # The option checks are imported here, not at the top: a module-level name would keep
        # the meter table's module in a board's RAM after boot (device.boot releases it).
        from wattbench_fw.meters import choice, integer, number

        self.i2c = i2c
        self.addr = integer("addr", addr, ADDRESSES[0], ADDRESSES[1])
        self.shunt_ohm = number("shunt_ohm", shunt_ohm, SHUNT_OHM[0], SHUNT_OHM[1])
        self.max_a = number("max_a", max_a, MAX_A[0], MAX_A[1])
        self.adc_range = 1 if choice("adc_range", adc_range, (0, 1, False, True)) else 0
        self.current_lsb = self.max_a / (1 << 19)
        self.adc_config = adc_config_word(avg, vbus_ct_us, vsh_ct_us, temp_ct_us)
        self.cal = shunt_cal(self.current_lsb, self.shunt_ohm, self.adc_range)
        self.reset_energy_on_setup = choice("reset_energy", reset_energy, (False, True))
        self.acc = None if acc is None else number("acc", acc, 0, 1)
        self._b2 = bytearray(2)
        self._b3 = bytearray(3)
        self._b5 = bytearray(5)

    def _read(self, reg, buf):
        self.i2c.readfrom_mem_into(self.addr, reg, buf)
        return be(buf)

    def _write(self, reg, value):
        self.i2c.writeto_mem(self.addr, reg, bytes((value >> 8, value & 0xFF)))

    def setup(self):
        mfg = self._read(REG_MFG_ID, self._b2)
        dev = self._read(REG_DEVICE_ID, self._b2) >> 4
        if mfg != MFG_ID or dev != DEVICE_ID:
            raise SensorError("not an INA228 at 0x%02x (ids 0x%04x 0x%03x)" % (self.addr, mfg, dev))
        config = self.adc_range << 4
        if self.reset_energy_on_setup:
            config |= 1 << 14
        self._write(REG_CONFIG, config)
        self._write(REG_ADC_CONFIG, self.adc_config)
        self._write(REG_SHUNT_CAL, self.cal)

    def reset_energy(self):
        self._write(REG_CONFIG, self.adc_range << 4 | 1 << 14)

    def info(self):
        out = {"model": "INA228", "range": {"A": self.max_a}}
        if self.acc:
            out["acc"] = self.acc
        return out

    def read(self):
        vbus = self._read(REG_VBUS, self._b3)
        current = self._read(REG_CURRENT, self._b3)
        power = self._read(REG_POWER, self._b3)
        energy = self._read(REG_ENERGY, self._b5)
        diag = self._read(REG_DIAG_ALRT, self._b2)
        vals, flags = sample(vbus, current, power, energy, diag, self.current_lsb)
        if self.acc and "W" in vals:
            vals["u"] = self.acc
        return vals, flags

    def read_charge(self):
        return charge_coulombs(self._read(REG_CHARGE, self._b5), self.current_lsb)

    def read_die_temp(self):
        raw = self._read(REG_DIETEMP, self._b2)
        return (raw - 0x10000 if raw & 0x8000 else raw) * DIETEMP_LSB_C
