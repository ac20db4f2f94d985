"""Scenario 7: the collector's spool fills its disk while InfluxDB is down.

The spool lives on a 256 KiB tmpfs mounted for the test (root only; skipped otherwise). With
InfluxDB stopped the collector spools until a write fails with ENOSPC. It must then say so clearly
(log and exit status 4) and acknowledge nothing it could not make durable, so the broker keeps those
messages (back-pressure: the broker's message store grows while the collector is down). Once
InfluxDB is back and the disk has room again, a restarted collector replays its spool and takes the
messages the broker kept: nothing lost, nothing doubled.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .harness import Figures, Rig, read_truth, tally, wait_until

HZ, CHANNELS, SECONDS = 50, 4, 40
EXIT_STORAGE = 4


@contextlib.contextmanager
def tiny_filesystem(path: Path, size: str = "256k") -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs for the disk-full spool needs root")
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode})")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def grow(path: Path, size: str) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size}", str(path)], check=True, capture_output=True)


def broker_store_count(host: str, port: int, timeout: float = 15.0) -> int:
    """Messages Mosquitto holds in its store ($SYS/broker/store/messages/count, retained)."""
    import paho.mqtt.client as mqtt

    got: list[int] = []
    ready = threading.Event()

    def on_message(client: object, userdata: object, msg: mqtt.MQTTMessage) -> None:
        got.append(int(msg.payload))
        ready.set()

    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="faults-sys", protocol=mqtt.MQTTv311)
    c.on_message = on_message
    c.connect(host, port)
    c.loop_start()
    c.subscribe("$SYS/broker/store/messages/count")
    try:
        ready.wait(timeout)
    finally:
        c.disconnect()
        c.loop_stop()
    return got[-1] if got else -1


@dataclass
class SpoolFullRun:
    figures: Figures
    exit_status: int
    log: str
    baseline: int
    held: int
    restart_with_full_disk: int | None


@pytest.fixture(scope="module")
def spool_full_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SpoolFullRun]:
    workdir = tmp_path_factory.mktemp("spoolfull")
    rig = Rig.open(workdir)
    try:
        yield _run(rig, workdir)
    finally:
        rig.close()


def _run(rig: Rig, workdir: Path) -> SpoolFullRun:
    dev = "spoolfull"
    with tiny_filesystem(workdir / "spoolfs") as fs:
        col = rig.collector(spool_dir=fs / "spool")
        col.start_subscribed()
        app = rig.appliance(dev, count=HZ * CHANNELS * SECONDS, hz=HZ, channels=CHANNELS)
        t0 = time.monotonic()
        app.start()
        rig.wait_flowing(dev)
        baseline = broker_store_count(rig.mosquitto.host, rig.mosquitto.port)

        rig.influx.stop()
        t_down = time.monotonic()
        rc = col.wait(120)
        full_after_s = time.monotonic() - t_down
        state = col.state()
        log = col.text()
        # Let the appliance go on publishing while nothing ingests: the broker must hold it all.
        time.sleep(12)
        held = broker_store_count(rig.mosquitto.host, rig.mosquitto.port)

        # InfluxDB returns; the disk is still full.
        rig.influx.start()
        col.start()
        restart_rc = None
        with contextlib.suppress(TimeoutError):
            restart_rc = col.wait(20)
        if restart_rc is not None:
            # It could not even replay into the returned InfluxDB: give the disk room, then again.
            grow(fs, "16m")
            col.start()
        col.wait_subscribed()
        counters = app.wait_done(SECONDS * 4 + 120)
        rig.wait_stored(dev, counters["samples"], timeout=180)
        wait_until(lambda: col.state().get("spool", {}).get("bytes") == 0, 60, what="the spool to drain")
        writer = col.state()["writer"]
        assert col.terminate() == 0, col.tail()

    fig = tally(
        "spool_disk_full",
        "ci",
        "collector spool on a 256 KiB filesystem fills while InfluxDB is down",
        read_truth(app.truths),
        rig.stored(dev),
        time.monotonic() - t0,
        issued=counters["samples"],
        collector_exit_status=rc,
        spool_full_after_s=round(full_after_s, 1),
        spooled_before_full=state.get("writer", {}).get("spooled_samples"),
        broker_store_before=baseline,
        broker_store_while_down=held,
        restart_with_full_disk_exit=restart_rc,
        replayed_samples=writer["replayed_samples"],
    )
    return SpoolFullRun(fig, rc, log, baseline, held, restart_rc)


@pytest.mark.services
def test_spool_disk_full_backpressure(spool_full_run: SpoolFullRun, record: Any) -> None:
    run = spool_full_run
    fig = record(run.figures)
    assert run.exit_status == EXIT_STORAGE, (
        f"collector exit status {run.exit_status}, expected {EXIT_STORAGE}"
    )
    assert "No space left on device" in run.log and "without acknowledging" in run.log, run.log[-2000:]
    assert run.held > run.baseline, "the broker did not keep the unacknowledged messages"
    assert fig.sent > 0
    fig.assert_clean()


@pytest.mark.services
def test_spool_full_recovers_when_influxdb_returns(spool_full_run: SpoolFullRun) -> None:
    """With InfluxDB back, a restarted collector should empty its spool into it before spooling
    anything new, even while the disk is still full."""
    assert spool_full_run.restart_with_full_disk is None, (
        f"the restarted collector exited with {spool_full_run.restart_with_full_disk}"
    )
