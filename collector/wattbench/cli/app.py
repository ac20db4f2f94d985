"""The `wattbench` command behind its entry point (wattbench.cli.main): the subcommands, the parser made
from them, and how a failure becomes one line and its exit code. Each subcommand lives in its own
module, so `wattbench score` does not pay for paho or matplotlib."""

from __future__ import annotations

import argparse
import errno
import importlib
import logging
import os
import ssl
import sys
import traceback

from .. import __version__
from ..broker import BrokerStartError
from ..config import ConfigError
from ..exits import Exit
from ..report.outputs import OutputError
from ..store.base import StoreError, failure_text
from ..sweep.publish import SinkError
from ..workloads.base import WorkloadError
from .options import CliError, add_verbose, verbosity
from .parser import Parser
from .prechecks import check_output_files, check_store_options
from .textout import shortened, write_symbols_in_ascii_where_needed

# subcommand -> (module, one-line help). The module provides add_arguments(parser) and run(args) -> int.
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": (
        "wattbench.cli.demo",
        "run broker, simulated appliance, collector and a short sweep on this machine",
    ),
    "appliance": (
        "wattbench.cli.appliance",
        "run the firmware on this host as an appliance (simulated meters)",
    ),
    "collect": ("wattbench.cli.collect", "ingest appliance samples from MQTT into the store"),
    "status": ("wattbench.cli.status", "show per-device accounting: gaps, duplicates, clock offset, rate"),
    "sweep": ("wattbench.cli.sweep", "drive the server through graduated loads and score it"),
    "suite": (
        "wattbench.cli.suite",
        "sweep several worklets in one session and give their SERT-style suite score",
    ),
    "report": ("wattbench.cli.report", "re-render a stored run as table, JSON and HTML"),
    "compare": (
        "wattbench.cli.compare",
        "candidate servers side by side: runs, suites and published tables, with price-performance",
    ),
    "compare-estimate": (
        "wattbench.cli.estimate",
        "a software power estimator (Kepler, Scaphandre) from Prometheus against a run's measured power",
    ),
    "score": ("wattbench.cli.score", "score a per-level table (CSV or JSON) such as a published result"),
    "flash": ("wattbench.cli.flash", "deploy the firmware and its config to a board with mpremote"),
    "broker": ("wattbench.cli.broker", "run the embedded MQTT broker on its own"),
    "ptd": (
        "wattbench.cli.ptd",
        "serve a wattbench source over the PTDaemon protocol, for MLPerf power rehearsals with power-dev",
    ),
}


# The commands that run until told to stop: their logs go on for days, each line with its time.
DAEMONS = frozenset({"appliance", "collect", "broker", "ptd"})


def build_parser() -> Parser:
    parser = Parser(prog="wattbench", description="Work per watt, measured.")
    parser.add_argument("--version", action="version", version=f"wattbench {__version__}")
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more log output (-vv for debug and tracebacks)"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module)
        add_verbose(p)
        try:
            mod = importlib.import_module(module)
        except ImportError as exc:
            # One broken or missing command must not take the others down with it; the cause is
            # reported when that command is actually used.
            p.set_defaults(_import_error=f"{exc.__class__.__name__}: {exc}")
            p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
            continue
        mod.add_arguments(p)
    h = sub.add_parser("help", help="a command's help: `wattbench help sweep` is `wattbench sweep --help`")
    h.add_argument("topic", nargs="?", choices=list(COMMANDS), metavar="COMMAND", help="the command")
    return parser


def _help(parser: Parser, topic: str | None) -> int:
    """The help of `topic`, or of the whole command when none is named."""
    for each in parser.family():
        if each.prog == (f"wattbench {topic}" if topic else "wattbench"):
            each.print_help()
    return Exit.OK


def _known_failure(exc: BaseException) -> tuple[str, int] | None:
    """(one-line message, exit code) for failures the user can act on; None for a bug."""

    if isinstance(exc, CliError):
        return str(exc), exc.code
    if isinstance(exc, StoreError):
        return failure_text(exc), Exit.UNREACHABLE
    if isinstance(exc, ConfigError):
        return str(exc), Exit.USAGE  # it names the setting as the user gave it
    if isinstance(exc, WorkloadError):
        return f"workload: {exc}", Exit.WORKLOAD
    if isinstance(exc, SinkError):
        return str(exc), Exit.UNREACHABLE
    if isinstance(exc, BrokerStartError):
        return str(exc), Exit.UNREACHABLE
    if isinstance(exc, OutputError):
        return str(exc), Exit.STORAGE
    if isinstance(exc, ssl.SSLError):
        return f"TLS: {exc.reason or exc}", Exit.UNREACHABLE
    if isinstance(exc, OSError) and exc.errno in _FULL:
        # A full or read-only disk is the user's to act on, wherever the output was going.
        where = f"{exc.filename}: " if exc.filename is not None else ""
        return f"cannot write the output: {where}{exc.strerror or exc}", Exit.STORAGE
    if isinstance(exc, OSError) and exc.errno in _MISTYPED:
        # The path as given cannot name a file at all: the user's to correct, like a bad option.
        where = f"{exc.filename}: " if exc.filename is not None else ""
        return f"{where}{exc.strerror or exc}", Exit.USAGE
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.filename}: {exc.strerror or exc}", Exit.INTERNAL
    return None


_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG)
_MISTYPED = (errno.ENAMETOOLONG,)


def _quiet_broken_pipe() -> None:
    """The reader of our output went away (`| head`): send the rest nowhere, so flushing at exit does
    not fail a second time."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def run(argv: list[str] | None) -> int:
    """One command line, run: its exit code."""
    write_symbols_in_ascii_where_needed(sys.stdout, sys.stderr)
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return Exit.USAGE
    if args.command == "help":
        return _help(parser, args.topic)
    verbose = verbosity(args)
    level = logging.WARNING - 10 * min(verbose, 2)
    # A command that ends on its own warns as it says everything else, "wattbench CMD: ..."; the daemons,
    # and anything run with -v, log with the time and the source, for the record.
    plain = not verbose and args.command not in DAEMONS
    fmt = (
        f"wattbench {args.command}: %(message)s"
        if plain
        else "%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.basicConfig(level=level, format=fmt)
    if getattr(args, "_import_error", None):
        print(f"wattbench {args.command}: unavailable ({args._import_error})", file=sys.stderr)
        return Exit.UNREACHABLE
    prefix = f"wattbench {args.command}"
    try:
        check_output_files(args)
        check_store_options(args)
        mod = importlib.import_module(args._module)
        code = int(mod.run(args) or 0)
        sys.stdout.flush()
        return code
    except KeyboardInterrupt:
        print(f"{prefix}: interrupted", file=sys.stderr)
        return Exit.INTERRUPTED
    except BrokenPipeError:
        _quiet_broken_pipe()
        return Exit.BROKEN_PIPE
    except Exception as exc:
        known = _known_failure(exc)
        if verbose >= 2:
            traceback.print_exc()
        if known is None:
            if verbose < 2:
                print(
                    f"{prefix}: internal error: {exc.__class__.__name__}: {shortened(str(exc))} "
                    "(run with -vv for the traceback)",
                    file=sys.stderr,
                )
            return Exit.INTERNAL
        message, code = known
        print(f"{prefix}: {shortened(message)}", file=sys.stderr)
        return code
