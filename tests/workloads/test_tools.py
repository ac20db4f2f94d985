"""The ready-made tool workloads against real runs of the tools (Debian fio, sysbench, stress-ng,
bonnie++, installed by scripts/provision.sh): each runs for a window through the workload protocol and
its report gives the count; fio and sysbench hold a paced level near its rate; a report without the
count, a missing tool and a filesystem without direct I/O are refused with the reason."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from wattbench.core.plan import Phase, Timing
from wattbench.workloads import make_workload
from wattbench.workloads.base import WorkloadError

T = Timing(pre_s=0.0, measure_s=2.0, post_s=0.0, gap_s=0.0)
CAL = Phase("cal1", "calibration", T)
L50 = Phase("l50", "target", T, target=0.5)


def need(tool: str) -> None:
    if shutil.which(tool) is None:
        if os.environ.get("CI"):
            raise AssertionError(f"{tool} not installed: scripts/provision.sh installs it")
        pytest.skip(f"{tool} not installed: run scripts/provision.sh")


def window(wl: Any, phase: Phase, rate: float | None) -> int:
    """One measurement window through the workload protocol, as the driver runs it."""
    wl.start_phase(phase, rate)
    wl.start_measure()
    while not wl.measure_done():
        import time

        time.sleep(0.05)
    ops = wl.end_measure()
    wl.end_phase()
    return int(ops)


def test_fio_counts_ios_and_holds_its_rate(tmp_path: Path) -> None:
    need("fio")
    wl = make_workload("fio", {"file": str(tmp_path / "fio.dat"), "size": "16M", "rw": "randread"})
    wl.open()
    try:
        flat = window(wl, CAL, None)
        assert flat > 100
        paced = window(wl, L50, 150.0)  # Poisson arrivals: 300 expected, sd about 17
        assert 240 <= paced <= 360, paced
    finally:
        wl.close()


def test_sysbench_counts_events_and_holds_its_rate() -> None:
    need("sysbench")
    wl = make_workload("sysbench", {"test": "cpu", "threads": 1})
    wl.open()
    try:
        assert window(wl, CAL, None) > 100
        paced = window(wl, L50, 100.0)
        assert 140 <= paced <= 260, paced  # paced near 200, never flat out (over 800 here)
    finally:
        wl.close()


def test_stress_ng_counts_bogo_ops() -> None:
    need("stress-ng")
    wl = make_workload("stressng", {"stressor": "cpu", "workers": 1})
    wl.open()
    try:
        assert window(wl, CAL, None) > 0
    finally:
        wl.close()


def test_bonnie_counts_file_operations(tmp_path: Path) -> None:
    need("bonnie++")
    wl = make_workload(
        "bonnie", {"dir": str(tmp_path / "b"), "files": 1, "user": "root" if os.geteuid() == 0 else ""}
    )
    wl.open()
    try:
        assert window(wl, CAL, None) == 1 * 1024 * 6
    finally:
        wl.close()


def test_bonnie_as_root_needs_a_user(tmp_path: Path) -> None:
    need("bonnie++")
    if os.geteuid() != 0:
        pytest.skip("not root")
    with pytest.raises(WorkloadError, match="refuses to run as root without one"):
        make_workload("bonnie", {"dir": str(tmp_path / "b")}).open()


def test_fio_checks_direct_io_on_the_file_before_the_first_phase(tmp_path: Path) -> None:
    # A filesystem that refuses O_DIRECT is not available here (tmpfs takes it since Linux 6.6): the
    # check runs on the file itself. A file in a folder that is not there is refused before that, as
    # the pre-flight refuses it, naming the setting.
    need("fio")
    with pytest.raises(WorkloadError, match=r"^file: folder '.*missing' does not exist"):
        make_workload("fio", {"file": str(tmp_path / "missing" / "fio.dat"), "size": "1M"}).open()
    make_workload("fio", {"file": str(tmp_path / "fio.dat"), "size": "1M"}).open()


@pytest.mark.parametrize(
    ("name", "config", "text", "why"),
    [
        ("fio", {}, "fio: file not found\n", "fio: no JSON report"),
        ("fio", {}, '{"jobs": [{"jobname": "wattbench", "error": 5}]}', "ended with error 5"),
        ("fio", {}, '{"jobs": []}', "no jobs"),
        ("sysbench", {}, "FATAL: unknown option\n", "no 'total number of events'"),
        ("stressng", {}, "stress-ng: info:  [1] dispatching hogs: 1 cpu\n", "no metrics row for the cpu"),
        ("bonnie", {}, "", "no CSV result line .*printed nothing"),
        ("bonnie", {}, "1.97,1.97,vm,1,1,,,,,,,,,,,,,,,,,1,", "CSV format 1.97"),
    ],
)
def test_a_report_without_the_count_is_refused(
    name: str, config: dict[str, Any], text: str, why: str
) -> None:
    with pytest.raises(WorkloadError, match=why):
        make_workload(name, config).parse_report(text)


@pytest.mark.parametrize(
    ("name", "config", "why"),
    [
        ("fio", {"rw": "sideways"}, "rw must be one of"),
        ("fio", {"bs": "4 kB"}, "bs must be a size"),
        ("fio", {"iodepth": 0}, "iodepth must be"),
        ("sysbench", {"test": "oltp"}, "test must be one of"),
        ("sysbench", {"options": "--x=1; rm -rf /"}, "options must be"),
        ("stressng", {"stressor": "cpu --all"}, "stressor must be"),
        ("bonnie", {"files": 0}, "files must be"),
        ("fio", {"size": 4}, "size must be a string"),
    ],
)
def test_settings_are_checked(name: str, config: dict[str, Any], why: str) -> None:
    with pytest.raises(WorkloadError, match=why):
        make_workload(name, config)


def test_a_missing_tool_is_refused_before_the_first_phase(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(WorkloadError, match="cannot start 'sysbench': no such program"):
        make_workload("sysbench", {}).open()
