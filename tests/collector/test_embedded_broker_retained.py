"""The embedded broker delivers a retained message only to clients whose subscription matches it.

amqtt 0.12.1, when a client connects, sends it the retained messages of every topic filter that ANY
client has subscribed to. A client subscribed to one device's meta then also gets every other device's
retained meta, or whatever else others watch. Whether it does depends on who subscribed first, so the
concurrent case runs a number of trials; the ordered case shows it every time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import paho.mqtt.client as mqtt
import pytest

from wattbench.broker import EmbeddedBroker

RETAINED = [f"wbtest/dev/d{i}/meta" for i in range(4)] + ["wbtest/run/r1/result", "other/status"]
ONE = "wbtest/dev/d0/meta"


class Client:
    """A paho MQTT 3.1.1 client that records every message it receives, subscribed or not."""

    def __init__(self, broker: EmbeddedBroker, cid: str, clean: bool = True, user: str = "") -> None:
        self.received: list[tuple[str, bool]] = []
        self.lock = threading.Lock()
        self.connected = threading.Event()
        self.subscribed = threading.Event()
        self.c = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2, client_id=cid, protocol=mqtt.MQTTv311, clean_session=clean
        )
        self.c.on_connect = lambda *a: self.connected.set()
        self.c.on_subscribe = lambda *a: self.subscribed.set()
        self.c.on_message = self._on_message
        if user:
            self.c.username_pw_set(user)
        self.c.connect(broker.host, broker.port)
        self.c.loop_start()

    def _on_message(self, client: mqtt.Client, userdata: object, msg: mqtt.MQTTMessage) -> None:
        with self.lock:
            self.received.append((msg.topic, bool(msg.retain)))

    def subscribe(self, topic_filter: str) -> None:
        assert self.connected.wait(10), "client did not connect"
        self.c.subscribe(topic_filter, qos=1)

    def topics(self) -> list[str]:
        with self.lock:
            return [t for t, _ in self.received]

    def wait_for(self, topic: str, timeout: float = 10.0) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if topic in self.topics():
                return True
            time.sleep(0.01)
        return False

    def close(self) -> None:
        self.c.disconnect()
        self.c.loop_stop()


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        pub = Client(b, "wbtest-retainer")
        assert pub.connected.wait(10)
        for t in RETAINED:
            pub.c.publish(t, f"retained {t}".encode(), qos=1, retain=True).wait_for_publish(10)
        pub.close()
        yield b


def _foreign(topics: list[str], topic_filter: str) -> list[str]:
    return [t for t in topics if not mqtt.topic_matches_sub(topic_filter, t)]


def _settle(client: Client, broker: EmbeddedBroker) -> None:
    # A live message on the client's own topic, sent after its retained one arrived: by the time it is
    # back, anything the broker queued for the client earlier has been delivered too.
    assert client.wait_for(ONE), f"the retained message of {ONE} never came: {client.received}"
    marker = Client(broker, "wbtest-marker")
    assert marker.connected.wait(10)
    before = client.topics().count(ONE)
    marker.c.publish(ONE, b"live", qos=1, retain=False).wait_for_publish(10)
    end = time.monotonic() + 10
    while client.topics().count(ONE) == before and time.monotonic() < end:
        time.sleep(0.01)
    marker.close()


def test_a_client_gets_only_what_it_subscribed_to_after_others_subscribed(broker: EmbeddedBroker) -> None:
    others = [Client(broker, f"wbtest-other-{i}") for i in range(3)]
    for o, f in zip(others, ["wbtest/dev/#", "wbtest/run/+/result", "other/status"], strict=True):
        o.subscribe(f)
        assert o.subscribed.wait(10)
    one = Client(broker, "wbtest-one")
    one.subscribe(ONE)
    _settle(one, broker)
    foreign = _foreign(one.topics(), ONE)
    for c in [one, *others]:
        c.close()
    assert not foreign, f"subscribed only to {ONE}, also received {sorted(set(foreign))}"


def test_a_client_gets_only_what_it_subscribed_to_while_others_subscribe(broker: EmbeddedBroker) -> None:
    filters = ["wbtest/dev/#", "wbtest/run/+/result", "other/status", "wbtest/dev/d1/meta"]
    leaks: list[tuple[int, list[str]]] = []
    for trial in range(12):
        start = threading.Barrier(len(filters) + 1)
        others: list[Client] = []

        def other(cid: str, f: str, start: threading.Barrier, others: list[Client]) -> None:
            start.wait()
            c = Client(broker, cid)
            others.append(c)
            c.subscribe(f)

        threads = [
            threading.Thread(target=other, args=(f"wbtest-t{trial}-o{k}", f, start, others))
            for k, f in enumerate(filters)
        ]
        for t in threads:
            t.start()
        start.wait()
        one = Client(broker, f"wbtest-t{trial}-one")
        one.subscribe(ONE)
        for t in threads:
            t.join(10)
        _settle(one, broker)
        foreign = _foreign(one.topics(), ONE)
        if foreign:
            leaks.append((trial, sorted(set(foreign))))
        for c in [one, *others]:
            c.close()
    assert not leaks, f"subscribed only to {ONE}; trials that received other topics: {leaks}"


def test_a_resumed_session_gets_its_own_retained_messages_only(broker: EmbeddedBroker) -> None:
    # A persistent session with a user name (as the collector keeps) comes back with its subscription;
    # others have subscribed to other filters meanwhile.
    first = Client(broker, "wbtest-persistent", clean=False, user="wbtest")
    first.subscribe(ONE)
    assert first.wait_for(ONE)
    first.close()
    other = Client(broker, "wbtest-other-persistent")
    other.subscribe("wbtest/#")
    assert other.subscribed.wait(10)
    again = Client(broker, "wbtest-persistent", clean=False, user="wbtest")
    assert again.connected.wait(10)
    _settle(again, broker)
    foreign = _foreign(again.topics(), ONE)
    again.close()
    other.close()
    assert not foreign, f"resumed a session subscribed to {ONE}, also received {sorted(set(foreign))}"
