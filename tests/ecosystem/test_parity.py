"""Telegraf and the collector write the same points.

The valid sample vectors go once through the real Mosquitto and the real Telegraf running the shipped
deploy/telegraf.conf into database A, and once through the collector's InfluxDB writer into database B
of the same real InfluxDB. The two databases must then hold the same series, the same field types,
and for every point the same tags, fields, values and nanosecond timestamp."""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from typing import Any

import paho.mqtt.client as mqtt
import pytest

import wattbench_schema as contract

pytestmark = pytest.mark.services

DB_TELEGRAF = "parity_telegraf"
DB_COLLECTOR = "parity_collector"
VECTORS = [v for v in contract.vectors("valid") if v.schema == "samples"]


def _influxql(url: str, db: str, q: str) -> list[dict[str, Any]]:
    body = urllib.parse.urlencode({"q": q, "db": db, "epoch": "ns"}).encode()
    with urllib.request.urlopen(urllib.request.Request(f"{url}/query", data=body), timeout=60) as r:
        out = json.loads(r.read())
    rows: list[dict[str, Any]] = []
    for result in out.get("results", []):
        assert "error" not in result, result["error"]
        for series in result.get("series", []):
            for values in series.get("values", []):
                row = dict(zip(series["columns"], values, strict=True))
                row.update(series.get("tags", {}))
                rows.append(row)
    return rows


DEVICES = sorted({contract.match_topic(v.topic)[1]["dev"] for v in VECTORS})  # type: ignore[index]
# Only the vectors' devices: on a shared machine a stray appliance may find the test broker's port.
OURS = '"dev" =~ /^(' + "|".join(DEVICES) + ")$/"


def _points(url: str, db: str) -> dict[tuple[str, str, int], dict[str, Any]]:
    """Every wb_sample point of the vectors' devices keyed by its identity, with only the fields it has."""
    rows = _influxql(url, db, f'SELECT * FROM "wb_sample" WHERE {OURS} GROUP BY *')
    out = {}
    for row in rows:
        key = (row.pop("dev"), row.pop("ch"), row.pop("time"))
        assert key not in out
        out[key] = {k: v for k, v in row.items() if v is not None}
    return out


def _publish(host: str, port: int) -> None:
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="parity-pub", protocol=mqtt.MQTTv311)
    client.connect(host, port)
    client.loop_start()
    try:
        for vec in VECTORS:
            client.publish(vec.topic, vec.raw, qos=1).wait_for_publish(10)
    finally:
        client.loop_stop()
        client.disconnect()


def _write_with_collector(url: str) -> int:
    from wattbench.store import open_store

    # Exactly how `wattbench collect --store http://...` opens it: the database named, nothing else.
    store: Any = open_store(url, db=DB_COLLECTOR)
    for vec in VECTORS:
        dev = contract.match_topic(vec.topic)[1]["dev"]  # type: ignore[index]
        store.write_samples(dev, vec.payload["samples"])
    store.flush()
    return store.written_lines


def test_telegraf_and_collector_write_identical_points(mosquitto, influxdb, telegraf_factory) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("wattbench.store.influx", reason="the collector's InfluxDB store is not installed")
    assert len(VECTORS) >= 10
    telegraf_factory(mosquitto, influxdb, db=DB_TELEGRAF)
    time.sleep(2.0)  # the persistent session subscribes on connect
    _publish(mosquitto.host, mosquitto.port)
    lines = _write_with_collector(influxdb.url)
    assert lines == sum(len(v.payload["samples"]) for v in VECTORS)

    expected = _points(influxdb.url, DB_COLLECTOR)
    assert len(expected) > 500, "the vectors hold over 500 distinct points"
    deadline = time.monotonic() + 60
    got: dict[tuple[str, str, int], dict[str, Any]] = {}
    while time.monotonic() < deadline:
        got = _points(influxdb.url, DB_TELEGRAF) if _has_db(influxdb.url, DB_TELEGRAF) else {}
        if len(got) >= len(expected):
            break
        time.sleep(0.3)

    # The collector keeps samples flagged clock_step a few microseconds off their millisecond so that
    # an overlap after a backward clock step cannot overwrite an earlier sample (Telegraf cannot); at
    # the contract's millisecond resolution both routes are identical, and only those samples differ.
    for (dev, ch, ns), fields in expected.items():
        if ns % 1_000_000:
            assert int(fields.get("f") or 0) & contract.FLAG_CLOCK_STEP, (dev, ch, ns)
    assert any(ns % 1_000_000 for _, _, ns in expected), "the clock_step vector exercises the offset"
    assert not any(ns % 1_000_000 for _, _, ns in got)
    expected = {(d, c, ns // 1_000_000): f for (d, c, ns), f in expected.items()}
    got = {(d, c, ns // 1_000_000): f for (d, c, ns), f in got.items()}
    assert set(got) == set(expected), "same points: (dev, ch, timestamp in ms)"
    for key, fields in expected.items():
        assert got[key] == fields, key
        for name, value in fields.items():
            assert type(got[key][name]) is type(value), (key, name)

    def schema(db: str, q: str) -> list[tuple[Any, ...]]:
        return sorted(tuple(sorted(r.items())) for r in _influxql(influxdb.url, db, q))

    # Telegraf also writes the host's cpu/mem/system metrics into its database; compare wb_sample only.
    for q in (
        'SHOW FIELD KEYS FROM "wb_sample"',
        'SHOW TAG KEYS FROM "wb_sample"',
        f'SHOW SERIES FROM "wb_sample" WHERE {OURS}',
    ):
        assert schema(DB_TELEGRAF, q) == schema(DB_COLLECTOR, q), q
    assert schema(DB_COLLECTOR, "SHOW MEASUREMENTS") == [(("name", "wb_sample"),)]
    layout = contract.influx_layout()["measurements"]["wb_sample"]["fields"]
    kinds = {"float": "float", "int": "integer"}
    for row in _influxql(influxdb.url, DB_TELEGRAF, 'SHOW FIELD KEYS FROM "wb_sample"'):
        assert kinds[layout[row["fieldKey"]]] == row["fieldType"], row


def _has_db(url: str, name: str) -> bool:
    rows = _influxql(url, name, "SHOW DATABASES")
    return any(r.get("name") == name for r in rows)
