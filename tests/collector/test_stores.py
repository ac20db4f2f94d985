"""Both stores behave the same through the Store protocol: idempotent writes, the same reads. The
InfluxDB one runs against the real InfluxDB 1.8 and is checked against the layout in influx.json."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import wattbench_schema as contract
from wattbench.store.influx.lineproto import sample_lines
from wattbench.store.layout import layout_field_type

T0 = 1_763_760_000_000


def _vector(name: str) -> Any:
    return next(v for v in contract.vectors("valid") if v.name == name).payload


def _rows(n: int, ch: str = "psu1", start_s: int = 0) -> list[dict[str, Any]]:
    return [
        {"s": start_s + i, "t": T0 + 100 * i, "c": ch, "W": 100.0 + i, "V": 230, "f": 4}
        if i % 10 == 9
        else {"s": start_s + i, "t": T0 + 100 * i, "c": ch, "W": 100.0 + i, "V": 230}
        for i in range(n)
    ]


def exercise(store: Any) -> None:
    store.write_samples("bench-a", _rows(50) + _rows(50, "psu2", 50))
    store.write_samples("bench-b", [{"s": 7, "t": T0, "c": "psu1", "f": 1}])
    phases = [v.payload for v in contract.vectors("valid") if v.schema == "phase"]
    for ev in phases:
        store.write_phase(ev)
    result = _vector("result_valid_run")
    store.write_result(result)
    store.write_status(_vector("status_online_boot"), T0 + 5)
    meta = _vector("meta_ac_bench")
    store.write_meta(meta, T0 - 10_000)
    store.write_meta({**meta, "fw": "changed"}, T0 + 20_000)
    store.write_health(
        "c1", "bench-a", {"received": 100, "stored": 100, "offset_ms": 12.5, "rate_hz": 10.0}, T0
    )
    store.write_health(
        "c1", "bench-a", {"received": 200, "stored": 199, "offset_ms": 11.0, "rate_hz": 10.0}, T0 + 5000
    )
    store.write_reject(
        "c1",
        {
            "v": 1,
            "t": T0,
            "topic": "wattbench/v1/dev/x/samples",
            "reason": "decode",
            "detail": 'not "strict" JSON, \\ and, = signs',
            "size": 12,
        },
    )
    store.flush()
    # replaying the same writes changes nothing: identity is tags + time
    store.write_samples("bench-a", _rows(50))
    store.write_result(result)
    store.flush()

    assert store.count_samples() == 101
    assert store.count_samples("bench-a") == 100
    checks = {c["dev"]: c for c in store.sequence_check()}
    assert checks["bench-a"] == {"dev": "bench-a", "count": 100, "first": 0, "last": 99, "missing": 0}

    s = store.series("bench-a", "psu1", T0 + 100, T0 + 900, ("W", "V", "A"))
    assert s.t_ms.tolist() == [T0 + 100 * i for i in range(1, 10)]
    assert s.seq.tolist() == list(range(1, 10))
    assert s.flags.tolist() == [0] * 8 + [4]
    assert s.values["W"].tolist() == [100.0 + i for i in range(1, 10)]
    assert s.values["V"].dtype == np.float64 and s.values["V"][0] == 230.0
    assert all(math.isnan(x) for x in s.values["A"])  # not carried: NaN, never invented
    flagged = store.series("bench-b", "psu1", T0, T0)
    assert flagged.flags.tolist() == [1] and math.isnan(flagged.values["W"][0])
    assert len(store.series("bench-a", "psu1", T0 - 10_000, T0 - 1)) == 0

    assert store.channels(T0, T0 + 10_000) == [("bench-a", "psu1"), ("bench-a", "psu2"), ("bench-b", "psu1")]

    run = phases[0]["run"]
    got = store.phases(run)
    mine = sorted((p for p in phases if p["run"] == run), key=lambda e: e["n"])
    assert [(e["n"], e["event"], e["phase"], e["t"]) for e in got] == [
        (e["n"], e["event"], e["phase"], e["t"]) for e in mine
    ]
    named = [e.get("channels") for e in mine if e.get("channels")]
    assert [e.get("channels") for e in got if e.get("channels")] == named  # lists survive both stores
    assert run in store.runs()
    listed = _vector("result_channels_listed")
    store.write_result(listed)
    store.flush()
    assert store.result(listed["run"])["channels"] == listed["channels"]  # both stores keep the list
    store.write_result(result)
    store.flush()
    res = store.result(result["run"])
    assert (
        res is not None
        and res["valid"] == result["valid"]
        and res["overall"] == pytest.approx(result["overall"])
    )
    assert sorted(lv["phase"] for lv in res["levels"]) == sorted(lv["phase"] for lv in result["levels"])
    assert store.result("no-such-run") is None

    # the metadata in effect over a span: the last one before it and every change inside it
    meta = _vector("meta_ac_bench")
    assert store.meta_history(T0 - 20_000, T0 - 15_000) == []
    assert store.meta_history(T0, T0 + 10_000) == [(T0 - 10_000, meta)]
    assert store.meta_history(T0, T0 + 30_000) == [
        (T0 - 10_000, meta),
        (T0 + 20_000, {**meta, "fw": "changed"}),
    ]
    assert store.meta_history(T0 + 25_000, T0 + 30_000) == [(T0 + 20_000, {**meta, "fw": "changed"})]

    # a flagged sample (bench-b's, no W) was still taken: the device was heard then
    assert store.newest_samples(["bench-a", "bench-b", "nosuch", "bench-a"]) == {
        "bench-a": T0 + 4900,
        "bench-b": T0,
    }
    assert store.newest_samples([]) == {}

    health = {(h["dev"], h["collector"]): h for h in store.health()}
    assert health[("bench-a", "c1")]["received"] == 200 and health[("bench-a", "c1")]["t"] == T0 + 5000
    rejects = store.rejects()
    assert rejects[0]["reason"] == "decode" and rejects[0]["detail"] == 'not "strict" JSON, \\ and, = signs'


def test_sqlite_store(tmp_path: Path) -> None:
    from wattbench.store import open_store

    store = open_store(str(tmp_path / "wb.sqlite"))
    exercise(store)
    store.close()
    # a second process (status, analysis) reads the same file
    again = open_store(f"sqlite://{tmp_path / 'wb.sqlite'}")
    assert again.count_samples() == 101
    again.close()


@pytest.mark.parametrize("spec", ["{tmp}/nodir/x.sqlite", "sqlite://{tmp}/nodir/x.sqlite"])
def test_a_new_sqlite_store_is_never_made_in_a_folder_of_its_own_making(tmp_path: Path, spec: str) -> None:
    """The folder was created, so a typo in its name left a new store where nobody reads."""
    from wattbench.store import StoreError, missing_folder, open_store

    spec = spec.format(tmp=tmp_path)
    assert missing_folder(spec) == tmp_path / "nodir"
    with pytest.raises(StoreError, match=f"no folder {tmp_path}/nodir \\(nothing was created\\)"):
        open_store(spec)
    assert not (tmp_path / "nodir").exists()
    assert missing_folder(f"{tmp_path}/x.sqlite") is None
    assert missing_folder("http://influx:8086") is None


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_store_file_deleted_or_replaced_under_the_writer_fails_its_flush(tmp_path: Path, how: str) -> None:
    """The writer went on committing into the deleted file's inode, acknowledging every message, and
    all of it was lost. The flush now fails (the writer spools the batch), and keeps failing."""
    import os

    from wattbench.store import StoreError
    from wattbench.store.sqlite import SqliteStore

    path = tmp_path / "wb.sqlite"
    store = SqliteStore(path)
    store.write_samples("a", _rows(10))
    store.flush()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    if how == "replaced":
        other = SqliteStore(tmp_path / "other.sqlite")
        other.close()
        os.replace(tmp_path / "other.sqlite", path)
    for _ in range(2):
        store.write_samples("a", _rows(5))
        with pytest.raises(StoreError, match=f"store {path} was deleted or replaced while in use"):
            store.flush()
        assert store.pending() == 0
    store.close()


def test_a_reader_leaves_an_empty_file_alone(tmp_path: Path) -> None:
    """report, status and compare turned an empty file (a `touch`, a failed copy) into a wattbench
    store of 36 KB, although they only read."""
    from wattbench.store import StoreError, open_store

    path = tmp_path / "empty.sqlite"
    path.write_bytes(b"")
    with pytest.raises(StoreError, match="is empty: no wattbench store"):
        open_store(str(path), must_exist=True)
    assert path.stat().st_size == 0 and sorted(p.name for p in tmp_path.iterdir()) == ["empty.sqlite"]
    open_store(str(path)).close()  # a writer (collect) makes its store in it, as ever


@pytest.fixture
def read_only_view(tmp_path: Path) -> Any:
    """A folder and a read-only view of it (a bind mount): what a reader sees of a store in a folder it
    cannot write, such as the systemd collector's (0750, group read) or a read-only share. Root writes
    past permission bits, not past a read-only mount."""
    import subprocess

    folder, view = tmp_path / "store", tmp_path / "view"
    folder.mkdir()
    view.mkdir()
    if subprocess.run(["mount", "--bind", str(folder), str(view)], capture_output=True).returncode:
        pytest.skip("cannot bind-mount a folder here (needs root and a mount namespace of its own)")
    try:
        if subprocess.run(["mount", "-o", "remount,bind,ro", str(view)], capture_output=True).returncode:
            pytest.skip("cannot make a bind mount read-only here")
        yield folder, view
    finally:
        subprocess.run(["umount", "--lazy", str(view)], check=True)


def test_a_reader_reads_a_store_in_a_folder_it_cannot_write(read_only_view: Any) -> None:
    """report, status and compare failed with "unable to open database file": a store in WAL mode wants
    its -shm file beside it, which a reader could not make. One a stopped collector left is read as it
    is; one a collector is writing is read with what the collector has committed, not only what was
    checkpointed into the file."""
    from wattbench.store import StoreError, open_reader
    from wattbench.store.sqlite import SqliteStore

    folder, view = read_only_view
    writer = SqliteStore(folder / "wb.sqlite")
    writer.write_samples("a", _rows(10))
    writer.flush()
    writer.close()  # a clean stop: the log is checkpointed and removed
    assert sorted(p.name for p in folder.iterdir()) == ["wb.sqlite"]
    reader = open_reader(str(view / "wb.sqlite"))
    assert reader.count_samples() == 10
    reader.close()
    # A writer (the sweep stores its phases) is told why, not "unable to open database file".
    with pytest.raises(StoreError, match="cannot be written by this user"):
        SqliteStore(view / "wb.sqlite", must_exist=True)

    writer = SqliteStore(folder / "wb.sqlite")
    writer._db.execute("PRAGMA wal_autocheckpoint=0")  # what it commits stays in the log
    writer.write_samples("a", _rows(5, ch="psu2", start_s=10))
    writer.flush()
    try:
        reader = open_reader(str(view / "wb.sqlite"))
        assert reader.count_samples() == 15
        reader.close()
    finally:
        writer.close()


def test_the_report_command_reads_a_store_in_a_folder_it_cannot_write(read_only_view: Any) -> None:
    import subprocess
    import sys

    from wattbench.store.sqlite import SqliteStore

    folder, view = read_only_view
    writer = SqliteStore(folder / "wb.sqlite")
    writer.write_samples("a", _rows(10))
    writer.flush()
    writer.close()
    out = subprocess.run(
        [sys.executable, "-m", "wattbench.cli", "report", "latest", "--store", str(view / "wb.sqlite")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    # No run was stored: the store was opened and read, and says so.
    assert out.returncode == 2 and "holds no runs" in out.stderr, out.stderr
    assert "unable to open" not in out.stderr


def test_a_writer_leaves_another_program_s_database_alone(tmp_path: Path) -> None:
    """collect and demo wrote the store's tables into someone else's SQLite file given as --store, and
    switched it to WAL mode, which changes how that program must open it; the readers refused it."""
    from wattbench.store import StoreError, open_store

    path = tmp_path / "app.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE notes (x)")
        db.execute("INSERT INTO notes VALUES (1)")
    before = path.read_bytes()
    with pytest.raises(StoreError, match="is a SQLite file but no wattbench store"):
        open_store(str(path))
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]


def test_sqlite_failed_flush_keeps_nothing_half_written(tmp_path: Path) -> None:
    from wattbench.store.sqlite import SqliteStore

    store = SqliteStore(tmp_path / "wb.sqlite")
    store.write_samples("a", _rows(10))
    store.write_samples("a", [{"s": 1, "t": T0, "c": "x", "W": [1.0]}])  # cannot be bound
    with pytest.raises(sqlite3.Error):
        store.flush()
    assert store.count_samples() == 0 and store.pending() == 0


def test_line_protocol_follows_the_layout() -> None:
    layout = contract.influx_layout()["measurements"]["wb_sample"]["fields"]
    lines: list[str] = []
    sample_lines("bench-a", [{"s": 3, "t": T0, "c": "psu1", "W": 231, "PF": -0.5, "n": 10, "f": 4.0}], lines)
    (line,) = lines
    head, fields, ts = line.split(" ")
    assert head == "wb_sample,ch=psu1,dev=bench-a" and ts == str(T0 * 1000), "microseconds, whole ms"
    parsed = dict(kv.split("=") for kv in fields.split(","))
    assert parsed == {"s": "3i", "W": "231", "PF": "-0.5", "n": "10i", "f": "4i"}
    for k, v in parsed.items():
        assert v.endswith("i") == (layout[k] == "int"), k


@pytest.mark.services
def test_influx_store(influxdb) -> None:  # type: ignore[no-untyped-def]
    from wattbench.store import open_store

    store = open_store(influxdb.url, db=influxdb.db)
    exercise(store)
    # field types in InfluxDB are exactly the layout's (Telegraf writes the same ones)
    layout = contract.influx_layout()["measurements"]
    kinds = {"float": "float", "int": "integer", "string": "string", "bool": "boolean"}
    for measurement in (
        "wb_sample",
        "wb_status",
        "wb_health",
        "wb_phase",
        "wb_result",
        "wb_meta",
        "wb_reject",
    ):
        got = {r["fieldKey"]: r["fieldType"] for r in influxdb.query(f'SHOW FIELD KEYS FROM "{measurement}"')}
        assert got, measurement
        for key, ftype in got.items():
            assert kinds[layout_field_type(measurement, key) or "?"] == ftype, (measurement, key)
        tags = {r["tagKey"] for r in influxdb.query(f'SHOW TAG KEYS FROM "{measurement}"')}
        assert tags == set(layout[measurement]["tags"]), measurement
    store.close()


@pytest.mark.services
def test_influx_store_reports_an_outage_and_recovers(influxdb) -> None:  # type: ignore[no-untyped-def]
    from wattbench.store.influx import InfluxStore, StoreUnavailable

    store = InfluxStore(influxdb.url, db=influxdb.db)
    store.write_samples("a", _rows(5))
    store.flush()
    influxdb.stop()
    store.write_samples("a", _rows(5, start_s=5))
    with pytest.raises(StoreUnavailable):
        store.flush()
    assert store.pending() == 0  # the caller keeps the failed writes (the collector spools them)
    influxdb.start()
    store.write_samples("a", _rows(10))
    store.flush()
    assert store.count_samples("a") == 10
    store.close()


def test_influx_credentials_never_show(monkeypatch: pytest.MonkeyPatch) -> None:
    from wattbench.store.influx import InfluxStore

    store = InfluxStore("http://127.0.0.1:1", user="u", token="s3cret-token", password="s3cret-pass")
    assert "s3cret" not in repr(store) and "s3cret" not in str(vars(store).get("url"))
    assert store.http._token_value() == "s3cret-token"


def test_the_influx_backend_takes_values_and_the_settings_read_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The store reads no environment variable itself: one resolver (the settings) gives the one order
    of precedence, and an option on the command line beats the environment."""
    import argparse

    from wattbench.cli.options import add_store_options, open_store_from_args
    from wattbench.store.influx import InfluxStore

    monkeypatch.setenv("WATTBENCH_INFLUX_DB", "envdb")
    monkeypatch.setenv("WATTBENCH_INFLUX_TOKEN", "env-token")
    assert InfluxStore("http://127.0.0.1:1").db == "wattbench"
    assert InfluxStore("http://127.0.0.1:1").http._token_value() == ""
    parser = argparse.ArgumentParser()
    add_store_options(parser)
    store = open_store_from_args(parser.parse_args(["--influx", "http://127.0.0.1:1"]), must_exist=False)
    assert store.db == "envdb" and store.http._token_value() == "env-token"
    store = open_store_from_args(
        parser.parse_args(["--influx", "http://127.0.0.1:1", "--db", "given"]), must_exist=False
    )
    assert store.db == "given"


