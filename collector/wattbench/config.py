"""Collector configuration: defaults, then a TOML file, then WATTBENCH_* environment variables, then
command-line options, each overriding the one before. Secrets (MQTT password, InfluxDB token and
password) can come from the environment or from files and never appear in repr() or logs.

CollectorConfig is the settings table (wattbench.settings): each field is one setting, declared once
with its environment variables, options, [table] in the file, range and help."""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from .forms import (
    ConfigError,
    ca_problem,
    expand,
    file_problem,
    folder_problem,
    http_address_problem,
    in_the_way,
    lone_password_problem,
    metrics_address,
    shown_url,
    store_folder_problem,
)
from .mqttconn import AddressError, BrokerAddress, Settings, broker_problem, parse_broker
from .settings import Flag, Range, Table, setting, table

ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")


def default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "wattbench"


def default_collector_id() -> str:
    host = re.sub(r"[^a-z0-9_-]+", "-", socket.gethostname().lower()).strip("-_") or "host"
    return f"collector-{host}"[:32].rstrip("-_")


# Named sets of settings. A profile changes a setting only where it is still at its default, so an
# explicit value in the file, the environment or on the command line wins. low-latency is for
# appliances that batch every 100 ms (ten times the messages): commits on a fixed 50 ms cadence instead
# of one per message (each commit costs a store write and a state save), small enough to take well
# under 100 ms, and checks in-process, where a small message does not pay a hop to a worker and back
# (docs/collector.md, "Latency").
PROFILES: dict[str, dict[str, int]] = {
    "default": {},
    "low-latency": {
        "commit_interval_ms": 50,
        "ack_interval_ms": 250,
        "max_batch_samples": 5000,
        "validate_workers": 0,
    },
}


def _store_form(text: str) -> str | None:
    # The forms this setting's help names; an address of another scheme is a typo ("htp://"), which a
    # path would take for a folder named "htp:" and the store would refuse only when first opened.
    if "://" in text and not text.startswith(("sqlite:", "http://", "https://")):
        return f"{text!r}: give a file path, sqlite:///path or http(s)://host:port"
    if text.startswith(("http://", "https://")):
        return http_address_problem(text)
    return store_folder_problem(text)


# How each MQTT version may be spelt.
_PROTOCOLS = (
    {"auto": "auto", "": "auto"}
    | dict.fromkeys(("5", "v5", "5.0"), "5")
    | dict.fromkeys(("3.1.1", "311", "v311"), "3.1.1")
)
# Processes checking payloads: more than this is no machine's spare cores.
MAX_VALIDATE_WORKERS = 64
_SECONDS = Range(0, 86400, low_open=True, unit="seconds")
_MS = Range(0, 60_000)
_POSITIVE = Range(1)
_PORTLIKE = Range(1, 65535)


