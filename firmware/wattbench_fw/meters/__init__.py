"""Meter and sensor drivers, one package per device.

Every driver is a class whose constructor takes its bus (UART, I2C, OneWire or a serial object)
plus keyword options, and has:

- KIND: the meter name in the contract (meta.schema.json channels[].meter);
- QUANTITIES: what read() may return, in contract short keys;
- setup(): one-time configuration, may raise a MeterError;
- read() -> (values, flags): a dict of quantities and a contract flag bit set. Bus faults raise a
  MeterError subclass whose .flag says what to put on the sample.
- info(): extra channel metadata (model, range, acc) for the retained meta message.

Constructors check their options (type and range) and raise ValueError naming the option; they do
no I/O, so a driver built without a bus checks a configuration. create() turns any refusal into a
ConfigError and imports a driver only when a channel uses it, which keeps RAM free on small boards.
"""

from wattbench_fw import port
from wattbench_fw.errors import ConfigError


def driver_class(kind):
    if kind == "pzem004t":
        from wattbench_fw.meters.pzem004t import PZEM004T as cls
    elif kind == "ina226":
        from wattbench_fw.meters.ina226 import INA226 as cls
    elif kind == "ina228":
        from wattbench_fw.meters.ina228 import INA228 as cls
    elif kind == "wt300":
        from wattbench_fw.meters.wt300 import WT300 as cls
    elif kind == "sim":
        from wattbench_fw.meters.sim import SimMeter as cls
    elif kind == "ds18b20":
        from wattbench_fw.sensors.ds18b20 import DS18B20 as cls
    elif kind == "sht3x":
        from wattbench_fw.sensors.sht3x import SHT3x as cls
    else:
        raise ConfigError("unknown meter " + repr(kind))
    return cls


def create(kind, bus, opts):
    cls = driver_class(kind)
    try:
        return cls(bus, **opts)
    except TypeError as exc:  # an option the driver does not take
        raise ConfigError("%s options %s: %s" % (kind, ", ".join(sorted(opts)) or "none", exc))
    except ConfigError:
        raise
    except ValueError as exc:
        raise ConfigError("%s: %s" % (kind, exc))


# ---- option checks shared by the drivers -------------------------------------------------------


def show(v):
    """A config value as the user wrote it, short: never a huge number or a nested structure."""
    if v is None:
        return "null"
    if v is True or v is False:
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "a list"
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, int) and not -(10**15) < v < 10**15:
        return "an integer of more than 15 digits"
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


def number(name, v, lo, hi, lo_open=False):
    """A finite number in [lo, hi] (or (lo, hi]), returned as given; ValueError naming the option otherwise.
    A bound of None is open on that side."""
    if (
        not isinstance(v, (int, float))
        or isinstance(v, bool)
        or not port.isfinite(v)
        or (lo is not None and (v <= lo if lo_open else v < lo))
        or (hi is not None and v > hi)
    ):
        raise ValueError(
            "%s must be a number in %s%s, %s], got %s" % (name, "(" if lo_open else "[", lo, hi, show(v))
        )
    return v


def integer(name, v, lo, hi):
    """An integer (not a boolean) in [lo, hi]; ValueError naming the option otherwise. A bound of None
    is open on that side."""
    if (
        not isinstance(v, int)
        or isinstance(v, bool)
        or (lo is not None and v < lo)
        or (hi is not None and v > hi)
    ):
        raise ValueError("%s must be an integer in [%s, %s], got %s" % (name, lo, hi, show(v)))
    return v


def choice(name, v, allowed):
    """One of `allowed` (compared by value and type, so 1.0 is not 1 and true is not 1)."""
    for a in allowed:
        if type(v) is type(a) and v == a:
            return v
    raise ValueError("%s must be one of %s, got %s" % (name, ", ".join(show(a) for a in allowed), show(v)))
