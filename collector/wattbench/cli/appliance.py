"""`wattbench appliance`: run the firmware on this host as an appliance (host mode).

With --sim the meters are simulated (CPU-following, constant, sine or steps); with --config a full
firmware config file is used (simulated meters, or meters on serial ports). Runs until SIGTERM or
SIGINT (Ctrl-C), or until --count samples have been taken and acknowledged by the broker.

A stop by signal is clean: up to 5 s to hand the buffer to the broker, whatever is left kept in the
flash directory (sent on the next start with the same --spool-dir; without one, the device's own
folder in the state folder, appliance-DEV), the retained status "offline" with
reason "shutdown", then exit 0. Exit codes: 0 stopped, 1 the appliance loop failed, 2 bad configuration.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import IO, Any

from wattbench_fw.contract_boot import MAX_CHANNELS

from ..argtypes import given, whole
from ..exits import Exit
from ..forms import folder_problem
from ..owner import Busy, hold
from ..signals import stop_event
from .options import broker_address, number, state_dir, state_folder, writable_file


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sim", action="store_true", help="simulated meters (no hardware needed)")

    p.add_argument(
        "--broker", default=None, type=broker_address, help="MQTT broker host[:port] (default 127.0.0.1:1883)"
    )
    p.add_argument("--dev", type=given, default=None, help="device id (default sim-01)")
    p.add_argument(
        "--hz",
        type=number(),
        default=None,
        help=f"samples per second per channel (default {SIM_DEFAULTS['hz']:g})",
    )
    p.add_argument(
        "--channels",
        type=whole(at_least=1, at_most=MAX_CHANNELS),
        default=None,
        help=f"number of simulated channels, 1 to {MAX_CHANNELS} (default {SIM_DEFAULTS['channels']})",
    )
    p.add_argument(
        "--batch-ms",
        type=whole(),
        default=None,
        metavar="MS",
        help="close a batch every MS ms (default 1000; 100 for the low-latency profile, docs/collector.md)",
    )
    p.add_argument(
        "--model",
        choices=("cpu", "const", "sine", "steps"),
        default=None,
        help="power model of the simulated meter (default cpu: follows this host's CPU load)",
    )
    p.add_argument(
        "--idle-w",
        type=number(at_least=0),
        default=None,
        help=f"cpu model: watts at idle (default {MODEL_DEFAULTS['idle_w']:g})",
    )
    p.add_argument(
        "--peak-w",
        type=number(at_least=0),
        default=None,
        help=f"cpu model: watts at full load (default {MODEL_DEFAULTS['peak_w']:g})",
    )
    p.add_argument(
        "--watts",
        type=number(at_least=0),
        default=None,
        help=f"const/sine models: mean watts (default {MODEL_DEFAULTS['watts']:g})",
    )
    p.add_argument(
        "--truth",
        default=None,
        type=writable_file,
        metavar="FILE",
        help="write seq,t_ms,ch,W of every published W",
    )
    p.add_argument("--config", default=None, metavar="FILE", help="firmware config JSON (board must be host)")
    p.add_argument(
        "--spool-dir",
        default=None,
        type=state_folder,
        metavar="DIR",
        help="state and offline buffer directory; keep it to keep sequence numbers across runs",
    )
    p.add_argument(
        "--count",
        type=whole(at_least=1),
        default=None,
        metavar="N",
        help="stop after N samples are delivered",
    )
    p.add_argument(
        "--every", type=number(above=0), default=5.0, metavar="S", help="print counters every S seconds (5)"
    )


def read_config_file(path: str) -> dict[str, Any]:
    """The --config file as a JSON object; ValueError naming the option and the file otherwise."""
    import wattbench_schema  # late: start-up

    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise ValueError(f"--config {path}: {exc.strerror or exc}") from None
    try:
        # strict: a key given twice (a hand-merged file) would be taken as its last value, another
        # device id or broker without a word
        doc = wattbench_schema.strict_loads(raw)
    except wattbench_schema.DecodeError as exc:
        raise ValueError(f"--config {path}: not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise ValueError(f"--config {path}: not a JSON object (the firmware's config is one)")
    return doc


def default_spool(dev: Any) -> str:
    """The state and offline buffer of an appliance given no --spool-dir: a folder of the device's own
    in the state folder, so that a restart sends what the last run kept and goes on with its sequence
    numbers, as a board does from its flash."""
    return str(state_dir() / f"appliance-{dev}")


def hold_folder(folder: str) -> IO[str]:
    """Take the state folder for this appliance until the process ends. Two appliances on one folder
    would write each other's flash and state, and the second's offline status would mark the first
    offline for every sweep."""
    try:
        return hold(Path(folder) / "lock")
    except Busy as exc:  # a ValueError: the one line of a usage error, exit 2
        raise ValueError(
            f"another appliance (pid {exc.pid}) uses the state folder {folder}: stop it, or give this one "
            "another --dev or --spool-dir"
        ) from None


def build_config(args: argparse.Namespace) -> dict[str, Any]:
    from wattbench_fw.host import broker_address, sim_config  # late: start-up

    if args.config:
        cfg = read_config_file(args.config)
        cfg.setdefault("board", "host")
        if args.broker:
            host, port, tls = broker_address(args.broker)
            broker = cfg.setdefault("broker", {})
            broker.update({"host": host, "port": port})
            if tls:  # mqtts:// asks for TLS; a plain address leaves the file's choice alone
                broker["tls"] = True
        if args.dev:
            cfg["dev"] = args.dev
        if args.spool_dir:
            cfg["flash_dir"] = args.spool_dir
        elif not cfg.get("flash_dir"):
            cfg["flash_dir"] = default_spool(cfg.get("dev"))
        elif isinstance(cfg["flash_dir"], str) and (problem := folder_problem(cfg["flash_dir"])):
            raise ValueError(f"--config {args.config}: flash_dir {problem}")
        return cfg
    sim = {
        name: default if getattr(args, name) is None else getattr(args, name)
        for name, default in {**SIM_DEFAULTS, **MODEL_DEFAULTS}.items()
    }
    steps = [[10, sim["idle_w"]], [10, sim["peak_w"]]] if sim["model"] == "steps" else None
    extra = {"steps": steps} if steps else {}
    dev = args.dev or "sim-01"
    return sim_config(
        dev=dev,
        broker=args.broker or "127.0.0.1:1883",
        **sim,
        spool_dir=args.spool_dir or default_spool(dev),
        **extra,
    )


# The simulated appliance's settings and the simulated meter's, by model: each option's default is
# None, so that one given where it is not read (beside --config, or for another model) is refused
# rather than ignored, silently.
SIM_DEFAULTS = {"hz": 10.0, "channels": 1, "model": "cpu", "batch_ms": 1000}
MODEL_DEFAULTS = {"idle_w": 60.0, "peak_w": 250.0, "watts": 150.0}
MODEL_OPTIONS = {
    "cpu": ("idle_w", "peak_w"),
    "steps": ("idle_w", "peak_w"),
    "const": ("watts",),
    "sine": ("watts",),
}


def model_option_problem(args: argparse.Namespace) -> str | None:
    """A simulated meter's option that the chosen model (or --config) does not read."""
    given = [name for name in (*SIM_DEFAULTS, *MODEL_DEFAULTS) if getattr(args, name) is not None]
    if args.config and given:
        return f"--{given[0].replace('_', '-')} is for --sim; --config runs the meters its file names"
    model = args.model or SIM_DEFAULTS["model"]
    for name in MODEL_DEFAULTS:
        if name in given and name not in MODEL_OPTIONS[model]:
            option = SIM_METER_OPTIONS[name]
            models = " and ".join(m for m, names in MODEL_OPTIONS.items() if name in names)
            return f"{option} is for the {models} models, not {model} (--model)"
    return None


