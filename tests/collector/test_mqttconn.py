"""The one broker-address parser and client setup of the host tools (wattbench.mqttconn), held to the
shared vectors in schema/vectors/broker-address.json; no broker needed."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

import wattbench_schema as contract
from wattbench.config import CollectorConfig, ConfigError
from wattbench.mqttconn import AddressError, BrokerAddress, Settings, make_client, parse_broker

VECTORS = contract.broker_address_vectors()


def _id(v: dict[str, Any]) -> str:
    return repr(v["input"])


@pytest.mark.parametrize("vec", VECTORS, ids=_id)
def test_broker_address_vector(vec: dict[str, Any]) -> None:
    if "error" in vec:
        with pytest.raises(AddressError) as info:
            parse_broker(vec["input"])
        message = str(info.value)
        assert vec["error"] in message, vec["why"]
        assert "\n" not in message, "a refusal is one line"
        return
    address = parse_broker(vec["input"])
    assert (address.host, address.port, address.tls) == (vec["host"], vec["port"], vec["tls"]), vec["why"]
    # The canonical form, which the collector writes back into its configuration, reads the same.
    assert parse_broker(str(address)) == address


def test_the_vectors_cover_every_rule() -> None:
    valid = [v for v in VECTORS if "error" not in v]
    assert any(v["tls"] for v in valid) and any(v["port"] == 8883 and not v["tls"] for v in valid)
    assert any(v["input"].startswith("[") for v in valid)
    assert any(":" in v["input"] and "[" not in v["input"] and "://" not in v["input"] for v in valid)
    assert len(VECTORS) - len(valid) >= 20


@pytest.mark.parametrize("vec", [v for v in VECTORS if "error" in v], ids=_id)
def test_a_bad_broker_option_is_a_usage_error(vec: dict[str, Any]) -> None:
    from wattbench.cli.options import broker_address

    with pytest.raises(argparse.ArgumentTypeError, match=vec["error"].replace(".", r"\.")):
        broker_address(vec["input"])


def test_the_collector_reads_an_mqtts_address_as_tls(tmp_path: Path) -> None:
    cfg = CollectorConfig(broker="mqtts://broker.lab", state_dir=str(tmp_path)).resolved()
    assert (cfg.host, cfg.port, cfg.broker) == ("broker.lab", 8883, "mqtts://broker.lab:8883")
    assert cfg.mqtt_settings().tls
    plain = CollectorConfig(broker="broker.lab", state_dir=str(tmp_path)).resolved()
    assert not plain.mqtt_settings().tls
    assert CollectorConfig(broker="broker.lab", tls_ca="/etc/ca.pem").mqtt_settings().tls


def test_a_bad_collector_broker_names_the_broker(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"outside 1\.\.65535"):
        CollectorConfig(broker="broker.lab:70000", state_dir=str(tmp_path)).resolved()


def test_bracketed_ipv6_is_shown_with_brackets() -> None:
    assert BrokerAddress("::1", 1884).hostport == "[::1]:1884"
    assert str(BrokerAddress("broker.lab", 8883, tls=True)) == "mqtts://broker.lab:8883"


def test_client_setup_credentials_and_tls() -> None:
    settings = Settings.parse("mqtts://broker.lab", "bench-user", "s3cret")
    client = make_client(settings, "wb-test")
    # paho keeps these private; reading them is the only way to see the setup without a broker.
    assert client._username == b"bench-user" and client._password == b"s3cret"
    assert client._ssl_context is not None, "mqtts:// connects with TLS"
    plain = make_client(Settings.parse("broker.lab"), "wb-test", username="named")
    assert plain._username == b"named" and plain._password is None and plain._ssl_context is None
    with pytest.raises(ValueError, match="protocol"):
        make_client(settings, "wb-test", protocol="4")


def test_sweep_sink_refuses_a_bad_address_in_one_line() -> None:
    from wattbench.sweep.publish import MqttSink, SinkError

    with pytest.raises(SinkError, match="not a number"):
        MqttSink("broker.lab:x", "wb-test")


def test_the_sweep_sink_says_once_when_its_broker_went_away(caplog: pytest.LogCaptureFixture) -> None:
    """With its broker gone mid-run, a sweep warned at every publish ("queued, not sent") and ended
    blaming silent channels, never naming the broker. The sink keeps the outage, warns once, and says
    it in one sentence for the sweep's last line."""
    import json
    import logging
    import time
    from pathlib import Path

    from wattbench.broker import EmbeddedBroker
    from wattbench.sweep.publish import MqttSink

    vector = json.loads(
        (Path(__file__).parents[2] / "schema/vectors/valid/phase_calibration_measure_end.json").read_text()
    )
    event = vector.get("payload", vector)
    broker = EmbeddedBroker().start()
    sink = MqttSink(broker.url, "wb-test-outage")
    try:
        sink.phase(event)
        assert sink.outage() is None
        broker.stop()
        deadline = time.monotonic() + 15
        while sink.outage() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        with caplog.at_level(logging.WARNING, logger="wattbench.sweep.publish"):
            for _ in range(3):
                sink.phase(event)
        said = sink.outage()
        assert said is not None and said.startswith(f"the MQTT broker at {broker.url} went away at ")
        assert said.endswith(
            "UTC and was not back by the end: phase events and power sent after it may be missing"
        )
        assert len([r for r in caplog.records if "not sent" in r.getMessage()]) <= 1
    finally:
        sink.close()
