"""Load and validate the appliance configuration (one JSON file), merged over a board profile.

Errors name the offending key, e.g. "channels[1].hz: must be a number in (0, 10000], got 0".
Defaults are filled in, so the rest of the firmware can index the result without checks.
"""

import json

from wattbench_fw import meters, port
from wattbench_fw.contract_boot import BOARDS, MAX_CHANNELS, ROLES, valid_channel_id, valid_device_id
from wattbench_fw.errors import ConfigError
from wattbench_fw.stateload import MAX_SEQ_BLOCK

# A configuration is a few levels deep (config > channels > channel > opts > steps > step); far
# deeper nesting is a damaged file, refused before anything walks it recursively.
MAX_DEPTH = 16

DEFAULTS = {
    "board": "host",
    "broker": {
        "host": None,
        "port": 1883,
        "user": None,
        "password": None,
        "tls": False,
        "ca": None,
        "keepalive": 30,
        "inflight": 8,
        "connect_timeout_ms": 5000,
        "client_id": None,
    },
    "ntp": {
        "host": "pool.ntp.org",
        "port": 123,
        "interval_s": 1024,
        "first_interval_s": 16,
        "step_ms": 128,
        "timeout_ms": 1000,
        "max_delay_ms": 500,
    },
    "buffer": {"ram_bytes": 262144, "flash_bytes": 4194304, "segment_bytes": 32768},
    "batch": {"max_rows": 500, "interval_ms": 1000, "max_bytes": 65536},
    "backoff": {"min_ms": 500, "max_ms": 30000},
    "status_s": 30,
    "persist_s": 60,
    "seq_block": 1000,
    "energy_margin_wh": 5.0,
    "wdt_ms": 8000,
    "flash_dir": None,
    "buses": {},
    # Board profile: pins the module itself uses ({"16": "PSRAM"}); a config may not put a bus on them.
    "reserved_pins": {},
    "channels": [],
    "wifi": None,
    "led": None,
    "safe_pin": None,
    "hmac_key": None,
    "max_late_ms": None,
    "hass": None,
    "host": {},
}
TOP_KEYS = ("dev",) + tuple(DEFAULTS)
CHANNEL_KEYS = ("c", "meter", "bus", "hz", "agg", "role", "node", "model", "cal", "opts")
BUS_TYPES = {
    "uart": ("type", "id", "baud", "tx", "rx", "bits", "parity", "stop", "timeout_ms"),
    "i2c": ("type", "id", "scl", "sda", "freq"),
    "onewire": ("type", "pin"),
    "serial": ("type", "port", "baud", "timeout_ms"),
}


def merge(base, over):
    """Deep merge: dicts merge key by key, anything else in `over` replaces `base`."""
    if not isinstance(base, dict) or not isinstance(over, dict):
        return over
    out = {}
    for k in base:
        out[k] = base[k]
    for k in over:
        out[k] = merge(base[k], over[k]) if k in base else over[k]
    return out


def _num(path, v, lo=None, hi=None, lo_open=False):
    # The drivers' option checks, with the key's path in front and the config's error type.
    try:
        return meters.number(path + ":", v, lo, hi, lo_open)
    except ValueError as exc:
        raise ConfigError(str(exc))


def _int(path, v, lo=None, hi=None):
    try:
        return meters.integer(path + ":", v, lo, hi)
    except ValueError as exc:
        raise ConfigError(str(exc))


def _str(path, v, optional=False):
    if v is None and optional:
        return v
    if not isinstance(v, str) or not v:
        raise ConfigError("%s: must be a non-empty string, got %r" % (path, v))
    return v


_HOST_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._:%"


def label_problem(host):
    """Why a host name (not an IPv6 address) breaks DNS's limits (RFC 1035 2.3.4), or None. A name
    the resolver cannot even encode would be retried for ever rather than refused once at start."""
    labels = (host[:-1] if host.endswith(".") else host).split(".")
    if "" in labels:
        return "an empty label in the host name (two dots, or a dot first)"
    if max(len(label) for label in labels) > 63:
        return "a label of the host name is longer than 63 characters"
    if len(host.rstrip(".")) > 253:
        return "the host name is longer than 253 characters"
    return None


