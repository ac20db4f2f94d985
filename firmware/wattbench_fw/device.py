"""Entry point on a board: load /config.json over /board.json, arm the watchdog, run forever."""

from wattbench_fw import port

CONFIG_PATH = "/config.json"
BOARD_PATH = "/board.json"


def ssl_context(broker):
    if not broker.get("tls"):
        return None
    import ssl

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ca = broker.get("ca")
    if ca:
        ctx.load_verify_locations(cadata=port.read_file(ca))
        ctx.verify_mode = ssl.CERT_REQUIRED
    else:
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def safe_mode(cfg):
    """Holding the board's safe pin low at boot skips the appliance (and the watchdog) for the REPL."""
    pin = cfg.get("safe_pin")
    if pin is None:
        return False
    import machine

    return machine.Pin(pin, machine.Pin.IN, machine.Pin.PULL_UP).value() == 0


class Device:
    """The booted appliance and what its loop services besides it: Wi-Fi, SNTP, LED, watchdog."""

    def __init__(self, cfg, app, wifi, clock, mono, sntp, led, wdt):
        self.cfg = cfg
        self.app = app
        self.wifi = wifi
        self.clock = clock
        self.mono = mono
        self.sntp = sntp
        self.led = led
        self.wdt = wdt
        self.next_sync = mono.now()

    def turn(self):
        """One loop turn: a slice of appliance work, the watchdog, Wi-Fi and clock upkeep, then idle."""
        app = self.app
        wait = app.step()
        self.wdt.feed()
        if self.led is not None:
            self.led.value(1 if app.link.up else 0)
        mono = self.mono
        if self.wifi.service() and mono.now() >= self.next_sync:
            ntp = self.cfg["ntp"]
            try:
                self.sntp.sync(self.clock, mono)
                ok = self.clock.synced
            except Exception as exc:  # noqa: BLE001 - DNS, timeout, bad packet: retry later
                app.last_error = "ntp: %r" % (exc,)
                ok = False
            self.wdt.feed()
            interval = ntp["interval_s"] if ok and self.clock.syncs > 3 else ntp["first_interval_s"]
            self.next_sync = mono.now() + int(interval * 1e6)
        app.idle(wait)


def boot(config_path=CONFIG_PATH, board_path=BOARD_PATH):
    """Load the configuration, set the drivers up and arm the watchdog: the Device, or None when the
    configuration is unusable or the safe pin is held (the REPL stays free)."""
    import machine

    # The appliance's code loads first, so it lies in one run at the bottom of the heap; the checks
    # load above it and leave one free run when they are released. Loaded after them, it filled the
    # holes their release left, and the esp32 profile's heap had 33 KB free in runs of 2.7 KB at most:
    # an outage's batches then failed (MicroPython 1.27.0 unix port, fixed heap).
    from wattbench_fw.app import Appliance
    from wattbench_fw.clock import Clock, SntpClient
    from wattbench_fw.wifi import Wifi

    board = board_path if port.exists(board_path) else None
    from wattbench_fw import config as config_mod
    from wattbench_fw.board import make_drivers

    try:
        cfg = config_mod.load(config_path, board)
    except Exception as exc:  # noqa: BLE001 - report and stay in the REPL, no watchdog armed
        print("wattbench: config error:", exc)
        return None
    finally:
        config_mod = None
        # The checks run once; their code and the contract facts only they use are not needed again.
        port.release("wattbench_fw.config")
        port.release("wattbench_fw.contract_boot")
    if safe_mode(cfg):
        print("wattbench: safe pin held, not starting")
        return None
    wifi = Wifi(cfg["wifi"]["ssid"], cfg["wifi"].get("password"), cfg["dev"])
    mono = port.Mono()
    ntp = cfg["ntp"]
    clock = Clock(
        step_ms=ntp["step_ms"], max_delay_ms=ntp["max_delay_ms"], rtc_us=port.utc_us(), mono_now=mono.now()
    )
    sntp = SntpClient(ntp["host"], ntp["port"], timeout_ms=ntp["timeout_ms"])
    drivers, _ = make_drivers(cfg)
    make_drivers = None
    port.release("wattbench_fw.board")
    names = None
    if cfg.get("hass"):
        # What discovery shows of the meter table, read now: loading the table again for each round of
        # discovery, beside the discovery code, did not fit the esp32 profile's heap.
        from wattbench_fw import meters

        names = meters.names([ch["meter"] for ch in cfg["channels"]])
        meters = None
    # The meter table and the drivers' option checks: the drivers are built, and their modules stay.
    port.release("wattbench_fw.meters")
    app = Appliance(
        cfg,
        drivers,
        clock,
        mono=mono,
        net_up=wifi.up,
        rssi=wifi.rssi,
        ssl_context=ssl_context(cfg["broker"]),
        meter_names=names,
    )
    for problem in app.state.problems:
        print("wattbench: persistent state repaired:", problem)
    led = None
    if cfg.get("led") is not None:
        try:
            led = machine.Pin(cfg["led"], machine.Pin.OUT)
        except (ValueError, TypeError):
            led = None
    app.start()  # driver setup may talk to slow meters: arm the watchdog after it
    wdt = machine.WDT(timeout=cfg["wdt_ms"])
    return Device(cfg, app, wifi, clock, mono, sntp, led, wdt)


def main(config_path=CONFIG_PATH, board_path=BOARD_PATH):
    device = boot(config_path, board_path)
    if device is None:
        return
    while True:
        device.turn()
