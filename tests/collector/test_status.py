"""`wattbench status`: the accounting as a user reads it. Offsets device minus host, gaps open apart
from gaps filled later, the JSON document valid against its schema, a store that cannot be read
refused in one line with exit 3."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

import wattbench_schema as contract
from wattbench.ingest.accounting import DeviceAccount
from wattbench.ingest.live import Live
from wattbench.ingest.metrics import registry_for
from wattbench.store.sqlite import SqliteStore

from .conftest import _child_env

NOW = int(time.time() * 1000)


def status(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wattbench.cli", "status", *args],
        capture_output=True,
        text=True,
        env=_child_env(),
        timeout=60,
    )


def schema_errors(doc: Any) -> list[str]:
    validator = contract.jsonschema_validator("status-report")
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]


def _account() -> DeviceAccount:
    """A device whose clock runs 200 ms ahead of the host, batches received 30 ms after their newest
    sample; one gap that was filled later and one still open."""
    a = DeviceAccount("bench-a")
    for seqs in ([0, 1, 2], [6, 7], [5, 4, 3], [8], [12]):
        rows = [{"s": s, "t": NOW - 5000 + s * 100 + 200, "c": "psu1", "W": 100.0} for s in seqs]
        newest = NOW - 5000 + max(seqs) * 100
        doc = {"v": 1, "dev": "bench-a", "boot": 1, "clk": {"sync": "ntp"}, "samples": rows}
        a.admit(doc, newest + 30)
    return a


def _populate(tmp_path: Path) -> tuple[Path, Path]:
    a = _account()
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    doc = {
        "id": "c1",
        "written_ms": NOW,
        "config": {"broker": "127.0.0.1:1883"},
        "accounts": {"bench-a": a.state()},
    }
    (state_dir / "collector-c1.json").write_text(json.dumps(doc))
    db = tmp_path / "store.sqlite"
    store = SqliteStore(str(db))
    store.write_health("c2", "bench-a", a.health(), NOW)
    store.flush()
    store.close()
    return state_dir, db


def test_status_shows_offsets_device_minus_host_and_gaps_filled_apart(tmp_path: Path) -> None:
    state_dir, db = _populate(tmp_path)
    out = status("--state-dir", str(state_dir), "--store", str(db), "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert schema_errors(doc) == []
    rows = {r["collector"]: r for r in doc["devices"]}
    assert set(rows) == {"c1", "c2"} and rows["c1"]["source"] == "file" and rows["c2"]["source"] == "store"
    for r in rows.values():
        # The device is 200 ms ahead and the delay 30 ms: device - host as measured is +170 ms.
        assert r["clock_offset_ms"] == 170.0, r
        assert (r["gaps"], r["gaps_open"], r["gaps_filled"], r["missing"]) == (2, 1, 1, 3), r
    table = status("--state-dir", str(state_dir), "--store", str(db))
    assert table.returncode == 0, table.stderr
    line = next(ln for ln in table.stdout.splitlines() if "bench-a" in ln and "c1" in ln)
    assert "170" in line and "-170" not in line, line
    assert "gaps open" in table.stdout and "gaps filled" in table.stdout


def test_seen_from_the_store_is_the_devices_newest_sample_not_the_collectors_last_health_point(
    tmp_path: Path,
) -> None:
    """A collector goes on writing health points for a device that has stopped; "seen" from the store
    alone is when the device's newest sample was taken, so a device silent for 11 minutes does not
    read as seen 2 s ago."""
    db = tmp_path / "store.sqlite"
    store = SqliteStore(str(db))
    now = int(time.time() * 1000)  # not the module's NOW: a long session imports it minutes earlier
    stopped = now - 11 * 60_000
    rows = [
        {"s": s, "t": stopped - (3 - s) * 100, "c": ch, "W": 100.0} for s in range(4) for ch in ("a", "b")
    ]
    store.write_samples("bench-a", rows)
    store.write_samples("bench-b", [{"s": 0, "t": now - 1000, "c": "a", "W": 5.0}])
    store.write_health("c2", "bench-a", {"received": 8}, now - 2000)
    store.write_health("c2", "bench-z", {"received": 0}, now - 2000)  # no sample stored yet
    store.flush()
    store.close()
    empty = tmp_path / "state"
    empty.mkdir()
    out = status("--state-dir", str(empty), "--store", str(db), "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert schema_errors(doc) == []
    seen = {r["dev"]: r["seen_ms"] for r in doc["devices"]}
    assert seen == {"bench-a": stopped, "bench-z": None}
    table = status("--state-dir", str(empty), "--store", str(db))
    line = next(ln for ln in table.stdout.splitlines() if "bench-a" in ln)
    assert "11 min" in line, line


def test_metrics_give_the_clock_offset_with_the_sign_of_status(tmp_path: Path) -> None:
    state_dir, _db = _populate(tmp_path)
    out = status("--state-dir", str(state_dir), "--json")
    assert out.returncode == 0, out.stderr
    shown = {r["dev"]: r["clock_offset_ms"] for r in json.loads(out.stdout)["devices"]}
    live = Live(t_ms=NOW, devices={"bench-a": _account().summary()})
    text = generate_latest(registry_for(lambda: live)).decode()
    scraped = {
        s.labels["dev"]: s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
        if s.name == "wattbench_device_clock_offset_ms"
    }
    # The device is 200 ms ahead, the delay 30 ms: +170 ms device minus host, in both.
    assert scraped == shown == {"bench-a": 170.0}, (scraped, shown)


def test_status_json_of_an_empty_state_validates(tmp_path: Path) -> None:
    out = status("--state-dir", str(tmp_path), "--json")
    assert out.returncode == 1
    assert schema_errors(json.loads(out.stdout)) == []


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_status_with_influxdb_down_says_so_in_one_line_and_exits_3(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    for extra in ((), ("--json",)):
        out = status("--state-dir", str(tmp_path), "--influx", url, *extra)
        assert out.returncode == 3, (extra, out.stdout, out.stderr)
        assert out.stdout == "" and "Traceback" not in out.stderr
        lines = out.stderr.strip().splitlines()
        # The store's own error names it (InfluxDB at URL), once.
        assert len(lines) == 1 and lines[0].startswith("wattbench status: InfluxDB at "), out.stderr
        assert lines[0].count(url) == 1 and "does not answer" in lines[0], out.stderr


def test_status_with_a_missing_store_file_creates_none(tmp_path: Path) -> None:
    missing = tmp_path / "missing.sqlite"
    for spec in (str(missing), f"sqlite://{missing}"):
        out = status("--state-dir", str(tmp_path), "--store", spec)
        assert out.returncode == 3 and len(out.stderr.strip().splitlines()) == 1, out.stderr
        assert not missing.exists()


def test_a_plugs_dropped_messages_show_by_reason(tmp_path: Path) -> None:
    a = _account()
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    doc = {
        "id": "c1",
        "written_ms": NOW,
        "accounts": {"bench-a": a.state()},
        "plugs": {
            "bench-a": {"boot": 1, "seq": 12, "drops": {"retained": 2, "stale": 0, "repeat": 5}},
            # every message of this plug was dropped: no account, yet a row
            "plug-b": {"boot": 1, "seq": -1, "drops": {"retained": 1, "stale": 3, "repeat": 0}},
        },
    }
    (state_dir / "collector-c1.json").write_text(json.dumps(doc))
    out = status("--state-dir", str(state_dir), "--json")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert schema_errors(got) == []
    rows = {d["dev"]: d for d in got["devices"]}
    assert rows["bench-a"]["dropped"] == {"retained": 2, "repeat": 5}
    assert rows["bench-a"]["stored"] == a.stored
    assert rows["plug-b"]["dropped"] == {"retained": 1, "stale": 3}
    text = status("--state-dir", str(state_dir))
    assert "plug-b dropped plug messages (no sample): 1 retained, 3 stale" in text.stdout
