"""The Grafana provisioning: the dashboards are what deploy/grafana/build.py generates, they follow the
InfluxDB layout of the contract, and every query in them (panels, annotations, variables, in both the
InfluxQL and the Flux flavour) returns rows from a real InfluxDB holding demo data, with the right values."""

from __future__ import annotations

import importlib.util
import json
import math
import re
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import demo_data
import grafana_queries as gq
import pytest

import wattbench_schema as contract

GRAFANA = gq.REPO / "deploy" / "grafana"
LAYOUT = contract.influx_layout()["measurements"]
ALL_QUERIES = [q for path in gq.dashboard_files() for q in gq.queries(path)]


def _load(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


def _build_module() -> Any:
    pytest.importorskip(
        "grafana_foundation_sdk", reason='install the "grafana" extra to regenerate dashboards'
    )
    spec = importlib.util.spec_from_file_location("grafana_build", GRAFANA / "build.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their annotations through sys.modules
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------ static checks


def test_committed_dashboards_are_the_generator_output() -> None:
    build = _build_module()
    rendered = build.render()
    assert set(rendered) == set(gq.dashboard_files()), "no stray or missing dashboard files"
    for path, text in rendered.items():
        assert path.read_text() == text, f"{path} is stale: run python deploy/grafana/build.py"


def test_three_dashboards_in_each_flavour() -> None:
    by_flavour: dict[str, set[str]] = defaultdict(set)
    for path in gq.dashboard_files():
        by_flavour[path.parent.name].add(path.stem)
    assert by_flavour == {f: {"live-power", "run-view", "fleet"} for f in ("influxql", "flux")}


def test_provisioning_matches_the_dashboards() -> None:
    yaml = pytest.importorskip("yaml")
    ds = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "wattbench.yaml").read_text())
    by_uid = {d["uid"]: d for d in ds["datasources"]}
    assert set(by_uid) == set(gq.DATASOURCE_FLAVOUR)
    assert by_uid["wattbench-influxql"]["jsonData"]["version"] == "InfluxQL"
    assert by_uid["wattbench-flux"]["jsonData"]["version"] == "Flux"
    assert all(d["type"] == "influxdb" for d in ds["datasources"])
    providers = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "wattbench.yaml").read_text())
    folders = {Path(p["options"]["path"]).name for p in providers["providers"]}
    assert folders == {"influxql", "flux"}


@pytest.mark.parametrize("path", gq.dashboard_files(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_dashboard_json_model(path: Path) -> None:
    """The parts of the dashboard JSON model Grafana needs to load a provisioned file."""
    doc = _load(path)
    flavour = path.parent.name
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,40}", doc["uid"])
    assert doc["title"] and isinstance(doc["schemaVersion"], int)
    assert doc["time"]["from"].startswith("now-") and doc["time"]["to"] == "now"
    ids = [p["id"] for p in doc["panels"]]
    assert len(ids) == len(set(ids)), "panel ids are unique"
    cells: set[tuple[int, int]] = set()
    for panel in doc["panels"]:
        pos = panel["gridPos"]
        assert 0 <= pos["x"] and pos["x"] + pos["w"] <= 24 and pos["h"] > 0, panel["title"]
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in cells, f"{panel['title']} overlaps another panel"
                cells.add((x, y))
        assert panel["type"] in {"timeseries", "stat", "table", "barchart", "state-timeline"}
        assert panel["targets"], panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs))
        for target in panel["targets"]:
            assert gq.DATASOURCE_FLAVOUR[target["datasource"]["uid"]] == flavour
            if flavour == "influxql":
                assert target["rawQuery"] is True and target["resultFormat"] in {"time_series", "table"}
    used = {m.group(1) for m in re.finditer(r"\$\{?(\w+)", json.dumps([p["targets"] for p in doc["panels"]]))}
    defined = {v["name"] for v in doc["templating"]["list"]}
    assert used - {"timeFilter", "__interval"} <= defined, "every template variable a query uses is defined"


def _influxql_identifiers(text: str) -> tuple[set[str], set[str]]:
    measurements = set(re.findall(r'FROM "(\w+)"', text))
    aliases = set(re.findall(r'AS "(\w+)"', text))
    quoted = set(re.findall(r'"(\w+)"', text)) - measurements - aliases
    return measurements, quoted