def _host(path, v):
    # A name or an address as getaddrinfo takes it. Anything else resolves nowhere, and the board
    # would retry it for ever rather than say so once at start.
    _str(path, v)
    for ch in v:
        if ch not in _HOST_CHARS:
            raise ConfigError("%s: %r is not a host name or address" % (path, v))
    if v.count(":") == 1:  # an IPv6 address has two or more
        raise ConfigError("%s: %r holds a port: give the port as %s.port" % (path, v, path[:-5]))
    problem = None if ":" in v else label_problem(v)
    if problem:
        raise ConfigError("%s: %r: %s" % (path, v, problem))
    return v


def _keys(path, d, allowed):
    if not isinstance(d, dict):
        raise ConfigError("%s: must be an object" % path)
    for k in d:
        if k not in allowed:
            raise ConfigError("%s: unknown key %r (allowed: %s)" % (path, k, ", ".join(allowed)))


def _check_bus(name, b):
    path = "buses." + name
    t = b.get("type") if isinstance(b, dict) else None
    # A list or object as the type is unhashable: test the type before looking it up.
    if not isinstance(t, str) or t not in BUS_TYPES:
        raise ConfigError("%s.type: must be one of %s, got %s" % (path, ", ".join(BUS_TYPES), meters.show(t)))
    _keys(path, b, BUS_TYPES[t])
    if t == "uart":
        _int(path + ".id", b.get("id", 1), 0, 3)
        _int(path + ".baud", b.get("baud", 9600), 300, 2000000)
    elif t == "i2c":
        _int(path + ".id", b.get("id", 0), 0, 1)
        _int(path + ".freq", b.get("freq", 400000), 10000, 3400000)
    elif t == "onewire":
        if "pin" not in b:
            raise ConfigError(path + ".pin: required")
    elif t == "serial":
        _str(path + ".port", b.get("port"))
        _int(path + ".baud", b.get("baud", 9600), 300, 4000000)


PIN_KEYS = ("tx", "rx", "scl", "sda", "pin")


def _check_pins(cfg):
    """No pin the board module itself uses, and explicit UART pins where the default ones are taken:
    a UART left on its hardware default pins would drive lines wired to something else."""
    reserved = cfg["reserved_pins"]
    if not isinstance(reserved, dict):
        raise ConfigError("reserved_pins: must be an object")
    if not reserved:
        return
    used = set(ch.get("bus") for ch in cfg["channels"])
    where = []
    for name in sorted(cfg["buses"]):
        b = cfg["buses"][name]
        if name in used and b["type"] == "uart":
            for k in ("tx", "rx"):
                if k not in b:
                    raise ConfigError(
                        "buses.%s.%s: required on board %s (its default UART pins are taken: %s)"
                        % (name, k, cfg["board"], _show_reserved(reserved))
                    )
        for k in PIN_KEYS:
            if k in b:
                where.append(("buses.%s.%s" % (name, k), b[k]))
    for k in ("led", "safe_pin"):
        if cfg[k] is not None:
            where.append((k, cfg[k]))
    for path, pin in where:
        what = reserved.get(str(pin))
        if what is not None:
            raise ConfigError(
                "%s: GPIO%s holds the %s on board %s (hardware/pinmap.md); pick a free GPIO"
                % (path, pin, what, cfg["board"])
            )


def _show_reserved(reserved):
    return ", ".join("GPIO%s holds the %s" % (p, reserved[p]) for p in sorted(reserved))


