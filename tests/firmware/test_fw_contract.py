"""The firmware keeps a copy of the contract facts it needs (a board cannot import schema/): those it
runs with in contract.py, those only its configuration check needs in contract_boot.py. Every one of
them must equal what wattbench_schema says."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

import wattbench_schema as schema
from wattbench_fw import contract, contract_boot, meters


def test_flags_match_schema() -> None:
    for name in (
        "MISSED",
        "CRC",
        "OVER_RANGE",
        "CLOCK_STEP",
        "UNSYNCED",
        "REVERSE",
        "RANGE_CHANGE",
        "PARTIAL",
        "SENSOR_ERROR",
    ):
        assert getattr(contract, "FLAG_" + name) == getattr(schema, "FLAG_" + name), name
    flags = schema.load_schema("common")["$defs"]["flags"]
    assert contract_boot.FLAGS_MAX == flags["maximum"]
    assert contract.FLAGS_WITHOUT_VALUES == schema.FLAG_MISSED | schema.FLAG_CRC | schema.FLAG_SENSOR_ERROR


def test_quantities_and_bounds_match_schema() -> None:
    assert contract.QUANTITIES == schema.QUANTITIES
    sample = schema.load_schema("samples")["$defs"]["sample"]["properties"]
    for key, (lo, hi) in contract.BOUNDS.items():
        assert sample[key]["minimum"] == lo, key
        assert sample[key]["maximum"] == hi, key
    assert set(contract.ROW_KEYS) | {"s", "t", "c", "f"} == set(sample)
    assert contract_boot.N_MAX == sample["n"]["maximum"]
    assert contract_boot.SEQ_MAX == sample["s"]["maximum"]
    common = schema.load_schema("common")["$defs"]
    assert contract_boot.UTC_MS_MIN == common["utc_ms"]["minimum"]
    assert contract_boot.UTC_MS_MAX == common["utc_ms"]["maximum"]
    assert contract_boot.BOOT_MAX == schema.load_schema("samples")["properties"]["boot"]["maximum"]


def test_enums_match_schema() -> None:
    common = schema.load_schema("common")["$defs"]
    assert list(contract_boot.CLOCK_SYNC) == common["clock"]["properties"]["sync"]["enum"]
    meta = schema.load_schema("meta")
    chan = meta["properties"]["channels"]["items"]["properties"]
    # The firmware's meters, then the smart-plug formats the collector bridges (never the firmware's)
    assert list(meters.KINDS) + list(schema.bridged_kinds()) == chan["meter"]["enum"]
    assert list(contract_boot.ROLES) == chan["role"]["enum"]
    assert list(contract_boot.BOARDS) == meta["properties"]["board"]["enum"]
    assert contract_boot.MAX_CHANNELS == meta["properties"]["channels"]["maxItems"]
    status = schema.load_schema("status")["properties"]
    assert list(contract_boot.STATUS_REASONS) == status["reason"]["enum"]
    assert contract_boot.FW_MAX_LEN == status["fw"]["maxLength"]
    assert contract.VERSION == schema.VERSION


def test_topics_match_schema() -> None:
    topics = schema.topics()
    for name in ("samples", "status", "meta"):
        spec = topics["topics"][name]
        assert getattr(contract, "TOPIC_" + name.upper()) == spec["pattern"]
        assert contract_boot.TOPIC_QOS_RETAIN[name] == (spec["qos"], spec["retain"])
        assert contract.topic(name, "bench-a") == schema.topic_for(name, dev="bench-a")
    assert topics["topics"]["status"]["will"] == {"state": "offline"}
    assert contract.MAX_BATCH_SAMPLES == topics["limits"]["max_batch_samples"]
    assert contract.MAX_PAYLOAD_BYTES == topics["limits"]["max_payload_bytes"]
    samples = schema.load_schema("samples")["properties"]["samples"]
    assert contract.MAX_BATCH_SAMPLES == samples["maxItems"]


def test_id_patterns_match_schema() -> None:
    common = schema.load_schema("common")["$defs"]
    assert contract_boot.DEVICE_ID_PATTERN == common["device_id"]["pattern"]
    assert contract_boot.CHANNEL_ID_PATTERN == common["channel_id"]["pattern"]


ID_CHARS = st.text(alphabet="abcxyz019_-.A/ +é", max_size=40)


@given(ID_CHARS)
def test_hand_written_id_checks_agree_with_the_schema_regex(text: str) -> None:
    common = schema.load_schema("common")["$defs"]
    dev_rx = re.compile(common["device_id"]["pattern"])
    ch_rx = re.compile(common["channel_id"]["pattern"])
    # JSON Schema patterns are ECMA-262: "$" does not match before a trailing newline.
    assert contract_boot.valid_device_id(text) == bool(dev_rx.fullmatch(text))
    assert contract_boot.valid_channel_id(text) == bool(ch_rx.fullmatch(text))