def test_overlap_after_a_backward_clock_step_does_not_overwrite(tmp_path: Path) -> None:
    """After the clock steps back, a sample can carry a millisecond already used by an earlier sample
    of its channel; it is flagged clock_step and must be stored beside it, idempotently."""
    from wattbench.store.sqlite import SqliteStore

    before = {"s": 10, "t": T0, "c": "x", "W": 100.0}
    overlap = {"s": 30, "t": T0, "c": "x", "W": 200.0, "f": contract.FLAG_CLOCK_STEP}
    lines: list[str] = []
    sample_lines("a", [before, overlap, overlap], lines)
    stamps = [line.rsplit(" ", 1)[1] for line in lines]
    assert stamps[0] == str(T0 * 1000) and stamps[1] == stamps[2] != stamps[0]
    assert int(stamps[1]) // 1000 == T0, "still the sample's own millisecond"

    store = SqliteStore(tmp_path / "wb.sqlite")
    store.write_samples("a", [before, overlap])
    store.write_samples("a", [overlap])  # a replay
    store.flush()
    series = store.series("a", "x", T0, T0, ("W",))
    assert sorted(series.seq.tolist()) == [10, 30] and store.count_samples() == 2


def test_sqlite_file_of_an_older_layout_gains_the_new_columns(tmp_path: Path) -> None:
    """A file written before wb_phase and wb_result had `channels` still takes a run that names them."""
    from wattbench.store.sqlite import SqliteStore
    from wattbench.store.sqlitefile import SCHEMA

    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.execute(SCHEMA.split(";")[0])  # wb_sample, as every store has had it
    db.executescript(
        "CREATE TABLE wb_phase (run TEXT NOT NULL, phase TEXT NOT NULL, event TEXT NOT NULL, time INTEGER NOT NULL,"
        ' "n", "kind", "target", "rate", "ops", "copies", "workload", doc TEXT,'
        " PRIMARY KEY (run, phase, event, time)) WITHOUT ROWID;"
        "CREATE TABLE wb_result (run TEXT NOT NULL, phase TEXT NOT NULL, time INTEGER NOT NULL,"
        ' "kind", "target", "actual", "ops", "W", "Wh", "ratio", "inlet_C", "overall", "valid", doc TEXT,'
        " PRIMARY KEY (run, phase, time)) WITHOUT ROWID;"
    )
    db.close()
    store = SqliteStore(path)
    start = _vector("phase_run_start")
    store.write_phase(start)
    result = _vector("result_channels_listed")
    store.write_result(result)
    store.flush()
    assert store.phases(start["run"])[0]["channels"] == start["channels"]
    assert store.result(result["run"])["channels"] == result["channels"]  # type: ignore[index]
    store.close()