def _check_channel(i, ch, buses, board):
    path = "channels[%d]" % i
    _keys(path, ch, CHANNEL_KEYS)
    if not valid_channel_id(ch.get("c")):
        raise ConfigError(
            path + ".c: channel name must match ^[a-z0-9][a-z0-9_.-]{0,23}$, got %r" % (ch.get("c"),)
        )
    meter = ch.get("meter")
    if meter not in meters.KINDS:
        raise ConfigError("%s.meter: must be one of %s, got %r" % (path, ", ".join(meters.KINDS), meter))
    _num(path + ".hz", ch.get("hz"), 0, 10000, lo_open=True)
    ch.setdefault("agg", 1)
    _int(path + ".agg", ch["agg"], 1, 1000000)
    if ch["hz"] * ch["agg"] > 100000:
        raise ConfigError(path + ": hz x agg above 100000 raw reads per second")
    if "role" in ch and ch["role"] not in ROLES:
        raise ConfigError("%s.role: must be one of %s" % (path, ", ".join(ROLES)))
    if "node" in ch:
        _str(path + ".node", ch["node"])
    cal = ch.setdefault("cal", {})
    _keys(path + ".cal", cal, ("gain", "offset", "date"))
    cal.setdefault("gain", 1.0)
    cal.setdefault("offset", 0.0)
    _num(path + ".cal.gain", cal["gain"], 0, 10, lo_open=True)
    _num(path + ".cal.offset", cal["offset"], -1e6, 1e6)
    opts = ch.setdefault("opts", {})
    if not isinstance(opts, dict):
        raise ConfigError(path + ".opts: must be an object")
    kinds = meters.row(meter)[3]
    if kinds:
        bus = ch.get("bus")
        if not isinstance(bus, str) or bus not in buses:
            raise ConfigError(
                "%s.bus: %s is not defined in buses (have: %s)"
                % (path, meters.show(bus), ", ".join(sorted(buses)) or "none")
            )
        if buses[bus]["type"] not in kinds:
            raise ConfigError(
                "%s.bus: %s needs a %s bus, %r is %s"
                % (path, meter, " or ".join(kinds), bus, buses[bus]["type"])
            )
    elif board != "host":
        # A driver may name one option value that works on a host only (the sim meter's cpu model).
        need = getattr(meters.driver_class(meter), "HOST_ONLY", None)
        if need is True:
            raise ConfigError(
                "%s.meter: %s reads this host's own interfaces and needs board host" % (path, meter)
            )
        if need and opts.get(need[0]) == need[1]:
            raise ConfigError("%s.opts.%s: the %s %s needs a host" % (path, need[0], need[1], need[0]))
    # Each driver checks its own options when built; building one without a bus does no I/O, so
    # a bad option stops the configuration here with its path instead of the boot later.
    try:
        meters.create(meter, None, dict(opts))
    except ValueError as exc:
        raise ConfigError("%s.opts: %s" % (path, exc))


