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
from wattbench_fw.clock import HostClock
from wattbench_fw.errors import ConfigError


def parse_broker(text, default_port=1883):
    """'host', 'host:port' or '[v6]:port' -> (host, port)."""
    text = text.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") else default_port
    if text.count(":") == 1:
        host, p = text.split(":")
        return host, int(p)
    return text, default_port


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
    host, p = parse_broker(broker) if isinstance(broker, str) else broker
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
        "broker": {"host": host, "port": p, "keepalive": 10},
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

    def __init__(self, path):
        self.f = open(path, "w", buffering=1 << 16)
        self.f.write("seq,t_ms,ch,W\n")
        self.rows = 0
        self.lock = threading.Lock()

    def __call__(self, row):
        if "W" in row:
            with self.lock:
                self.f.write("%d,%d,%s,%s\n" % (row["s"], row["t"], row["c"], repr(row["W"])))
                self.rows += 1

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

    def wait_connected(self, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.app.link.up:
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
