"""`wattbench collect`: ingest appliance samples from MQTT into the store.

Exit codes: 0 clean stop (SIGTERM/SIGINT), 1 internal error, 2 configuration error, 3 broker
unreachable or refused the credentials, 4 store or spool unusable (nothing more could be made durable).
"""

from __future__ import annotations

import argparse

EPILOG = """\
configuration: defaults < --config FILE (TOML) < WATTBENCH_* environment < options.
secrets: WATTBENCH_MQTT_PASSWORD (or --mqtt-password-file), WATTBENCH_INFLUX_TOKEN,
  WATTBENCH_INFLUX_USER / WATTBENCH_INFLUX_PASSWORD, WATTBENCH_INFLUX_ORG, WATTBENCH_INFLUX_DB.
exit codes: 0 stopped cleanly, 1 internal error, 2 bad configuration,
  3 broker unreachable or credentials refused, 4 store/spool unusable.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ..config import PROFILES
    from .options import add_broker_options, add_store_options, number

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    add_broker_options(parser)
    add_store_options(parser, purpose="write")
    parser.add_argument("--config", metavar="FILE", help="TOML configuration file")
    parser.add_argument("--id", metavar="ID", help="collector id: reject topic level and health tag")
    parser.add_argument(
        "--share", metavar="GROUP", help="MQTT 5 shared subscription group, to split the load"
    )
    parser.add_argument("--spool", metavar="DIR", help="spool directory used while the store is down")
    parser.add_argument("--state-dir", metavar="DIR", help="status file and default SQLite location")
    parser.add_argument(
        "--protocol",
        choices=["auto", "5", "3.1.1"],
        help="MQTT version (default auto: 5, or 3.1.1 if refused)",
    )
    parser.add_argument(
        "--hmac-keys", metavar="FILE", help='JSON {"device": "hex key"}: check batch signatures'
    )
    parser.add_argument(
        "--require-signatures",
        action="store_true",
        default=None,
        help="refuse unsigned batches from every device",
    )
    parser.add_argument(
        "--profile",
        choices=list(PROFILES),
        help="low-latency: small commits, for appliances batching every 100 ms (docs/collector.md)",
    )
    parser.add_argument(
        "--health-period",
        type=number(),  # its range is the configuration's (config.CollectorConfig.resolved)
        metavar="S",
        help="seconds between health points (5)",
    )
    parser.add_argument(
        "--plugs", metavar="FILE", help="smart plugs to bridge (TOML mapping; docs/sources/plugs.md)"
    )
    parser.add_argument(
        "--metrics",
        metavar="HOST:PORT",
        help="serve Prometheus /metrics here (e.g. 127.0.0.1:9464; docs/prometheus.md)",
    )


# setting -> the option that gives it, for the values and for messages that name it as typed.
OPTIONS = {
    "broker": "--broker",
    "influx_db": "--db",
    "id": "--id",
    "share": "--share",
    "spool_dir": "--spool",
    "state_dir": "--state-dir",
    "mqtt_user": "--mqtt-user",
    "mqtt_password_file": "--mqtt-password-file",
    "tls_ca": "--mqtt-ca",
    "protocol": "--protocol",
    "health_period_s": "--health-period",
    "hmac_keys": "--hmac-keys",
    "hmac_require": "--require-signatures",
    "metrics": "--metrics",
    "plugs": "--plugs",
    "profile": "--profile",
}


def _overrides(args: argparse.Namespace) -> tuple[dict[str, object], dict[str, str]]:
    """The settings the options give, and how each was given."""
    values: dict[str, object] = {
        name: getattr(args, option[2:].replace("-", "_")) for name, option in OPTIONS.items()
    }
    values["store"] = args.influx or args.store
    given_as = {**OPTIONS, "store": "--influx" if args.influx else "--store"}
    return values, given_as


def run(args: argparse.Namespace) -> int:
    import logging
    import sys

    from ..config import ConfigError, load_config
    from ..ingest.collector import EXIT_CONFIG, Collector, CollectorError
    from ..signals import stop_event

    log = logging.getLogger("wattbench.cli.collect")
    if logging.getLogger().level > logging.INFO or not logging.getLogger().handlers:
        # The service's own progress lines are worth seeing without -v.
        logging.getLogger("wattbench").setLevel(logging.INFO)
    try:
        overrides, given_as = _overrides(args)
        config = load_config(args.config, overrides=overrides, given_as=given_as)
        collector = Collector(config)
    except ConfigError as exc:
        # Before anything runs: one line, as every command says a mistake, not a service's log line.
        print(f"wattbench collect: {exc}", file=sys.stderr)
        return EXIT_CONFIG

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