@pytest.mark.parametrize("q", ALL_QUERIES, ids=lambda q: q.id)
def test_query_uses_only_the_contract_layout(q: gq.PanelQuery) -> None:
    """Measurements, tags and fields named in a query exist in schema/v1/influx.json."""
    if q.flavour == "influxql":
        measurements, names = _influxql_identifiers(q.text)
        assert measurements and measurements <= set(LAYOUT), measurements
        known = {n for m in measurements for n in (*LAYOUT[m]["tags"], *LAYOUT[m]["fields"])}
        known |= set(re.findall(r'AS "(\w+)"', q.text))
        assert names <= known, names - known
    else:
        measurements = set(re.findall(r'r\._measurement == "(\w+)"', q.text))
        assert measurements and measurements <= set(LAYOUT), measurements
        fields = set(re.findall(r'r\._field == "(\w+)"', q.text))
        tags = set(re.findall(r"\br\.([a-zA-Z]\w*)", q.text))
        assert fields <= {f for m in measurements for f in LAYOUT[m]["fields"]}
        assert tags <= {t for m in measurements for t in LAYOUT[m]["tags"]}


def test_energy_comes_from_the_counter_never_its_average() -> None:
    for q in ALL_QUERIES:
        if "wb_sample" in q.text and "Wh" in re.findall(r'"(\w+)"', q.text):
            assert not re.search(r'mean\("Wh"\)|fn: mean', q.text), q.id
            assert "difference" in q.text, q.id


# ------------------------------------------------------------------ against a real InfluxDB


def _num(value: Any) -> float:
    return float(value)


def _by(rows: list[dict[str, Any]], *keys: str) -> dict[tuple[str, ...], list[dict[str, Any]]]:
    out: dict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        out[tuple(r[k] for k in keys)].append(r)
    return out


def _value(row: dict[str, Any], flavour: str) -> Any:
    if flavour == "flux":
        return row["_value"]
    (name,) = [k for k in row if k not in ("time", "dev", "ch", "collector")]
    return row[name]


def _demo_wh() -> dict[tuple[str, str], list[tuple[int, float]]]:
    series: dict[tuple[str, str], list[tuple[int, float]]] = defaultdict(list)
    for ln in demo_data.sample_lines():
        head, fields, t = ln.split(" ")
        tags = dict(kv.split("=") for kv in head.split(",")[1:])
        values = dict(kv.split("=") for kv in fields.split(","))
        if "Wh" in values:
            series[(tags["dev"], tags["ch"])].append((int(t), float(values["Wh"])))
    return series


def _find(dashboard: str, where: str) -> gq.PanelQuery:
    (q,) = [q for q in ALL_QUERIES if q.dashboard == dashboard and q.where.startswith(where)]
    return q


@pytest.mark.services
def test_every_query_returns_rows_from_a_real_influxdb(influxdb) -> None:  # type: ignore[no-untyped-def]
    written = demo_data.write(influxdb.url, influxdb.db)
    assert written > 1500
    assert len(ALL_QUERIES) >= 40
    failures = []
    counts = {}
    for q in ALL_QUERIES:
        try:
            rows = gq.run(q, influxdb.url, influxdb.db)
        except Exception as exc:
            failures.append(f"{q.id}: {exc}")
            continue
        counts[q.id] = len(rows)
        if not rows:
            failures.append(f"{q.id}: no rows")
    assert not failures, "\n".join(failures)
    # the variable queries list exactly the demo's appliances, channels and run
    for flavour in ("influxql", "flux"):
        dev = gq.run(_find(f"{flavour}/live-power", "variable: dev"), influxdb.url, influxdb.db)
        ch = gq.run(_find(f"{flavour}/live-power", "variable: ch"), influxdb.url, influxdb.db)
        run = gq.run(_find(f"{flavour}/run-view", "variable: run"), influxdb.url, influxdb.db)
        col = "value" if flavour == "influxql" else "_value"
        assert sorted(r[col] for r in dev) == sorted(demo_data.DEVICES)
        assert sorted(r[col] for r in ch) == sorted([*demo_data.POWER_CHANNELS, demo_data.INLET_CHANNEL])
        assert [r[col] for r in run] == [demo_data.RUN_ID]


