"""`wattbench ptd` (also installed as `wattbench-ptd`): the part of SPEC PTDaemon's protocol that
MLCommons' power-dev speaks, over a wattbench source, so that power-dev's server can run it as its `ptd`
binary for a rehearsal of an MLPerf power run. It is not SPEC PTDaemon and says so when asked
(`Identify`); docs/mlperf-power.md tells what its results may be used for.

The command line is PTDaemon's as power-dev builds it: `-l LOGFILE -p PORT [-b N] [-c CH[,CH...]] [-D]
[-n|-g|-y|-U] DEVICE_TYPE DEVICE_PORT`. DEVICE_TYPE is 0 (not a Yokogawa analyzer); DEVICE_PORT names
the source: `DEV/CHANNEL@BROKER` (several channels for the multichannel mode), `sim:WATTS` or
`simdc:WATTS`.

Exit codes: 0 stopped by SIGTERM or Ctrl-C; 2 a bad command line or device port (a log file whose folder
is not there or cannot be written, too), or a source that cannot be read (an unknown device, no retained
metadata, a channel that is not power, a meter without ranges, an AC meter under -D); 3 the broker cannot
be reached or the port is taken. A refusal is one line, before the port opens and before any other
output.
"""

from __future__ import annotations

import argparse
import os
import sys

from .. import __version__
from ..argtypes import whole
from ..exits import Exit
from ..mqttconn import BrokerError
from ..signals import stop_event
from . import main as cli_main
from .options import CliError, number, tcp_port, writable_file

DEVICE_TYPE = 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-l", dest="logfile", required=True, type=writable_file, help="sample log file (appended to)"
    )
    parser.add_argument(
        "-p", dest="port", type=tcp_port, default=8888, help="TCP port on 127.0.0.1 (8888, as PTDaemon)"
    )
    parser.add_argument(
        "-c",
        dest="channel",
        help="analyzer channels, e.g. 1,2,3: with a device port DEV@BROKER, the device's power channels "
        "at those positions (multichannel mode); one number with a port that names its channel is ignored",
    )
    parser.add_argument(
        "-D",
        dest="dc",
        action="store_true",
        help="DC mode: DC meters only (ina226, ina228, simdc), read with DC-RL",
    )
    parser.add_argument("-b", dest="board", type=whole(at_least=0), help="GPIB board (accepted and ignored)")
    for flag in ("-n", "-g", "-y", "-U"):
        parser.add_argument(
            flag, dest=f"iface_{flag[1]}", action="store_true", help="interface flag (accepted and ignored)"
        )
    parser.add_argument(
        "--silence",
        type=number(above=0),
        default=5.0,
        metavar="S",
        help="a source that sent nothing for S seconds is silent: Go, Watts and Uncertainty answer "
        "with an error (default 5)",
    )
    parser.add_argument(
        "--lag",
        type=number(at_least=0),
        default=2.0,
        metavar="S",
        help="a second of samples is closed S seconds after its end, so that readings still on their way "
        "count; more than the appliance's batch interval (default 2)",
    )
    parser.add_argument("device_type", help=f"{DEVICE_TYPE}: wattbench is not a Yokogawa analyzer")
    parser.add_argument(
        "device_port",
        help="DEV/CHANNEL@BROKER (an appliance's channel; DEV/CH1,CH2@BROKER for several), DEV@BROKER with -c, "
        "sim:WATTS[,WATTS...] or simdc:WATTS[,...]",
    )


