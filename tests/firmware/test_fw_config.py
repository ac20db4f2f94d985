"""Configuration loading: the shipped example and board profiles are valid, and mistakes produce an
error that names the key."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from wattbench_fw import config
from wattbench_fw.errors import ConfigError
from wattbench_fw.meters import TABLE

FIRMWARE = Path(__file__).resolve().parents[2] / "firmware"
EXAMPLE = json.loads((FIRMWARE / "config.example.json").read_text())
ESP32 = str(FIRMWARE / "wattbench_fw" / "boards" / "esp32.json")
PICOW = str(FIRMWARE / "wattbench_fw" / "boards" / "picow.json")


def test_example_is_valid_on_esp32() -> None:
    cfg = config.load(EXAMPLE, ESP32)
    assert cfg["board"] == "esp32"
    assert cfg["buses"]["uart2"]["tx"] == 17  # from the profile
    assert cfg["buffer"]["ram_bytes"] == 2048  # profile overrides the default
    assert cfg["buffer"]["segment_bytes"] == 65536
    assert cfg["broker"]["client_id"] == "wattbench-bench-a"
    assert cfg["channels"][1]["agg"] == 10 and cfg["channels"][0]["cal"]["gain"] == 1.0


def test_picow_profile_with_its_own_bus_names() -> None:
    user = copy.deepcopy(EXAMPLE)
    user["board"] = "picow"
    user["channels"][0]["bus"] = "uart0"
    cfg = config.load(user, PICOW)
    assert cfg["buses"]["i2c0"]["sda"] == 4 and cfg["led"] == "LED"


def test_every_driver_sample_config_is_valid() -> None:
    buses = {
        "uart2": {"type": "uart", "id": 2},
        "i2c0": {"type": "i2c", "id": 0, "scl": 5, "sda": 4},
        "ow": {"type": "onewire", "pin": 4},
        "rs232": {"type": "uart", "id": 1},
    }
    samples = sorted(FIRMWARE.glob("wattbench_fw/*/*/sample.json"))
    assert len(samples) == len(TABLE)  # one per meter kind
    for path in samples:
        ch = json.loads(path.read_text())
        config.load({"dev": "x", "broker": {"host": "b"}, "buses": buses, "channels": [ch]})
        assert (path.parent / "README.md").is_file(), path.parent


def broken(**changes: Any) -> dict[str, Any]:
    cfg = copy.deepcopy(EXAMPLE)
    for dotted, value in changes.items():
        node: Any = cfg
        parts = dotted.split("__")
        for p in parts[:-1]:
            node = node[int(p)] if p.isdigit() else node[p]
        last = parts[-1]
        if value is KeyError:
            del node[last]
        elif last.isdigit():
            node[int(last)] = value
        else:
            node[last] = value
    return cfg


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        (broken(dev="Bench A"), r"^dev: device id"),
        (broken(channels__0__meter="pzem"), r"channels\[0\]\.meter: must be one of"),
        (broken(channels__0__hz=0), r"channels\[0\]\.hz: must be a number in \(0, 10000\]"),
        (broken(channels__0__bus="uart9"), r"channels\[0\]\.bus: 'uart9' is not defined"),
        (broken(channels__2__bus="uart2"), r"channels\[2\]\.bus: sht3x needs a i2c bus"),
        (broken(channels__1__c="psu1"), r"duplicate channel name 'psu1'"),
        (broken(channels__0__cal={"gain": 0, "offset": 0}), r"channels\[0\]\.cal\.gain"),
        (broken(channels__0__colour="red"), r"channels\[0\]: unknown key 'colour'"),
        (broken(brokr={"host": "x"}), r"config: unknown key 'brokr'"),
        (broken(broker__host=KeyError), r"broker\.host: must be a non-empty string"),
        # A port or a scheme in the host name resolved nowhere, and the board retried it for ever.
        (
            broken(broker__host="127.0.0.1:18831"),
            r"^broker\.host: '127\.0\.0\.1:18831' holds a port: give the port as broker\.port$",
        ),
        (broken(broker__host="mqtt://b"), r"^broker\.host: 'mqtt://b' is not a host name or address"),
        (broken(broker__host="b c"), r"^broker\.host: 'b c' is not a host name or address"),
        # A label the resolver's IDNA codec cannot encode: the board retried it for ever.
        (
            broken(broker__host="broker..lab"),
            r"^broker\.host: 'broker\.\.lab': an empty label in the host name",
        ),
        (
            broken(ntp={"host": "a" * 64 + ".org"}),
            r"^ntp\.host: .*: a label of the host name is longer than 63",
        ),
        (
            broken(ntp={"host": "pool.ntp.org:123"}),
            r"^ntp\.host: .* holds a port: give the port as ntp\.port$",
        ),
        (broken(wifi=KeyError), r"wifi\.ssid: required on board esp32"),
        (broken(hmac_key="abc"), r"hmac_key: must be an even number of hex digits"),
        (broken(channels=[]), r"channels: must be a list of 1 to 16"),
        (broken(batch={"max_rows": 900}), r"batch\.max_rows"),
        (broken(buses={"u1": {"type": []}}), r"^buses\.u1\.type: must be one of .*, got a list$"),
        (broken(channels__0__bus=["uart2"]), r"^channels\[0\]\.bus: a list is not defined in buses"),
        (
            broken(channels__1__opts={"shunt_ohm": 0}),
            r"^channels\[1\]\.opts: ina228: shunt_ohm must be a number",
        ),
        (broken(channels__1__opts={"max_a": 10**400}), r"max_a must be .*, got an integer of more than 15"),
        (
            broken(channels__0__opts={"variant": "16A"}),
            r"^channels\[0\]\.opts: pzem004t: variant must be one",
        ),
        (broken(channels__0__opts={"adr": 1}), r"^channels\[0\]\.opts: pzem004t options adr: "),
    ],
)
def test_errors_name_the_key(cfg: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config.load(cfg, ESP32)


@pytest.mark.parametrize("host", ["broker.lan", "10.0.0.5", "::1", "fe80::1%eth0", "b"])
def test_broker_hosts_that_are_names_or_addresses_pass(host: str) -> None:
    cfg = broken(broker__host=host)
    assert config.load(cfg, ESP32)["broker"]["host"] == host


def test_hmac_key_value_never_appears_in_errors() -> None:
    secret = "Z" * 40
    with pytest.raises(ConfigError) as info:
        config.load(broken(hmac_key=secret), ESP32)
    assert secret not in str(info.value)


def test_files_and_bad_json(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(EXAMPLE))
    assert config.load(str(path), ESP32)["dev"] == "bench-a"
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        config.load(str(path), ESP32)
    with pytest.raises(ConfigError, match="not found"):
        config.load(str(tmp_path / "missing.json"))


@pytest.mark.parametrize(
    "text",
    [b"[" * 100_000, b'{"dev": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", b"{" + b'"a": {' * 50_000],
    ids=["open-lists", "deep-valid-list", "open-objects"],
)
def test_deeply_nested_file_is_a_config_error(tmp_path: Path, text: bytes) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(text)
    with pytest.raises(ConfigError, match=r"config file .*(not valid JSON|nested too deeply|nests deeper)"):
        config.load(str(path), ESP32)


def test_nesting_beyond_any_real_configuration_is_refused(tmp_path: Path) -> None:
    deep: Any = 1
    for _ in range(config.MAX_DEPTH):
        deep = [deep]
    cfg = broken(channels__0__opts={"addr": deep})
    with pytest.raises(ConfigError, match=f"nests deeper than {config.MAX_DEPTH} levels"):
        config.load(cfg, ESP32)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(ConfigError, match=f"config file {path} nests deeper"):
        config.load(str(path), ESP32)


PSRAM = str(FIRMWARE / "wattbench_fw" / "boards" / "esp32-psram.json")


def _psram_config(**buses: Any) -> dict[str, Any]:
    user = copy.deepcopy(EXAMPLE)
    user["board"] = "esp32-psram"
    if buses:
        user["buses"] = buses
    return user


def test_psram_board_refuses_the_pins_that_hold_its_psram() -> None:
    # GPIO16/17 are wired to the PSRAM on WROVER modules (hardware/pinmap.md): a UART there would
    # corrupt memory, so the esp32 profile's UART2 pins cannot simply be inherited.
    with pytest.raises(ConfigError, match=r"buses\.uart2\.(tx|rx).*GPIO1[67].*PSRAM"):
        config.load(_psram_config(uart2={"tx": 17, "rx": 16}), PSRAM)
    with pytest.raises(ConfigError, match=r"buses\.uart2\.tx: required"):
        config.load(_psram_config(), PSRAM)  # the profile leaves the pins for the user to choose
    with pytest.raises(ConfigError, match=r"led.*GPIO16"):
        user = _psram_config(uart2={"tx": 25, "rx": 26})
        user["led"] = 16
        config.load(user, PSRAM)


def test_psram_board_with_free_pins_is_valid() -> None:
    cfg = config.load(_psram_config(uart2={"tx": 25, "rx": 26}), PSRAM)
    assert cfg["buses"]["uart2"]["tx"] == 25 and cfg["buffer"]["ram_bytes"] == 1048576


def test_example_does_not_put_two_meters_of_one_supply_in_one_node() -> None:
    """Power channels of one node are summed: an AC meter at the wall and a DC meter on a rail behind the
    same supply would count that rail twice. The example must be safe to copy."""
    by_node: dict[str, list[str]] = {}
    for ch in EXAMPLE["channels"]:
        if ch.get("role") == "power":
            by_node.setdefault(ch.get("node") or EXAMPLE["dev"], []).append(ch["meter"])
    for node, meters in by_node.items():
        kinds = {"ac" if m in ("pzem004t", "wt300") else "dc" for m in meters}
        assert len(kinds) == 1, f"node {node} sums AC and DC meters: {meters}"
