"""Fixtures for real services. Each test that asks for one gets its own instance on a free port."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from wattbench_devkit import services


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
