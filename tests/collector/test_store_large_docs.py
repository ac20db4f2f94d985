"""A run's documents come back from InfluxDB whole, however long the contract lets them be.

InfluxDB limits a string field to 64 KiB, so the compact JSON of a phase event, of a result's overall
point and of a device's metadata is written across doc, doc1, doc2, ... with the part count in
doc_parts. A cluster sweep's measure_end lists thousands of jobs and its result thousands of channels:
both must read back from InfluxDB exactly as written and as the embedded SQLite store gives them, and a
document with a part missing must be refused, never replaced by the fields that have a column.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import wattbench_schema as schema
from wattbench.core import contract
from wattbench.store import layout
from wattbench.store.base import StoreError
from wattbench.store.influx import lineproto

VALID = Path(__file__).resolve().parents[2] / "schema" / "vectors" / "valid"
T0 = 1_763_760_000_000
RUN = "20261121T072000Z-a1b2"


def _payload(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((VALID / name).read_text())["payload"]
    return doc


def _measure_end_with_jobs(n_jobs: int) -> dict[str, Any]:
    """A Slurm sweep's measure_end: every job of the window with its nodes, as the scheduler had it."""
    event = {
        "v": 1,
        "run": RUN,
        "n": 3,
        "t": T0 + 60_000,
        "event": "measure_end",
        "phase": "c4",
        "kind": "concurrency",
        "copies": 4,
        "ops": n_jobs,
        "workload": "slurm",
        "jobs": [
            {
                "id": f"{1000 + i}",
                "state": "COMPLETED",
                "exit": 0,
                "nodes": [f"node{(i + k) % 256:03d}" for k in range(4)],
                "start": T0 + 1000 + i,
                "end": T0 + 50_000 + i,
                "ops": 1,
            }
            for i in range(n_jobs)
        ],
    }
    contract.validate_phase(event)
    return event


def _run_events(n_jobs: int) -> list[dict[str, Any]]:
    start = _payload("phase_run_start.json")
    start.update(run=RUN, n=0, t=T0)
    start["channels"] = [f"node{i // 4:03d}/psu{i % 4}" for i in range(1024)]
    contract.validate_phase(start)
    events = [start]
    for n, event in ((1, "phase_start"), (2, "measure_start")):
        events.append(
            {"v": 1, "run": RUN, "n": n, "t": T0 + n * 1000, "event": event, "phase": "c4", "copies": 4}
        )
    events.append(_measure_end_with_jobs(n_jobs))
    return events


def _result_with_channels(n: int) -> dict[str, Any]:
    result = _payload("result_channels_listed.json")
    row = dict(result["channels"][0])
    rows = []
    for i in range(n):
        dev, ch = f"node{i // 16:03d}", f"psu{i % 16}"
        rows.append({**row, "dev": dev, "ch": ch, "node": dev})
    result.update(run=RUN, t=T0 + 120_000, channels=rows)
    contract.validate_result(result)
    return result


def _big_meta() -> dict[str, Any]:
    meta = _payload("meta_lab_wt310.json")
    ch = dict(meta["channels"][0])
    meta["channels"] = [{**ch, "c": f"psu{i}"} for i in range(16)]
    return meta


def _escaped_len(text: str) -> int:
    return len(text) + text.count('"') + text.count("\\")


def _field_values(line: str) -> dict[str, str]:
    """The string fields of one line-protocol line, still escaped as InfluxDB receives them."""
    return {m[0]: m[1] for m in re.findall(r'[ ,]([a-z_0-9]+)="((?:[^"\\]|\\.)*)"', line)}


# ------------------------------------------------------------------ split and join (pure)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{}",
        "x" * layout.MAX_DOC_CHARS,
        "x" * (layout.MAX_DOC_CHARS + 1),
        '"' * (3 * layout.MAX_DOC_CHARS + 7),
        "\\" * (layout.MAX_DOC_CHARS // 2 + 1) + '"a' * layout.MAX_DOC_CHARS,
        ('{"k":"a\\"b\\\\"}' * 20_000),
    ],
)
def test_doc_parts_join_to_the_text_and_each_fits_when_escaped(text: str) -> None:
    parts = layout.split_doc(text)
    assert "".join(parts) == text
    assert all(_escaped_len(p) <= layout.MAX_DOC_CHARS for p in parts)
    assert all(parts) or parts == [""]
    fields = layout.doc_fields(text)
    assert fields["doc_parts"] == len(parts)
    assert layout.joined_doc(fields) == text


def test_a_short_document_is_one_part() -> None:
    assert layout.doc_fields('{"v":1}') == {"doc": '{"v":1}', "doc_parts": 1}


def test_a_document_with_a_part_missing_is_refused() -> None:
    text = json.dumps(_measure_end_with_jobs(2000), separators=(",", ":"))
    fields = layout.doc_fields(text)
    assert fields["doc_parts"] >= 3
    for gone in ("doc", "doc1", f"doc{fields['doc_parts'] - 1}"):
        broken = {k: v for k, v in fields.items() if k != gone}
        with pytest.raises(StoreError, match="incomplete"):
            layout.joined_doc(broken)
    with pytest.raises(StoreError, match="incomplete"):
        layout.joined_doc({**fields, "doc_parts": fields["doc_parts"] + 1})
    # A point rewritten with a shorter document keeps the old trailing fields: the count decides.
    stale = {**layout.doc_fields('{"v":1}'), "doc1": fields["doc1"]}
    assert layout.joined_doc(stale) == '{"v":1}'


def test_a_stored_document_that_is_not_an_object_is_refused() -> None:
    for text in ('{"v":1', "[1]"):
        with pytest.raises(StoreError, match=r"^run r, result: the stored document is not a JSON object$"):
            layout.loaded_doc(layout.doc_fields(text), "run r, result")
    assert layout.loaded_doc({"n": 3}, "run r, result") is None


