"""A cluster sweep end to end through a real Slurm: munged, slurmctld and a slurmd per node name on this
machine, a host-mode appliance per node publishing through real Mosquitto, the collector, and
`wattbench sweep --workload slurm` as a user runs it, once compact and once spread.

Each node's simulated meter holds a constant power of its own (wbn1 200 W, wbn2 150 W), so every level's
power must be exactly their sum: idle nodes count (EE HPC WG), and a node left out would show at once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.services, pytest.mark.timeout(600)]

NODES = {"wbn1": 200.0, "wbn2": 150.0}


def _appliances(broker: str) -> list[Any]:
    fw_host = pytest.importorskip("wattbench_fw.host")
    out = []
    for node, watts in NODES.items():
        cfg = fw_host.sim_config(dev=node, broker=broker, hz=10, model="const", watts=watts, batch_ms=250)
        cfg["channels"][0]["node"] = node
        cfg["channels"][0]["c"] = "psu"
        out.append(fw_host.HostAppliance(cfg).start())
    return out


def _collector(broker: str, tmp: Path, store: Path) -> Any:
    from wattbench.config import CollectorConfig
    from wattbench.ingest.collector import Collector

    c = Collector(
        CollectorConfig(
            broker=broker,
            store=str(store),
            state_dir=str(tmp / "state"),
            spool_dir=str(tmp / "spool"),
            validate_workers=0,
            health_period_s=1.0,
        )
    )
    c.start()
    return c


def _sweep_argv(broker: str, store: Path, placement: str, out: Path, run: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "wattbench.cli",
        "sweep",
        "--workload",
        "slurm",
        "--workload-config",
        str(out.parent / "slurm.toml"),
        "--placement",
        placement,
        "--cluster-levels",
        "1/2,1",
        "--run",
        run,
        "--broker",
        broker,
        "--store",
        str(store),
        "--pre",
        "1",
        "--post",
        "1",
        "--gap",
        "0.5",
        "--measure",
        "8",
        "--wait-data",
        "10",
        "--quiet",
        "--json-out",
        str(out),
        "--html",
        str(out.with_suffix(".html")),
    ]


def test_compact_and_spread_sweeps_run_real_jobs_and_sum_every_node(
    tmp_path: Path, mosquitto: Any, slurm_cluster: Any
) -> None:
    cluster = slurm_cluster(list(NODES), cpus=2)
    broker = f"{mosquitto.host}:{mosquitto.port}"
    store = tmp_path / "wattbench.sqlite"
    (tmp_path / "slurm.toml").write_text(
        'workload = "slurm"\njob = "builtin:3000"\n'
        f'output_dir = "{tmp_path / "jobs"}"\nslurm_conf = "{cluster.conf}"\ntimeout_s = 120\n'
    )
    collector = _collector(broker, tmp_path, store)
    appliances = _appliances(broker)
    env = {**os.environ, **cluster.env, "COLUMNS": "200"}
    results: dict[str, dict[str, Any]] = {}
    outputs: dict[str, str] = {}
    try:
        assert all(a.wait_connected(20) for a in appliances)
        for placement in ("compact", "spread"):
            out = tmp_path / f"{placement}.json"
            done = subprocess.run(
                _sweep_argv(broker, store, placement, out, f"cluster-{placement}"),
                capture_output=True,
                text=True,
                timeout=300,
                env=env,
                cwd=tmp_path,
            )
            outputs[placement] = done.stdout + done.stderr
            assert done.returncode in (0, 1) and out.exists(), outputs[placement][-3000:]
            results[placement] = json.loads(out.read_text())
    finally:
        for a in appliances:
            a.stop(timeout=10)
        collector.stop()
    print(outputs["compact"][-4000:])

    from wattbench.core import contract

    for placement, result in results.items():
        contract.validate_result(result)
        rows = {r["phase"]: r for r in result["levels"]}
        assert list(rows) == ["c1", "c2", "idle"], placement
        # every node's power counts at every level, busy or idle: exactly the two meters' sum
        for phase, row in rows.items():
            assert row["W"] == pytest.approx(sum(NODES.values()), rel=1e-6), (placement, phase)
            assert row["ops"] > 0 or phase == "idle"
        assert sorted(c["node"] for c in result["channels"]) == sorted(NODES)
        assert rows["c2"]["busy"] == sorted(NODES)
        assert "busy" not in rows["idle"]
        std = result["standard"]
        assert std["eehpc_level"] in (0, 1, 2, 3) and std["statement"]
        assert "nodes metered" not in std["statement"]  # both nodes metered: no share is missing

    # compact puts the one job on one node; spread deals its two tasks over both
    c1 = {p: {r["phase"]: r for r in res["levels"]}["c1"] for p, res in results.items()}
    assert len(c1["compact"]["busy"]) == 1
    assert c1["spread"]["busy"] == sorted(NODES)

    # the jobs Slurm ran, with its own records, are in the run's events
    from wattbench.store import open_store

    st = open_store(str(store))
    try:
        for placement in ("compact", "spread"):
            ends = [
                e for e in st.phases(f"cluster-{placement}") if e["event"] == "measure_end" and "jobs" in e
            ]
            assert [len(e["jobs"]) for e in ends] == [1, 2]
            for e in ends:
                for job in e["jobs"]:
                    assert job["state"] == "COMPLETED" and job["exit"] == 0
                    assert job["nodes"] and job["end"] >= job["start"]
                    # each of the job's two tasks ran half of its 3 000 transactions, and said so
                    assert job["ops"] == 3000
    finally:
        st.close()
    # the table names the figures a cluster study reads
    text = outputs["compact"]
    assert "Relative Throughput" in text and "Energy per Job" in text and "Idle Nodes" in text
    assert "EE HPC WG" in text
    assert cluster.queue() == []
    page = (tmp_path / "compact.html").read_text()
    assert "<h2>Nodes</h2>" in page and "Idle Nodes (W)" in page

    # compact and spread side by side, level by level
    cmp_out = tmp_path / "cmp.json"
    done = subprocess.run(
        [sys.executable, "-m", "wattbench.cli", "compare", str(tmp_path / "compact.json"), str(tmp_path / "spread.json"),
         "--json-out", str(cmp_out)],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads(cmp_out.read_text())
    # result files are named by their file's stem (the run ids are cluster-compact, cluster-spread)
    assert [c["name"] for c in doc["candidates"]] == ["compact", "spread"]
    # nothing but an invalid verdict (short test windows) keeps them apart: an INVALID run is never ranked
    invalid = ["the run is INVALID: its figures are not ranked"]
    assert all(
        c["unit"] == "jobs" and (c["comparable"] or c["incomparable"] == invalid) for c in doc["candidates"]
    ), doc["candidates"]


def test_a_worklet_job_reports_its_ops_beside_the_jobs(tmp_path: Path, slurm_cluster: Any) -> None:
    cluster = slurm_cluster(list(NODES), cpus=2)
    (tmp_path / "slurm.toml").write_text(
        f'workload = "slurm"\njob = "worklet:sha256:400"\noutput_dir = "{tmp_path / "jobs"}"\n'
        f'slurm_conf = "{cluster.conf}"\ntimeout_s = 120\n'
    )
    out = tmp_path / "r.json"
    argv = [sys.executable, "-m", "wattbench.cli", "sweep", "--workload-config", str(tmp_path / "slurm.toml"),
            "--cluster-levels", "1", "--ops-only", "--no-idle", "--quiet", "--pre", "0.3", "--post", "0.3",
            "--json-out", str(out)]  # fmt: skip
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=120, env={**os.environ, **cluster.env, "COLUMNS": "200"}
    )
    assert out.exists(), done.stdout + done.stderr
    assert "Job Ops/s" in done.stdout
    # an ops-only run has no result rows with power; the jobs' records carry the counts
    jobs = sorted((tmp_path / "jobs").glob("c2-*.out"))
    assert len(jobs) == 2
    from wattbench.workloads.slurm.client import task_ops

    assert [task_ops(p.read_text()) for p in jobs] == [400, 400]


def test_ctrl_c_cancels_every_job_of_the_sweep(tmp_path: Path, slurm_cluster: Any) -> None:
    cluster = slurm_cluster(list(NODES), cpus=2)
    # Jobs that would run for minutes: Ctrl-C must leave none queued or running.
    (tmp_path / "slurm.toml").write_text(
        f'workload = "slurm"\njob = "sleep 300"\noutput_dir = "{tmp_path / "jobs"}"\n'
        f'slurm_conf = "{cluster.conf}"\ntimeout_s = 600\n'
    )
    argv = [
        sys.executable,
        "-m",
        "wattbench.cli",
        "sweep",
        "--workload-config",
        str(tmp_path / "slurm.toml"),
        "--cluster-levels",
        "1",
        "--ops-only",
        "--quiet",
        "--pre",
        "0.5",
    ]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, **cluster.env}
    )
    deadline = time.monotonic() + 60
    while len(cluster.queue()) < 2:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0]
        time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=90)
    assert proc.returncode == 130, out
    assert cluster.queue() == [], out
    assert "Traceback" not in out


@pytest.mark.parametrize(
    ("placement", "c2_nodes"), [("compact", ["wbn1", "wbn1"]), ("spread", ["wbn1", "wbn2"])]
)
def test_slot_levels_run_one_task_jobs_where_the_placement_puts_them(
    tmp_path: Path, slurm_cluster: Any, placement: str, c2_nodes: list[str]
) -> None:
    # 2 nodes x 2 CPUs = 4 slots: 1/4 is one job, 1/2 two; each job says which node ran it.
    cluster = slurm_cluster(list(NODES), cpus=2)
    (tmp_path / "slurm.toml").write_text(
        f'workload = "slurm"\njob = "echo node=$SLURMD_NODENAME; sleep 1; echo ops=1"\n'
        f'output_dir = "{tmp_path / "jobs"}"\nslurm_conf = "{cluster.conf}"\ntimeout_s = 120\n'
    )
    out = tmp_path / "r.json"
    argv = [sys.executable, "-m", "wattbench.cli", "sweep", "--workload-config", str(tmp_path / "slurm.toml"),
            "--cluster-unit", "slots", "--placement", placement, "--cluster-levels", "1/4,1/2",
            "--ops-only", "--no-idle", "--quiet", "--pre", "0.3", "--post", "0.3", "--json-out", str(out)]  # fmt: skip
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=180, env={**os.environ, **cluster.env, "COLUMNS": "200"}
    )
    assert out.exists(), done.stdout + done.stderr
    ran: dict[str, list[str]] = {}
    for path in sorted((tmp_path / "jobs").glob("c*-*.out")):
        phase = path.name.split("-")[0]
        node = [ln.split("node=")[1].strip() for ln in path.read_text().splitlines() if "node=" in ln]
        assert len(node) == 1, path.read_text()  # one task per job
        ran.setdefault(phase, []).append(node[0])
    assert len(ran["c1"]) == 1
    assert sorted(ran["c2"]) == c2_nodes
    assert cluster.queue() == []
