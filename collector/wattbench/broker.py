"""The embedded MQTT broker (amqtt, MQTT 3.1.1) for a single bench or a demo without Mosquitto.

It keeps sessions and retained messages in memory only, speaks MQTT 3.1.1 (the collector then uses
3.1.1 too) and has no shared subscriptions: for a lab, run Mosquitto with deploy/mosquitto.conf.
Anyone may connect; sessions of clients that give a user name are kept with their queued QoS 1
messages while they are away (use EmbeddedBroker.collector_options() for the collector).

`wattbench broker` (cli/broker.py) runs it in the foreground; EmbeddedBroker runs it in a background thread of the
calling process:

    with EmbeddedBroker(port=0) as broker:   # port 0: pick a free port
        print(broker.url)
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)


class BrokerStartError(RuntimeError):
    """The embedded broker cannot listen where it was asked to: the port is taken, the address is not
    this machine's, or the name does not resolve."""


def _reason(exc: BaseException) -> str:
    """The cause of a failed start in the operating system's words: amqtt wraps the OSError of the bind
    in a BrokerError, and asyncio rewrites its text around the address we already name."""

    while exc.__cause__ is not None:
        exc = exc.__cause__
    if isinstance(exc, socket.gaierror) and exc.strerror:
        return exc.strerror
    if isinstance(exc, OSError) and exc.errno and exc.errno > 0:
        return os.strerror(exc.errno)
    return str(exc)


class _StartupFailureFilter(logging.Filter):
    """Drops amqtt's own report of a failed start (an ERROR with its traceback, logged in the broker's
    thread): start() raises the same failure as BrokerStartError, which is said once, by the caller."""

    def __init__(self, thread_id: int | None) -> None:
        super().__init__()
        self.thread_id = thread_id

    def filter(self, record: logging.LogRecord) -> bool:
        return record.thread != self.thread_id or record.levelno < logging.ERROR


class _ProtocolLevelFilter(logging.Filter):
    """amqtt warns twice for a client that asks for MQTT 5 and is told "unacceptable protocol version":
    "Invalid connection from ..." and then the reason. That answer is the one a client like the
    collector asks for (it tries 5 and takes 3.1.1 when refused), so it is said once, as this broker's
    own DEBUG line. Every other refusal keeps its reason as amqtt's WARNING; its first line, which never
    says why, is dropped."""

    _PREFIX = "Failed to initialize client session: Invalid protocol from "

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if text.startswith("Invalid connection from "):
            return False
        if text.startswith(self._PREFIX) and text.endswith(": 5"):
            client = text[len(self._PREFIX) : -len(": 5")]
            log.debug("%s asked for MQTT 5; told it speaks 3.1.1 (unacceptable protocol version)", client)
            return False
        return True


def _config(host: str, port: int) -> dict[str, Any]:
    return {
        "listeners": {"default": {"type": "tcp", "bind": f"{host}:{port}", "max_connections": 1000}},
        # Long enough to hold a collector's queued QoS 1 messages while it restarts.
        "session_expiry_interval": 7 * 24 * 3600,
        "plugins": {"wattbench.broker.OpenAuth": {}},
    }


def _open_auth_class() -> Any:
    from amqtt.plugins.base import BaseAuthPlugin  # late: start-up

    class OpenAuth(BaseAuthPlugin):  # type: ignore[misc]
        """Lets every client in, like allow_anonymous, but keeps the sessions of clients that give a
        user name: amqtt queues QoS 1 messages for an offline session only if it is not anonymous,
        and the collector needs that queue to lose nothing while it restarts."""

        @dataclass
        class Config:
            pass

        async def authenticate(self, *, session: Any) -> bool:
            session.is_anonymous = not session.username
            return True

    return OpenAuth


