"""Entry point on a board: load /config.json over /board.json, arm the watchdog, run forever."""

from wattbench_fw import config as config_mod
from wattbench_fw import port
from wattbench_fw.app import Appliance
from wattbench_fw.clock import Clock, SntpClient

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


def main(config_path=CONFIG_PATH, board_path=BOARD_PATH):
    import machine

    from wattbench_fw.board import make_drivers
    from wattbench_fw.wifi import Wifi

    board = board_path if port.exists(board_path) else None
    try:
        cfg = config_mod.load(config_path, board)
    except Exception as exc:  # noqa: BLE001 - report and stay in the REPL, no watchdog armed
        print("wattbench: config error:", exc)
        return None
    if safe_mode(cfg):
        print("wattbench: safe pin held, not starting")
        return None
    wifi = Wifi(cfg["wifi"]["ssid"], cfg["wifi"].get("password"), cfg["dev"])
    mono = port.Mono()
    ntp = cfg["ntp"]
    clock = Clock(
        step_ms=ntp["step_ms"], max_delay_ms=ntp["max_delay_ms"], rtc_us=port.utc_us(), mono_now=mono.now()
    )
    sntp = SntpClient(ntp["host"], timeout_ms=ntp["timeout_ms"])
    drivers, _ = make_drivers(cfg)
    app = Appliance(
        cfg, drivers, clock, mono=mono, net_up=wifi.up, rssi=wifi.rssi, ssl_context=ssl_context(cfg["broker"])
    )
    for problem in app.state.problems:
        print("wattbench: persistent state repaired:", problem)
    led = None
    if cfg.get("led") is not None:
        try:
            led = machine.Pin(cfg["led"], machine.Pin.OUT)
        except (ValueError, TypeError):
            led = None
    next_sync = mono.now()
    app.start()  # driver setup may talk to slow meters: arm the watchdog after it
    wdt = machine.WDT(timeout=cfg["wdt_ms"])
    while True:
        wait = app.step()
        wdt.feed()
        if led is not None:
            led.value(1 if app.link.up else 0)
        if wifi.service() and mono.now() >= next_sync:
            try:
                sntp.sync(clock, mono)
                ok = clock.synced
            except Exception as exc:  # noqa: BLE001 - DNS, timeout, bad packet: retry later
                app.last_error = "ntp: %r" % (exc,)
                ok = False
            wdt.feed()
            interval = ntp["interval_s"] if ok and clock.syncs > 3 else ntp["first_interval_s"]
            next_sync = mono.now() + int(interval * 1e6)
        app.idle(wait)