def validate(cfg):
    _keys("config", cfg, TOP_KEYS)
    if not valid_device_id(cfg.get("dev")):
        raise ConfigError("dev: device id must match ^[a-z0-9][a-z0-9_-]{0,31}$, got %r" % (cfg.get("dev"),))
    if cfg["board"] not in BOARDS:
        raise ConfigError("board: must be one of %s, got %r" % (", ".join(BOARDS), cfg["board"]))
    b = cfg["broker"]
    _keys("broker", b, DEFAULTS["broker"])
    _host("broker.host", b["host"])
    _int("broker.port", b["port"], 1, 65535)
    _int("broker.keepalive", b["keepalive"], 0, 65535)
    _int("broker.inflight", b["inflight"], 1, 1000)
    _str("broker.user", b["user"], optional=True)
    _str("broker.password", b["password"], optional=True)
    if cfg["board"] != "host":
        w = cfg["wifi"]
        if not isinstance(w, dict) or not w.get("ssid"):
            raise ConfigError("wifi.ssid: required on board %s" % cfg["board"])
    _keys("ntp", cfg["ntp"], DEFAULTS["ntp"])
    _host("ntp.host", cfg["ntp"]["host"])
    _int("ntp.port", cfg["ntp"]["port"], 1, 65535)
    _num("ntp.interval_s", cfg["ntp"]["interval_s"], 16, 86400)
    _num("ntp.step_ms", cfg["ntp"]["step_ms"], 1, 1e7)
    buf = cfg["buffer"]
    _keys("buffer", buf, DEFAULTS["buffer"])
    _int("buffer.ram_bytes", buf["ram_bytes"], 1024)
    _int("buffer.flash_bytes", buf["flash_bytes"], 0)
    _int("buffer.segment_bytes", buf["segment_bytes"], 1024)
    bt = cfg["batch"]
    _keys("batch", bt, DEFAULTS["batch"])
    _int("batch.max_rows", bt["max_rows"], 1, 500)
    _int("batch.interval_ms", bt["interval_ms"], 10, 600000)
    _int("batch.max_bytes", bt["max_bytes"], 512, 131072)
    if bt["max_bytes"] > buf["ram_bytes"]:
        raise ConfigError("batch.max_bytes: larger than buffer.ram_bytes")
    _keys("backoff", cfg["backoff"], DEFAULTS["backoff"])
    _int("backoff.min_ms", cfg["backoff"]["min_ms"], 10)
    _int("backoff.max_ms", cfg["backoff"]["max_ms"], cfg["backoff"]["min_ms"])
    _num("status_s", cfg["status_s"], 1, 86400)
    _num("persist_s", cfg["persist_s"], 1, 86400)
    _int("seq_block", cfg["seq_block"], 1, MAX_SEQ_BLOCK)
    _num("energy_margin_wh", cfg["energy_margin_wh"], 0, 1e6)
    _int("wdt_ms", cfg["wdt_ms"], 1000, 60000)
    buses = cfg["buses"]
    if not isinstance(buses, dict):
        raise ConfigError("buses: must be an object")
    for name in buses:
        _check_bus(name, buses[name])
    chans = cfg["channels"]
    if not isinstance(chans, list) or not 1 <= len(chans) <= MAX_CHANNELS:
        raise ConfigError("channels: must be a list of 1 to %d channels" % MAX_CHANNELS)
    seen = set()
    for i, ch in enumerate(chans):
        _check_channel(i, ch, buses, cfg["board"])
        if ch["c"] in seen:
            raise ConfigError("channels[%d].c: duplicate channel name %r" % (i, ch["c"]))
        seen.add(ch["c"])
    _check_pins(cfg)
    key = cfg["hmac_key"]
    if key is not None:
        if (
            not isinstance(key, str)
            or len(key) < 32
            or len(key) % 2
            or any(c not in "0123456789abcdefABCDEF" for c in key)
        ):
            # The message names the key, never its value (docs/security.md).
            raise ConfigError("hmac_key: must be an even number of hex digits, at least 32 (16 bytes)")
    if cfg["max_late_ms"] is not None:
        _num("max_late_ms", cfg["max_late_ms"], 0, 60000)
    if cfg["hass"] is not None and not isinstance(cfg["hass"], bool):
        # null (the default) leaves Home Assistant alone; false removes what an earlier boot announced
        raise ConfigError("hass: must be true, false or null")
    if cfg["flash_dir"] is None:
        cfg["flash_dir"] = port.default_flash_dir()
    if b["client_id"] is None:
        b["client_id"] = "wattbench-" + cfg["dev"]
    return cfg


def load(source, board=None):
    """Validated config from a dict or JSON file path, over an optional board profile (dict or path)."""
    user = _read(source, "config")
    profile = _read(board, "board profile") if board is not None else {}
    cfg = merge(merge(DEFAULTS, profile), user)
    return validate(cfg)


def _too_deep(doc, limit):
    """True if lists and objects nest deeper than `limit` (walked without recursion)."""
    stack = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            node = list(node.values())
        elif not isinstance(node, list):
            continue
        if depth > limit:
            return True
        for child in node:
            stack.append((child, depth + 1))
    return False


def _read(source, what):
    if isinstance(source, dict):
        if _too_deep(source, MAX_DEPTH):
            raise ConfigError("%s nests deeper than %d levels" % (what, MAX_DEPTH))
        return json.loads(json.dumps(source))  # deep copy: validation fills in defaults
    raw = port.read_file(source)
    if raw is None:
        raise ConfigError("%s file %s not found" % (what, source))
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise ConfigError("%s file %s is not valid JSON: %s" % (what, source, exc))
    except (RuntimeError, MemoryError):
        # CPython's RecursionError is a RuntimeError; MicroPython has no such name.
        raise ConfigError(
            "%s file %s is nested too deeply or too large to read (a configuration is at most %d levels deep)"
            % (what, source, MAX_DEPTH)
        )
    if not isinstance(doc, dict):
        raise ConfigError("%s file %s must hold a JSON object" % (what, source))
    if _too_deep(doc, MAX_DEPTH):
        raise ConfigError("%s file %s nests deeper than %d levels" % (what, source, MAX_DEPTH))
    return doc
