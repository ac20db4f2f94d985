"""A command workload that fails is a failure, not a level with fewer ops; one the sweep stops is not."""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

import pytest
from sweep_synth import wait

from wattbench.sweep.plan import Phase, Timing
from wattbench.workloads.base import WorkloadError
from wattbench.workloads.command.runner import CommandWorkload

PY = shlex.quote(sys.executable)
T = Timing(pre_s=0.1, measure_s=1.0, post_s=0.1, gap_s=0.0)
L50 = Phase("l50", "target", T, target=0.5)


def test_total_mode_command_exiting_non_zero_fails_the_level() -> None:
    wl = CommandWorkload(
        f"{PY} -c \"import sys; print('ops: 42'); print('disk full', file=sys.stderr); sys.exit(5)\"",
        report="total",
    )
    wl.start_phase(L50, 10.0)
    wl.start_measure()
    assert wait(wl.measure_done)
    with pytest.raises(WorkloadError, match=r"exited with status 5: disk full"):
        wl.end_measure()  # its 42 ops are not the level's throughput
    wl.close()


def test_stream_mode_failure_is_seen_while_the_phase_runs() -> None:
    wl = CommandWorkload(f'{PY} -c "import sys; sys.exit(2)"')
    wl.start_phase(L50, 10.0)
    assert wait(lambda: wl.failure() is not None)
    assert wl.failure() == "the command exited with status 2"
    wl.close()


def test_a_command_stopped_at_the_window_end_has_not_failed() -> None:
    wl = CommandWorkload(f'{PY} -c "import time; print(7, flush=True); time.sleep(60)"', report="total")
    wl.start_phase(L50, 10.0)
    wl.start_measure()
    time.sleep(0.5)
    assert wl.end_measure() == 7  # stopped by SIGTERM, which is ours
    assert wl.failure() is None
    wl.close()


def test_a_missing_program_fails_before_the_first_phase(tmp_path: Path) -> None:
    wl = CommandWorkload(f"{tmp_path}/no-such-program {{load}}")
    with pytest.raises(WorkloadError, match="no such program"):
        wl.open()
    CommandWorkload(f"{PY} -c pass").open()  # found on the path or by its full name
    CommandWorkload("true {load}").open()
