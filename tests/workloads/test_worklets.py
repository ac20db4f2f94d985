"""Worklets: each one's op runs and is deterministic in its work; each folder has its README and a
sample that builds the workload; the worklet workload calibrates and paces a level on the built-in
arrival stream; a worklet whose work cannot start stops before the first phase with the reason."""

from __future__ import annotations

import os
import time
from importlib import import_module
from pathlib import Path

import pytest

from wattbench.core.plan import Phase, Timing
from wattbench.workloads import load_config, make_workload
from wattbench.workloads.base import WorkloadError
from wattbench.workloads.worklet import WORKLETS

HERE = Path(import_module("wattbench.workloads.worklet").__file__ or "").parent


@pytest.mark.parametrize("name", list(WORKLETS))
def test_each_worklet_does_its_op(name: str, tmp_path: Path) -> None:
    options = {"file": str(tmp_path / "w.dat"), "size_mb": 8} if WORKLETS[name][0] == "storage" else {}
    if name == "capacity":
        options = {"size_mb": 8}
    op = import_module(f"wattbench.workloads.worklet.{name}").make_unit(7, **options)
    for _ in range(3):
        op()
    folder = HERE / name
    assert (folder / "README.md").is_file()
    wl = make_workload("worklet", load_config(folder / "sample.toml"))
    assert wl.worklet == name and wl.group == WORKLETS[name][0]


def test_the_worklet_paces_a_level_on_the_arrival_stream() -> None:
    wl = make_workload("worklet", {"worklet": "sha256", "workers": 1})
    t = Timing(pre_s=0.3, measure_s=2.0, post_s=0.0, gap_s=0.0)
    wl.open()
    try:
        wl.start_phase(Phase("cal1", "calibration", t), None)
        time.sleep(t.pre_s)
        wl.start_measure()
        time.sleep(t.measure_s)
        calibrated = wl.end_measure() / t.measure_s
        wl.end_phase()
        assert calibrated > 100
        rate = 0.5 * calibrated
        wl.start_phase(Phase("l50", "target", t, target=0.5), rate)
        time.sleep(t.pre_s)
        wl.start_measure()
        time.sleep(t.measure_s)
        got = wl.end_measure() / t.measure_s
        wl.end_phase()
    finally:
        wl.close()
    # Paced, not flat out: the fine figure on a quiet machine is bench/bench_workload_pacing.py's, and
    # tests assert behaviour, not timings.
    assert 0.3 * calibrated <= got <= 0.7 * calibrated, (got, calibrated)


@pytest.mark.parametrize(
    ("config", "why"),
    [
        ({"worklet": "xml"}, "worklet 'xml': one of compress"),
        ({}, "worklet missing"),
        (
            {"worklet": "random", "options": {"colour": 1}},
            "unknown option 'colour'; known: direct, file, size_mb",
        ),
        (
            {"worklet": "random", "options": {"size_mb": "big"}},
            'options.size_mb must be an integer, got "big"',
        ),
        ({"worklet": "sha256", "bogus": 1}, "unknown settings"),
    ],
)
def test_settings_are_checked(config: dict[str, object], why: str) -> None:
    with pytest.raises(WorkloadError, match=why):
        make_workload("worklet", config)


def test_a_storage_worklet_that_cannot_open_its_file_stops_before_the_first_phase(tmp_path: Path) -> None:
    wl = make_workload(
        "worklet", {"worklet": "random", "options": {"file": str(tmp_path / "no" / "w.dat"), "size_mb": 1}}
    )
    with pytest.raises(WorkloadError, match=r"worklet random: file .*: no folder "):
        wl.open()


def test_a_worker_whose_work_cannot_start_is_named() -> None:
    wl = make_workload("worklet", {"worklet": "capacity", "workers": 1, "options": {"size_mb": 0}})
    with pytest.raises(WorkloadError, match="its work cannot start: ValueError: size_mb must be"):
        wl.open()


def test_workers_run_their_numerical_libraries_on_one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each worker is one core's share: its BLAS pool must not spread over every core. Before, the LU
    worklet's two workers each ran a pool on both cores and reached 7 % of the 75 % target on 2 cores."""
    from wattbench.workloads.builtin import workers

    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "8")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    seen = {}

    def capture(self: object) -> None:
        seen.update(
            {k: os.environ.get(k) for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
        )

    monkeypatch.setattr(workers.BuiltinWorkload, "_start_workers", capture)
    wl = make_workload("worklet", {"worklet": "lu", "workers": 1})
    try:
        wl.open()  # starts no worker here: only the environment they would start with matters
    finally:
        wl.close()
    assert seen == dict.fromkeys(("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"), "1")
    assert os.environ["OPENBLAS_NUM_THREADS"] == "8" and "OMP_NUM_THREADS" not in os.environ


def test_a_storage_file_larger_than_the_free_disk_is_refused_before_the_run(tmp_path: Path) -> None:
    """It failed after the run had started, when the disk filled, and left its half-written file."""
    from wattbench.workloads.worklet._storage import check_file

    with pytest.raises(ValueError, match=r"MiB do not fit in .* \(\d+ MiB free\)"):
        check_file(str(tmp_path / "data"), 1 << 23)  # 8 TiB


def test_a_storage_file_that_cannot_be_written_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno
    import os

    from wattbench.workloads.worklet import _storage

    calls = []

    def full(fd: int, data: bytes) -> int:
        calls.append(1)
        if len(calls) > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return len(data)

    monkeypatch.setattr(_storage.os, "write", full)
    with pytest.raises(OSError, match="No space left"):
        _storage.open_file(str(tmp_path / "data"), 4, direct=False, block=4096)
    monkeypatch.undo()
    assert os.listdir(tmp_path) == []
