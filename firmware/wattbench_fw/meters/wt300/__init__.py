"""Yokogawa WT300 series (WT310, WT310E, WT332E, WT333E) power analyzer over SCPI (RS-232 or a
USB serial link).

Numeric data come from :NUMERIC:NORMAL:VALUE? as comma separated <NR3> values in the order of the
items set with :NUMERIC:NORMAL:ITEM<n> <function>,<element>. Error data: "NAN" (or 9.91E+37) when
the data does not exist, "INF" (or 9.9E+37) on over-range, overflow or data over. Ranges are fixed
with :INPUT:VOLTAGE:RANGE / :INPUT:CURRENT:RANGE after turning auto-range off, because auto-ranging
during a measurement interval invalidates it.
"""

from wattbench_fw import serialio
from wattbench_fw.contract import FLAG_MISSED, FLAG_OVER_RANGE, FLAG_RANGE_CHANGE
from wattbench_fw.errors import FrameError, SensorError

# Contract quantity -> WT300 numeric function name.
FUNCTIONS = {"W": "P", "V": "U", "A": "I", "PF": "LAMB", "Hz": "FU"}
INF_VALUE = 9.9e37
NAN_VALUE = 9.91e37
# Float parsing on small ports is not exact; the two markers differ by 0.1e37.
_NAN_THRESHOLD = 9.905e37
_INF_THRESHOLD = 9.0e37

NO_DATA = "nan"
OVER_RANGE = "inf"
MAX_RANGE = 100000.0  # V or A: above every range the series offers, finite for range_text()
EOLS = ("\n", "\r\n", "\r")  # the terminators the RS-232 and USB interfaces accept


def parse_value(token):
    """One <NR3> field: a float, or NO_DATA / OVER_RANGE markers. Raises FrameError on garbage."""
    t = token.strip().upper()
    if t in ("NAN", "+NAN", "-NAN"):
        return NO_DATA
    if t in ("INF", "+INF", "-INF", "NINF"):
        return OVER_RANGE
    if not t or t[0] not in "+-0123456789.":
        raise FrameError("not a number: %r" % token)
    try:
        v = float(t)
    except ValueError:
        raise FrameError("not a number: %r" % token)
    if v != v:
        return NO_DATA  # any other spelling of NaN the float parser takes
    a = abs(v)
    if a >= _NAN_THRESHOLD:
        return NO_DATA
    if a >= _INF_THRESHOLD:
        return OVER_RANGE
    return v


def parse_reply(line, items):
    """Values and flags from one :NUM:NORM:VAL? reply line for the given contract items.

    A missing or over-range field is withheld, never filled in. If the power itself is missing the
    whole sample is a missed read.
    """
    if isinstance(line, (bytes, bytearray)):
        try:
            line = line.decode()
        except UnicodeError:
            raise FrameError("reply is not ASCII")
    fields = line.strip().split(",")
    if len(fields) != len(items):
        raise FrameError("%d fields for %d items" % (len(fields), len(items)))
    vals = {}
    flags = 0
    for q, tok in zip(items, fields):
        v = parse_value(tok)
        if v is OVER_RANGE:
            flags |= FLAG_OVER_RANGE
        elif v is NO_DATA:
            if q == "W":
                return {}, FLAG_MISSED
        else:
            vals[q] = v
    return vals, flags


def range_text(value, unit):
    """'300V', '0.5A': the analyzer takes a number with a unit suffix."""
    if value == int(value):
        return "%d%s" % (int(value), unit)
    return "%s%s" % (repr(float(value)), unit)


def setup_commands(items, v_range=None, a_range=None, element=1):
    cmds = [":COMMUNICATE:HEADER OFF", ":NUMERIC:FORMAT ASCII", ":NUMERIC:NORMAL:NUMBER %d" % len(items)]
    for i, q in enumerate(items):
        cmds.append(":NUMERIC:NORMAL:ITEM%d %s,%d" % (i + 1, FUNCTIONS[q], element))
    cmds.extend(range_commands(v_range, a_range))
    return cmds


def range_commands(v_range=None, a_range=None):
    cmds = []
    if v_range:
        cmds += [":INPUT:VOLTAGE:AUTO OFF", ":INPUT:VOLTAGE:RANGE " + range_text(v_range, "V")]
    if a_range:
        cmds += [":INPUT:CURRENT:AUTO OFF", ":INPUT:CURRENT:RANGE " + range_text(a_range, "A")]
    return cmds


