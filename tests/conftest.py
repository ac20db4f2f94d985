"""Fixtures for real services. Each test that asks for one gets its own instance on a free port.

The suite runs in parallel (scripts/test.sh passes pytest-xdist's `-n`). What keeps that safe lives
here and in wattbench_devkit: every worker takes ports from a band of its own (services), keeps
wattbench's state under a folder of its own (below), and a test module whose fixtures are module-scoped
(a built wheel, a started Home Assistant) runs whole on one worker, so they are made once (parallel).
tests/test_parallel_safety.py holds these rules.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from wattbench_devkit import parallel, services

_STATE_HOME: str | None = None


def pytest_configure(config: pytest.Config) -> None:
    # wattbench's default state folder is ~/.local/state/wattbench: a command run by a test without
    # --state would share it with every other worker, and with the user's own runs. Each worker (and a
    # serial run) gets a folder of its own, inherited by every process it starts.
    global _STATE_HOME
    _STATE_HOME = tempfile.mkdtemp(prefix="wattbench-test-state-")
    os.environ["XDG_STATE_HOME"] = _STATE_HOME


def pytest_unconfigure(config: pytest.Config) -> None:
    if _STATE_HOME is not None:
        shutil.rmtree(_STATE_HOME, ignore_errors=True)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Modules with module-scoped fixtures, and named groups, each stay on one worker
    (wattbench_devkit.parallel)."""
    return parallel.make_scheduler(config, log)


def _require(make):  # type: ignore[no-untyped-def]
    """In CI a missing service is a failure; on a developer machine it is a skip with the fix."""
    try:
        return make()
    except services.ServiceUnavailable as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(exc))


@pytest.fixture
def mosquitto(tmp_path: Path) -> Iterator[services.Mosquitto]:
    broker = _require(lambda: services.Mosquitto(tmp_path / "mosquitto"))
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture
def ipmi_sim(tmp_path: Path) -> Iterator[services.IpmiSim]:
    """OpenIPMI's BMC simulator with one power sensor at 344 W."""
    sim = _require(lambda: services.IpmiSim(tmp_path / "ipmi_sim", watts=344.0))
    sim.start()
    yield sim
    sim.stop()


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[Any]:
    """Start a real Prometheus from deploy/prometheus/ as shipped, scraping the given targets:
    prometheus(["127.0.0.1:9464"]). Stopped after the test."""
    started: list[services.Prometheus] = []

    def start(targets: list[str]) -> services.Prometheus:
        conf = services.REPO / "deploy" / "prometheus"
        prom = _require(lambda: services.Prometheus(tmp_path / f"prometheus{len(started)}", conf, targets))
        started.append(prom)
        return prom.start()

    yield start
    for prom in started:
        prom.stop()


@pytest.fixture
def slurm_cluster(tmp_path: Path) -> Iterator[Any]:
    """slurm_cluster(["wbn1", "wbn2"], cpus=2): a real Slurm (munged, slurmctld, a slurmd per node name)
    on loopback, from devkit/wattbench_devkit/slurm.py. Stopped after the test."""
    from wattbench_devkit.slurm import SlurmCluster

    started: list[SlurmCluster] = []

    def start(nodes: list[str], cpus: int = 2) -> SlurmCluster:
        cluster = _require(lambda: SlurmCluster(tmp_path / f"slurm{len(started)}", nodes, cpus))
        started.append(cluster)
        return cluster.start()

    yield start
    for cluster in started:
        cluster.stop()


@pytest.fixture
def chrony(tmp_path: Path) -> Iterator[Any]:
    """chrony(address, port): an NTP server from Debian's chrony on loopback. Stopped after the test."""
    started: list[services.Chrony] = []

    def start(address: str = "127.0.0.1", port: int | None = None) -> services.Chrony:
        ntp = _require(lambda: services.Chrony(tmp_path / f"chrony{len(started)}", address, port))
        started.append(ntp)
        return _require(ntp.start)

    yield start
    for ntp in started:
        ntp.stop()


@pytest.fixture
def influxdb(tmp_path: Path) -> Iterator[services.InfluxDB]:
    db = _require(lambda: services.InfluxDB(tmp_path / "influxdb"))
    db.start()
    yield db
    db.stop()


@pytest.fixture
def telegraf_factory(tmp_path: Path) -> Iterator:  # type: ignore[type-arg]
    """telegraf_factory(mosquitto, influxdb, db=None, config=None) -> a started Telegraf."""
    started: list[services.Telegraf] = []

    def make(
        mosquitto: services.Mosquitto,
        influxdb: services.InfluxDB,
        db: str | None = None,
        config: Path | None = None,
        client_id: str = "telegraf-test",
    ) -> services.Telegraf:
        env = services.telegraf_env(mosquitto, influxdb, db, client_id)
        tg = _require(
            lambda: services.Telegraf(
                tmp_path / f"telegraf{len(started)}",
                config or services.REPO / "deploy" / "telegraf.conf",
                env,
            )
        )
        started.append(tg)
        return tg.start()

    yield make
    for tg in started:
        tg.stop()
