"""MQTT over TLS against a real Mosquitto with a CA generated for the test."""

from __future__ import annotations

import ssl
import time

import pytest

from .test_broker_acl import Client, accepted

pytestmark = pytest.mark.services


def test_tls_with_trusted_ca_connects_and_delivers(secure_broker, credentials) -> None:  # type: ignore[no-untyped-def]
    broker = secure_broker(tls=True)
    ca = str(broker.pki["ca"])
    collector = Client(broker, "wattbench-collector", credentials["wattbench-collector"], tls_ca=ca)
    assert collector.wait_connected() == 0
    collector.subscribe("wattbench/v1/#")
    device = Client(broker, "bench-a", credentials["bench-a"], tls_ca=ca)
    assert device.wait_connected() == 0
    assert accepted(device.publish("wattbench/v1/dev/bench-a/samples", b"over tls"))
    time.sleep(0.5)
    assert collector.received == [("wattbench/v1/dev/bench-a/samples", b"over tls")]
    device.close()
    collector.close()


def test_tls_refuses_a_client_that_does_not_trust_the_broker(secure_broker, credentials, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from .conftest import make_ca

    broker = secure_broker(tls=True)
    other = make_ca(tmp_path / "other", "other-ca")
    ctx = ssl.create_default_context(cafile=str(other["ca"]))
    import socket

    with (
        socket.create_connection((broker.host, broker.port), timeout=5) as raw,
        pytest.raises(ssl.SSLCertVerificationError),
    ):
        ctx.wrap_socket(raw, server_hostname="127.0.0.1")


def test_plain_mqtt_is_not_spoken_on_the_tls_port(secure_broker, credentials) -> None:  # type: ignore[no-untyped-def]
    broker = secure_broker(tls=True)
    client = Client(broker, "bench-a", credentials["bench-a"])
    assert not client.connected.wait(3) or client.connect_rc.is_failure  # type: ignore[union-attr]
    client.close()


def _host_appliance(broker, credentials, ca: str):  # type: ignore[no-untyped-def]
    from wattbench_fw.host import HostAppliance, sim_config

    cfg = sim_config(dev="bench-a", broker=f"{broker.host}:{broker.port}", hz=5)
    cfg["broker"].update(user="bench-a", password=credentials["bench-a"], tls=True, ca=ca)
    return HostAppliance(cfg)


def test_host_appliance_speaks_tls_and_verifies_the_broker(secure_broker, credentials, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from .conftest import make_ca

    broker = secure_broker(tls=True)
    app = _host_appliance(broker, credentials, str(broker.pki["ca"])).start()
    try:
        assert app.wait_connected(20), app.counters()
    finally:
        app.stop(timeout=5)

    other = make_ca(tmp_path / "other", "other-ca")
    app = _host_appliance(broker, credentials, str(other["ca"])).start()
    try:
        assert not app.wait_connected(3), "a broker the CA does not vouch for is refused"
        assert "TLS handshake failed" in (app.counters()["link_error"] or "")
    finally:
        app.stop(timeout=1, drain=False)


def test_host_appliance_with_a_missing_ca_file_is_a_config_error(
    secure_broker, credentials, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    from wattbench_fw.errors import ConfigError

    broker = secure_broker(tls=True)
    with pytest.raises(ConfigError, match=r"broker\.ca"):
        _host_appliance(broker, credentials, str(tmp_path / "missing.crt"))
