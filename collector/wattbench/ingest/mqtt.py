"""The collector's MQTT connection: paho-mqtt 2, persistent session, QoS 1, manual acknowledgements.

The broker keeps the session (MQTT 5: clean_start=False with a session expiry; 3.1.1: clean_session
False), so QoS 1 messages that were delivered but not acknowledged are delivered again after a crash
or a reconnect. Acknowledgements are sent only when the collector says the data is durable, and only
on the connection the message came in on: after a reconnect the broker resends what was pending and
that copy is acknowledged instead (a stale packet id could by then name a different message).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from paho.mqtt.subscribeoptions import SubscribeOptions

import wattbench_schema as contract

from .. import mqttconn
from ..config import CollectorConfig

log = logging.getLogger("wattbench.cli.collect.mqtt")
# A connect timeout longer than this gets a line at once that the broker does not answer yet.
SAY_WAITING_AFTER_S = 5.0

SUBSCRIBED = ("samples", "status", "meta", "phase", "result")
AUTH_FAILURES = {"Bad user name or password", "Not authorized", "Client identifier not valid", "Banned"}

# (connection generation, packet id, qos, topic, payload, retain flag, DUP flag)
OnMessage = Callable[[int, int, int, str, bytes, bool, bool], None]


class _QuietShutdown(logging.Filter):
    """paho's network thread may run once more after a requested disconnect and log it as an error;
    real connection losses are reported by on_disconnect instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Client is not connected.")


class BrokerRefused(RuntimeError):
    """The broker refused the connection for a reason that retrying will not fix (credentials, id)."""


def topic_filters(share: str = "", extra: Sequence[str] = ()) -> list[str]:
    """The collector's subscriptions: the contract's topics, and extra ones (the bridged plugs')."""
    filters = [contract.subscription(name) for name in SUBSCRIBED] + list(extra)
    if share:
        # Every topic goes through the share group, so two collectors never both write one message.
        filters = [f"$share/{share}/{f}" for f in filters]
    return filters


class BrokerUnreachable(RuntimeError):
    """No MQTT answer from the broker's address within the connect timeout; the text says why."""


def _connect_once(
    config: CollectorConfig, protocol: str, until: float, cancel: threading.Event | None
) -> tuple[Any, str]:
    """One clean CONNECT, closed at once: the broker's answer (a reason code) or None, and why not."""
    settings = config.mqtt_settings()
    answer: list[Any] = []
    answered = threading.Event()

    def on_connect(client: Any, userdata: Any, flags: Any, reason: Any, properties: Any = None) -> None:
        answer.append(reason)
        answered.set()

    # named as the collector's own connection (MqttLink) names an anonymous 3.1.1 client
    username = None if settings.username or protocol == "5" else config.client_id
    client = mqttconn.make_client(
        settings, f"{config.client_id}-preflight"[:64], protocol=protocol, username=username
    )
    client.on_connect = on_connect
    address = settings.address
    try:
        client.connect(address.host, address.port, keepalive=max(5, int(config.connect_timeout_s)))
    except OSError as exc:  # also ssl.SSLError: a TLS handshake that fails
        return None, exc.strerror or str(exc) or exc.__class__.__name__
    client.loop_start()
    try:
        while time.monotonic() < until and not (cancel is not None and cancel.is_set()):
            if answered.wait(0.1):
                break
    finally:
        client.disconnect()
        client.loop_stop()
    if answer:
        return answer[0], f"broker refused the connection: {answer[0]}"
    return None, "the port accepts connections but no MQTT answer came"


