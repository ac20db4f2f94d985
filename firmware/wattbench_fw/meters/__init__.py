"""Meter and sensor drivers, one package per device.

Every driver is a class whose constructor takes its bus (UART, I2C, OneWire or a serial object)
plus keyword options, and has:

- KIND: the meter name in the contract (meta.schema.json channels[].meter);
- QUANTITIES: what read() may return, in contract short keys;
- setup(): one-time configuration, may raise a MeterError;
- read() -> (values, flags): a dict of quantities and a contract flag bit set. Bus faults raise a
  MeterError subclass whose .flag says what to put on the sample.
- info(): extra channel metadata (model, range, acc, upd) for the retained meta message.
- close(), optional: let go of what the driver holds outside the process (a BMC's session) when host
  mode stops.

Optional class attributes: HOST_ONLY = (option, value) when that option value works in host mode only
(the configuration check refuses it on a board), or True when the whole meter does (it reads a host
interface such as sysfs or a BMC), and HOST_CLOCK = True when host mode should pass the
appliance's clock as the `clock` option (simulated meters, so their time follows the sampler's).

Constructors check their options (type and range) and raise ValueError naming the option; they do
no I/O, so a driver built without a bus checks a configuration. create() turns any refusal into a
ConfigError and imports a driver only when a channel uses it (TABLE below names it), which keeps RAM
free on small boards.
"""

from wattbench_fw import port
from wattbench_fw.errors import ConfigError

# The bus types a meter hangs on, named: a row made of literals only would be folded by MicroPython's
# compiler into one constant whose strings each become a heap object when the module loads (about 100
# bytes a row on a board); a name in the row keeps its strings shared.
UART = ("uart", "serial")
I2C = ("i2c",)
ONEWIRE = ("onewire",)
NO_BUS = ()

# Every meter kind, one row each: kind (meta.schema.json channels[].meter), the package its driver folder
# is in (its module is wattbench_fw.<package>.<kind>), driver class, the bus types it hangs on (NO_BUS:
# it needs none) and the name shown to people (Home Assistant's device model). Adding a meter is its
# folder plus one row here: the configuration check, the contract's list of kinds, Home Assistant, the
# manifest and the tests all read this table. Rows hold names only, so no driver is imported before a
# channel uses it; the table costs about 600 bytes of RAM on a board.
TABLE = (
    ("pzem004t", "meters", "PZEM004T", UART, "PZEM-004T"),
    ("ina226", "meters", "INA226", I2C, "INA226"),
    ("ina228", "meters", "INA228", I2C, "INA228"),
    ("wt300", "meters", "WT300", UART, "Yokogawa WT300"),
    ("sim", "meters", "SimMeter", NO_BUS, "simulated"),
    ("ds18b20", "sensors", "DS18B20", ONEWIRE, "DS18B20"),
    ("sht3x", "sensors", "SHT3x", I2C, "SHT3x"),
    ("simdc", "meters", "SimDC", NO_BUS, "simulated DC rail"),
    ("rapl", "meters", "RAPL", NO_BUS, "RAPL (Linux powercap)"),
    ("redfish", "meters", "Redfish", NO_BUS, "BMC (Redfish)"),
    ("ipmi", "meters", "IPMI", NO_BUS, "BMC (IPMI)"),
)
KINDS = tuple(r[0] for r in TABLE)


def row(kind):
    """The table row of a meter kind, or None. Any value may be asked (a config can hold a list). The
    only accessor: on a board each function costs RAM, so callers index the row (3: buses, 4: name)."""
    for r in TABLE:
        if r[0] == kind:
            return r
    return None


def names(kinds):
    """{kind: the name shown to people} for the kinds given; a kind the table does not know is its
    own name. Home Assistant's discovery shows these: a board reads them at boot (device.boot), while
    the table is loaded, and does not load it again for each round of discovery."""
    out = {}
    for kind in kinds:
        r = row(kind)
        out[kind] = r[4] if r else kind
    return out


def driver_class(kind):
    r = row(kind)
    if r is None:
        raise ConfigError("unknown meter " + repr(kind))
    # A non-empty fromlist makes __import__ return the driver's own module (CPython and MicroPython).
    return getattr(__import__("wattbench_fw." + r[1] + "." + kind, None, None, (r[2],), 0), r[2])


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
