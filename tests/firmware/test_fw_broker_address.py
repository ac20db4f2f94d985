"""The firmware's host mode reads broker addresses by the same rules as the host tools: both are held
to schema/vectors/broker-address.json, and the firmware shares the rules, not the code."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

import wattbench_schema as contract
from wattbench_fw import host
from wattbench_fw.errors import ConfigError
from wattbench_fw.host import parse_broker, sim_config

VECTORS = contract.broker_address_vectors()


@pytest.mark.parametrize("vec", VECTORS, ids=lambda v: repr(v["input"]))
def test_broker_address_vector(vec: dict[str, Any]) -> None:
    if "error" in vec:
        with pytest.raises(ConfigError) as info:
            host.broker_address(vec["input"])
        assert vec["error"] in str(info.value), vec["why"]
        assert "\n" not in str(info.value)
        with pytest.raises(ConfigError):
            parse_broker(vec["input"])
        return
    assert host.broker_address(vec["input"]) == (vec["host"], vec["port"], vec["tls"]), vec["why"]
    assert parse_broker(vec["input"]) == (vec["host"], vec["port"])


def test_parse_broker_reads_urls_and_refuses_what_it_used_to_guess() -> None:
    """It used to take "mqtt://broker.lab:1884" as the host "mqtt://broker.lab:1884" on port 1883, and
    "[::1]x" as ::1 on port 1883."""
    assert parse_broker("mqtt://broker.lab:1884") == ("broker.lab", 1884)
    for text in ("[::1]x", "broker.lab:99999", ""):
        with pytest.raises(ConfigError):
            parse_broker(text)


def test_sim_config_turns_tls_on_for_mqtts() -> None:
    broker = sim_config(broker="mqtts://[::1]")["broker"]
    assert (broker["host"], broker["port"], broker["tls"]) == ("::1", 8883, True)
    assert sim_config(broker="127.0.0.1:1884")["broker"]["tls"] is False
    assert sim_config(broker=("10.0.0.5", 1999))["broker"]["port"] == 1999


def test_the_firmware_does_not_import_the_host_tools() -> None:
    code = (
        "import sys, wattbench_fw.host as h; h.broker_address('[::1]:1884'); "
        "bad = sorted(m for m in sys.modules if m == 'wattbench' or m.startswith('wattbench.')); "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
