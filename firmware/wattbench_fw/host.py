"""Host mode: the firmware on CPython, with simulated (or serial-attached) meters and a real socket.

    from wattbench_fw.host import HostAppliance, sim_config
    cfg = sim_config(dev="sim-01", broker="127.0.0.1:1883", hz=100, model="sine", count=10000)
    with HostAppliance(cfg) as app:
        app.wait_done(timeout=60)
    print(app.counters())

This API is used by `wattbench appliance`, the demo and the tests; see firmware/README.md.
"""

import os
import tempfile
import threading
import time

from wattbench_fw import config as config_mod
from wattbench_fw import meters, port
from wattbench_fw.app import Appliance
from wattbench_fw.contract import FLAG_CLOCK_STEP
from wattbench_fw.errors import ConfigError

_HEX = "0123456789abcdefABCDEF"
_HOST_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_"
# scheme -> (TLS, default port)
_SCHEMES = {"mqtt": (False, 1883), "tcp": (False, 1883), "mqtts": (True, 8883)}


class HostClock:
    """Host mode: the OS clock is already disciplined (chrony/ntpd), so it is used directly.

    inject_step() shifts it for fault tests; the next sample then carries the clock_step flag.
    """

    SYNC = "host"

    def __init__(self, now_us=None):
        self._now = now_us or port.utc_us
        self.shift_us = 0
        self.steps = 0
        self._step_pending = False
        self.synced = True

    def utc_us(self, mono=None):
        return self._now() + self.shift_us

    def local_us(self, mono=None):
        return self.utc_us()

    def inject_step(self, ms):
        self.shift_us += int(ms * 1000)
        self.steps += 1
        self._step_pending = True

    def sample_flags(self):
        if self._step_pending:
            self._step_pending = False
            return FLAG_CLOCK_STEP
        return 0

    def status(self, mono=None):
        out = {"sync": "host"}
        if self.steps:
            out["steps"] = self.steps
            out["off"] = round(self.shift_us / 1000, 3)
        return out


def _ipv6(text):
    addr, pct, zone = text.partition("%")
    if pct and (not zone or any(ch not in _HOST_CHARS for ch in zone)):
        return False
    if not 2 <= addr.count(":") <= 7 or ":::" in addr or addr.count("::") > 1:
        return False
    return all(ch in _HEX or ch in ":." for ch in addr)


def _port(text, shown):
    if not text or any(ch not in "0123456789" for ch in text):
        raise ConfigError("broker %s: port %r is not a number" % (shown, text))
    p = int(text)
    if not 1 <= p <= 65535:
        raise ConfigError("broker %s: port %d is outside 1..65535" % (shown, p))
    return p


def broker_address(text, default_port=1883):
    """A broker address -> (host, port, tls); ConfigError for anything else.

    The same rules as the host tools (docs/guide.md, "Broker addresses"), written out again here
    because the firmware never imports them: schema/vectors/broker-address.json holds both to it.
    'host', 'host:port', '[v6]', '[v6]:port', optionally behind mqtt:// (or tcp://) or mqtts://
    (TLS, default port 8883); a bare IPv6 address is the host and never carries a port."""
    shown = repr(text)
    s = text.strip()
    if not s:
        raise ConfigError("broker address is empty")
    tls, default = False, default_port
    if "://" in s:
        scheme, _, s = s.partition("://")
        if scheme.lower() not in _SCHEMES:
            raise ConfigError("broker %s: scheme %s:// is not mqtt:// or mqtts://" % (shown, scheme))
        tls, default = _SCHEMES[scheme.lower()]
        if s.endswith("/"):
            s = s[:-1]
    for ch, what in (("@", "user information"), ("/", "a path"), ("?", "a query"), ("#", "a fragment")):
        if ch in s:
            raise ConfigError(
                "broker %s: %s does not belong in a broker address (give host and port only)" % (shown, what)
            )
    if s.startswith("["):
        end = s.find("]")
        if end < 0:
            raise ConfigError("broker %s: '[' without ']'" % shown)
        host, rest = s[1:end], s[end + 1 :]
        if not _ipv6(host):
            raise ConfigError("broker %s: [%s] is not an IPv6 address" % (shown, host))
        if rest.startswith(":"):
            return host, _port(rest[1:], shown), tls
        if rest:
            raise ConfigError("broker %s: expected ':PORT' after ']', not %r" % (shown, rest))
        return host, default, tls
    colons = s.count(":")
    if colons >= 2:
        if "]" in s or not _ipv6(s):
            raise ConfigError("broker %s: not an IPv6 address (write [v6]:port for a port)" % shown)
        return s, default, tls
    host, _, port_text = s.partition(":")
    p = _port(port_text, shown) if colons else default
    if not host:
        raise ConfigError("broker %s: no host name" % shown)
    if any(ch not in _HOST_CHARS for ch in host):
        raise ConfigError("broker %s: a host name holds only letters, digits, '.', '-' and '_'" % shown)
    problem = config_mod.label_problem(host)
    if problem:
        raise ConfigError("broker %s: %s" % (shown, problem))
    return host, p, tls


