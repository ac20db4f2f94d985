"""A sample batch vector travels through the real Mosquitto, the real Telegraf running the shipped
deploy/telegraf.conf, and the real InfluxDB, and comes back with every value, tag and timestamp intact."""

from __future__ import annotations

import time

import paho.mqtt.client as mqtt
import pytest

import wattbench_schema as contract

pytestmark = pytest.mark.services

FLOAT_FIELDS = [
    k for k, t in contract.influx_layout()["measurements"]["wb_sample"]["fields"].items() if t == "float"
]
INT_FIELDS = [
    k for k, t in contract.influx_layout()["measurements"]["wb_sample"]["fields"].items() if t == "int"
]
KEY_TO_FIELD = {"s": "s", "f": "f", "n": "n"}


def _publish(host: str, port: int, messages: list[tuple[str, bytes]]) -> None:
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="e2e-pub", protocol=mqtt.MQTTv311)
    client.connect(host, port)
    client.loop_start()
    try:
        for topic, payload in messages:
            client.publish(topic, payload, qos=1).wait_for_publish(10)
    finally:
        client.loop_stop()
        client.disconnect()


def _wait_rows(influxdb, q: str, n: int, timeout: float = 40.0) -> list[dict]:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    rows: list[dict] = []
    while time.monotonic() < deadline:
        rows = influxdb.query(q)
        if len(rows) >= n:
            return rows
        time.sleep(0.3)
    return rows


def test_vector_through_mosquitto_telegraf_influxdb(mosquitto, influxdb, telegraf_factory) -> None:  # type: ignore[no-untyped-def]
    vectors = [v for v in contract.vectors("valid") if v.schema == "samples"]
    telegraf_factory(mosquitto, influxdb)
    time.sleep(2.0)  # the persistent session subscribes on connect; give it time before publishing
    _publish(mosquitto.host, mosquitto.port, [(v.topic, v.raw) for v in vectors])

    expected = {}
    for vec in vectors:
        dev = contract.match_topic(vec.topic)[1]["dev"]  # type: ignore[index]
        for sample in vec.payload["samples"]:
            expected[(dev, sample["c"], sample["t"])] = sample
    rows = _wait_rows(influxdb, 'SELECT * FROM "wb_sample"', len(expected))
    got = {(r["dev"], r["ch"], r["time"]): r for r in rows}
    assert set(got) == set(expected), "every sample row arrives, keyed by device, channel and ms timestamp"

    for key, sample in expected.items():
        row = got[key]
        for field in FLOAT_FIELDS + INT_FIELDS:
            if field in sample:
                assert row[field] == sample[field], (key, field)
                if field in INT_FIELDS:
                    assert isinstance(row[field], int), (key, field)
            else:
                assert row[field] is None, (key, field, "no value may be invented")
    # field types as the layout says: ask InfluxDB itself
    types = {r["fieldKey"]: r["fieldType"] for r in influxdb.query('SHOW FIELD KEYS FROM "wb_sample"')}
    for field in FLOAT_FIELDS:
        assert types.get(field, "float") == "float", field
    for field in INT_FIELDS:
        assert types.get(field, "integer") == "integer", field
    tag_keys = {r["tagKey"] for r in influxdb.query('SHOW TAG KEYS FROM "wb_sample"')}
    assert tag_keys == {"dev", "ch"}
