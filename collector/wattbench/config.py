"""Collector configuration: defaults, then a TOML file, then WATTBENCH_* environment variables, then
command-line options, each overriding the one before. Secrets (MQTT password, InfluxDB token and
password) can come from the environment or from files and never appear in repr() or logs."""

from __future__ import annotations

import math
import os
import re
import socket
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from .mqttconn import AddressError, BrokerAddress, Settings, parse_broker

ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")


class ConfigError(ValueError):
    """The configuration cannot work; the message says which setting and why."""


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


@dataclass(repr=False)
class CollectorConfig:
    # MQTT
    broker: str = "127.0.0.1:1883"
    # "auto": MQTT 5, or 3.1.1 when the broker refuses 5 (the embedded amqtt broker); "5"; "3.1.1".
    # resolved() turns "auto" into "5" with protocol_fallback set.
    protocol: str = "auto"
    protocol_fallback: bool = False
    mqtt_user: str = ""
    mqtt_password: str = field(default="", repr=False)
    client_id: str = ""
    share: str = ""
    # The broker sends each device's topic to one member of the share group (EMQX hash_topic or
    # hash_clientid), so per-device gap counting stays meaningful in a share group.
    share_by_topic: bool = False
    session_expiry_s: int = 7 * 24 * 3600
    receive_maximum: int = 1000
    keepalive_s: int = 30
    tls_ca: str = ""
    tls_insecure: bool = False
    connect_timeout_s: float = 30.0
    # store
    store: str = ""  # http(s)://influx:8086, a file path or sqlite:///path; empty = embedded file store
    influx_db: str = ""
    influx_rp: str = ""
    influx_bucket: str = ""
    influx_org: str = ""
    influx_user: str = ""
    influx_token: str = field(default="", repr=False)
    influx_password: str = field(default="", repr=False)
    influx_batch_lines: int = 10_000
    sqlite_sync: str = "FULL"
    # "default", or "low-latency": see PROFILES
    profile: str = "default"
    # collector
    id: str = ""
    state_dir: str = ""
    spool_dir: str = ""
    health_period_s: float = 5.0
    retry_s: float = 2.0
    max_batch_samples: int = 50_000
    # Hand a batch to the writer at most this often (0: whenever the writer is free). A full batch, a
    # health point and the last batch at stop do not wait.
    commit_interval_ms: int = 0
    # Acknowledge messages and save the status file at most this often (0: with every commit). Every
    # commit still stores its batch; what waits is the broker's PUBACK and the resume point, each
    # saved before the acknowledgements it covers go out.
    ack_interval_ms: int = 0
    publish_rejects: bool = True
    validate_workers: int = -1  # processes checking payloads; -1: one per spare core (at most 2), 0: none
    # Hand payloads and lines to those processes through shared memory (Linux); false: their pipes.
    validate_shared_memory: bool = True
    restore_state: bool = True
    hmac_keys: str = ""  # JSON file {"device-id": "hex key"}: batches of those devices must be signed
    hmac_require: bool = False  # refuse unsigned batches from devices without a key as well
    # Serve Prometheus /metrics on HOST:PORT (ingest/metrics.py); empty: not served.
    metrics: str = ""
    # Smart plugs to bridge into the contract: a TOML mapping file (bridge/__init__.py); empty: none.
    plugs: str = ""
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
        defaults = CollectorConfig()
        for name, value in PROFILES[c.profile].items():
            if getattr(c, name) == getattr(defaults, name):
                setattr(c, name, value)
        c.protocol = {
            "auto": "auto",
            "": "auto",
            "5": "5",
            "v5": "5",
            "5.0": "5",
            "3.1.1": "3.1.1",
            "311": "3.1.1",
            "v311": "3.1.1",
        }.get(str(c.protocol).lower(), "?")
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
        state = _expand(c.state_dir) if c.state_dir else default_state_dir()
        c.state_dir = str(state)
        c.spool_dir = str(_expand(c.spool_dir)) if c.spool_dir else str(state / "spool" / c.id)
        if c.plugs:
            c.plugs = str(_expand(c.plugs))
        for name in ("state_dir", "spool_dir", "hmac_keys", "tls_ca", "store", "plugs"):
            if "\0" in getattr(c, name):
                raise ConfigError(f"{said(name)} holds a NUL character")
        if c.metrics:
            c.metrics = metrics_address(c.metrics, said("metrics", "metrics address"))
        for name in ("health_period_s", "retry_s", "connect_timeout_s"):
            value = getattr(c, name)
            if not (math.isfinite(value) and 0 < value <= 86400):
                raise ConfigError(
                    f"{said(name)} must be a number of seconds above 0 and at most 86400, not {value!r}"
                )
        if not 1 <= c.keepalive_s <= 65535:
            raise ConfigError(f"{said('keepalive_s')} must be 1..65535, not {c.keepalive_s}")
        if not 0 <= c.session_expiry_s <= 0xFFFFFFFF:
            raise ConfigError(f"{said('session_expiry_s')} must be 0..4294967295, not {c.session_expiry_s}")
        for name in ("max_batch_samples", "influx_batch_lines"):
            if getattr(c, name) < 1:
                raise ConfigError(f"{said(name)} must be positive, not {getattr(c, name)}")
        for name in ("commit_interval_ms", "ack_interval_ms"):
            if not 0 <= getattr(c, name) <= 60_000:
                raise ConfigError(f"{said(name)} must be 0..60000, not {getattr(c, name)}")
        if c.receive_maximum < 1 or c.receive_maximum > 65535:
            raise ConfigError(f"{said('receive_maximum')} must be 1..65535, not {c.receive_maximum}")
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
            opts: dict[str, Any] = {"batch_lines": self.influx_batch_lines}
            for name in ("db", "rp", "bucket", "org", "user", "token", "password"):
                value = getattr(self, f"influx_{name}")
                if value:
                    opts[name] = value
            return opts
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


