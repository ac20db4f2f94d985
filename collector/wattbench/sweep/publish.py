"""Where the sweep's phase events and result go: the MQTT run topics and the store.

Every message is validated against the contract before it leaves. A broker or store that goes away
mid-run is logged and counted; the run goes on (paho keeps QoS 1 messages queued and resends them on
reconnect, and the timestamps travel inside the payloads, so late delivery changes nothing).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from wattbench_schema import dumps, topic_for

from ..core.contract import validate_phase, validate_result
from ..mqttconn import AddressError, BrokerError, Settings, open_client

if TYPE_CHECKING:
    from ..store.base import Store

log = logging.getLogger(__name__)


class SinkError(RuntimeError):
    """A sink cannot be opened (broker unreachable, credentials refused)."""


class Sink(Protocol):
    def phase(self, event: dict[str, Any]) -> None: ...

    def result(self, result: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


class MqttSink:
    """Publishes phase events (QoS 1) and the result (QoS 1, retained) on the run's topics."""

    def __init__(
        self,
        broker: str,
        client_id: str,
        username: str | None = None,
        password: str | None = None,
        tls_ca: str | None = None,
        connect_timeout: float | None = None,
        publish_timeout: float = 5.0,
    ) -> None:

        try:
            settings = Settings.parse(broker, username, password, tls_ca)
        except AddressError as exc:
            raise SinkError(str(exc)) from None
        self.host, self.port = settings.address.host, settings.address.port
        self.where = settings.address.hostport
        self.publish_timeout = publish_timeout
        self.failures = 0
        self._closing = False
        # The first outage (UTC seconds) and whether the broker is away now: the sweep's last line
        # names it, since without a broker no power reaches the store.
        self._lost_at: float | None = None
        self._down = False
        try:
            self.client = open_client(settings, client_id[:64], timeout=connect_timeout)
        except BrokerError as exc:
            raise SinkError(str(exc)) from None
        self.client.on_disconnect = self._on_disconnect
        self.client.on_connect = self._on_connect

    def _on_disconnect(self, client: Any, userdata: Any, flags: Any, reason: Any, properties: Any) -> None:
        if not self._closing:
            log.warning(
                "MQTT broker %s disconnected (%s); messages are queued until it is back", self.where, reason
            )
            self._down = True
            if self._lost_at is None:
                self._lost_at = time.time()

    def _on_connect(self, client: Any, userdata: Any, flags: Any, reason: Any, properties: Any) -> None:
        if self._down and not reason.is_failure:
            log.warning("MQTT broker %s is back", self.where)
            self._down = False

    def outage(self) -> str | None:
        """The broker's outage during the run, in one sentence; None when it never went away."""
        if self._lost_at is None:
            return None
        at = time.strftime("%H:%M:%S", time.gmtime(self._lost_at))
        end = "was not back by the end" if self._down else "came back later"
        return (
            f"the MQTT broker at {self.where} went away at {at} UTC and {end}: phase events and power "
            "sent after it may be missing"
        )

    def _publish(self, topic: str, payload: dict[str, Any], retain: bool) -> None:

        info = self.client.publish(topic, dumps(payload), qos=1, retain=retain)
        if info.rc != 0:
            self.failures += 1
            if not self._down:  # the outage was said once when it began
                log.warning("MQTT publish to %s queued, not sent (rc=%s)", topic, info.rc)
            return
        try:
            info.wait_for_publish(self.publish_timeout)
        except (RuntimeError, ValueError) as exc:
            self.failures += 1
            log.warning("MQTT publish to %s failed: %s", topic, exc)
            return
        if not info.is_published():
            self.failures += 1
            log.warning("MQTT publish to %s not acknowledged within %.0f s", topic, self.publish_timeout)

    def phase(self, event: dict[str, Any]) -> None:

        self._publish(topic_for("phase", run=event["run"]), validate_phase(event), retain=False)

    def result(self, result: dict[str, Any]) -> None:

        self._publish(topic_for("result", run=result["run"]), validate_result(result), retain=True)

    def close(self) -> None:
        self._closing = True
        try:
            self.client.disconnect()
        finally:
            self.client.loop_stop()


class StoreSink:
    """Writes phase events and the result straight into the store (idempotent, so it is harmless when
    a collector also stores what was published)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.failures = 0

    def phase(self, event: dict[str, Any]) -> None:
        try:
            self.store.write_phase(validate_phase(event))
        except Exception as exc:  # a store outage must not stop the run
            self.failures += 1
            log.warning("could not store phase event %s/%s: %s", event.get("phase"), event.get("event"), exc)

    def result(self, result: dict[str, Any]) -> None:
        try:
            self.store.write_result(validate_result(result))
            self.store.flush()
        except Exception as exc:
            self.failures += 1
            log.error("could not store the result of %s: %s", result.get("run"), exc)

    def close(self) -> None:
        try:
            self.store.flush()
        except Exception as exc:
            log.warning("store flush failed: %s", exc)


class MemorySink:
    """Keeps what was sent; for tests and for runs without broker or store."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.results: list[dict[str, Any]] = []

    def phase(self, event: dict[str, Any]) -> None:
        self.events.append(validate_phase(dict(event)))

    def result(self, result: dict[str, Any]) -> None:
        self.results.append(validate_result(dict(result)))

    def close(self) -> None:
        pass


class Fanout:
    """Sends to every sink; one failing sink does not keep the others from receiving."""

    def __init__(self, sinks: Sequence[Sink]) -> None:
        self.sinks = list(sinks)

    def phase(self, event: dict[str, Any]) -> None:
        for s in self.sinks:
            try:
                s.phase(event)
            except Exception as exc:
                log.warning("%s: %s", type(s).__name__, exc)

    def result(self, result: dict[str, Any]) -> None:
        for s in self.sinks:
            try:
                s.result(result)
            except Exception as exc:
                log.error("%s: %s", type(s).__name__, exc)

    def close(self) -> None:
        for s in self.sinks:
            try:
                s.close()
            except Exception as exc:
                log.warning("%s close: %s", type(s).__name__, exc)