def preflight(config: CollectorConfig, cancel: threading.Event | None = None) -> str | None:
    """The MQTT version the collector will speak, from a clean connection that is closed at once, so
    that a wrong address or refused credentials are known before the store is opened or anything is
    subscribed. A broker that is not up yet is asked again until the connect timeout, as the collector's
    own connection would. With config.protocol_fallback, an MQTT 5 CONNECT answered "unsupported
    protocol version" gives "3.1.1". None when cancel was set first. Raises BrokerRefused for
    credentials (retrying will not fix them), BrokerUnreachable after the timeout."""
    protocol = "3.1.1" if config.protocol == "3.1.1" else "5"
    until = time.monotonic() + config.connect_timeout_s
    waiting_said = False
    while True:
        reason, why = _connect_once(config, protocol, until, cancel)
        if reason is not None:
            text = str(reason)
            if not reason.is_failure:
                return protocol
            if text == "Unsupported protocol version" and protocol == "5" and config.protocol_fallback:
                protocol = "3.1.1"
                continue
            if text in AUTH_FAILURES:
                raise BrokerRefused(f"broker {config.broker} refused the collector: {text}")
        if cancel is not None and cancel.is_set():
            return None
        left = until - time.monotonic()
        if left <= 0:
            raise BrokerUnreachable(
                f"cannot reach the MQTT broker at {config.broker} within {config.connect_timeout_s:g} s ({why})"
            )
        if not waiting_said and config.connect_timeout_s > SAY_WAITING_AFTER_S:
            # A broker starting beside the collector answers within seconds; one that never will would
            # otherwise leave the user with silence for the whole timeout (a short one ends in its
            # own line soon enough).
            log.warning(
                "the MQTT broker at %s does not answer (%s): trying again for up to %g s (%s)",
                config.broker,
                why,
                config.connect_timeout_s,
                config.named("connect_timeout_s"),
            )
            waiting_said = True
        if cancel is not None:
            if cancel.wait(min(0.5, left)):
                return None
        else:
            time.sleep(min(0.5, left))


