"""Every MQTT connection wattbench opens starts here: the broker address, the paho client, the
credentials and TLS.

Broker addresses (the rules are documented in docs/guide.md and pinned by
schema/vectors/broker-address.json, which the firmware's host mode passes as well):

- `host`, `host:port`, `[v6]` or `[v6]:port`, each optionally behind `mqtt://` (or `tcp://`) or
  `mqtts://`. The scheme is case-insensitive; a trailing `/` after a URL is allowed, a path is not.
- The default port is 1883, or 8883 with `mqtts://`. A port is 1..65535 in decimal digits.
- `mqtts://` asks for TLS. A CA file (`--mqtt-ca`, `tls_ca`) also turns TLS on, whatever the scheme,
  as it always has; `mqtts://` without a CA file verifies the broker against the system's CAs.
- A bare IPv6 address (two or more colons, no brackets) is the host, on the default port: it never
  carries a port, because `::1:1884` is itself a valid address. Write `[::1]:1884` for a port.
- A host name holds letters, digits, `.`, `-` and `_`; user information (`user@`), paths and queries are
  refused, so credentials never hide in an address that gets logged.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

DEFAULT_PORT = 1883
DEFAULT_TLS_PORT = 8883
# scheme -> TLS
SCHEMES = {"mqtt": False, "tcp": False, "mqtts": True}
PROTOCOLS = ("5", "3.1.1")

_HEX = set("0123456789abcdefABCDEF")
_HOST_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_")
_ZONE_CHARS = _HOST_CHARS


class AddressError(ValueError):
    """A broker address that does not follow the rules; the message is one line that quotes it."""


class BrokerError(RuntimeError):
    """The broker cannot be reached, does not answer, or refuses the connection."""


@dataclass(frozen=True)
class BrokerAddress:
    host: str
    port: int
    tls: bool = False  # mqtts:// was asked for

    @property
    def hostport(self) -> str:
        """host:port, with an IPv6 host in brackets so that the port stays readable."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def __str__(self) -> str:
        # Parses back to the same address: the scheme is written only where it changes the meaning.
        return f"mqtts://{self.hostport}" if self.tls else self.hostport


def _ipv6(text: str) -> bool:
    """The shape of an IPv6 literal (hex groups, colons, an optional dotted IPv4 tail and %zone);
    the resolver judges the rest."""
    addr, pct, zone = text.partition("%")
    if pct and (not zone or not set(zone) <= _ZONE_CHARS):
        return False
    if not 2 <= addr.count(":") <= 7 or ":::" in addr or addr.count("::") > 1:
        return False
    return all(ch in _HEX or ch in ":." for ch in addr)


def _port(text: str, shown: str) -> int:
    if not text or not all("0" <= ch <= "9" for ch in text):
        raise AddressError(f"broker {shown}: port {text!r} is not a number")
    port = int(text)
    if not 1 <= port <= 65535:
        raise AddressError(f"broker {shown}: port {port} is outside 1..65535")
    return port


def parse_broker(text: str) -> BrokerAddress:
    """The broker address in `text`, or AddressError saying what is wrong with it."""
    shown = repr(text)
    s = text.strip()
    if not s:
        raise AddressError("broker address is empty")
    tls = False
    default = DEFAULT_PORT
    if "://" in s:
        scheme, _, s = s.partition("://")
        if scheme.lower() not in SCHEMES:
            raise AddressError(f"broker {shown}: scheme {scheme}:// is not mqtt:// or mqtts://")
        tls = SCHEMES[scheme.lower()]
        default = DEFAULT_TLS_PORT if tls else DEFAULT_PORT
        if s.endswith("/"):
            s = s[:-1]
    for ch, what in (("@", "user information"), ("/", "a path"), ("?", "a query"), ("#", "a fragment")):
        if ch in s:
            raise AddressError(
                f"broker {shown}: {what} does not belong in a broker address (give host and port only)"
            )
    if s.startswith("["):
        end = s.find("]")
        if end < 0:
            raise AddressError(f"broker {shown}: '[' without ']'")
        host, rest = s[1:end], s[end + 1 :]
        if not _ipv6(host):
            raise AddressError(f"broker {shown}: [{host}] is not an IPv6 address")
        if rest.startswith(":"):
            port = _port(rest[1:], shown)
        elif rest:
            raise AddressError(f"broker {shown}: expected ':PORT' after ']', not {rest!r}")
        else:
            port = default
        return BrokerAddress(host, port, tls)
    colons = s.count(":")
    if colons >= 2:
        if "]" in s or not _ipv6(s):
            raise AddressError(f"broker {shown}: not an IPv6 address (write [v6]:port for a port)")
        return BrokerAddress(s, default, tls)
    host, _, port_text = s.partition(":")
    port = _port(port_text, shown) if colons else default
    if not host:
        raise AddressError(f"broker {shown}: no host name")
    if not set(host) <= _HOST_CHARS:
        raise AddressError(f"broker {shown}: a host name holds only letters, digits, '.', '-' and '_'")
    # DNS's limits (RFC 1035 2.3.4): the resolver's IDNA codec fails on them at connect time, which
    # every command took for a bug.
    name = host[:-1] if host.endswith(".") else host
    labels = name.split(".")
    if "" in labels:
        raise AddressError(f"broker {shown}: an empty label in the host name (two dots, or a dot first)")
    if max(len(label) for label in labels) > 63:
        raise AddressError(f"broker {shown}: a label of the host name is longer than 63 characters")
    if len(name) > 253:
        raise AddressError(f"broker {shown}: the host name is longer than 253 characters")
    return BrokerAddress(host, port, tls)


