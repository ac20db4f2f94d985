"""Builds the buses and drivers a configuration asks for, from the `machine` module of a board."""

from wattbench_fw import meters
from wattbench_fw.errors import ConfigError


def make_bus(spec):
    import machine

    t = spec["type"]
    if t == "uart":
        kw = {
            "baudrate": spec.get("baud", 9600),
            "bits": spec.get("bits", 8),
            "parity": spec.get("parity"),
            "stop": spec.get("stop", 1),
            "timeout": 0,
        }
        if "tx" in spec:
            kw["tx"] = machine.Pin(spec["tx"])
        if "rx" in spec:
            kw["rx"] = machine.Pin(spec["rx"])
        return machine.UART(spec.get("id", 1), **kw)
    if t == "i2c":
        return machine.I2C(
            spec.get("id", 0),
            scl=machine.Pin(spec["scl"]),
            sda=machine.Pin(spec["sda"]),
            freq=spec.get("freq", 400000),
        )
    if t == "onewire":
        import onewire

        return onewire.OneWire(machine.Pin(spec["pin"]))
    raise ConfigError("bus type %s is not available on a board" % t)


def make_drivers(cfg):
    buses = {}
    drivers = {}
    for ch in cfg["channels"]:
        name = ch.get("bus")
        bus = None
        if name:
            if name not in buses:
                buses[name] = make_bus(cfg["buses"][name])
            bus = buses[name]
        drivers[ch["c"]] = meters.create(ch["meter"], bus, dict(ch.get("opts") or {}))
    return drivers, buses