@pytest.mark.services
def test_panel_values_are_right_in_both_flavours(influxdb) -> None:  # type: ignore[no-untyped-def]
    demo_data.write(influxdb.url, influxdb.db)
    wh = _demo_wh()

    def rows(flavour: str, dashboard: str, where: str) -> list[dict[str, Any]]:
        return gq.run(_find(f"{flavour}/{dashboard}", where), influxdb.url, influxdb.db)

    for flavour in ("influxql", "flux"):
        # energy in the range is the counter's increase; per interval it sums to the increase after
        # the first window's last reading (the first window has no predecessor to subtract)
        in_range = {
            k: _num(_value(r[0], flavour))
            for k, r in _by(rows(flavour, "live-power", "Energy in range"), "dev", "ch").items()
        }
        per_interval = _by(rows(flavour, "live-power", "Energy per interval"), "dev", "ch")
        assert set(in_range) == set(wh) == set(per_interval)
        window_ms = int(gq.INTERVAL[:-1]) * 1000
        for key, points in wh.items():
            assert math.isclose(in_range[key], (points[-1][1] - points[0][1]) / 1000, rel_tol=1e-9), (
                flavour,
                key,
            )
            first_window_end = max(t for t, _ in points if t < (points[0][0] // window_ms + 1) * window_ms)
            first_last = dict(points)[first_window_end]
            total = sum(_num(_value(r, flavour)) for r in per_interval[key])
            assert math.isclose(total, (points[-1][1] - first_last) / 1000, rel_tol=1e-9), (flavour, key)
            assert all(_num(_value(r, flavour)) > 0 for r in per_interval[key]), "energy never goes down"

        now = {
            k: _num(_value(r[0], flavour))
            for k, r in _by(rows(flavour, "live-power", "Power now"), "dev", "ch").items()
        }
        assert set(now) == set(wh)

        valid = rows(flavour, "run-view", "Compliance")
        assert [str(_value(valid[0], flavour)).lower()] == ["true"]
        ratios = {
            r["phase"]: _num(r["ratio"]) for r in rows(flavour, "run-view", "Performance to power ratio")
        }
        assert set(ratios) == {p for p, _ in demo_data.LEVELS}
        assert ratios["idle"] == 0 and ratios["l100"] > ratios["l50"] > 0

        gaps = _by(rows(flavour, "fleet", "Sequence gaps"), "dev")
        assert sum(_num(_value(r, flavour)) for r in gaps[("bench-b",)]) == 3
        assert sum(_num(_value(r, flavour)) for r in gaps[("bench-a",)]) == 0
        table = {r["dev"]: r for r in rows(flavour, "fleet", "Appliances [A]")}
        assert set(table) == set(demo_data.DEVICES) and {r["state"] for r in table.values()} == {"online"}

        notes = rows(flavour, "run-view", "annotation")
        assert len(notes) == len(demo_data.phase_lines())

    # both flavours show the same power curve
    series = {}
    for flavour in ("influxql", "flux"):
        got = _by(rows(flavour, "live-power", "Active power"), "dev", "ch")
        series[flavour] = {k: sorted(round(_num(_value(r, flavour)), 9) for r in v) for k, v in got.items()}
    assert series["influxql"] == series["flux"]


def test_demo_data_follows_the_contract() -> None:
    checks = [
        ("samples", b) for dev, rows in demo_data.sample_rows().items() for b in demo_data.batches(dev, rows)
    ]
    checks += [("status", s) for s, _ in demo_data.statuses()]
    checks += [("phase", e) for e in demo_data.phase_events()]
    checks += [("result", demo_data.result())]
    for schema, payload in checks:
        errors = [e.message for e in contract.jsonschema_validator(schema).iter_errors(payload)]
        assert not errors, (schema, errors)


def _normalised(rows: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in rows)


@pytest.mark.services
def test_dashboards_see_the_same_through_the_collector_writer(influxdb) -> None:  # type: ignore[no-untyped-def]
    """The demo written by the collector's own InfluxDB writer gives every query the same rows as the
    demo written from the layout: the dashboards read what the collector writes."""
    influx = pytest.importorskip(
        "wattbench.store.influx", reason="the collector's InfluxDB store is not installed"
    )
    own, collector = "demo_layout", "demo_collector"
    influxdb.create_database(own)
    demo_data.write(influxdb.url, own)
    store = influx.InfluxStore(influxdb.url, db=collector)
    for dev, rows in demo_data.sample_rows().items():
        for batch in demo_data.batches(dev, rows):
            store.write_samples(dev, batch["samples"])
    for status, t in demo_data.statuses():
        store.write_status(status, t)
    for col, dev, fields, t in demo_data.healths():
        store.write_health(col, dev, fields, t)
    for event in demo_data.phase_events():
        store.write_phase(event)
    store.write_result(demo_data.result())
    store.flush()
    differ = []
    for q in ALL_QUERIES:
        mine, theirs = gq.run(q, influxdb.url, own), gq.run(q, influxdb.url, collector)
        assert mine, q.id
        if _normalised(mine) != _normalised(theirs):
            differ.append(q.id)
    assert not differ, "queries that see different data: " + ", ".join(differ)


# Panels that show the collector's own accounting (gaps, received rate, clock offset): Telegraf has no
# sequence bookkeeping, so these stay empty on the Telegraf route, and the README says so.
COLLECTOR_ONLY = {"wb_health", "wb_reject"}


def _reads(q: gq.PanelQuery) -> set[str]:
    return set(re.findall(r'"(wb_[a-z]+)"', q.text)) | set(
        re.findall(r'r\._measurement == "(wb_[a-z]+)"', q.text)
    )


@pytest.mark.services
def test_dashboards_see_the_same_through_the_shipped_telegraf(mosquitto, influxdb, telegraf_factory) -> None:  # type: ignore[no-untyped-def]
    """deploy/telegraf.conf, as shipped, carries samples, status, phase events and results into the layout,
    so every Live power, Run view and Fleet panel that does not show the collector's accounting sees the
    same rows as from the collector's writer (it used to carry samples only: Run view and Fleet stayed
    empty)."""
    import paho.mqtt.client as mqtt

    own, via = "demo_layout", "via_telegraf"
    influxdb.create_database(own)
    demo_data.write(influxdb.url, own)
    telegraf_factory(mosquitto, influxdb, db=via)
    time.sleep(2.0)  # persistent sessions subscribe on connect

    messages: list[tuple[str, dict[str, Any], bool]] = []
    for dev, rows in demo_data.sample_rows().items():
        messages += [(f"wattbench/v1/dev/{dev}/samples", b, False) for b in demo_data.batches(dev, rows)]
    messages += [(f"wattbench/v1/dev/{s['dev']}/status", s, True) for s, _ in demo_data.statuses()]
    messages += [(f"wattbench/v1/run/{e['run']}/phase", e, False) for e in demo_data.phase_events()]
    res = demo_data.result()
    messages.append((f"wattbench/v1/run/{res['run']}/result", res, True))
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="dash-pub", protocol=mqtt.MQTTv311)
    client.connect(mosquitto.host, mosquitto.port)
    client.loop_start()
    try:
        for topic, payload, retain in messages:
            client.publish(topic, json.dumps(payload), qos=1, retain=retain).wait_for_publish(10)
    finally:
        client.loop_stop()
        client.disconnect()

    expected = {
        "wb_sample": sum(len(r) for r in demo_data.sample_rows().values()),
        "wb_status": len(demo_data.statuses()),
        "wb_phase": len(demo_data.phase_events()),
        "wb_result": len(res["levels"]) + 1,
    }
    deadline = time.monotonic() + 60
    counts: dict[str, int] = {}
    while time.monotonic() < deadline:
        counts = {}
        for m in expected:
            rows = gq.run_influxql(influxdb.url, via, f'SELECT count(*) FROM "{m}"')
            counts[m] = max((int(v) for r in rows for k, v in r.items() if k.startswith("count_")), default=0)
        if counts == expected:
            break
        time.sleep(0.5)
    assert counts == expected, "every message becomes its points"
    for m in ("wb_status", "wb_phase", "wb_result"):
        # every tag, field, type and timestamp, not only what today's panels select
        mine = gq.run_influxql(influxdb.url, own, f'SELECT * FROM "{m}" GROUP BY *')
        theirs = gq.run_influxql(influxdb.url, via, f'SELECT * FROM "{m}" GROUP BY *')
        assert _normalised(theirs) == _normalised(mine), m
        types = [gq.run_influxql(influxdb.url, db, f'SHOW FIELD KEYS FROM "{m}"') for db in (own, via)]
        assert _normalised(types[1]) == _normalised(types[0]), m

    differ, checked = [], 0
    for q in ALL_QUERIES:
        if _reads(q) & COLLECTOR_ONLY:
            continue
        checked += 1
        mine, theirs = gq.run(q, influxdb.url, own), gq.run(q, influxdb.url, via)
        assert mine, q.id
        if _normalised(mine) != _normalised(theirs):
            differ.append(
                f"{q.id}\n  layout:   {_normalised(mine)[:2]}\n  telegraf: {_normalised(theirs)[:2]}"
            )
    assert not differ, "queries that see different data through Telegraf:\n" + "\n".join(differ)
    dashboards = {q.dashboard.split("/")[1] for q in ALL_QUERIES if not _reads(q) & COLLECTOR_ONLY}
    assert dashboards == {"live-power", "run-view", "fleet"} and checked >= 30