def split_broker(text: str) -> tuple[str, int]:
    """(host, port) of a broker address (rules: wattbench.mqttconn); ConfigError when it breaks them."""
    address = broker_address(text)
    return address.host, address.port


def broker_address(text: str) -> BrokerAddress:
    try:
        return parse_broker(text)
    except AddressError as exc:
        raise ConfigError(str(exc)) from None


def redact_url(url: str) -> str:
    return re.sub(r"//[^/@]*@", "//***@", url)


# environment variable -> config field
ENV = {
    "WATTBENCH_BROKER": "broker",
    "WATTBENCH_MQTT_PROTOCOL": "protocol",
    "WATTBENCH_MQTT_USER": "mqtt_user",
    "WATTBENCH_MQTT_PASSWORD": "mqtt_password",
    "WATTBENCH_MQTT_CLIENT_ID": "client_id",
    "WATTBENCH_SHARE": "share",
    "WATTBENCH_SHARE_BY_TOPIC": "share_by_topic",
    "WATTBENCH_MQTT_CA": "tls_ca",
    "WATTBENCH_STORE": "store",
    "WATTBENCH_INFLUX_URL": "store",
    "WATTBENCH_INFLUX_DB": "influx_db",
    "WATTBENCH_INFLUX_RP": "influx_rp",
    "WATTBENCH_INFLUX_BUCKET": "influx_bucket",
    "WATTBENCH_INFLUX_ORG": "influx_org",
    "WATTBENCH_INFLUX_USER": "influx_user",
    "WATTBENCH_INFLUX_TOKEN": "influx_token",
    "WATTBENCH_INFLUX_PASSWORD": "influx_password",
    "WATTBENCH_COLLECTOR_ID": "id",
    "WATTBENCH_STATE_DIR": "state_dir",
    "WATTBENCH_SPOOL_DIR": "spool_dir",
    "WATTBENCH_HMAC_KEYS": "hmac_keys",
    "WATTBENCH_METRICS": "metrics",
    "WATTBENCH_PLUGS": "plugs",
    "WATTBENCH_HMAC_REQUIRE": "hmac_require",
    "WATTBENCH_PROFILE": "profile",
}
SECRET_FILES = {
    "mqtt_password_file": "mqtt_password",
    "influx_token_file": "influx_token",
    "influx_password_file": "influx_password",
}


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
# What a file's (TOML's) value may be for each kind of setting other than true/false.
_FILE_KINDS: dict[str, tuple[type, ...]] = {"int": (int, float), "float": (int, float), "str": (str,)}


def _settings() -> dict[str, str]:
    """The settings (name -> kind) a file, the environment or an option may give."""
    return {f.name: str(f.type) for f in fields(CollectorConfig) if not f.metadata.get("internal")}


def _coerce(name: str, value: Any, typed: bool = False, said: str | None = None) -> Any:
    """value as the setting's kind. typed: it comes from the file, where TOML keeps kinds apart, so it
    must already be of the setting's kind (an integer passes for a number, an integral number for an
    integer); a number is no broker address and 5 is not true. Text (the environment) is read. said:
    the setting as the user gave it, for the message."""
    said = said or repr(name)
    kind = _settings().get(name)
    if kind is None:
        raise ConfigError(f"unknown setting {said}{_close_to(name)}")
    try:
        if isinstance(value, list | dict):
            raise TypeError(value)
        if kind == "bool":
            if isinstance(value, str) and not typed:
                word = value.strip().lower()
                if word in _TRUE + _FALSE:
                    return word in _TRUE
                raise ValueError(value)
            if typed and not isinstance(value, bool):
                raise TypeError(value)
            return bool(value)
        if typed and (isinstance(value, bool) or not isinstance(value, _FILE_KINDS[kind])):
            raise TypeError(value)
        if kind == "int":
            if isinstance(value, float) and not value.is_integer():
                raise ValueError(value)
            return int(value)
        if kind == "float":
            out = float(value)
            if not math.isfinite(out):
                raise ValueError(value)
            return out
        return str(value)
    except (TypeError, ValueError, OverflowError):
        shown = (
            repr(value) if isinstance(value, str | int | float) and len(repr(value)) < 40 else "this value"
        )
        want = {"bool": "true or false", "int": "whole number", "float": "number", "str": "text"}.get(
            kind, kind
        )
        raise ConfigError(f"{said}: {shown} is not a valid {want}") from None


