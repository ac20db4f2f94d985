"""`wattbench broker`: the embedded MQTT broker (broker.py) in the foreground until Ctrl-C or SIGTERM.
An address it cannot listen on is one line and exit 3 (BrokerStartError, through the CLI's failures)."""

from __future__ import annotations

import argparse
import logging

from ..argtypes import listen_host
from ..broker import EmbeddedBroker
from ..signals import stop_event
from .options import tcp_port


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--host", type=listen_host, default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )

    parser.add_argument("--port", type=tcp_port, default=1883, help="TCP port (default 1883, 0: any free)")


def run(args: argparse.Namespace) -> int:
    log = logging.getLogger("wattbench.broker")
    logging.getLogger("wattbench").setLevel(logging.INFO)
    broker = EmbeddedBroker(args.host, args.port).start()
    stop = stop_event()
    log.info("embedded MQTT 3.1.1 broker listening on %s (Ctrl-C to stop)", broker.url)
    stop.wait()
    broker.stop()
    log.info("broker stopped")
    return 0
