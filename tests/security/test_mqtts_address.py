"""mqtts:// in a broker address means TLS, verified: with the site CA the connection is made, without a
CA file the broker is checked against the system's CAs, so a broker they do not vouch for is refused."""

from __future__ import annotations

import pytest

from wattbench.mqttconn import BrokerError, Settings, open_client

pytestmark = pytest.mark.services


def test_mqtts_address_with_the_site_ca_connects(secure_broker, credentials) -> None:  # type: ignore[no-untyped-def]
    broker = secure_broker(tls=True)
    settings = Settings.parse(
        f"mqtts://127.0.0.1:{broker.port}",
        "wattbench-collector",
        credentials["wattbench-collector"],
        tls_ca=str(broker.pki["ca"]),
    )
    client = open_client(settings, "mqtts-site-ca")
    client.disconnect()
    client.loop_stop()


def test_mqtts_address_without_a_ca_file_verifies_the_broker(secure_broker, credentials) -> None:  # type: ignore[no-untyped-def]
    broker = secure_broker(tls=True)
    settings = Settings.parse(
        f"mqtts://127.0.0.1:{broker.port}", "wattbench-collector", credentials["wattbench-collector"]
    )
    with pytest.raises(BrokerError, match="certificate verify failed"):
        open_client(settings, "mqtts-system-cas")


def test_plain_address_to_the_tls_port_is_not_tls(secure_broker, credentials) -> None:  # type: ignore[no-untyped-def]
    """Port 8883-style listeners are not guessed from the number: without mqtts:// or a CA it is plain."""
    broker = secure_broker(tls=True)
    settings = Settings.parse(
        f"127.0.0.1:{broker.port}", "wattbench-collector", credentials["wattbench-collector"]
    )
    assert not settings.tls
    with pytest.raises(BrokerError):
        open_client(settings, "plain-to-tls", timeout=3)