def parse_broker(text, default_port=1883):
    """'host', 'host:port' or '[v6]:port' -> (host, port); see broker_address, which also says
    whether mqtts:// asked for TLS."""
    host, p, _ = broker_address(text, default_port)
    return host, p


def sim_config(
    dev="sim-01",
    broker="127.0.0.1:1883",
    channels=1,
    hz=10.0,
    model="cpu",
    idle_w=60.0,
    peak_w=250.0,
    watts=150.0,
    truth=None,
    count=None,
    spool_dir=None,
    batch_ms=1000,
    status_s=30,
    noise_w=0.0,
    seed=0,
    **sim_opts,
):
    """A complete host-mode config with `channels` simulated meters (named sim, or sim1..simN)."""
    host, p, tls = broker_address(broker) if isinstance(broker, str) else (broker[0], broker[1], False)
    names = ["sim"] if channels == 1 else ["sim%d" % (i + 1) for i in range(channels)]
    chans = []
    for i, name in enumerate(names):
        opts = {
            "model": model,
            "idle_w": idle_w,
            "peak_w": peak_w,
            "watts": watts,
            "noise_w": noise_w,
            "seed": seed + i,
        }
        opts.update(sim_opts)
        chans.append({"c": name, "meter": "sim", "hz": hz, "role": "power", "node": "node1", "opts": opts})
    cfg = {
        "dev": dev,
        "board": "host",
        "broker": {"host": host, "port": p, "keepalive": 10, "tls": tls},
        "channels": chans,
        "batch": {"max_rows": 500, "interval_ms": batch_ms, "max_bytes": 65536},
        "backoff": {"min_ms": 250, "max_ms": 4000},
        "status_s": status_s,
        # A busy host may wake a few ms late: read late (real timestamps) rather than drop slots.
        "max_late_ms": 50,
        "host": {},
    }
    if spool_dir is not None:
        cfg["flash_dir"] = str(spool_dir)
    if truth is not None:
        cfg["host"]["truth"] = str(truth)
    if count is not None:
        cfg["host"]["count"] = int(count)
    return cfg


class SerialBus:
    """pyserial port with the any()/read()/write() surface of machine.UART."""

    def __init__(self, device, baud=9600, timeout_ms=0):
        try:
            import serial
        except ImportError:
            raise ConfigError("buses: serial meters on a host need pyserial (pip install pyserial)") from None

        self.ser = serial.Serial(device, baud, timeout=timeout_ms / 1000)

    def any(self):
        return self.ser.in_waiting

    def read(self, n):
        return self.ser.read(n) or None

    def write(self, data):
        return self.ser.write(data)


class TruthWriter:
    """CSV of exactly the power values the appliance published: seq,t_ms,ch,W."""

    def __init__(self, path, flush_every_s=1.0):
        self.f = open(path, "w", buffering=1 << 16)
        self.f.write("seq,t_ms,ch,W\n")
        self.rows = 0
        self.lock = threading.Lock()
        # On disk within a second: a sweep running beside it checks against it, and a killed
        # appliance keeps all but the last second.
        self.flush_every_s = flush_every_s
        self._flushed = time.monotonic()

    def __call__(self, row):
        if "W" in row:
            with self.lock:
                self.f.write("%d,%d,%s,%s\n" % (row["s"], row["t"], row["c"], repr(row["W"])))
                self.rows += 1
                now = time.monotonic()
                if now - self._flushed >= self.flush_every_s:
                    self.f.flush()
                    self._flushed = now

    def close(self):
        with self.lock:
            self.f.close()


