"""Smallest inputs for the crashes the fuzz targets found, one test each.

Each test states the behaviour the parser documents. While a crash is unfixed its test carries a
strict xfail mark; the fix turns that into a failure of this file, and then the mark goes, and the
matching entry in crashes.KNOWN with it. Tests without a mark are crashes already fixed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import wattbench_schema as contract
from wattbench_devkit.fuzz import targets as t

SAMPLES_TOPIC = "wattbench/v1/dev/bench-a/samples"
PHASE_TOPIC = "wattbench/v1/run/20261121T072000Z-a1b2/phase"
LONG_INT = b"1" * 4301  # one digit past CPython's int/str conversion limit


def xfail(reason: str):  # type: ignore[no-untyped-def]
    return pytest.mark.xfail(strict=True, reason=f"crash: {reason}")


# ---------------------------------------------------------------- MQTT payloads (collector)


def test_strict_loads_long_integer_is_a_decode_error() -> None:
    with pytest.raises(contract.DecodeError):
        contract.strict_loads(LONG_INT)


def test_validator_rejects_long_integer_as_decode() -> None:
    out = t.validator().check(SAMPLES_TOPIC, b'{"v":' + LONG_INT + b"}", t.RECV_LATE_MS)
    assert out.reason == "decode"


def test_validator_rejects_deeply_nested_version() -> None:
    raw = b'{"v":' + b"[" * 1000 + b"]" * 1000 + b"}"
    out = t.validator().check(SAMPLES_TOPIC, raw, t.RECV_LATE_MS)
    assert out.reason in ("version", "schema", "decode")


def test_accepted_text_with_lone_surrogate_survives_the_spool_encoding() -> None:
    from wattbench.ingest import records
    from wattbench.ingest.pipeline import Pipeline

    raw = (
        b'{"v":1,"run":"20261121T072000Z-a1b2","n":30,"t":1763709630000,"event":"run_abort",'
        b'"phase":"run","kind":"run","reason":"\\ud800"}'
    )
    p = Pipeline("collector-1", validator=t.validator())
    p.handle(PHASE_TOPIC, raw, t.RECV_LATE_MS)
    batch, _ = p.take()
    records.encode(batch.records)


def test_integer_beyond_64_bits_is_rejected_and_the_reject_spools() -> None:
    from wattbench.ingest import records
    from wattbench.ingest.pipeline import Pipeline

    raw = (
        b'{"v":1,"dev":"bench-b","state":"online","t":1763709600000,"reason":"reconnect",'
        b'"buf":{"ram":2400,"flash":18446744073709551616,"dropped":12}}'
    )
    p = Pipeline("collector-1", validator=t.validator())
    p.handle("wattbench/v1/dev/bench-b/status", raw, t.RECV_LATE_MS)
    batch, _ = p.take()
    records.encode(batch.records)


# ---------------------------------------------------------------- collector configuration


def _load_collector(tmp_path: Path, text: bytes, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    from wattbench import config

    path = tmp_path / "collector.toml"
    path.write_bytes(text)
    return config.load_config(path, env=env or {}).resolved()


@pytest.mark.parametrize(
    "text",
    [
        b'broker = "\xff"\n',
        b"keepalive_s = " + LONG_INT + b"\n",
        b"broker = " + b"[" * 2000 + b"]" * 2000 + b"\n",
        b"keepalive_s = inf\n",
        b'state_dir = "~no-such-user-wb/x"\n',
        b'mqtt_password_file = "a\\u0000b"\n',
        b"health_period_s = nan\n",
    ],
    ids=["not-utf8", "long-int", "deep-array", "int-inf", "unknown-user", "nul-in-path", "nan-period"],
)
def test_collector_config_errors_are_config_errors(tmp_path: Path, text: bytes) -> None:
    from wattbench.config import ConfigError

    with pytest.raises(ConfigError):
        _load_collector(tmp_path, text)


def test_collector_binary_secret_file_is_a_config_error(tmp_path: Path) -> None:
    from wattbench.config import ConfigError

    secret = tmp_path / "secret"
    secret.write_bytes(bytes(range(256)))
    with pytest.raises(ConfigError):
        _load_collector(tmp_path, b"", {"WATTBENCH_MQTT_PASSWORD_FILE": str(secret)})


def test_hmac_key_file_deep_nesting_is_a_value_error(tmp_path: Path) -> None:
    from wattbench.ingest.auth import Verifier

    path = tmp_path / "keys.json"
    path.write_bytes(b"[" * 100_000)
    with pytest.raises(ValueError):
        Verifier.from_file(path)


# ---------------------------------------------------------------- firmware configuration


def _fw_config(tmp_path: Path, doc: object | bytes):  # type: ignore[no-untyped-def]
    from wattbench_fw import config

    path = tmp_path / "config.json"
    path.write_bytes(doc if isinstance(doc, bytes) else json.dumps(doc).encode())
    return config.load(str(path))


def _with(**changes: object) -> dict[str, object]:
    doc = json.loads(json.dumps(t.FW_BASE_CONFIG))
    doc.update(changes)
    return doc


@pytest.mark.parametrize(
    "doc",
    [
        pytest.param(b"[" * 100_000, id="deep-nesting"),
        pytest.param(_with(buses={"u1": {"type": []}}), id="bus-type-list"),
        pytest.param(
            _with(channels=[{"c": "p", "meter": "pzem004t", "hz": 1, "bus": []}]), id="channel-bus-list"
        ),
    ],
)
def test_firmware_config_errors_are_config_errors(tmp_path: Path, doc: object) -> None:
    from wattbench_fw.errors import ConfigError

    with pytest.raises(ConfigError):
        _fw_config(tmp_path, doc)


def test_firmware_base_config_loads(tmp_path: Path) -> None:
    cfg = _fw_config(tmp_path, t.FW_BASE_CONFIG)
    assert [ch["c"] for ch in cfg["channels"]] == ["psu1", "dc", "inlet", "sim"]


@pytest.mark.parametrize(
    "kind,opts",
    [
        pytest.param("ina226", {"shunt_ohm": 0}, id="ina226-zero-shunt"),
        pytest.param("ina226", {"max_a": 0}, id="ina226-zero-range"),
        pytest.param("ina228", {"shunt_ohm": float("inf")}, id="ina228-infinite-shunt"),
        pytest.param("ina226", {"max_a": 10**400}, id="ina226-huge-range"),
        pytest.param("ina228", {"max_a": 10**400}, id="ina228-huge-range"),
        pytest.param("sim", {"watts": 10**400}, id="sim-huge-power"),
        pytest.param(
            "ina226", {"current_lsb": 10**400, "shunt_ohm": "0.002"}, id="ina226-huge-lsb-string-shunt"
        ),
    ],
)
def test_meter_options_from_the_config_give_a_clear_error(kind: str, opts: dict[str, object]) -> None:
    from wattbench_fw import meters

    with pytest.raises(ValueError):  # ConfigError is a ValueError, and so are the drivers' own checks
        meters.create(kind, None, opts)


# ---------------------------------------------------------------- appliance state files


@pytest.mark.parametrize(
    "slot",
    [
        pytest.param(b'{"gen": 1, "boot": "x"}', id="boot-not-a-number"),
        pytest.param(b'{"gen": 1e999}', id="gen-infinite"),
        pytest.param(b'{"gen": "1", "boot": 3}', id="gen-a-string"),
        pytest.param(b'{"gen": 1, "energy": [1]}', id="energy-a-list"),
        pytest.param(b'{"gen": 1, "energy": {"psu1": [1]}}', id="energy-entry-short"),
        pytest.param(b'{"gen": 1, "seq": -5}', id="negative-seq"),
        pytest.param(b'{"gen": 1, "energy": {"psu1": [-5, 1, -1]}}', id="energy-negative"),
        pytest.param(b'{"gen": 1, "energy": {"psu1": [1e999, 1, 1e999]}}', id="energy-infinite"),
    ],
)
def test_damaged_state_file_does_not_stop_the_boot(slot: bytes) -> None:
    assert t.run_state((slot, None)) == "ok"
