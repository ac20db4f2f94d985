"""Meter and sensor drivers, one package per device.

Every driver is a class whose constructor takes its bus (UART, I2C, OneWire or a serial object)
plus keyword options, and has:

- KIND: the meter name in the contract (meta.schema.json channels[].meter);
- QUANTITIES: what read() may return, in contract short keys;
- setup(): one-time configuration, may raise a MeterError;
- read() -> (values, flags): a dict of quantities and a contract flag bit set. Bus faults raise a
  MeterError subclass whose .flag says what to put on the sample.
- info(): extra channel metadata (model, range, acc) for the retained meta message.

create() imports a driver only when a channel uses it, which keeps RAM free on small boards.
"""

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
    except TypeError as exc:
        raise ConfigError("%s options %r: %s" % (kind, sorted(opts), exc))
