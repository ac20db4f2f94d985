"""What every power source's end-to-end test does: the real host-mode appliance with the source's
channel (and whatever else the test adds), publishing through real Mosquitto, the collector storing
into the embedded store, a short sweep of the built-in workload, and `wattbench report` as a user
types it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

RUN = "source-run"


@dataclass
class SweepRun:
    outcome: Any
    notes: list[str]
    db: str

    def report(self, *args: str) -> subprocess.CompletedProcess[str]:
        cli = Path(sys.executable).parent / "wattbench"
        assert cli.exists(), "wattbench console script not installed in this environment"
        p = subprocess.run(
            [str(cli), "report", RUN, "--store", self.db, "--no-inlet-required", *args],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "COLUMNS": "250"},  # tables unwrapped
        )
        assert "Traceback" not in p.stderr, p.stderr
        return p


def sweep_with(
    tmp_path: Path,
    mosquitto: Any,
    dev: str,
    channels: list[dict[str, Any]],
    sim_watts: float | None = None,
    named: list[str] | None = None,
    before: Callable[[], None] | None = None,
    plugs: str | None = None,
) -> SweepRun:
    """A 2-level sweep (3 s windows) on an appliance `dev` with `channels`, plus a simulated wall meter
    `sim` of sim_watts when given (no appliance when there is neither). named: the sweep's --channel
    list (None: chosen from metadata). plugs: the collector's smart-plug mapping file."""
    fw_host = pytest.importorskip("wattbench_fw.host")
    from wattbench.config import CollectorConfig
    from wattbench.core.plan import Timing, specpower_plan
    from wattbench.ingest.collector import Collector
    from wattbench.store import open_store
    from wattbench.sweep.channels import parse_channel
    from wattbench.sweep.session import MqttSettings, SweepSetup, run_sweep
    from wattbench.workloads.builtin.workers import BuiltinWorkload

    broker = f"{mosquitto.host}:{mosquitto.port}"
    cfg = fw_host.sim_config(
        dev=dev, broker=broker, hz=10, model="const", watts=sim_watts or 0.0, batch_ms=250
    )
    if sim_watts is None:
        cfg["channels"] = []
    cfg["channels"].extend(channels)
    db = str(tmp_path / "wb.sqlite")
    collector = Collector(
        CollectorConfig(
            broker=broker,
            store=db,
            state_dir=str(tmp_path / "state"),
            spool_dir=str(tmp_path / "spool"),
            validate_workers=0,
            health_period_s=1.0,
            plugs=plugs or "",
        )
    )
    collector.start()
    appliance = fw_host.HostAppliance(cfg).start() if cfg["channels"] else None
    store = open_store(db)
    notes: list[str] = []
    try:
        assert appliance is None or appliance.wait_connected(20)
        if before is not None:
            before()
        plan = specpower_plan(calibrations=3, levels=(1.0, 0.5), timing=Timing(0.5, 3.0, 0.3, 0.2))
        outcome = run_sweep(
            SweepSetup(
                run=RUN,
                plan=plan,
                workload=BuiltinWorkload(workers=1),
                store=store,
                mqtt=MqttSettings(broker),
                channels=[parse_channel(c) for c in named] if named else None,
                wait_data_s=30,
                announce=notes.append,
            )
        )
    finally:
        if appliance is not None:
            appliance.stop(timeout=10)
        collector.stop()
        store.close()
    assert outcome.record.interrupted is None
    return SweepRun(outcome, notes, db)