@dataclass(repr=False)
class CollectorConfig:
    # ---------------------------------------------------------------- [mqtt]
    broker: str = setting(
        "127.0.0.1:1883",
        "`host:port`, `[v6]:port` or `mqtts://host`: [address rules](guide.md#broker-addresses)",
        env="WATTBENCH_BROKER",
        flags=Flag("--broker", "{broker_help}", "HOST:PORT", check="broker", group="broker"),
        section="mqtt",
        form=broker_problem,
    )
    # "auto": MQTT 5, or 3.1.1 when the broker refuses 5 (the embedded amqtt broker); "5"; "3.1.1".
    # resolved() turns "auto" into "5" with protocol_fallback set.
    protocol: str = setting(
        "auto",
        "`5`, `3.1.1` or `auto` (5, or 3.1.1 if the broker refuses it)",
        env="WATTBENCH_MQTT_PROTOCOL",
        flags=Flag("--protocol", "MQTT version (default auto: 5, or 3.1.1 if refused)"),
        section="mqtt",
        choices=("auto", "5", "3.1.1"),
    )
    protocol_fallback: bool = field(default=False, metadata={"internal": True})
    mqtt_user: str = setting(
        "",
        "MQTT user name",
        env="WATTBENCH_MQTT_USER",
        flags=Flag("--mqtt-user", "MQTT user name (or WATTBENCH_MQTT_USER)", "USER", group="broker"),
        section="mqtt",
    )
    mqtt_password: str = setting(
        "",
        "MQTT password",
        env="WATTBENCH_MQTT_PASSWORD",
        flags=Flag(
            "--mqtt-password-file",
            "file holding the MQTT password (or WATTBENCH_MQTT_PASSWORD)",
            "FILE",
            check="readable",
            group="broker",
            file=True,
        ),
        section="mqtt",
        secret=True,
    )
    client_id: str = setting(
        "", "MQTT client id", env="WATTBENCH_MQTT_CLIENT_ID", section="mqtt", shown_default="`wattbench-<id>`"
    )
    share: str = setting(
        "",
        "MQTT 5 shared subscription group, to split the load",
        env="WATTBENCH_SHARE",
        flags=Flag("--share", "MQTT 5 shared subscription group, to split the load", "GROUP"),
        section="mqtt",
    )
    # The broker sends each device's topic to one member of the share group (EMQX hash_topic or
    # hash_clientid), so per-device gap counting stays meaningful in a share group.
    share_by_topic: bool = setting(
        False,
        "the broker shares by topic: keep gap counting in a share group",
        env="WATTBENCH_SHARE_BY_TOPIC",
        section="mqtt",
    )
    session_expiry_s: int = setting(
        7 * 24 * 3600, "MQTT 5 session expiry", section="mqtt", range=Range(0, 0xFFFFFFFF)
    )
    receive_maximum: int = setting(
        1000, "unacknowledged messages the broker may send", section="mqtt", range=_PORTLIKE
    )
    keepalive_s: int = setting(30, "MQTT keep-alive", section="mqtt", range=_PORTLIKE)
    tls_ca: str = setting(
        "",
        "CA file: connect with TLS",
        env="WATTBENCH_MQTT_CA",
        flags=Flag("--mqtt-ca", "CA certificate: connect with TLS", "FILE", check="ca", group="broker"),
        section="mqtt",
        form=ca_problem,
    )
    tls_insecure: bool = setting(
        False, "do not check that the broker's certificate names its host", section="mqtt"
    )
    connect_timeout_s: float = setting(
        30.0, "give up (exit 3) if the first connection fails this long", section="mqtt", range=_SECONDS
    )
    # ---------------------------------------------------------------- the store
    store: str = setting(
        "",
        "`http(s)://` for InfluxDB, else a path or `sqlite:///path`",
        env=("WATTBENCH_STORE", "WATTBENCH_INFLUX_URL"),
        flags=(
            Flag("--store", "embedded SQLite file, {where} (default: {default})", "PATH", "store", "store"),
            Flag("--influx", "InfluxDB instead of the SQLite file", "URL", "influx", "store"),
        ),
        shown_default="`wattbench.sqlite` in `state_dir`",
        form=_store_form,
        env_forms={"WATTBENCH_INFLUX_URL": http_address_problem},
    )
    influx_db: str = setting(
        "",
        "InfluxDB database (1.8) or bucket (2.x)",
        env="WATTBENCH_INFLUX_DB",
        flags=Flag("--db", "InfluxDB database or bucket (default wattbench)", "NAME", group="store"),
        section="influx",
        shown_default="`wattbench`",
    )
    influx_rp: str = setting(
        "",
        "InfluxDB 1.8 retention policy",
        env="WATTBENCH_INFLUX_RP",
        section="influx",
        shown_default="the default one",
    )
    influx_bucket: str = setting(
        "",
        "InfluxDB 2.x bucket",
        env="WATTBENCH_INFLUX_BUCKET",
        section="influx",
        shown_default="`influx_db`",
    )
    influx_org: str = setting("", "InfluxDB 2.x organisation", env="WATTBENCH_INFLUX_ORG", section="influx")
    influx_user: str = setting("", "InfluxDB 1.8 user", env="WATTBENCH_INFLUX_USER", section="influx")
    influx_token: str = setting(
        "", "InfluxDB 2.x token", env="WATTBENCH_INFLUX_TOKEN", section="influx", secret=True
    )
    influx_password: str = setting(
        "", "InfluxDB 1.8 password", env="WATTBENCH_INFLUX_PASSWORD", section="influx", secret=True
    )
    influx_batch_lines: int = setting(10_000, "lines per write request", section="influx", range=_POSITIVE)
    sqlite_sync: str = setting(
        "FULL",
        "`FULL`: each flush survives power loss; `NORMAL`: only a crash of the collector",
        section="store",
    )
    # ---------------------------------------------------------------- [collector]
    profile: str = setting(
        "default",
        "`low-latency`: see [Latency](#latency); a profile sets only what is still at its default",
        env="WATTBENCH_PROFILE",
        flags=Flag(
            "--profile",
            "low-latency: small commits, for appliances batching every 100 ms (docs/collector.md)",
        ),
        choices=tuple(PROFILES),
    )
    id: str = setting(
        "",
        "reject topic level and `collector` tag",
        env="WATTBENCH_COLLECTOR_ID",
        flags=Flag("--id", "collector id: reject topic level and health tag", "ID", check="given"),
        shown_default="MQTT user, else `collector-<host>`",
    )
    state_dir: str = setting(
        "",
        "status file and default SQLite location",
        env="WATTBENCH_STATE_DIR",
        flags=Flag("--state-dir", "status file and default SQLite location", "DIR", check="folder"),
        shown_default="`~/.local/state/wattbench`",
        form=folder_problem,
    )
    spool_dir: str = setting(
        "",
        "spool directory used while the store is down",
        env="WATTBENCH_SPOOL_DIR",
        flags=Flag("--spool", "spool directory used while the store is down", "DIR", check="spool"),
        shown_default="`spool/<id>` in `state_dir`",
        # Inside the state folder it is made with it; elsewhere its own folder must be there (resolved()).
        form=in_the_way,
    )
    health_period_s: float = setting(
        5.0,
        "seconds between health points",
        flags=Flag("--health-period", "seconds between health points (5)", "S", check="number"),
        range=_SECONDS,
    )
    retry_s: float = setting(
        2.0, "replay the spool into the store this often while the store is away", range=_SECONDS
    )
    max_batch_samples: int = setting(50_000, "samples per commit at most", range=_POSITIVE)
    # Hand a batch to the writer at most this often (0: whenever the writer is free). A full batch, a
    # health point and the last batch at stop do not wait.
    commit_interval_ms: int = setting(
        0, "hand a batch to the writer at most this often; 0: whenever the writer is free", range=_MS
    )
    # Acknowledge messages and save the status file at most this often (0: with every commit). Every
    # commit still stores its batch; what waits is the broker's PUBACK and the resume point, each
    # saved before the acknowledgements it covers go out.
    ack_interval_ms: int = setting(
        0,
        "acknowledge messages and save the status file at most this often (every batch is still stored "
        "at its commit; the status file is saved before the acknowledgements it covers, and no more than "
        "half of `receive_maximum` wait); 0: with every commit",
        range=_MS,
    )
    publish_rejects: bool = setting(True, "publish a notice of each rejected message on the reject topic")
    validate_workers: int = setting(
        -1, "processes checking payloads; 0: check in-process", shown_default="one per spare core, at most 2"
    )
    # Hand payloads and lines to those processes through shared memory (Linux); false: their pipes.
    validate_shared_memory: bool = setting(
        True,
        "false: payloads and lines cross to the checking processes through pipes, not shared memory "
        "(which needs Linux)",
    )
    restore_state: bool = setting(True, "resume the per-device accounting from the status file at start")
    hmac_keys: str = setting(
        "",
        'JSON file `{"device": "hex key"}`: batches of those devices must be signed (docs/security.md)',
        env="WATTBENCH_HMAC_KEYS",
        flags=Flag("--hmac-keys", 'JSON {"device": "hex key"}: check batch signatures', "FILE"),
        section="hmac",
        form=file_problem,
    )
    hmac_require: bool = setting(
        False,
        "refuse unsigned batches from devices without a key as well",
        env="WATTBENCH_HMAC_REQUIRE",
        flags=Flag("--require-signatures", "refuse unsigned batches from every device"),
        section="hmac",
    )
    # Serve Prometheus /metrics on HOST:PORT (ingest/metrics.py); empty: not served.
    metrics: str = setting(
        "",
        "`HOST:PORT`: serve Prometheus `/metrics` ([prometheus.md](prometheus.md))",
        env="WATTBENCH_METRICS",
        flags=Flag(
            "--metrics",
            "serve Prometheus /metrics here (e.g. 127.0.0.1:9464; docs/prometheus.md)",
            "HOST:PORT",
        ),
        shown_default="off",
    )
    # Smart plugs to bridge into the contract: a TOML mapping file (bridge/__init__.py); empty: none.
    plugs: str = setting(
        "",
        "a smart-plug mapping file to bridge ([sources/plugs.md](sources/plugs.md))",
        env="WATTBENCH_PLUGS",
        flags=Flag("--plugs", "smart plugs to bridge (TOML mapping; docs/sources/plugs.md)", "FILE"),
        form=file_problem,
    )
    # How each setting was given, for messages: "--health-period", "WATTBENCH_BROKER",
    # "[mqtt] user in collect.toml". Not a setting: load_config fills it in.
    said: dict[str, str] = field(default_factory=dict, repr=False, compare=False, metadata={"internal": True})

    def __repr__(self) -> str:
        shown = []
        for f in fields(self):
            if not f.repr:
                continue
            value = getattr(self, f.name)
            if f.name == "store" and isinstance(value, str):
                value = redact_url(value)
            shown.append(f"{f.name}={value!r}")
        return f"CollectorConfig({', '.join(shown)})"

    # ---------------------------------------------------------------- derived values

    def named(self, name: str, default: str | None = None) -> str:
        """A setting as the user gave it (an option, a variable, a key in the file), for a message."""
        return self.said.get(name) or default or name

    def resolved(self) -> CollectorConfig:
        """A copy with defaults filled in and every value checked; raises ConfigError."""
        c = CollectorConfig(**{f.name: getattr(self, f.name) for f in fields(self)})
        said = c.named
        if problem := lone_password_problem(c.mqtt_user, c.mqtt_password, said("mqtt_password")):
            raise ConfigError(problem)
        if not c.id:
            c.id = c.mqtt_user if ID_PATTERN.match(c.mqtt_user or "") else default_collector_id()
        if not ID_PATTERN.match(c.id):
            raise ConfigError(
                f"{said('id', 'collector id')} {c.id!r} must match {ID_PATTERN.pattern} "
                "(it is a topic level and a tag)"
            )
        c.client_id = c.client_id or f"wattbench-{c.id}"
        if c.profile not in PROFILES:
            raise ConfigError(f"{said('profile')} {c.profile!r}: use {' or '.join(PROFILES)}")
        # Checked here, not by SQLite when the store opens: that was exit 4 after the collector had
        # started, and a worker count no machine has spawned its processes before the broker was asked.
        if str(c.sqlite_sync).upper() not in ("FULL", "NORMAL", "EXTRA"):
            raise ConfigError(f"{said('sqlite_sync')} {c.sqlite_sync!r}: use FULL, NORMAL or EXTRA")
        if not -1 <= c.validate_workers <= MAX_VALIDATE_WORKERS:
            raise ConfigError(
                f"{said('validate_workers')} {c.validate_workers}: use -1 (one per spare core), 0 (check "
                f"in-process) or 1 to {MAX_VALIDATE_WORKERS}"
            )
        defaults = CollectorConfig()
        for name, value in PROFILES[c.profile].items():
            if getattr(c, name) == getattr(defaults, name):
                setattr(c, name, value)
        c.protocol = _PROTOCOLS.get(str(c.protocol).lower(), "?")
        if c.protocol == "?":
            raise ConfigError(f"{said('protocol')} {self.protocol!r}: use auto, 5 or 3.1.1")
        if c.protocol == "auto":
            c.protocol, c.protocol_fallback = "5", True
        if c.share and not re.match(r"^[A-Za-z0-9_-]{1,64}$", c.share):
            raise ConfigError(
                f"{said('share', 'share group')} {c.share!r}: letters, digits, '-' and '_' only"
            )
        if c.share and c.protocol == "3.1.1":
            raise ConfigError(
                f"{said('share', 'share group')}: shared subscriptions ($share/...) need MQTT 5, "
                f"and {said('protocol')} is 3.1.1"
            )
        # Written back in the one canonical form, so that it parses again to the same address (an
        # IPv6 host keeps its brackets, mqtts:// its scheme).
        try:
            c.broker = str(broker_address(c.broker))
        except ConfigError as exc:
            raise ConfigError(f"{said('broker')}: {exc}" if "broker" in c.said else str(exc)) from None
        state = expand(c.state_dir) if c.state_dir else default_state_dir()
        c.state_dir = str(state)
        c.spool_dir = str(expand(c.spool_dir)) if c.spool_dir else str(state / "spool" / c.id)
        problem = folder_problem(c.spool_dir, made_with=state)
        if problem:
            raise ConfigError(f"{said('spool_dir')}: {problem}")
        if c.plugs:
            c.plugs = str(expand(c.plugs))
        for name in ("state_dir", "spool_dir", "hmac_keys", "tls_ca", "store", "plugs"):
            if "\0" in getattr(c, name):
                raise ConfigError(f"{said(name)} holds a NUL character")
        if c.metrics:
            c.metrics = metrics_address(c.metrics, said("metrics", "metrics address"))
        SETTINGS.check_ranges(c, said)
        return c

    @property
    def address(self) -> BrokerAddress:
        return broker_address(self.broker)

    @property
    def host(self) -> str:
        return self.address.host

    @property
    def port(self) -> int:
        return self.address.port

    def mqtt_settings(self) -> Settings:
        """Where and as whom the collector connects."""
        return Settings(
            self.address,
            self.mqtt_user or None,
            self.mqtt_password or None,
            self.tls_ca or None,
            self.tls_insecure,
        )

    @property
    def is_influx(self) -> bool:
        return self.store.startswith(("http://", "https://"))

    def store_spec(self) -> str:
        if self.store:
            return self.store
        return str(Path(self.state_dir) / "wattbench.sqlite")

    def store_options(self) -> dict[str, Any]:
        if self.is_influx:
            names = ("db", "rp", "bucket", "org", "user", "token", "password")
            given = {n: getattr(self, f"influx_{n}") for n in names if getattr(self, f"influx_{n}")}
            return {"batch_lines": self.influx_batch_lines, **given}
        return {"synchronous": self.sqlite_sync}

    def describe(self) -> dict[str, Any]:
        """What the operator may see: no secrets."""
        return {
            "id": self.id,
            "broker": self.broker,
            "protocol": self.protocol + (" (3.1.1 if refused)" if self.protocol_fallback else ""),
            "mqtt_user": self.mqtt_user or None,
            "share": self.share or None,
            "store": redact_url(self.store_spec()),
            "spool_dir": self.spool_dir,
            "state_dir": self.state_dir,
            "profile": self.profile,
            "signatures": ("required" if self.hmac_require else "checked")
            if self.hmac_keys or self.hmac_require
            else "off",
        }


def broker_address(text: str) -> BrokerAddress:
    try:
        return parse_broker(text)
    except AddressError as exc:
        raise ConfigError(str(exc)) from None


redact_url = shown_url  # the name the commands know


SETTINGS = Table(table(CollectorConfig))
# environment variable -> setting; the secret's *_FILE variable -> the setting naming its file
ENV = SETTINGS.env
SECRET_FILES = SETTINGS.files


def load_config(
    path: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    given_as: Mapping[str, str] | None = None,
    only: Iterable[str] | None = None,
) -> CollectorConfig:
    """Build the configuration from file, environment and overrides (None values are ignored), in the
    one precedence of wattbench.settings. given_as: how each override was given ("--health-period"),
    for messages. only: read just these settings, for a command that needs no more (the rest keep
    their defaults, and a mistake in another setting's variable is not its error)."""
    values, said = SETTINGS.read(path, os.environ if env is None else env, overrides, given_as, only)
    cfg = CollectorConfig(**values)
    cfg.said = said
    return cfg
