"""Helpers for the collector tests: the collector as a real `wattbench collect` process, host-mode
appliances, and exactly-once checks against the store by sequence number."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from wattbench_schema import FLAG_CLOCK_STEP


def _child_env() -> dict[str, str]:
    # The child imports exactly the modules this test process imports.
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    env.pop("WATTBENCH_INFLUX_URL", None)
    return env


class CollectorProcess:
    """`wattbench collect` in a child process, with its log and status file."""

    def __init__(self, workdir: Path, args: list[str], cid: str = "c1") -> None:
        self.workdir = workdir
        self.cid = cid
        self.args = args
        self.log_path = workdir / f"collect-{cid}.log"
        self.state_dir = workdir / "state"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> CollectorProcess:
        argv = [
            sys.executable,
            "-m",
            "wattbench.cli",
            "-v",
            "collect",
            "--id",
            self.cid,
            "--state-dir",
            str(self.state_dir),
            "--health-period",
            "0.5",
            *self.args,
        ]
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, env=_child_env(), start_new_session=True
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"collector exited with {self.proc.returncode}:\n{self.log()}")
            if "subscribed" in self.log()[offset:]:
                return self
            time.sleep(0.05)
        raise TimeoutError(f"collector not ready:\n{self.log()}")

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def state(self) -> dict[str, Any]:
        try:
            return dict(json.loads((self.state_dir / f"collector-{self.cid}.json").read_text()))
        except (OSError, ValueError):
            return {}

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM: drain, commit, acknowledge, exit."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                raise
        return int(self.proc.returncode)

    def kill(self) -> None:
        """SIGKILL: no chance to flush or acknowledge anything."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)


@pytest.fixture
def collector_factory(tmp_path: Path) -> Iterator[Callable[..., CollectorProcess]]:
    started: list[CollectorProcess] = []

    def make(args: list[str], cid: str = "c1", workdir: Path | None = None) -> CollectorProcess:
        proc = CollectorProcess(workdir or tmp_path, args, cid)
        started.append(proc)
        return proc

    yield make
    for proc in started:
        with contextlib.suppress(Exception):
            proc.kill()


@contextlib.contextmanager
def appliances(
    broker: str, tmp: Path, n: int, channels: int, hz: float, count: int, prefix: str = "fw"
) -> Iterator[list[Any]]:
    """n host-mode appliances (the real firmware on CPython) sending `count` samples each."""
    from wattbench_fw.host import HostAppliance, sim_config

    configs = [
        sim_config(
            dev=f"{prefix}-{i}",
            broker=broker,
            channels=channels,
            hz=hz,
            count=count,
            batch_ms=200,
            spool_dir=tmp / f"{prefix}-{i}-flash",
            seed=i,
        )
        for i in range(n)
    ]
    apps = [HostAppliance(cfg) for cfg in configs]
    for app in apps:
        app.start()
    try:
        yield apps
    finally:
        for app in apps:
            with contextlib.suppress(Exception):
                app.stop(timeout=5)


