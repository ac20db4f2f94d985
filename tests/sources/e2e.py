"""What every power source's end-to-end test does: the real host-mode appliance with the source's
channel (and whatever else the test adds), run as `wattbench appliance --config FILE` in a process of
its own, publishing through real Mosquitto, the collector storing into the embedded store, a short
sweep of the built-in workload, and `wattbench report` as a user types it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
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
    in_process: bool = False,
) -> SweepRun:
    """A 2-level sweep (3 s windows) on an appliance `dev` with `channels`, plus a simulated wall meter
    `sim` of sim_watts when given (no appliance when there is neither). named: the sweep's --channel
    list (None: chosen from metadata). plugs: the collector's smart-plug mapping file. in_process: the
    appliance in a thread of this process instead of its own (see `collecting`)."""
    fw_host = pytest.importorskip("wattbench_fw.host")
    from wattbench.core.plan import Timing, specpower_plan
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
    notes: list[str] = []
    with collecting(tmp_path, broker, cfg, plugs=plugs, in_process=in_process) as db:
        if before is not None:
            before()
        store = open_store(db)
        try:
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
            store.close()
    assert outcome.record.interrupted is None
    return SweepRun(outcome, notes, db)


class ApplianceProcess:
    """`wattbench appliance --config FILE`, started as a user starts it: a process of its own, in a
    session of its own, its output in a log file. In a thread of the test's process, its sampler woke
    only when this process let it (the sweep, the collector, the interpreter lock), and on a busy
    machine it skipped sample slots: holes in the channel's readings that the sweep's checks fail on."""

    def __init__(self, workdir: Path, cfg: dict[str, Any]) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.config = workdir / "appliance.json"
        self.config.write_text(json.dumps(cfg, indent=1))
        self.spool_dir = workdir / "flash"
        self.log = workdir / "appliance.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> ApplianceProcess:
        cli = Path(sys.executable).parent / "wattbench"
        assert cli.exists(), "wattbench console script not installed in this environment"
        argv = [str(cli), "appliance", "--config", str(self.config), "--spool-dir", str(self.spool_dir)]
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
            )
        return self

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, as a service manager stops it: it hands what it buffered to the broker (up to 5 s),
        says offline and lets go of what it holds outside (a BMC's session). Past timeout, SIGKILL to
        its session. Returns its exit status (0: stopped cleanly)."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        return self.proc.returncode

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


@contextmanager
def collecting(
    tmp_path: Path, broker: str, cfg: dict[str, Any], plugs: str | None = None, in_process: bool = False
) -> Iterator[str]:
    """The collector storing into an embedded store in tmp_path, and the appliance of cfg publishing
    (none when cfg has no channel); yields the store's path once the collector has the appliance's
    first batch. On the way out both are stopped, whatever happened, the appliance first; it must
    have stopped cleanly. in_process: the appliance as a thread of this process (HostAppliance), for the
    one test that measured better that way (test_rapl_e2e.py says why)."""
    from wattbench.config import CollectorConfig
    from wattbench.ingest.collector import Collector

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
    appliance: ApplianceProcess | None = None
    status = 0
    if in_process and cfg["channels"]:
        from wattbench_fw.host import HostAppliance

        threaded = HostAppliance(cfg).start()
        try:
            assert threaded.wait_connected(20)
            collector.wait_for(lambda _: cfg["dev"] in collector.devices(), timeout=60)
            yield db
        finally:
            threaded.stop(timeout=10)
            collector.stop()
        return
    try:
        if cfg["channels"]:
            appliance = ApplianceProcess(tmp_path / "appliance", cfg).start()
            app = appliance
            collector.wait_for(lambda _: cfg["dev"] in collector.devices() or not app.running, timeout=60)
            assert cfg["dev"] in collector.devices(), f"no batch from the appliance:\n{appliance.tail()}"
        yield db
    finally:
        if appliance is not None:
            status = appliance.stop()
        collector.stop()
    assert appliance is None or status == 0, f"the appliance exited with {status}:\n{appliance.tail()}"