# With --sim the firmware configuration is built from the options, so a value it refuses is named by
# the option that gave it, not by its place in a configuration the user never wrote.
SIM_OPTIONS = (
    (re.compile(r"channels\[\d+\]\.hz"), "--hz"),
    (re.compile(r"channels"), "--channels"),
    (re.compile(r"batch\.interval_ms"), "--batch-ms"),
    (re.compile(r"dev"), "--dev"),
)
# The simulated meter's own settings, which it names in its message ("sim: idle_w must be …").
SIM_METER_OPTIONS = {"idle_w": "--idle-w", "peak_w": "--peak-w", "watts": "--watts"}


def as_typed(message: str, args: argparse.Namespace) -> str:
    """A firmware configuration error ("PATH: reason") named as the user gave the value: the option,
    or the key in their --config file."""
    path, sep, reason = message.partition(": ")
    if not sep:
        return message
    if args.config:
        return f"--dev: {reason}" if path == "dev" and args.dev else f"{args.config}: {message}"
    for pattern, option in SIM_OPTIONS:
        if pattern.fullmatch(path):
            return f"{option}: {reason}"
    if re.fullmatch(r"channels\[\d+\]\.opts", path):
        name, _, rest = reason.removeprefix("sim: ").partition(" ")
        if name in SIM_METER_OPTIONS:
            return f"{SIM_METER_OPTIONS[name]}: {rest}"
    return message