def test_points_without_a_part_count_read_as_before() -> None:
    assert layout.joined_doc({"doc": '{"v":1}'}) == '{"v":1}'  # written before doc_parts existed
    assert layout.joined_doc({"n": 3}) is None  # written by Telegraf, which writes no doc


def test_a_cluster_phase_event_keeps_every_job_on_its_line() -> None:
    event = _measure_end_with_jobs(2000)
    line = lineproto.phase_line(event)
    assert line is not None
    values = _field_values(line)
    assert all(len(v) <= layout.MAX_DOC_CHARS for v in values.values()), "escaped as sent"
    fields = layout.phase_fields(event)
    text = layout.joined_doc(fields)
    assert text is not None and json.loads(text) == event


def test_a_result_of_4096_channels_keeps_its_document() -> None:
    result = _result_with_channels(4096)
    (*_, (tags, overall)) = layout.result_points(result)
    assert tags["phase"] == "overall" and overall["doc_parts"] > 1
    text = layout.joined_doc(overall)
    assert text is not None and json.loads(text) == result
    for line in lineproto.result_lines(result):
        assert all(len(v) <= layout.MAX_DOC_CHARS for v in _field_values(line).values())


def test_the_layout_names_the_doc_parts() -> None:
    measurements = schema.influx_layout()["measurements"]
    for measurement in ("wb_phase", "wb_result", "wb_meta"):
        spec = measurements[measurement]
        assert spec["fields"]["doc"] == "string" and spec["fields"]["doc_parts"] == "int"
        assert layout.layout_field_type(measurement, "doc7") == "string"
        assert layout.layout_field_type(measurement, "docx") is None


# ------------------------------------------------------------------ through the stores


def _write_run(store: Any, n_jobs: int, n_channels: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    events = _run_events(n_jobs)
    for event in events:
        store.write_phase(event)
    result = _result_with_channels(n_channels)
    store.write_result(result)
    store.write_meta(_big_meta(), T0 - 1000)
    store.flush()
    return events, result


def test_sqlite_keeps_a_cluster_run_whole(tmp_path: Path) -> None:
    from wattbench.store.sqlite import SqliteStore

    store = SqliteStore(tmp_path / "wb.sqlite")
    events, result = _write_run(store, 2000, 4096)
    assert store.phases(RUN) == events
    assert store.result(RUN) == result
    store.close()


@pytest.mark.services
def test_influx_keeps_a_cluster_run_whole_as_sqlite_does(influxdb, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from wattbench.store.influx import InfluxStore
    from wattbench.store.sqlite import SqliteStore

    influx = InfluxStore(influxdb.url, db=influxdb.db)
    sqlite = SqliteStore(tmp_path / "wb.sqlite")
    events, result = _write_run(influx, 2000, 4096)
    _write_run(sqlite, 2000, 4096)

    got = influx.phases(RUN)
    assert got == events
    assert len(got[-1]["jobs"]) == 2000
    assert influx.result(RUN) == result
    assert len(result["channels"]) == 4096
    assert influx.phases(RUN) == sqlite.phases(RUN)
    assert influx.result(RUN) == sqlite.result(RUN)
    assert influx.meta_history(T0, T0 + 200_000) == sqlite.meta_history(T0, T0 + 200_000)

    # What InfluxDB holds is split, every part under its string limit.
    rows = influxdb.query(f"SELECT * FROM wb_phase WHERE run = '{RUN}' AND event = 'measure_end'")
    (row,) = rows
    assert row["doc_parts"] >= 3
    parts = [row["doc"], *(row[f"doc{i}"] for i in range(1, row["doc_parts"]))]
    assert all(len(p) <= layout.MAX_DOC_CHARS for p in parts)
    kinds = {"string": "string", "int": "integer"}
    for measurement in ("wb_phase", "wb_result", "wb_meta"):
        got = {r["fieldKey"]: r["fieldType"] for r in influxdb.query(f'SHOW FIELD KEYS FROM "{measurement}"')}
        assert "doc1" in got or measurement == "wb_meta"
        for key in ("doc", "doc_parts", *(k for k in got if k.startswith("doc"))):
            assert kinds[layout.layout_field_type(measurement, key) or "?"] == got[key], (measurement, key)
    influx.close()
    sqlite.close()


@pytest.mark.services
def test_influx_refuses_a_stored_document_with_a_part_missing(influxdb, capsys) -> None:  # type: ignore[no-untyped-def]
    from wattbench.store.influx import InfluxStore

    influx = InfluxStore(influxdb.url, db=influxdb.db)
    event = _measure_end_with_jobs(2000)
    influx.write_phase(event)
    influx.write_result(_result_with_channels(4096))
    influx.flush()
    # The same points again with a part count one higher than the parts written: a document that
    # lost its tail, as a reader could meet it.
    lines = [lineproto.phase_line(event), *lineproto.result_lines(_result_with_channels(4096))]
    bumped = [re.sub(r"doc_parts=(\d+)i", lambda m: f"doc_parts={int(m[1]) + 1}i", ln or "") for ln in lines]
    influx.write_lines([b for b in bumped if b])
    influx.flush()
    with pytest.raises(StoreError, match="incomplete"):
        influx.phases(RUN)
    with pytest.raises(StoreError, match="incomplete"):
        influx.result(RUN)
    influx.close()

    # The report refuses the run with one line and the store's exit code, no traceback.
    from wattbench.cli import main

    code = main(["report", RUN, "--influx", influxdb.url, "--db", influxdb.db])
    err = capsys.readouterr().err
    assert code == 3, err
    assert "incomplete" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
