"""The appliance's own MQTT 3.1.1 client: packet encoding, and behaviour against the real Mosquitto
(several QoS 1 publishes in flight, retained messages, last will, credentials, TLS, keepalive,
broker loss) plus the link's reconnect and resend."""

from __future__ import annotations

import json
import queue
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import paho.mqtt.client as paho
import pytest

from wattbench_devkit import services
from wattbench_fw import encode, mqtt
from wattbench_fw.buffer import Buffer
from wattbench_fw.link import Link

# ---- packets -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "encoded"),
    [
        (0, "00"),
        (127, "7f"),
        (128, "8001"),
        (16383, "ff7f"),
        (16384, "808001"),
        (2097151, "ffff7f"),
        (2097152, "80808001"),
        (268435455, "ffffff7f"),
    ],
)
def test_remaining_length(n: int, encoded: str) -> None:
    raw = bytes.fromhex(encoded)
    assert mqtt.remaining_length(n) == raw
    assert mqtt.decode_remaining_length(b"\x30" + raw, 1) == (n, 1 + len(raw))
    assert mqtt.decode_remaining_length(b"\x30" + raw[:-1], 1) is None or len(raw) == 1


def test_connect_packet_layout() -> None:
    pkt = mqtt.connect_packet("c1", 30, True, ("t/s", b'{"x":1}', 1, True), "u", "p")
    body = (
        b"\x00\x04MQTT\x04"
        + bytes((0x80 | 0x40 | 0x20 | 0x08 | 0x04 | 0x02,))
        + b"\x00\x1e"
        + b"\x00\x02c1"
        + b"\x00\x03t/s"
        + b'\x00\x07{"x":1}'
        + b"\x00\x01u"
        + b"\x00\x01p"
    )
    assert pkt == b"\x10" + bytes((len(body),)) + body
    assert mqtt.connect_packet("c1", 0, True) == b"\x10\x0e\x00\x04MQTT\x04\x02\x00\x00\x00\x02c1"


def test_publish_header_and_parse() -> None:
    head = mqtt.publish_header("a/b", 5, qos=1, retain=True, pid=0x1234)
    assert head == b"\x33\x0c\x00\x03a/b\x12\x34"
    first, body, end = mqtt.split_packet(head + b"hello" + b"\x40")
    assert end == len(head) + 5
    assert mqtt.parse_publish(first, body) == ("a/b", b"hello", 1, True, 0x1234)
    assert mqtt.split_packet(head + b"hel") is None
    assert mqtt.puback_packet(0x1234) == b"\x40\x02\x12\x34"


def test_malformed_length_is_an_error() -> None:
    with pytest.raises(mqtt.MQTTError):
        mqtt.decode_remaining_length(b"\x30\xff\xff\xff\xff\x01", 1)


# ---- against Mosquitto -------------------------------------------------------------------------


class Watcher:
    """A paho subscriber collecting everything under a filter."""

    def __init__(self, host: str, port: int, topic: str = "#", **kw: Any) -> None:
        self.msgs: queue.Queue[tuple[str, bytes, bool]] = queue.Queue()
        self.c = paho.Client(paho.CallbackAPIVersion.VERSION2)
        if "user" in kw:
            self.c.username_pw_set(kw["user"], kw["password"])
        self.c.on_message = lambda c, u, m: self.msgs.put((m.topic, m.payload, bool(m.retain)))
        self.c.connect(host, port)
        self.c.subscribe(topic, qos=1)
        self.c.loop_start()
        time.sleep(0.3)

    def get(self, timeout: float = 10.0) -> tuple[str, bytes, bool]:
        return self.msgs.get(timeout=timeout)

    def close(self) -> None:
        self.c.loop_stop()
        self.c.disconnect()