class MqttLink:
    """protocol: "5" or "3.1.1" (with config.protocol_fallback, see preflight)."""

    def __init__(
        self,
        config: CollectorConfig,
        on_message: OnMessage,
        protocol: str | None = None,
        extra_filters: Sequence[str] = (),
    ) -> None:
        self.config = config
        self.extra_filters = list(extra_filters)
        self.protocol = protocol or ("3.1.1" if config.protocol == "3.1.1" else "5")
        self._on_message_cb = on_message
        self.v5 = self.protocol == "5"
        settings = config.mqtt_settings()
        self.client = mqttconn.make_client(
            settings,
            config.client_id,
            protocol=self.protocol,
            persistent=True,
            manual_ack=True,
            # Some 3.1.1 brokers (amqtt) keep the session and its queued messages only for a named
            # client; a broker that allows anonymous access accepts a name without a password.
            username=None if settings.username or self.v5 else config.client_id,
        )
        paho_log = logging.getLogger("wattbench.cli.collect.paho")
        if not any(isinstance(f, _QuietShutdown) for f in paho_log.filters):
            paho_log.addFilter(_QuietShutdown())
        self.client.enable_logger(paho_log)
        self.client.reconnect_delay_set(1, 30)
        # Outgoing: reject notices only. Let paho keep as many in flight as it likes.
        self.client.max_inflight_messages_set(100)
        self.client.max_queued_messages_set(0)
        self.client.on_connect = self._on_connect
        self.client.on_disconnect = self._on_disconnect
        self.client.on_message = self._on_message
        self.client.on_subscribe = self._on_subscribe
        self.gen = 0
        self.connected = threading.Event()
        self.refused: str | None = None
        self.connects = 0
        self.disconnects = 0
        self.last_error = ""
        self._subscribed = threading.Event()
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        kwargs = mqttconn.session_connect_args(
            self.protocol, self.config.session_expiry_s, self.config.receive_maximum
        )
        address = self.config.address
        self.client.connect_async(address.host, address.port, self.config.keepalive_s, **kwargs)
        self.client.loop_start()

    def wait_ready(self, timeout: float, cancel: threading.Event | None = None) -> bool:
        """True once connected and subscribed; False after timeout, or as soon as cancel is set;
        raises BrokerRefused on a permanent refusal."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.refused:
                raise BrokerRefused(self.refused)
            if self._subscribed.wait(0.1):
                return True
            if cancel is not None and cancel.is_set():
                return False
        if self.refused:
            raise BrokerRefused(self.refused)
        return False

    def stop(self) -> None:
        try:
            self.client.disconnect()
        finally:
            self.client.loop_stop()

    def why_not_connected(self, timeout: float = 3.0) -> str:
        """Why no session came up: the broker's own refusal or loss when it said one, else what a
        plain TCP connection to its address meets (paho retries in silence: it does not say why)."""
        if self.last_error:
            return self.last_error
        address = self.config.address
        try:
            with socket.create_connection((address.host, address.port), timeout=timeout):
                return "the port accepts connections but no MQTT answer came"
        except OSError as exc:
            return exc.strerror or str(exc) or exc.__class__.__name__

    # ------------------------------------------------------------------ callbacks (paho's thread)

    def _on_connect(
        self, client: Any, userdata: Any, flags: Any, reason: Any, properties: Any = None
    ) -> None:
        if reason.is_failure:
            text = str(reason)
            self.last_error = f"broker refused the connection: {text}"
            if text in AUTH_FAILURES:
                self.refused = f"broker {self.config.broker} refused the collector: {text}"
                log.error("%s; check the MQTT user and password", self.refused)
                client.disconnect()
            else:
                log.warning("broker %s refused the connection: %s; retrying", self.config.broker, text)
            return
        with self._lock:
            self.gen += 1
        self.connects += 1
        session = bool(getattr(flags, "session_present", False))
        log.info(
            "connected to %s (MQTT %s, session %s)",
            self.config.broker,
            self.protocol,
            "resumed" if session else "new",
        )
        # Subscribing again is harmless when the session kept the subscriptions, and needed when the
        # broker lost them (expired session, broker without persistence).
        filters = topic_filters(self.config.share, self.extra_filters)
        if self.v5:
            # Retained messages are sent on every subscribe, and marked retained only then (not
            # retain-as-published): a plug's retained copy is counted and dropped as what it is (see
            # bridge/), and a live message is never mistaken for one. MQTT 3.1.1 brokers do the same.
            options = SubscribeOptions(
                qos=1,
                retainAsPublished=False,
                retainHandling=SubscribeOptions.RETAIN_SEND_ON_SUBSCRIBE,
            )
            client.subscribe([(f, options) for f in filters])
        else:
            client.subscribe([(f, 1) for f in filters])
        self.connected.set()

    def _on_subscribe(
        self, client: Any, userdata: Any, mid: int, reasons: Any, properties: Any = None
    ) -> None:
        bad = [str(r) for r in reasons if getattr(r, "is_failure", False)]
        if bad:
            self.last_error = f"subscription refused: {', '.join(bad)}"
            log.error(
                "broker refused a subscription (%s); check the ACL for the collector user", ", ".join(bad)
            )
        self._subscribed.set()

    def _on_disconnect(
        self, client: Any, userdata: Any, flags: Any, reason: Any, properties: Any = None
    ) -> None:
        with self._lock:
            self.gen += 1  # acknowledgements for messages of the lost connection are void from now on
        self.connected.clear()
        self.disconnects += 1
        if reason is not None and getattr(reason, "is_failure", False):
            self.last_error = f"disconnected: {reason}"
            log.warning("lost the broker %s (%s); reconnecting", self.config.broker, reason)

    def _on_message(self, client: Any, userdata: Any, msg: Any) -> None:
        try:
            topic = msg.topic
        except UnicodeDecodeError:
            topic = "<topic is not UTF-8>"
        self._on_message_cb(self.gen, msg.mid, msg.qos, topic, msg.payload, bool(msg.retain), bool(msg.dup))

    # ------------------------------------------------------------------ from other threads

    def ack(self, gen: int, mid: int, qos: int) -> bool:
        """Acknowledge one message if it came on the current connection."""
        if qos == 0:
            return False
        with self._lock:
            if gen != self.gen:
                return False
            self.client.ack(mid, qos)
        return True

    def publish(self, topic: str, payload: bytes, qos: int = 1) -> None:
        self.client.publish(topic, payload, qos=qos)