def _close_to(name: str, prefix: str = "") -> str:
    """A hint for a misspelt setting, spelt as it would be written where it was (in a [table] whose
    prefix may be left out)."""
    import difflib

    names = [*_settings(), *SECRET_FILES]
    if prefix:
        names += [n.removeprefix(prefix) for n in names if n.startswith(prefix)]
    near = difflib.get_close_matches(name, names, n=1)
    return f" (did you mean {near[0]}?)" if near else ""


def _read_secret(path: str) -> str:
    try:
        return _expand(path).read_text().strip()
    except OSError as exc:
        raise ConfigError(f"cannot read secret file {path}: {exc.strerror}") from None
    except (UnicodeDecodeError, ValueError):  # binary content, NUL in the path
        raise ConfigError(f"secret file {path!r} is not a readable text file") from None


def _expand(path: str) -> Path:
    try:
        return Path(path).expanduser()
    except RuntimeError:  # ~user that does not exist
        raise ConfigError(f"path {path!r}: unknown home directory") from None


def _flatten(doc: dict[str, Any], where: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The file may group settings in [mqtt], [store]/[influx] and [collector] tables. Also how each
    setting was written there ("[mqtt] user in FILE"), for messages."""
    out: dict[str, Any] = {}
    said: dict[str, str] = {}
    prefixes = {"mqtt": "mqtt_", "influx": "influx_", "store": "", "collector": "", "hmac": "hmac_"}
    names = set(_settings()) | set(SECRET_FILES)
    for key, value in doc.items():
        if isinstance(value, dict) and key in prefixes:
            for k, v in value.items():
                for candidate in (prefixes[key] + k, k):
                    if candidate in names:
                        out[candidate] = v
                        said[candidate] = f"[{key}] {k} in {where}"
                        break
                else:
                    raise ConfigError(f"unknown setting [{key}] {k} in {where}{_close_to(k, prefixes[key])}")
        else:
            out[key] = value
            said[key] = f"{key} in {where}"
    return out, said


def metrics_address(text: str, said: str = "metrics address") -> str:
    """HOST:PORT (or :PORT for every interface) for the /metrics endpoint; ConfigError otherwise."""
    host, sep, port = str(text).rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"{said} {text!r}: use HOST:PORT, for example 127.0.0.1:9464")
    host = host.strip("[]")
    if any(ch.isspace() or ch in "/\0" for ch in host):
        raise ConfigError(f"{said} {text!r}: {host!r} is not a host")
    return f"{host}:{int(port)}"


def split_metrics_address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host.strip("[]") or "0.0.0.0", int(port)


def load_config(
    path: str | Path | None = None,
    env: dict[str, str] | None = None,
    overrides: dict[str, Any] | None = None,
    given_as: dict[str, str] | None = None,
) -> CollectorConfig:
    """Build the configuration from file, environment and overrides (None values are ignored).
    given_as: how each override was given ("--health-period"), for messages."""
    values: dict[str, Any] = {}
    said: dict[str, str] = {}
    from_file: set[str] = set()  # the keys whose value is still the file's
    if path:
        try:
            with open(Path(path).expanduser(), "rb") as f:
                doc = tomllib.load(f)
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {str(exc)[:200]}") from None
        # Outside the parse: a setting the file names wrongly is not a file that is not TOML.
        flat, said = _flatten(doc, str(path))
        values.update(flat)
        from_file.update(values)
    environ = os.environ if env is None else env
    for var, name in ENV.items():
        if environ.get(var):
            values[name] = environ[var]
            said[name] = var
            from_file.discard(name)
    for var in (
        "WATTBENCH_MQTT_PASSWORD_FILE",
        "WATTBENCH_INFLUX_TOKEN_FILE",
        "WATTBENCH_INFLUX_PASSWORD_FILE",
    ):
        if environ.get(var):
            name = var[len("WATTBENCH_") :].lower()
            values[name] = environ[var]
            said[name] = var
            from_file.discard(name)
    for key, value in (overrides or {}).items():
        if value is not None:
            values[key] = value
            said[key] = (given_as or {}).get(key, key)
            from_file.discard(key)
    for file_key, name in SECRET_FILES.items():
        if file_key in from_file and not isinstance(values[file_key], str):
            raise ConfigError(
                f"{said.get(file_key, file_key)}: a path to a file is text, not {values[file_key]!r}"
            )
        secret_path = values.pop(file_key, None)
        if secret_path:
            values[name] = _read_secret(str(secret_path))
            said[name] = said.get(file_key, file_key)
            from_file.discard(name)
    cfg = CollectorConfig()
    for key, value in values.items():
        setattr(cfg, key, _coerce(key, value, typed=key in from_file, said=said.get(key)))
    cfg.said = said
    return cfg
