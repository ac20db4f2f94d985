"""The concurrency workload, driven directly (no driver, no services): N copies of a job, counted by
the copies that succeed."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
from sweep_synth import wait

from wattbench.core.plan import Phase, Timing
from wattbench.workloads.base import WorkloadError
from wattbench.workloads.concurrency.runner import ConcurrencyWorkload

PY = shlex.quote(sys.executable)
T = Timing(pre_s=0.1, measure_s=1.0, post_s=0.1, gap_s=0.0)
IDLE = Phase("idle", "idle", T, target=0.0)


def test_concurrency_counts_successful_copies(tmp_path: Path) -> None:
    wl = ConcurrencyWorkload(f'{PY} -c "import sys; sys.exit(1 if {{copy}} == 2 else 0)"')
    phase = Phase("c3", "concurrency", T, copies=3)
    wl.start_phase(phase, None)
    wl.start_measure()
    assert wait(wl.measure_done)
    assert wl.end_measure() == 2  # copy 2 failed

    wl = ConcurrencyWorkload("builtin:30")
    wl.start_phase(Phase("c2", "concurrency", T, copies=2), None)
    wl.start_measure()
    assert wait(wl.measure_done, 60)
    assert wl.end_measure() == 2
    wl.start_phase(IDLE, 0.0)
    wl.start_measure()
    assert wl.measure_done() and wl.end_measure() == 0
    wl.close()


def test_from_config_leaves_the_plan_settings_to_the_plan() -> None:
    wl = ConcurrencyWorkload.from_config({"job": "builtin:5", "copies": [1, 2], "timeout_s": 60})
    assert "--ops 5" in wl.template
    with pytest.raises(WorkloadError, match=r"^concurrency workload: unknown settings \['run'\]; known: "):
        ConcurrencyWorkload.from_config({"run": "true"})


def test_a_job_whose_program_is_not_there_is_refused_before_the_first_copy() -> None:
    with pytest.raises(WorkloadError, match="cannot start 'mybenchh': no such program on PATH"):
        ConcurrencyWorkload("mybenchh {copy}").preflight()
    ConcurrencyWorkload("builtin:30").preflight()
