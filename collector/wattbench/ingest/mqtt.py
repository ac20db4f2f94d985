"""The collector's MQTT connection: paho-mqtt 2, persistent session, QoS 1, manual acknowledgements.

The broker keeps the session (MQTT 5: clean_start=False with a session expiry; 3.1.1: clean_session
False), so QoS 1 messages that were delivered but not acknowledged are delivered again after a crash
or a reconnect. Acknowledgements are sent only when the collector says the data is durable, and only
on the connection the message came in on: after a reconnect the broker resends what was pending and
that copy is acknowledged instead (a stale packet id could by then name a different message).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import wattbench_schema as contract

from ..config import CollectorConfig

log = logging.getLogger("wattbench.collect.mqtt")

SUBSCRIBED = ("samples", "status", "meta", "phase", "result")
AUTH_FAILURES = {"Bad user name or password", "Not authorized", "Client identifier not valid", "Banned"}

OnMessage = Callable[[int, int, int, str, bytes, bool], None]


class _QuietShutdown(logging.Filter):
    """paho's network thread may run once more after a requested disconnect and log it as an error;
    real connection losses are reported by on_disconnect instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Client is not connected.")


class BrokerRefused(RuntimeError):
    """The broker refused the connection for a reason that retrying will not fix (credentials, id)."""


def topic_filters(share: str = "") -> list[str]:
    filters = [contract.subscription(name) for name in SUBSCRIBED]
    if share:
        # Every topic goes through the share group, so two collectors never both write one message.
        filters = [f"$share/{share}/{f}" for f in filters]
    return filters


def probe_protocol(config: CollectorConfig, timeout: float = 5.0) -> str:
    """ "5" unless the broker answers an MQTT 5 CONNECT with "unsupported protocol version".

    The probe is a separate, clean, property-less connection (some 3.1.1-only brokers cannot even
    parse v5 properties and never answer); the collector's own persistent session is not touched."""
    import paho.mqtt.client as mqtt

    answer: list[str] = []
    done = threading.Event()

    def on_connect(client: Any, userdata: Any, flags: Any, reason: Any, properties: Any = None) -> None:
        answer.append(str(reason))
        done.set()

    probe = mqtt.Client(
        mqtt.CallbackAPIVersion.VERSION2, client_id=f"{config.client_id}-probe"[:64], protocol=mqtt.MQTTv5
    )
    if config.mqtt_user:
        probe.username_pw_set(config.mqtt_user, config.mqtt_password or None)
    if config.tls_ca:
        probe.tls_set(ca_certs=config.tls_ca)
        if config.tls_insecure:
            probe.tls_insecure_set(True)
    probe.on_connect = on_connect
    try:
        probe.connect(config.host, config.port, keepalive=max(5, int(timeout)))
    except OSError:
        return "5"  # unreachable for now: the link's own retries report it
    probe.loop_start()
    try:
        done.wait(timeout)
    finally:
        probe.disconnect()
        probe.loop_stop()
    return "3.1.1" if answer and answer[0] == "Unsupported protocol version" else "5"


class MqttLink:
    """protocol: "5" or "3.1.1" (with config.protocol_fallback, see probe_protocol)."""

    def __init__(self, config: CollectorConfig, on_message: OnMessage, protocol: str | None = None) -> None:
        import paho.mqtt.client as mqtt

        self.config = config
        self.protocol = protocol or ("3.1.1" if config.protocol == "3.1.1" else "5")
        self._on_message_cb = on_message
        self._mqtt = mqtt
        self.v5 = self.protocol == "5"
        kwargs: dict[str, Any] = {
            "callback_api_version": mqtt.CallbackAPIVersion.VERSION2,
            "client_id": config.client_id,
            "protocol": mqtt.MQTTv5 if self.v5 else mqtt.MQTTv311,
            "manual_ack": True,
        }
        if not self.v5:
            kwargs["clean_session"] = False
        self.client = mqtt.Client(**kwargs)
        paho_log = logging.getLogger("wattbench.collect.paho")
        if not any(isinstance(f, _QuietShutdown) for f in paho_log.filters):
            paho_log.addFilter(_QuietShutdown())
        self.client.enable_logger(paho_log)
        if config.mqtt_user:
            self.client.username_pw_set(config.mqtt_user, config.mqtt_password or None)
        elif not self.v5:
            # Some 3.1.1 brokers (amqtt) keep the session and its queued messages only for a named
            # client; a broker that allows anonymous access accepts a name without a password.
            self.client.username_pw_set(config.client_id)
        if config.tls_ca:
            self.client.tls_set(ca_certs=config.tls_ca)
            if config.tls_insecure:
                self.client.tls_insecure_set(True)
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
        props = None
        kwargs: dict[str, Any] = {}
        if self.v5:
            from paho.mqtt.packettypes import PacketTypes
            from paho.mqtt.properties import Properties

            props = Properties(PacketTypes.CONNECT)
            props.SessionExpiryInterval = int(self.config.session_expiry_s)
            props.ReceiveMaximum = int(self.config.receive_maximum)
            kwargs = {"clean_start": False, "properties": props}
        self.client.connect_async(self.config.host, self.config.port, self.config.keepalive_s, **kwargs)
        self.client.loop_start()

    def wait_ready(self, timeout: float) -> bool:
        """True once connected and subscribed; raises BrokerRefused on a permanent refusal."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.refused:
                raise BrokerRefused(self.refused)
            if self._subscribed.wait(0.1):
                return True
        if self.refused:
            raise BrokerRefused(self.refused)
        return False

    def stop(self) -> None:
        try:
            self.client.disconnect()
        finally:
            self.client.loop_stop()

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
        filters = topic_filters(self.config.share)
        if self.v5:
            from paho.mqtt.subscribeoptions import SubscribeOptions

            client.subscribe([(f, SubscribeOptions(qos=1)) for f in filters])
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
        self._on_message_cb(self.gen, msg.mid, msg.qos, topic, msg.payload, bool(msg.retain))

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