@pytest.mark.services
def test_influx_write_refusals_and_a_dropped_database(influxdb) -> None:  # type: ignore[no-untyped-def]
    """The write request against the real InfluxDB: a refusal for good names InfluxDB's reason, a
    database dropped underneath is created again, and gzip'd bodies land the same."""
    from wattbench.store.influx import InfluxStore, StoreRejected, StoreUnavailable

    store = InfluxStore(influxdb.url, db="wb_writes", parallel_writes=2, batch_lines=3)
    store.write_samples("a", _rows(10))
    store.flush()
    assert store.count_samples("a") == 10 and store.written_lines == 10
    # W is a float in the layout: an integer W is a field type conflict, refused for good
    store.write_lines([f"wb_sample,ch=psu1,dev=a W=5i {T0 * 1000}"])
    with pytest.raises(StoreRejected, match=r"HTTP 400.*conflict"):
        store.flush()
    influxdb.query('DROP DATABASE "wb_writes"')
    store.write_samples("a", _rows(4))
    with pytest.raises(StoreUnavailable, match="HTTP 404"):
        store.flush()
    store.write_samples("a", _rows(4))
    store.flush()  # the database is created again
    assert store.count_samples("a") == 4
    store.close()
    zipped = InfluxStore(influxdb.url, db="wb_gzip", gzip=True)
    zipped.write_samples("a", _rows(50) + _rows(50, "psu2", 50))
    zipped.flush()
    assert zipped.count_samples("a") == 100
    zipped.close()
