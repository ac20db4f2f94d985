"""Configuration loaders: any document, any bytes give a loaded configuration or the module's own
error with a message. Covers the appliance config, the collector config (TOML, environment,
secret files), the HMAC key file and the meter options a config hands to the drivers."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from wattbench_devkit.fuzz import targets as t
from wattbench_devkit.fuzz.crashes import tolerate
from wattbench_devkit.fuzz.mutate import DrawSource

from .profiles import fuzz

json_docs = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=6),
    max_leaves=40,
)
fw_keys = st.sampled_from(
    [
        "dev",
        "board",
        "broker",
        "buses",
        "channels",
        "batch",
        "buffer",
        "ntp",
        "wifi",
        "backoff",
        "status_s",
        "seq_block",
        "wdt_ms",
        "flash_dir",
        "x",
    ]
)


@fuzz(ci=500)
@given(json_docs)
def test_firmware_config_any_json_document(doc: object) -> None:
    tolerate(t.run_fw_config, (json.dumps(doc).encode(), None))


@fuzz(ci=500)
@given(st.dictionaries(fw_keys, json_docs, max_size=6))
def test_firmware_config_known_keys_any_values(changes: dict[str, object]) -> None:
    doc = {**t.FW_BASE_CONFIG, **changes}
    tolerate(t.run_fw_config, (json.dumps(doc).encode(), None))


@fuzz(ci=800)
@given(st.data())
def test_firmware_config_mutated(data: st.DataObject) -> None:
    tolerate(t.run_fw_config, t.gen_fw_config(DrawSource(data)))


@fuzz(ci=300)
@given(st.binary(max_size=200))
def test_firmware_config_any_bytes(raw: bytes) -> None:
    tolerate(t.run_fw_config, (raw, None))


@fuzz(ci=500)
@given(json_docs)
def test_collector_config_any_json_document_as_toml(doc: object) -> None:
    tolerate(t.run_collector_config, (t.to_toml(doc), {}))


@fuzz(ci=800)
@given(st.data())
def test_collector_config_mutated_with_environment(data: st.DataObject) -> None:
    tolerate(t.run_collector_config, t.gen_collector_config(DrawSource(data)))


@fuzz(ci=300)
@given(st.binary(max_size=200))
def test_collector_config_any_bytes(raw: bytes) -> None:
    tolerate(t.run_collector_config, (raw, {}))


@fuzz(ci=500)
@given(json_docs)
def test_hmac_key_file_any_json_document(doc: object) -> None:
    tolerate(t.run_keyfile, json.dumps(doc).encode())


@fuzz(ci=500)
@given(st.data())
def test_hmac_key_file_mutated(data: st.DataObject) -> None:
    tolerate(t.run_keyfile, t.gen_keyfile(DrawSource(data)))


@fuzz(ci=1000)
@given(st.data())
def test_meter_options_from_the_config(data: st.DataObject) -> None:
    tolerate(t.run_meter_opts, t.gen_meter_opts(DrawSource(data)))


def test_base_configs_load() -> None:
    assert t.run_fw_config((json.dumps(t.FW_BASE_CONFIG).encode(), None)) == "ok"
    assert t.run_collector_config((t.to_toml(t.COLLECTOR_BASE_CONFIG), {})) == "ok"
