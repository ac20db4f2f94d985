"""Slurm's output as the cluster sweep reads it, on text captured from Slurm 22.05 (tests/data/slurm/).
sacct's lines follow its documented `-P` format: there is no accounting database here to capture from."""

from __future__ import annotations

import calendar
from pathlib import Path

import pytest

from wattbench.workloads.base import WorkloadError
from wattbench.workloads.slurm.client import (
    Node,
    SlurmError,
    accounting_enabled,
    exit_code,
    parse_sacct,
    parse_scontrol_jobs,
    parse_sinfo,
    slurm_time,
    task_ops,
)
from wattbench.workloads.slurm.workload import SlurmWorkload

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"


def test_sinfo_lists_each_node_once_with_its_cpus() -> None:
    assert parse_sinfo((DATA / "sinfo.txt").read_text()) == [Node("wbn1", 2, "idle"), Node("wbn2", 2, "idle")]
    # a node in two partitions shows twice; a state flag (* not responding) is not part of the state
    assert parse_sinfo("a|4|idle*\na|4|idle\n") == [Node("a", 4, "idle")]
    with pytest.raises(SlurmError, match="cannot read"):
        parse_sinfo("NODELIST NODES PARTITION STATE\n")


def test_scontrol_records_give_state_exit_status_nodes_and_utc_times() -> None:
    expand = {"wbn[1-2]": ("wbn1", "wbn2")}
    jobs = parse_scontrol_jobs((DATA / "scontrol-show-job.txt").read_text(), expand)
    assert sorted(jobs) == ["1", "2", "3"]
    done, failed, cancelled = jobs["1"], jobs["2"], jobs["3"]
    assert (done.state, done.exit_code, done.nodes, done.ok) == ("COMPLETED", 0, ("wbn1", "wbn2"), True)
    assert done.start == calendar.timegm((2026, 11, 25, 21, 33, 4, 0, 0, 0))
    assert (failed.state, failed.exit_code, failed.ok, failed.finished) == ("FAILED", 3, False, True)
    # cancelled while running: status 0, signal 15
    assert (cancelled.state, cancelled.exit_code, cancelled.nodes, cancelled.ok) == (
        "CANCELLED",
        143,
        ("wbn2",),
        False,
    )
    assert cancelled.end is not None and cancelled.start is not None and cancelled.end - cancelled.start == 1
    assert done.to_dict() == {
        "id": "1",
        "state": "COMPLETED",
        "nodes": ["wbn1", "wbn2"],
        "exit": 0,
        "start": int(done.start * 1000),
        "end": int(done.start * 1000),
    }


def test_slurm_times_are_the_controllers_local_time() -> None:
    assert slurm_time("2026-11-25T21:33:04", utc_offset_s=3600) == calendar.timegm((2026, 11, 25, 20, 33, 4))
    assert slurm_time("Unknown") is None and slurm_time("None") is None and slurm_time("") is None
    assert (
        exit_code("0:9") == 137
        and exit_code("2:0") == 2
        and exit_code(None) is None
        and exit_code("x") is None
    )


def test_sacct_parallel_lines_take_the_state_before_by() -> None:
    text = (
        "12|COMPLETED|0:0|wbn[1-2]|2026-11-25T21:33:04|2026-11-25T21:33:09\n"
        "13|CANCELLED by 0|0:15|wbn2|2026-11-25T21:33:04|2026-11-25T21:33:05\n"
        "14|PENDING|0:0|None assigned|Unknown|Unknown\n"
    )
    jobs = parse_sacct(text, {"wbn[1-2]": ("wbn1", "wbn2")})
    assert jobs["12"].ok and jobs["12"].nodes == ("wbn1", "wbn2")
    assert jobs["13"].state == "CANCELLED" and not jobs["13"].ok
    assert jobs["14"].nodes == () and jobs["14"].start is None and not jobs["14"].finished


def test_accounting_is_enabled_only_with_a_storage_plugin() -> None:
    assert not accounting_enabled("AccountingStorageType   = accounting_storage/none\n")
    assert accounting_enabled("AccountingStorageType   = accounting_storage/slurmdbd\n")
    assert not accounting_enabled("ClusterName = x\n")