def ssl_context(broker):
    """CPython's TLS for broker.tls: the board's version hands PEM text to cadata and turns hostname
    checks off, which CPython's client contexts refuse; here `ca` is a file on this host."""
    if not broker.get("tls"):
        return None
    import ssl

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ca = broker.get("ca")
    if ca:
        try:
            ctx.load_verify_locations(cafile=ca)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError("broker.ca: cannot load %s: %s" % (ca, exc)) from None
    else:
        # Same as a board without `ca`: encrypted, but the broker is not verified.
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def build_drivers(cfg, mono, t0):
    drivers = {}
    buses = {}
    for ch in cfg["channels"]:
        opts = dict(ch.get("opts") or {})
        if not meters.row(ch["meter"])[3]:
            # A meter that needs no bus (a simulated one) is built without one; a simulation's time
            # follows the appliance's clock.
            if getattr(meters.driver_class(ch["meter"]), "HOST_CLOCK", False):
                opts.setdefault("clock", lambda: (mono.now() - t0) / 1e6)
            drivers[ch["c"]] = meters.create(ch["meter"], None, opts)
            continue
        bus_cfg = cfg["buses"][ch["bus"]]
        if bus_cfg["type"] != "serial":
            raise ConfigError(
                "channels: host mode reaches meters over serial ports only (%s uses %s)"
                % (ch["c"], bus_cfg["type"])
            )
        if ch["bus"] not in buses:
            buses[ch["bus"]] = SerialBus(bus_cfg["port"], bus_cfg.get("baud", 9600))
        drivers[ch["c"]] = meters.create(ch["meter"], buses[ch["bus"]], opts)
    return drivers


class HostAppliance:
    """The appliance running in a background thread on this host."""

    def __init__(self, config, truth=None, count=None):
        cfg = config_mod.load(config)
        if cfg["board"] != "host":
            raise ConfigError("board: host mode needs board 'host'")
        host_opts = cfg.get("host") or {}
        if not cfg["flash_dir"]:
            cfg["flash_dir"] = tempfile.mkdtemp(prefix="wattbench-%s-" % cfg["dev"])
        os.makedirs(cfg["flash_dir"], exist_ok=True)
        self.cfg = cfg
        truth = truth if truth is not None else host_opts.get("truth")
        count = count if count is not None else host_opts.get("count")
        self.truth = TruthWriter(truth) if truth else None
        self.mono = port.Mono()
        self.clock = HostClock()
        drivers = build_drivers(cfg, self.mono, self.mono.now())
        self.app = Appliance(
            cfg,
            drivers,
            self.clock,
            mono=self.mono,
            on_row=self.truth,
            max_samples=count,
            ssl_context=ssl_context(cfg["broker"]),
        )
        self._stop = threading.Event()
        self._thread = None
        self._graceful = True
        self.crashed = None

    # ---- lifecycle ----------------------------------------------------------------------------

    def start(self):
        if self._thread is not None:
            raise RuntimeError("already started")
        self._thread = threading.Thread(target=self._run, name="wattbench-" + self.cfg["dev"], daemon=True)
        self._thread.start()
        return self

    def _run(self):
        app = self.app
        try:
            app.start()
            while not self._stop.is_set():
                app.idle(app.step())
            if self._graceful:
                app.shutdown()
            else:
                app.client.close()  # simulated power cut: no goodbye, no state flush
        except Exception as exc:  # noqa: BLE001 - surfaced through .crashed
            self.crashed = exc
            raise
        finally:
            # A driver holding something outside this process (a BMC's session) lets it go.
            for drv in app.drivers.values():
                if hasattr(drv, "close"):
                    try:
                        drv.close()
                    except Exception:  # noqa: BLE001 - stopping goes on whatever one driver does
                        pass
            if self.truth is not None:
                self.truth.close()

    def stop(self, timeout=10.0, drain=True, graceful=True):
        """Stop sampling; with drain, first wait up to `timeout` s for the broker to have everything."""
        if self._thread is None:
            return
        self.app.sampling = False
        if drain:
            self.wait_drained(timeout)
        self._graceful = graceful
        self._stop.set()
        self._thread.join(timeout + 5)

    def kill(self):
        """Stop like a power cut: no shutdown status, RAM buffer lost, state as last persisted."""
        self.stop(drain=False, graceful=False)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # ---- observing ----------------------------------------------------------------------------

    def wait_drained(self, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.app.drained() and self.app.link.in_flight() == 0:
                return True
            time.sleep(0.02)
        return False

    def wait_done(self, timeout):
        """With a sample count: wait until all samples were taken and acknowledged."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if not self.app.sampling and self.app.drained():
                return True
            time.sleep(0.02)
        return False

    @property
    def connected(self):
        """True while the link to the broker is up."""
        return self.app.link.up

    def wait_connected(self, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.connected:
                return True
            time.sleep(0.01)
        return False

    def counters(self):
        return self.app.counters()

    @property
    def dev(self):
        return self.cfg["dev"]

    def inject_clock_step(self, ms):
        """Shift the clock by ms; the next sample carries the clock_step flag."""
        self.clock.inject_step(ms)
