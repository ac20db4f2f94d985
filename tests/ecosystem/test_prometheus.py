"""A real Prometheus (Debian) scrapes the collector's /metrics, with deploy/prometheus/ installed as it
ships: the power a host-mode appliance sent and the collector stored comes back from PromQL, the
node-power rule sums only power channels, and the ops-per-watt rule equals a run's overall score."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from wattbench_devkit import REPO
from wattbench_devkit.services import free_port

pytestmark = [pytest.mark.services, pytest.mark.timeout(300)]

WATTS = 150.0
INLET_C = 23.5


def test_prometheus_scrapes_the_power_the_appliance_sent(
    tmp_path: Path, mosquitto: Any, prometheus: Any
) -> None:
    import paho.mqtt.publish as publish

    import wattbench_fw.host as fw_host
    from wattbench.config import CollectorConfig
    from wattbench.ingest.collector import Collector
    from wattbench.store import open_store

    broker = f"{mosquitto.host}:{mosquitto.port}"
    metrics = f"127.0.0.1:{free_port()}"
    db = str(tmp_path / "wb.sqlite")
    collector = Collector(
        CollectorConfig(
            broker=broker,
            store=db,
            state_dir=str(tmp_path / "state"),
            spool_dir=str(tmp_path / "spool"),
            validate_workers=0,
            metrics=metrics,
        )
    ).start()
    cfg = fw_host.sim_config(dev="prom1", broker=broker, hz=5, model="const", watts=WATTS, batch_ms=250)
    # An inlet probe beside the power channel: Prometheus shows it, the node rule must not sum it.
    cfg["channels"].append(
        {"c": "inlet", "meter": "sim", "hz": 1, "role": "inlet", "opts": {"model": "const", "watts": INLET_C}}
    )
    appliance = fw_host.HostAppliance(cfg).start()
    prom = prometheus([metrics])
    try:
        assert appliance.wait_connected(20)
        power = prom.wait_query('wattbench_power_watts{dev="prom1",ch="sim"}')
        assert power, prom.log_tail()
        assert float(power[0]["value"][1]) == pytest.approx(WATTS, rel=1e-9)
        assert power[0]["metric"]["role"] == "power" and power[0]["metric"]["job"] == "wattbench"

        # The same power is in the store.
        store = open_store(db)
        try:
            now = int(time.time() * 1000)
            stored = store.series("prom1", "sim", now - 60_000, now + 1000).values["W"]
        finally:
            store.close()
        assert stored.size and float(stored[-1]) == pytest.approx(float(power[0]["value"][1]), rel=1e-9)

        # Node power: the power channel only, never the inlet probe beside it.
        node = prom.wait_query("wattbench:node_power_watts")
        assert len(node) == 1 and float(node[0]["value"][1]) == pytest.approx(WATTS, rel=1e-9), node

        healthy = prom.wait_query('wattbench_device_samples_stored_total{dev="prom1"} > 0')
        assert healthy

        # A run's result on the broker: the recording rule's ops per watt is its overall score.
        vector = json.loads((REPO / "schema" / "vectors" / "valid" / "result_valid_run.json").read_text())
        result = vector["payload"]
        host, port = broker.rsplit(":", 1)
        publish.single(vector["topic"], json.dumps(result), qos=1, retain=True, hostname=host, port=int(port))
        ratio = prom.wait_query("wattbench:run_ops_per_watt")
        assert ratio, prom.log_tail()
        assert ratio[0]["metric"]["run"] == result["run"]
        assert float(ratio[0]["value"][1]) == pytest.approx(result["overall"], rel=1e-9)
        overall = prom.wait_query("wattbench_run_overall")
        assert float(overall[0]["value"][1]) == pytest.approx(result["overall"], rel=1e-9)

        # The endpoint speaks OpenMetrics when asked, as prometheus_client does.
        req = urllib.request.Request(
            f"http://{metrics}/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"}
        )
        with urllib.request.urlopen(req, timeout=5) as resp:
            assert resp.headers["Content-Type"].startswith("application/openmetrics-text")
            assert resp.read().decode().rstrip().endswith("# EOF")
    finally:
        appliance.stop(timeout=10)
        collector.stop()


def test_a_metrics_address_in_use_is_refused_before_the_collector_runs(tmp_path: Path) -> None:
    """The address is bound first: taken, it stops the collector before it creates its store or spool
    or connects to the broker (which here only listens, and must see no one knock)."""
    import socket

    from wattbench.config import CollectorConfig
    from wattbench.exits import Exit
    from wattbench.ingest.collector import Collector, CollectorError

    with socket.socket() as taken, socket.socket() as broker:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        broker.bind(("127.0.0.1", 0))
        broker.listen()
        port = taken.getsockname()[1]
        collector = Collector(
            CollectorConfig(
                broker=f"127.0.0.1:{broker.getsockname()[1]}",
                store=str(tmp_path / "wb.sqlite"),
                state_dir=str(tmp_path / "state"),
                spool_dir=str(tmp_path / "spool"),
                validate_workers=0,
                connect_timeout_s=2.0,
                metrics=f"127.0.0.1:{port}",
            )
        )
        with pytest.raises(CollectorError, match="cannot serve /metrics") as caught:
            collector.start()
        assert caught.value.exit_code == Exit.CONFIG
        broker.settimeout(0.2)
        with pytest.raises(TimeoutError):
            broker.accept()
    assert sorted(p.name for p in tmp_path.iterdir()) == []
