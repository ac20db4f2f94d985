"""`wattbench collect`: ingest appliance samples from MQTT into the store.

Exit codes: 0 clean stop (SIGTERM/SIGINT), 1 internal error, 2 configuration error, 3 broker
unreachable or refused the credentials, 4 store or spool unusable (nothing more could be made durable).
"""

from __future__ import annotations

import argparse
import logging
import sys

from ..config import SETTINGS, ConfigError, load_config
from ..exits import Exit
from ..signals import stop_event
from .options import CHECKS, add_broker_options, add_store_options, option_values

EPILOG = """\
configuration: defaults < --config FILE (TOML) < WATTBENCH_* environment < options.
secrets: WATTBENCH_MQTT_PASSWORD (or --mqtt-password-file), WATTBENCH_INFLUX_TOKEN,
  WATTBENCH_INFLUX_USER / WATTBENCH_INFLUX_PASSWORD, WATTBENCH_INFLUX_ORG, WATTBENCH_INFLUX_DB.
exit codes: 0 stopped cleanly, 1 internal error, 2 bad configuration,
  3 broker unreachable or credentials refused, 4 store/spool unusable.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    add_broker_options(parser)
    add_store_options(parser, purpose="write")
    parser.add_argument("--config", metavar="FILE", help="TOML configuration file")
    # The collector's own settings, made from the table; a number's range is the configuration's
    # (CollectorConfig.resolved), so its message names the option as typed.
    SETTINGS.add_arguments(parser, "", CHECKS)


def run(args: argparse.Namespace) -> int:
    from ..ingest.collector import Collector, CollectorError  # late: start-up

    log = logging.getLogger("wattbench.cli.collect")
    if logging.getLogger().level > logging.INFO or not logging.getLogger().handlers:
        # The service's own progress lines are worth seeing without -v.
        logging.getLogger("wattbench").setLevel(logging.INFO)
    try:
        overrides, given_as = option_values(args)
        config = load_config(args.config, overrides=overrides, given_as=given_as)
        collector = Collector(config)
    except ConfigError as exc:
        # Before anything runs: one line, as every command says a mistake, not a service's log line.
        print(f"wattbench collect: {exc}", file=sys.stderr)
        return Exit.CONFIG

    stop = stop_event(log)
    try:
        collector.start(cancel=stop)
    except CollectorError as exc:
        print(f"wattbench collect: {exc}", file=sys.stderr)
        return exc.exit_code
    while not stop.is_set() and not collector.wait(0.5):
        pass
    collector.stop()
    if collector.error is not None:
        log.error("stopped on error: %s", collector.error)
        return collector.error.exit_code
    return 0
