"""The collector's broker setting keeps the address it was given: resolving the configuration writes
it back in a form that reads the same again."""

from __future__ import annotations

from pathlib import Path

import pytest

from wattbench.config import CollectorConfig, ConfigError


@pytest.mark.parametrize(
    "given,host,port,written",
    [
        ("[::1]:1884", "::1", 1884, "[::1]:1884"),
        ("mqtt://[2001:db8::5]:1999", "2001:db8::5", 1999, "[2001:db8::5]:1999"),
        ("::1", "::1", 1883, "[::1]:1883"),
        ("broker.lab", "broker.lab", 1883, "broker.lab:1883"),
    ],
)
def test_the_collector_keeps_the_port_of_an_ipv6_broker(
    tmp_path: Path, given: str, host: str, port: int, written: str
) -> None:
    """The resolved configuration used to write "[::1]:1884" back as "::1:1884", which then read as
    the host "::1:1884" on port 1883."""
    cfg = CollectorConfig(broker=given, state_dir=str(tmp_path)).resolved()
    assert (cfg.host, cfg.port, cfg.broker) == (host, port, written)
    assert cfg.resolved().broker == written


def test_the_collector_reads_mqtts_with_its_default_port(tmp_path: Path) -> None:
    """mqtts:// used to be refused ("port '//broker.lab' is not a number")."""
    cfg = CollectorConfig(broker="mqtts://broker.lab", state_dir=str(tmp_path)).resolved()
    assert (cfg.host, cfg.port, cfg.broker) == ("broker.lab", 8883, "mqtts://broker.lab:8883")


@pytest.mark.parametrize("given", ["[broker.lab]:1883", "[::1]:", "[::1", "host:+80", "ssl://broker.lab"])
def test_addresses_it_used_to_guess_at_are_refused(tmp_path: Path, given: str) -> None:
    with pytest.raises(ConfigError, match="broker"):
        CollectorConfig(broker=given, state_dir=str(tmp_path)).resolved()