def until(cond: Callable[[], bool], client: mqtt.MQTTClient | None = None, timeout: float = 15.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if client is not None:
            client.service()
        if cond():
            return True
        time.sleep(0.005)
    return False


def connected_client(host: str, port: int, **kw: Any) -> mqtt.MQTTClient:
    c = mqtt.MQTTClient(kw.pop("client_id", "fw-test"), host, port, **kw)
    c.start()
    assert until(lambda: c.connected or c.state == c.IDLE, c), "no CONNACK"
    assert c.connected, c.error
    return c


@pytest.mark.services
def test_many_qos1_in_flight_all_acknowledged_in_order(mosquitto: services.Mosquitto) -> None:
    w = Watcher(mosquitto.host, mosquitto.port, "fw/#")
    acked: list[int] = []
    c = connected_client(mosquitto.host, mosquitto.port, on_puback=acked.append)
    assert c._sock.gettimeout() == 0.0  # non-blocking: service() never waits on the network
    pids = [c.publish("fw/data", b"%d" % i, qos=1) for i in range(200)]
    assert len(c.inflight) > 1  # publishes did not wait for each other's PUBACK
    assert until(lambda: len(acked) == 200, c)
    assert sorted(acked) == sorted(pids) and not c.inflight
    got = [int(w.get()[1]) for _ in range(200)]
    assert got == list(range(200))
    c.disconnect()
    w.close()


@pytest.mark.services
def test_retained_and_last_will(mosquitto: services.Mosquitto) -> None:
    will = ("fw/dev/status", b'{"v":1,"dev":"x","state":"offline"}', 1, True)
    c = connected_client(mosquitto.host, mosquitto.port, will=will, keepalive=30)
    c.publish("fw/dev/status", b'{"state":"online"}', qos=1, retain=True)
    assert until(lambda: not c.inflight, c)
    w = Watcher(mosquitto.host, mosquitto.port, "fw/dev/status")
    assert w.get() == ("fw/dev/status", b'{"state":"online"}', True)  # retained, delivered late
    c._sock.close()  # vanish without DISCONNECT: the broker must publish the will
    topic, payload, _ = w.get()
    assert topic == "fw/dev/status" and json.loads(payload)["state"] == "offline"
    w.close()


@pytest.mark.services
def test_empty_payload_deletes_retained_and_does_not_block_the_queue(mosquitto: services.Mosquitto) -> None:
    acked: list[int] = []
    c = connected_client(mosquitto.host, mosquitto.port, on_puback=acked.append)
    c.publish("fw/ret", b"kept", qos=1, retain=True)
    c.publish("fw/ret", b"", qos=1, retain=True)  # deletes the retained message
    c.publish("fw/after", b"after", qos=1)  # must not be stuck behind the empty one
    assert until(lambda: len(acked) == 3, c), "every PUBLISH, the empty one included, is acknowledged"
    w = Watcher(mosquitto.host, mosquitto.port, "fw/ret")
    with pytest.raises(queue.Empty):
        w.get(timeout=1.5)
    c.disconnect()
    w.close()


@pytest.mark.services
def test_clean_disconnect_suppresses_the_will(mosquitto: services.Mosquitto) -> None:
    w = Watcher(mosquitto.host, mosquitto.port, "fw/w")
    c = connected_client(mosquitto.host, mosquitto.port, will=("fw/w", b"gone", 1, False))
    c.disconnect()
    with pytest.raises(queue.Empty):
        w.get(timeout=1.5)
    w.close()


@pytest.mark.services
def test_keepalive_pings_keep_the_session(mosquitto: services.Mosquitto) -> None:
    c = connected_client(mosquitto.host, mosquitto.port, keepalive=1)
    sent = c.packets_out
    assert until(lambda: False, c, timeout=3.0) is False  # idle for three keepalive periods
    assert c.connected and c.packets_out >= sent + 2  # PINGREQs went out and were answered
    c.disconnect()


@pytest.mark.services
def test_broker_loss_is_detected(mosquitto: services.Mosquitto) -> None:
    c = connected_client(mosquitto.host, mosquitto.port, keepalive=2)
    mosquitto.stop()
    assert until(lambda: c.state == c.IDLE, c)
    assert c.error
    try:
        c.start()  # nothing listening: refused now or on the next service(), never retried in here
    except OSError:
        pass
    else:
        assert until(lambda: c.state == c.IDLE, c)
        assert "refused" in c.error or "connect" in c.error


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[services.Mosquitto]:
    """Mosquitto with a password file and a TLS listener using a throw-away CA."""
    d = tmp_path / "pki"
    d.mkdir()

    def sh(*args: str) -> None:
        subprocess.run(args, cwd=d, check=True, capture_output=True)

    sh(
        "openssl",
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=test-ca",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
    )
    sh(
        "openssl",
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=localhost",
        "-keyout",
        "srv.key",
        "-out",
        "srv.csr",
    )
    (d / "ext.cnf").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    sh(
        "openssl",
        "x509",
        "-req",
        "-in",
        "srv.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        "ext.cnf",
        "-out",
        "srv.crt",
    )
    pw = d / "passwd"
    pw.write_text("")
    sh("mosquitto_passwd", "-b", str(pw), "bench-a", "s3cret")
    plain = services.free_port()
    tls = services.free_port()
    conf = (
        f"per_listener_settings false\nallow_anonymous false\npassword_file {pw}\n"
        f"listener {plain} 127.0.0.1\n"
        f"listener {tls} 127.0.0.1\ncafile {d}/ca.crt\ncertfile {d}/srv.crt\nkeyfile {d}/srv.key\n"
    )
    try:
        broker = services.Mosquitto(tmp_path / "mosq", port=plain, extra_conf=conf)
    except services.ServiceUnavailable as exc:
        pytest.skip(str(exc))
    broker.tls_port = tls  # type: ignore[attr-defined]
    broker.ca = str(d / "ca.crt")  # type: ignore[attr-defined]
    broker.start()
    yield broker
    broker.stop()


@pytest.mark.services
def test_credentials(secured: services.Mosquitto) -> None:
    c = mqtt.MQTTClient("fw-auth", secured.host, secured.port, user="bench-a", password="nope")
    c.start()
    assert until(lambda: c.state == c.IDLE, c)
    assert "not authorised" in c.error or "bad user name" in c.error
    c = connected_client(secured.host, secured.port, user="bench-a", password="s3cret")
    c.publish("fw/x", b"1")
    assert until(lambda: not c.inflight, c)
    c.disconnect()


@pytest.mark.services
def test_tls(secured: services.Mosquitto) -> None:
    import ssl

    ctx = ssl.create_default_context(cafile=secured.ca)  # type: ignore[attr-defined]
    w = Watcher(secured.host, secured.port, "fw/tls", user="bench-a", password="s3cret")
    c = mqtt.MQTTClient(
        "fw-tls",
        "localhost",
        secured.tls_port,
        user="bench-a",
        password="s3cret",  # type: ignore[attr-defined]
        ssl_context=ctx,
    )
    c.start()
    assert until(lambda: c.connected or c.state == c.IDLE, c), "no CONNACK over TLS"
    assert c.connected, c.error
    for i in range(20):
        c.publish("fw/tls", b"%d" % i)
    assert until(lambda: not c.inflight, c)
    assert [int(w.get()[1]) for _ in range(20)] == list(range(20))
    c.disconnect()
    w.close()
    untrusted = mqtt.MQTTClient(
        "fw-tls2", "localhost", secured.tls_port, ssl_context=ssl.create_default_context()
    )  # type: ignore[attr-defined]
    untrusted.start()
    assert until(lambda: untrusted.state == untrusted.IDLE, untrusted)
    assert "TLS" in untrusted.error


@pytest.mark.services
def test_link_resends_after_broker_restart(mosquitto: services.Mosquitto) -> None:
    buf = Buffer(ram_bytes=1 << 20)
    client = mqtt.MQTTClient("fw-link", mosquitto.host, mosquitto.port, keepalive=2)
    statuses: list[str] = []

    def status(state: str, reason: str) -> bytes:
        statuses.append(reason)
        return json.dumps({"v": 1, "dev": "lnk", "state": state, "reason": reason}).encode()

    link = Link(client, buf, "lnk", status, lambda: b"{}", inflight=4, backoff_min_ms=100, backoff_max_ms=800)
    for i in range(10):
        buf.push(b"%d" % i, 1)
    assert until(lambda: (link.service() or True) and buf.empty())
    mosquitto.stop()
    for i in range(10, 20):
        buf.push(b"%d" % i, 1)
    assert until(lambda: (link.service() or True) and not link.up)
    assert until(lambda: (link.service() or True) and link.attempts >= 3, timeout=10)  # backing off
    assert link.backoff_ms > 0
    mosquitto.start()
    assert until(lambda: (link.service() or True) and buf.empty(), timeout=20)
    assert statuses[0] == "boot" and "reconnect" in statuses
    assert link.connects == 2 and buf.acked_samples == 20
    client.disconnect()


@pytest.mark.services
def test_a_payload_in_pieces_arrives_as_one_message(mosquitto: services.Mosquitto) -> None:
    # How a batch is sent from flash: its pieces queued as they are, no run of the whole size needed.
    w = Watcher(mosquitto.host, mosquitto.port, "fw/#")
    acked: list[int] = []
    c = connected_client(mosquitto.host, mosquitto.port, on_puback=acked.append)
    pieces = [b'{"samples":[', b"1", b"", b",2", b"]}"]
    c.publish("fw/pieces", pieces, qos=1)
    c.publish("fw/after", b"next", qos=1)
    assert until(lambda: len(acked) == 2, c)
    assert w.get() == ("fw/pieces", b'{"samples":[1,2]}', False)
    assert w.get() == ("fw/after", b"next", False)
    c.disconnect()
    w.close()


@pytest.mark.services
def test_discovery_waits_until_the_backlog_in_flash_is_delivered(
    mosquitto: services.Mosquitto, tmp_path: Path
) -> None:
    """After an outage the backfill goes first and the extra retained messages (Home Assistant
    discovery) after it: built beside the backfill they took the heap's larger free runs (esp32
    profile, MicroPython 1.27.0 unix port, fixed heap)."""
    buf = Buffer(ram_bytes=1, flash_bytes=1 << 20, segment_bytes=8192, directory=str(tmp_path))
    clk = {"sync": "ntp", "age": 1.0, "off": 0.0, "err": 1.0, "ppm": 0.0, "steps": 0}
    for i in range(6):
        rows = [
            encode.row({"s": i * 40 + k, "t": 1_763_709_600_000 + k, "c": "p", "W": 230.5}) for k in range(40)
        ]
        buf.push(encode.batch("lnk", 1, clk, rows), 40)  # spilled to flash at once, packed compact
    assert buf.counts()["flash"] == 240
    w = Watcher(mosquitto.host, mosquitto.port, "#")
    client = mqtt.MQTTClient("fw-link-flash", mosquitto.host, mosquitto.port)

    def extra() -> Iterator[tuple[str, bytes]]:
        # Built only when asked for, as discovery's messages are; by then flash must be empty.
        assert buf.flash_used == 0 and not buf.has_unsent(), buf.counts()
        yield "disc-test/lnk/config", b"discovery"

    link = Link(client, buf, "lnk", lambda s, r: b"{}", lambda: b"{}", inflight=2, extra_retained=extra)
    got: list[str] = []

    def delivered() -> bool:
        link.service()
        while not w.msgs.empty():
            topic = w.msgs.get()[0]
            if "lnk" in topic.split("/"):
                got.append(topic)
        return "disc-test/lnk/config" in got

    assert until(delivered)
    samples = [i for i, t in enumerate(got) if t.endswith("/samples")]
    assert len(samples) == 6 and got.index("disc-test/lnk/config") > max(samples), got
    assert buf.empty() and buf.acked_samples == 240
    client.disconnect()
    w.close()