def test_sbatch_arguments_place_the_same_job_compact_or_spread() -> None:
    compact = SlurmWorkload(job="builtin:4000", placement="compact", output_dir="/shared/out")
    spread = SlurmWorkload(job="builtin:4000", placement="spread", output_dir="/shared/out")
    for wl in (compact, spread):
        wl.cluster = [Node("n1", 4, "idle"), Node("n2", 4, "idle"), Node("n3", 8, "idle")]
    a, b = compact.sbatch_argv("c2", 1, 2), spread.sbatch_argv("c2", 1, 2)
    assert "--nodes=1" in a and "--ntasks=4" in a and "--spread-job" not in a
    assert "--nodes=3" in b and "--ntasks=4" in b and "--spread-job" in b
    assert "--output=/shared/out/c2-1-%j.out" in a
    # the work is the same: 4000 transactions split over 4 tasks, whatever the placement
    assert a[-1] == b[-1] and "--ops 1000" in a[-1] and a[-1].startswith("srun ")


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"placement": "diagonal"}, "placement must be one of compact, spread"),
        ({"job": "builtin:x"}, "op count"),
        ({"tasks": -1}, "tasks must be 0"),
        ({"nodes": 3}, "unknown settings"),
        ({"sbatch_args": "--qos='x"}, "sbatch_args"),
    ],
)
def test_bad_settings_are_refused_with_the_setting_named(config: dict, message: str) -> None:
    with pytest.raises(WorkloadError, match=message):
        SlurmWorkload.from_config(config)


def test_a_controller_that_does_not_answer_stops_the_sweep_before_its_plan(tmp_path: Path) -> None:
    from wattbench.workloads.slurm.client import Slurm

    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=x\nSlurmctldHost=nohost(127.0.0.1)\nSlurmctldPort=1\nNodeName=a CPUs=1\n")
    wl = SlurmWorkload(slurm=Slurm(env={"SLURM_CONF": str(conf)}, timeout_s=20))
    with pytest.raises(WorkloadError, match=r"^slurm: "):
        wl.level_jobs(None)


def test_a_missing_configuration_file_is_named_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "nope" / "slurm.conf"
    with pytest.raises(WorkloadError, match=f"no Slurm configuration at {missing}"):
        SlurmWorkload(slurm_conf=str(missing)).level_jobs(None)
    monkeypatch.setenv("SLURM_CONF", str(missing))
    with pytest.raises(WorkloadError, match="no Slurm configuration"):
        SlurmWorkload().probe()


def test_each_task_counts_once_by_its_last_labelled_count() -> None:
    text = "0: ops=10\n1: ops=7\n0: ops=25\nnoise\n1: 30\n  2: OPS: 5\n"
    assert task_ops(text) == 25 + 30 + 5
    assert task_ops("ops=10\nhello\n") is None  # unlabelled: not this workload's output


def test_a_worklet_job_runs_that_worklet_split_over_the_tasks() -> None:
    wl = SlurmWorkload(job="worklet:sha256:1000", placement="spread")
    wl.cluster = [Node("n1", 2, "idle"), Node("n2", 2, "idle")]
    script = wl.sbatch_argv("c1", 1, 1)[-1]
    assert "-m wattbench.workloads.worklet sha256 --ops 500" in script and "--label" in script
    for bad, why in (
        ("worklet:nope:10", "not a worklet"),
        ("worklet:sha256:x", "op count"),
        ("worklet:sha256:0", "at least 1"),
    ):
        with pytest.raises(WorkloadError, match=why):
            SlurmWorkload(job=bad)


def test_the_worklet_command_runs_n_ops_and_refuses_a_bad_option() -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "wattbench.workloads.worklet", "sha256", "--ops", "5"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and done.stdout.strip().splitlines()[-1] == "ops=5"
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "wattbench.workloads.worklet",
            "random",
            "--ops",
            "1",
            "--option",
            "size_mb=x",
        ],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "size_mb must be int" in bad.stderr


def test_slot_levels_count_the_partition_s_cpus_and_run_one_task_per_job() -> None:
    from wattbench.workloads.slurm.workload import slot_nodes

    cluster = [Node("n1", 4, "idle"), Node("n2", 4, "idle")]
    wl = SlurmWorkload(job="builtin:4000", unit="slots", placement="compact", output_dir="/shared/out")
    wl.cluster = cluster
    assert wl.level_jobs("1/8,1/4,1/2,3/4,1") == (1, 2, 4, 6, 8)
    assert wl.tasks == 1
    argv = wl.sbatch_argv("c6", 5, 6)
    assert "--nodes=1" in argv and "--ntasks=1" in argv and "--nodelist=n2" in argv
    assert "--ops 4000" in argv[-1]  # a slot's job does the whole fixed work in its one task
    # compact fills a node's slots before the next; spread deals the jobs out over the nodes
    assert slot_nodes(cluster, 6, "compact") == ["n1", "n1", "n1", "n1", "n2", "n2"]
    assert slot_nodes(cluster, 6, "spread") == ["n1", "n2", "n1", "n2", "n1", "n2"]
    uneven = [Node("a", 1, "idle"), Node("b", 3, "idle")]
    assert slot_nodes(uneven, 4, "spread") == ["a", "b", "b", "b"]
    assert slot_nodes(uneven, 4, "compact") == ["a", "b", "b", "b"]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"unit": "racks"}, "unit must be nodes or slots"),
        ({"unit": "slots", "tasks": 2}, "one task per job"),
    ],
)
def test_bad_slot_settings_are_refused(config: dict, message: str) -> None:
    with pytest.raises(WorkloadError, match=message):
        SlurmWorkload.from_config(config)