def _broker_class() -> Any:
    from amqtt.broker import Broker  # late: start-up

    class RetainedToSubscribersBroker(Broker):  # type: ignore[misc]
        """amqtt's broker, sending a retained message only to a client subscribed to a matching filter.

        When a client connects, amqtt 0.12.1 walks the filters that ANY client has subscribed to and
        sends the connecting client the retained messages matching them (Broker.client_connected,
        "publish retained messages to a pre-existing session's subscriptions"). A client that
        subscribed to one device's meta then also received every retained message others watch,
        depending on who subscribed first. Both that walk and a new subscription go through this
        method, so it keeps only the filters the client itself holds, at the QoS it asked for."""

        async def _publish_retained_messages_for_subscription(
            self, subscription: tuple[str, int], session: Any
        ) -> None:
            topic_filter = subscription[0]
            mine = [
                qos for s, qos in self.subscriptions.get(topic_filter, ()) if s.client_id == session.client_id
            ]
            if not mine:
                return
            await super()._publish_retained_messages_for_subscription((topic_filter, mine[0]), session)

    return RetainedToSubscribersBroker


def __getattr__(name: str) -> Any:
    # Built on first use so that `wattbench --help` does not import amqtt.
    if name == "OpenAuth":
        cls = _open_auth_class()
    elif name == "RetainedToSubscribersBroker":
        cls = _broker_class()
    else:
        raise AttributeError(name)
    globals()[name] = cls
    return cls


def _free_port(host: str) -> int:
    try:
        with socket.socket() as s:
            s.bind((host, 0))
            return int(s.getsockname()[1])
    except OSError as exc:
        raise BrokerStartError(f"embedded broker cannot listen on {host}: {_reason(exc)}") from exc


class EmbeddedBroker:
    """amqtt in a daemon thread with its own event loop."""

    protocol = "3.1.1"

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port or _free_port(host)
        self._loop: Any = None
        self._broker: Any = None
        self._thread: Any = None
        self._error: BaseException | None = None

    @property
    def url(self) -> str:
        # an IPv6 host in brackets, as the address rules want it (wattbench.mqttconn)
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def collector_options(self) -> dict[str, Any]:
        """CollectorConfig settings for this broker: MQTT 3.1.1, and a user name so that the broker
        keeps the collector's session (and its queued messages) across a restart."""
        return {"broker": self.url, "protocol": self.protocol, "mqtt_user": "wattbench-collector"}

    def start(self, timeout: float = 15.0) -> EmbeddedBroker:
        import asyncio  # late: start-up

        # amqtt and its state machine log every packet and transition at INFO.
        for name in ("amqtt", "transitions"):
            if logging.getLogger(name).level == logging.NOTSET:
                logging.getLogger(name).setLevel(logging.WARNING)
        ready = threading.Event()
        amqtt_log = logging.getLogger("amqtt.broker")
        if not any(isinstance(f, _ProtocolLevelFilter) for f in amqtt_log.filters):
            amqtt_log.addFilter(_ProtocolLevelFilter())
        quiet = _StartupFailureFilter(None)

        def main() -> None:
            # Set here, not after Thread.start() returns, so that a start failing at once is caught too.
            quiet.thread_id = threading.get_ident()
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                self._broker = _broker_class()(_config(self.host, self.port), loop=loop)
                loop.run_until_complete(self._broker.start())
            except BaseException as exc:
                self._error = exc
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.close()

        self._thread = threading.Thread(target=main, name="wb-broker", daemon=True)
        amqtt_log.addFilter(quiet)
        try:
            self._thread.start()
            started = ready.wait(timeout)
        finally:
            amqtt_log.removeFilter(quiet)
        if not started:
            raise BrokerStartError(f"embedded broker did not start on {self.url} within {timeout:g} s")
        if self._error is not None:
            reason = _reason(self._error)
            raise BrokerStartError(f"embedded broker cannot listen on {self.url}: {reason}") from self._error
        return self

    def stop(self, timeout: float = 10.0) -> None:
        import asyncio  # late: start-up

        if self._loop is None or self._broker is None or not self._loop.is_running():
            return
        fut = asyncio.run_coroutine_threadsafe(self._broker.shutdown(), self._loop)
        try:
            fut.result(timeout)
        except Exception:  # shutting down anyway
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(timeout)

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_embedded_broker(host: str = "127.0.0.1", port: int = 0) -> EmbeddedBroker:
    """Start the embedded broker in this process and return it (call .stop() when done)."""
    return EmbeddedBroker(host, port).start()