def check_identity(idn):
    """'YOKOGAWA,WT310,<serial>,<firmware>' -> model name; SensorError for another instrument."""
    parts = [p.strip() for p in idn.split(",")]
    if len(parts) < 2 or parts[0].upper() != "YOKOGAWA" or not parts[1].upper().startswith("WT3"):
        raise SensorError("not a WT300-series analyzer: %r" % idn)
    return parts[1]


def uncertainty(watts, acc, acc_range, v_range, a_range):
    """Relative uncertainty of W: reading term plus range term scaled to this reading."""
    if not watts or watts <= 0:
        return None
    u = acc
    if acc_range and v_range and a_range:
        u += acc_range * v_range * a_range / watts
    return min(u, 1.0)


class WT300:
    KIND = "wt300"

    def __init__(
        self,
        port,
        items=("W", "V", "A", "PF", "Hz"),
        v_range=None,
        a_range=None,
        element=1,
        timeout_ms=500,
        acc=0.001,
        acc_range=0.001,
        eol="\n",
    ):
        # The option checks are imported here, not at the top: a module-level name would keep
        # the meter table's module in a board's RAM after boot (device.boot releases it).
        from wattbench_fw.meters import choice, integer, number, show

        if not isinstance(items, (list, tuple)):
            raise ValueError(
                "items must be a list of %s, got %s" % (", ".join(sorted(FUNCTIONS)), show(items))
            )
        for q in items:
            if not isinstance(q, str) or q not in FUNCTIONS:
                raise ValueError("item %s not one of %s" % (show(q), ", ".join(sorted(FUNCTIONS))))
            if items.count(q) > 1:
                raise ValueError("item %r listed twice" % q)
        if "W" not in items:
            raise ValueError("items must include W")
        self.port = port
        self.items = tuple(items)
        self.QUANTITIES = self.items
        self.v_range = None if v_range is None else number("v_range", v_range, 0, MAX_RANGE, lo_open=True)
        self.a_range = None if a_range is None else number("a_range", a_range, 0, MAX_RANGE, lo_open=True)
        self.element = integer("element", element, 1, 3)
        self.timeout_ms = integer("timeout_ms", timeout_ms, 0, 60000)
        self.acc = number("acc", acc, 0, 1)
        self.acc_range = number("acc_range", acc_range, 0, 1)
        if isinstance(eol, (bytes, bytearray)):
            eol = bytes(eol).decode()  # non-ASCII bytes raise UnicodeError, a ValueError
        self.eol = choice("eol", eol, EOLS).encode()
        self.model = "WT300"
        self._range_changed = False

    def _send(self, cmd):
        self.port.write(cmd.encode() + self.eol)

    def query(self, cmd):
        line = serialio.query_line(self.port, cmd.encode() + self.eol, self.timeout_ms, self.eol)
        try:
            return line.decode()
        except UnicodeError:
            raise FrameError("reply is not ASCII")

    def setup(self):
        self.model = check_identity(self.query("*IDN?"))
        for cmd in setup_commands(self.items, self.v_range, self.a_range, self.element):
            self._send(cmd)
        # *OPC? returns once every command before it has been processed.
        if self.query("*OPC?").strip() != "1":
            raise SensorError("analyzer did not confirm setup")

    def set_range(self, v_range=None, a_range=None):
        """Fix new ranges (once per load level); the next sample carries the range_change flag."""
        for cmd in range_commands(v_range, a_range):
            self._send(cmd)
        if v_range:
            self.v_range = v_range
        if a_range:
            self.a_range = a_range
        self._range_changed = True

    def info(self):
        out = {"model": self.model, "acc": self.acc}
        rng = {"auto": False} if (self.v_range and self.a_range) else {"auto": True}
        if self.v_range:
            rng["V"] = self.v_range
        if self.a_range:
            rng["A"] = self.a_range
        out["range"] = rng
        return out

    def read(self):
        line = serialio.query_line(self.port, b":NUMERIC:NORMAL:VALUE?" + self.eol, self.timeout_ms, self.eol)
        vals, flags = parse_reply(line, self.items)
        if self._range_changed:
            flags |= FLAG_RANGE_CHANGE
            self._range_changed = False
        if "W" in vals:
            u = uncertainty(vals["W"], self.acc, self.acc_range, self.v_range, self.a_range)
            if u is not None:
                vals["u"] = u
        return vals, flags
