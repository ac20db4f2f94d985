"""The `wattbench` command. Each subcommand lives in its own module and is imported only when used,
so `wattbench score` does not pay for paho or matplotlib."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from . import __version__

# subcommand -> (module, one-line help). The module provides add_arguments(parser) and run(args) -> int.
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": (
        "wattbench.demo",
        "run broker, simulated appliance, collector and a short sweep on this machine",
    ),
    "appliance": ("wattbench.appliance", "run the firmware on this host as an appliance (simulated meters)"),
    "collect": ("wattbench.collect", "ingest appliance samples from MQTT into the store"),
    "status": ("wattbench.status", "show per-device accounting: gaps, duplicates, clock offset, rate"),
    "sweep": ("wattbench.sweep.cli", "drive the server through graduated loads and score it"),
    "report": ("wattbench.report.cli", "re-render a stored run as table, JSON and HTML"),
    "score": ("wattbench.scorefile", "score a per-level table (CSV or JSON) such as a published result"),
    "flash": ("wattbench.flash", "deploy the firmware and its config to a board with mpremote"),
    "broker": ("wattbench.broker", "run the embedded MQTT broker on its own"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wattbench", description="Work per watt, measured.")
    parser.add_argument("--version", action="version", version=f"wattbench {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv for debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module)
        try:
            mod = importlib.import_module(module)
        except ImportError as exc:
            # One broken or missing command must not take the others down with it; the cause is
            # reported when that command is actually used.
            p.set_defaults(_import_error=f"{exc.__class__.__name__}: {exc}")
            p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
            continue
        mod.add_arguments(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if getattr(args, "_import_error", None):
        print(f"wattbench {args.command}: unavailable ({args._import_error})", file=sys.stderr)
        return 3
    mod = importlib.import_module(args._module)
    try:
        return int(mod.run(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