def broker_problem(text: str) -> str | None:
    """Why text is no broker address, or None (a setting's form: wattbench.settings)."""
    try:
        parse_broker(text)
    except AddressError as exc:
        return str(exc)
    return None


# ---------------------------------------------------------------------------- connection settings


@dataclass(frozen=True)
class Settings:
    """Where and as whom to connect. tls_ca (a PEM file) verifies the broker and turns TLS on."""

    address: BrokerAddress
    username: str | None = None
    password: str | None = None
    tls_ca: str | None = None
    tls_insecure: bool = False

    @classmethod
    def parse(
        cls,
        broker: str,
        username: str | None = None,
        password: str | None = None,
        tls_ca: str | None = None,
        tls_insecure: bool = False,
    ) -> Settings:
        return cls(parse_broker(broker), username or None, password, tls_ca or None, tls_insecure)

    @property
    def tls(self) -> bool:
        return self.address.tls or bool(self.tls_ca)


def make_client(
    settings: Settings,
    client_id: str,
    *,
    protocol: str = "3.1.1",
    persistent: bool = False,
    manual_ack: bool = False,
    username: str | None = None,
) -> Any:
    """A paho-mqtt 2 client (callback API 2), not yet connected, with credentials and TLS set.

    persistent keeps the broker's session: with 3.1.1 that is clean_session=False here; with MQTT 5 it
    is clean_start=False on connect (see session_connect_args). username overrides the settings' user
    (the collector names itself to 3.1.1 brokers that keep sessions only for named clients)."""
    import paho.mqtt.client as mqtt  # late: start-up

    if protocol not in PROTOCOLS:
        raise ValueError(f"MQTT protocol {protocol!r}: use 5 or 3.1.1")
    kwargs: dict[str, Any] = {
        "callback_api_version": mqtt.CallbackAPIVersion.VERSION2,
        "client_id": client_id,
        "protocol": mqtt.MQTTv5 if protocol == "5" else mqtt.MQTTv311,
    }
    if manual_ack:
        kwargs["manual_ack"] = True
    if persistent and protocol == "3.1.1":
        kwargs["clean_session"] = False
    client = mqtt.Client(**kwargs)
    user = username or settings.username
    if user:
        # The password goes only with the settings' own user.
        client.username_pw_set(user, settings.password if user == settings.username else None)
    if settings.tls:
        # No CA file (mqtts:// alone): the system's CAs verify the broker.
        client.tls_set(ca_certs=settings.tls_ca)
        if settings.tls_insecure:
            client.tls_insecure_set(True)
    return client


def session_connect_args(protocol: str, session_expiry_s: int, receive_maximum: int) -> dict[str, Any]:
    """connect() arguments that resume the broker's session: MQTT 5 only, 3.1.1 set it in the client."""
    if protocol != "5":
        return {}
    from paho.mqtt.packettypes import PacketTypes  # late: start-up
    from paho.mqtt.properties import Properties  # late: start-up

    props = Properties(PacketTypes.CONNECT)
    props.SessionExpiryInterval = int(session_expiry_s)
    props.ReceiveMaximum = int(receive_maximum)
    return {"clean_start": False, "properties": props}


# A command's connection before it runs anything: a broker answers CONNECT in milliseconds, and a
# port of another service (HTTP, plain MQTT for mqtts://) must be a refusal within 5 s.
CONNECT_TIMEOUT_S = 4.0


def open_client(
    settings: Settings,
    client_id: str,
    *,
    timeout: float | None = None,
    keepalive: int = 30,
    protocol: str = "3.1.1",
) -> Any:
    """A client connected to the broker with its network loop running; BrokerError (one line) when
    the broker cannot be reached, does not answer within `timeout` s, or refuses the connection."""
    timeout = CONNECT_TIMEOUT_S if timeout is None else timeout
    client = make_client(settings, client_id, protocol=protocol)
    client.reconnect_delay_set(0.5, 10)
    answered = threading.Event()
    refused: list[str] = []

    def on_connect(c: Any, userdata: Any, flags: Any, reason: Any, properties: Any = None) -> None:
        if getattr(reason, "is_failure", False):
            refused.append(str(reason))
        answered.set()

    client.on_connect = on_connect
    # The TCP connection and the TLS handshake within the same bound as the answer to CONNECT.
    client.connect_timeout = timeout
    where = settings.address.hostport
    try:
        client.connect(settings.address.host, settings.address.port, keepalive=keepalive)
    except TimeoutError:
        what = "no TLS handshake (does this port speak TLS?)" if settings.tls else "no connection"
        raise BrokerError(f"MQTT broker {where} unreachable: {what} within {timeout:g} s") from None
    except OSError as exc:  # also ssl.SSLError: a TLS handshake that fails
        raise BrokerError(f"MQTT broker {where} unreachable: {exc.strerror or exc}") from None
    client.loop_start()
    if not answered.wait(timeout) or refused:
        client.loop_stop()
        why = (
            f"connection refused ({refused[0]})"
            if refused
            else f"no answer to CONNECT within {timeout:g} s (is this an MQTT port?)"
        )
        raise BrokerError(f"MQTT broker {where}: {why}")
    return client