def _line(c: dict[str, Any], closed: bool = False) -> str:
    """The status line. Samples sent and not yet acknowledged have left the RAM buffer, so a link
    that goes down with some in flight says how many batches; after a stop the link is closed, not
    connecting."""
    if closed:
        link = "closed"
    else:
        link = "up" if c["connected"] else f"down ({c['link_error'] or 'connecting'})"
    flying = c["in_flight"]
    if flying:
        link += f", {flying} batch{'es' if flying != 1 else ''} in flight"
    return (
        f"samples {c['samples']} acked {c['acked_samples']} flagged {c['flagged']} "
        f"buffered ram {c['ram']} flash {c['flash']} dropped {c['dropped']} link {link}"
    )


def run(args: argparse.Namespace) -> int:
    from wattbench_fw import config as config_mod  # late: start-up
    from wattbench_fw.errors import ConfigError  # late: start-up
    from wattbench_fw.host import HostAppliance  # late: start-up

    if not args.sim and not args.config:
        print("wattbench appliance: give --sim (simulated meters) or --config FILE", file=sys.stderr)
        return Exit.USAGE
    if args.sim and args.config:
        # the file's meters ran, under the simulation's flag, without a word
        print(
            "wattbench appliance: give --sim or --config, not both: --config runs the meters its file names",
            file=sys.stderr,
        )
        return Exit.USAGE
    problem = model_option_problem(args)
    if problem:
        print(f"wattbench appliance: {problem}", file=sys.stderr)
        return Exit.USAGE
    # Before anything is started, so that a stop request is never missed or fatal.
    stop = stop_event()
    try:
        cfg = build_config(args)
        config_mod.load(cfg)  # a bad device id is refused before a folder is made for it
        held = hold_folder(cfg["flash_dir"])
        app = HostAppliance(cfg, truth=args.truth, count=args.count)
    except ConfigError as exc:
        print(f"wattbench appliance: {as_typed(str(exc), args)}", file=sys.stderr)
        return Exit.USAGE
    except (OSError, ValueError) as exc:
        print(f"wattbench appliance: {exc}", file=sys.stderr)
        return Exit.USAGE
    print(
        f"appliance {app.dev}: {len(cfg['channels'])} channel(s), broker "
        f"{app.cfg['broker']['host']}:{app.cfg['broker']['port']}, state in {app.cfg['flash_dir']}",
        flush=True,
    )
    app.start()
    try:
        next_print = time.monotonic() + args.every
        while not stop.wait(0.2):
            if args.count is not None and app.wait_done(0.01):
                break
            if app.crashed is not None:
                print(f"wattbench appliance: stopped: {app.crashed!r}", file=sys.stderr)
                return Exit.INTERNAL
            if time.monotonic() >= next_print:
                next_print += args.every
                print(_line(app.counters()), flush=True)
    finally:
        # Up to 5 s for the broker to take what is buffered, when there is a link to take it; the rest
        # is kept in flash for the next start. Then the retained offline status (reason shutdown) and
        # the saved state.
        app.stop(timeout=5.0 if app.connected else 0.0)
        held.close()  # the folder is free once its state is saved
    print(_line(app.counters(), closed=True), flush=True)
    return 0