def run(args: argparse.Namespace) -> int:
    from ..ptd.protocol import PtdState, identity  # late: start-up
    from ..ptd.samples import console_line  # late: start-up
    from ..ptd.server import PtdServer, now_ms  # late: start-up
    from ..ptd.source import SourceError, open_source, parse_device_port  # late: start-up

    if args.device_type != str(DEVICE_TYPE):
        raise CliError(
            f"device type {args.device_type!r}: wattbench ptd reads a wattbench source, not a "
            f"PTDaemon analyzer; use device type {DEVICE_TYPE}",
            Exit.USAGE,
        )
    positions: tuple[int, ...] = ()
    if args.channel is not None:
        parts = args.channel.split(",")
        if not all(p.isdigit() and 1 <= int(p) <= 64 for p in parts) or len(set(parts)) != len(parts):
            raise CliError(f"-c {args.channel!r}: channel numbers from 1 to 64, comma-separated, each once")
        positions = tuple(int(p) for p in parts)
    if not 0.5 <= args.silence <= 3600:
        raise CliError(f"--silence {args.silence}: between 0.5 and 3600 s")
    if not 0.0 <= args.lag <= 60:
        raise CliError(f"--lag {args.lag}: between 0 and 60 s")
    try:
        spec = parse_device_port(args.device_port, positions)
        # One -c number with a port that names its channel is what power-dev passes for a one-channel
        # analyzer: the port's channel is read, as before.
        if spec.kind == "mqtt" and all(c for _, c in spec.targets) and len(positions) > 1:
            raise SourceError(
                f"-c {args.channel}: give DEV@BROKER as the device port to pick channels by number"
            )
        source = open_source(spec, positions if spec.kind == "mqtt" else (), args.dc)
    except SourceError as exc:
        raise CliError(str(exc), Exit.USAGE) from None

    def say(message: str) -> None:
        print(console_line(now_ms(), message), flush=True)

    log = None
    try:
        # Everything that can refuse comes before the first line of output and the log file: a
        # refusal is its one line alone, and leaves nothing behind.
        try:
            source.start()
        except BrokerError as exc:
            raise CliError(str(exc), Exit.UNREACHABLE) from None
        except SourceError as exc:
            # As PTDaemon that cannot open its analyzer: one line and an exit, before the port opens.
            raise CliError(str(exc), Exit.USAGE) from None
        channels = source.channels()
        meter = source.meter + (" DC" if args.dc else "")
        state = PtdState(
            identity(__version__, meter, source.label),
            source.label,
            channels,
            silence_s=args.silence,
            lag_ms=round(args.lag * 1000),
            dc=args.dc,
        )
        made_log = not os.path.exists(args.logfile)
        try:
            log = open(args.logfile, "a", encoding="utf-8")
        except OSError as exc:
            raise CliError(f"-l {args.logfile}: {exc.strerror or exc}", Exit.USAGE) from None
        try:
            server = PtdServer(state, source, args.port, log, sys.stdout)
        except OSError as exc:
            log.close()
            log = None
            if made_log:
                os.unlink(args.logfile)  # a refusal leaves nothing behind
            raise CliError(f"port {args.port}: {exc.strerror or exc}", Exit.UNREACHABLE) from None
        print(
            f"wattbench ptd {__version__}: the PTDaemon protocol as MLCommons power-dev uses it, over a",
            flush=True,
        )
        print(
            "wattbench source. Not SPEC PTDaemon: results are rehearsals, never an MLPerf submission.",
            flush=True,
        )
        say(f"Source {source.label}: {meter}")
        for ch in channels:
            say(
                f"Channel {ch.label}: ranges {'/'.join(f'{v:g}' for v in ch.row.volts)} V, "
                f"{'/'.join(f'{a:g}' for a in ch.row.amps)} A; accuracy ±({100 * ch.row.reading:g} % of reading "
                f"+ {100 * ch.row.range:g} % of range), {ch.row.datasheet}"
            )
        stop = stop_event()
        server.serve(stop)
        say("Stopped")
        return 0
    finally:
        source.close()
        if log is not None:
            log.close()


def main() -> None:
    """The `wattbench-ptd` executable: the same as `wattbench ptd`, for power-dev's `ptd` setting."""

    sys.exit(cli_main(["ptd", *sys.argv[1:]]))