def wait_appliances_done(apps: list[Any], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for app in apps:
        assert app.wait_done(max(1.0, deadline - time.monotonic())), (
            f"{app.dev} did not finish: {app.counters()}"
        )


class Tap:
    """An independent MQTT subscriber that records every published sample row: (dev, s, ch, t)."""

    def __init__(self, host: str, port: int) -> None:
        import threading

        import paho.mqtt.client as mqtt

        import wattbench_schema as contract

        self.rows: dict[str, dict[int, tuple[str, int]]] = {}
        self.flags: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()
        ready = threading.Event()
        self.client = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2, client_id="wb-test-tap", protocol=mqtt.MQTTv5
        )
        self.client.on_connect = lambda c, *a: c.subscribe(contract.subscription("samples"), qos=1)
        self.client.on_subscribe = lambda *a: ready.set()
        self.client.on_message = self._on_message
        self.client.connect(host, port)
        self.client.loop_start()
        assert ready.wait(10), "tap did not subscribe"

    def _on_message(self, client: Any, userdata: Any, msg: Any) -> None:
        doc = json.loads(msg.payload)
        with self._lock:
            rows = self.rows.setdefault(doc["dev"], {})
            for r in doc["samples"]:
                rows[r["s"]] = (r["c"], r["t"])
                if "f" in r:
                    self.flags[(doc["dev"], r["s"])] = r["f"]

    def keys(self, dev: str) -> int:
        """Distinct (ch, t) keys published by a device: the points the store should end up with."""
        with self._lock:
            return len(set(self.rows.get(dev, {}).values()))

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def wait_keys_stored(influxdb: Any, tap: Tap, devs: list[str], timeout: float, db: str | None = None) -> None:
    """Wait until the store holds as many points per device as the tap saw distinct keys."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = influxdb.query('SELECT count("s") FROM "wb_sample" GROUP BY "dev"', db=db)
        counts = {r["dev"]: r["count"] for r in rows}
        if all(counts.get(d, 0) >= tap.keys(d) > 0 for d in devs):
            return
        time.sleep(0.5)


def stored_points(influxdb: Any, db: str | None = None) -> dict[tuple[str, str, int], int]:
    """(dev, ch, ms) -> s of every wb_sample point in InfluxDB."""
    out = {}
    for r in influxdb.query('SELECT "s" FROM "wb_sample" GROUP BY "dev", "ch"', db=db):
        out[(r["dev"], r["ch"], r["time"])] = r["s"]
    return out


def assert_stored_exactly_once(
    influxdb: Any, tap: Tap, devs: list[str], per_dev: int, db: str | None = None
) -> int:
    """Every published sample is in the store once, keyed as the layout says (dev, ch, ms), with the
    sequence number it was published with; nothing else is there. Returns how many samples shared a
    millisecond with an earlier one of their channel.

    samples.schema.json wants time to increase per channel, so keys are unique; the one exception the
    firmware documents is a backward clock step, whose samples it flags clock_step and which may then
    land on a millisecond already used. Those are allowed here, and nothing else."""
    stored = stored_points(influxdb, db)
    same_ms = 0
    for dev in devs:
        published = tap.rows.get(dev, {})
        assert sorted(published) == list(range(per_dev)), (
            f"{dev}: the appliance published every sequence number"
        )
        keys: dict[tuple[str, int], set[int]] = {}
        for s, (ch, t) in published.items():
            keys.setdefault((ch, t), set()).add(s)
        for seqs in keys.values():
            if len(seqs) > 1:
                same_ms += len(seqs) - 1
                later = sorted(seqs)[1:]
                assert all(tap.flags.get((dev, s), 0) & FLAG_CLOCK_STEP for s in later), (
                    dev,
                    sorted(seqs),
                    "samples in one millisecond of a channel without the clock_step flag",
                )
        mine = {(ch, t): s for (d, ch, t), s in stored.items() if d == dev}
        assert set(mine) == set(keys), (
            dev,
            "missing",
            len(set(keys) - set(mine)),
            "extra",
            len(set(mine) - set(keys)),
        )
        for key, s in mine.items():
            assert s in keys[key], (dev, key, s)
    return same_ms


def sequence_counts(influxdb: Any, db: str | None = None) -> dict[str, dict[str, int]]:
    """Per device: stored points, distinct sequence numbers, first and last, from InfluxDB itself."""
    rows = influxdb.query('SELECT count("s"), min("s"), max("s") FROM "wb_sample" GROUP BY "dev"', db=db)
    out = {}
    for r in rows:
        out[r["dev"]] = {"count": r["count"], "first": r["min"], "last": r["max"]}
    # count("s") counts points; a point exists once per (dev, ch, t), so also count distinct s
    for r in influxdb.query('SELECT count(distinct("s")) FROM "wb_sample" GROUP BY "dev"', db=db):
        out[r["dev"]]["distinct"] = r["count"]
    return out


def wait_stored(
    influxdb: Any, devs: list[str], per_dev: int, timeout: float, db: str | None = None
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    counts: dict[str, Any] = {}
    while time.monotonic() < deadline:
        rows = influxdb.query('SELECT count("s") FROM "wb_sample" GROUP BY "dev"', db=db)
        counts = {r["dev"]: r["count"] for r in rows}
        if all(counts.get(d, 0) >= per_dev for d in devs):
            break
        time.sleep(0.5)
    return counts


def assert_exactly_once(influxdb: Any, devs: list[str], per_dev: int, db: str | None = None) -> None:
    got = sequence_counts(influxdb, db)
    for dev in devs:
        assert dev in got, f"nothing stored for {dev}"
        c = got[dev]
        assert c["first"] == 0 and c["last"] == per_dev - 1, (dev, c)
        assert c["count"] == per_dev, (dev, c, "every sequence number stored once")
        assert c["distinct"] == per_dev, (dev, c, "no sequence number stored twice")
