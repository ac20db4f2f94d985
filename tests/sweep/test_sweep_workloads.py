"""The three workloads, driven directly (no driver, no services)."""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

import pytest
from sweep_synth import wait

from wattbench.sweep.plan import Phase, Timing
from wattbench.workloads import NAMES, load_config, make_workload, sample_config
from wattbench.workloads.base import WorkloadError
from wattbench.workloads.builtin.transaction import OrderGenerator, process, transaction
from wattbench.workloads.command.runner import CommandWorkload, fill, read_ops_text
from wattbench.workloads.concurrency.runner import ConcurrencyWorkload

PY = shlex.quote(sys.executable)
T = Timing(pre_s=0.1, measure_s=1.0, post_s=0.1, gap_s=0.0)
CAL = Phase("cal1", "calibration", T)
L50 = Phase("l50", "target", T, target=0.5)
IDLE = Phase("idle", "idle", T, target=0.0)


def test_transaction_is_deterministic_real_work() -> None:
    a, b = OrderGenerator(7), OrderGenerator(7)
    oa, ob = a.order(), b.order()
    assert oa == ob and 5 <= len(oa["lines"]) <= 25
    assert process(oa) == process(ob)
    assert isinstance(transaction(OrderGenerator(1)), int)


def test_sample_configs_load_and_build() -> None:
    for name in NAMES:
        path = sample_config(name)
        assert path.exists() and (path.parent / "README.md").exists()
        wl = make_workload(name, load_config(path))
        assert wl.name == name
    with pytest.raises(WorkloadError):
        make_workload("nope")
    with pytest.raises(WorkloadError):
        make_workload("command", {"run": "true", "bogus": 1})


def test_builtin_counts_and_idles() -> None:
    wl = make_workload("builtin", {"workers": 1})
    wl.open()
    try:
        wl.start_phase(CAL, None)
        assert wait(lambda: wl.completed() > 50)
        wl.start_measure()
        assert wait(lambda: wl.completed() > wl._mark + 20)
        assert wl.end_measure() >= 20
        wl.start_phase(IDLE, 0.0)
        time.sleep(0.2)  # let an in-flight transaction finish
        before = wl.completed()
        time.sleep(0.3)
        assert wl.completed() == before  # active idle: nothing runs
        wl.start_phase(L50, 50.0)  # paced: 50 arrivals/s
        assert wait(lambda: wl.completed() > before + 5)
    finally:
        wl.close()
    assert wl.completed() >= before
    assert not wl._procs


def _counter(path: Path) -> str:
    """A command printing a cumulative count every 20 ms for {duration} seconds, and its arguments."""
    script = path / "count.py"
    script.write_text(
        "import sys, time\n"
        "open(sys.argv[1], 'a').write(' '.join(sys.argv[2:]) + '\\n')\n"
        "end = time.time() + float(sys.argv[2]); n = 0\n"
        "while time.time() < end:\n"
        "    n += 10; print(f'ops={n}', flush=True); time.sleep(0.02)\n"
    )
    return f"{PY} {script} {path / 'args.txt'} {{duration}} {{load}} {{rate}} {{level}}"


def test_command_stream_mode(tmp_path: Path) -> None:
    wl = CommandWorkload(_counter(tmp_path))
    wl.open()
    wl.start_phase(L50, 123.5)
    assert wait(lambda: wl.completed() > 0)
    wl.start_measure()
    time.sleep(0.5)
    ops = wl.end_measure()
    wl.end_phase()
    wl.close()
    assert 50 <= ops <= 400  # ~25 lines of 10 in half a second; generous for a loaded machine
    args = (tmp_path / "args.txt").read_text().split()
    assert args == ["1.2", "50", "123.5", "l50"]  # duration = pre + measure + post


def test_command_total_mode_and_ops_file(tmp_path: Path) -> None:
    wl = CommandWorkload(f"{PY} -c \"print('warming'); print('ops: 42')\"", report="total")
    wl.start_phase(CAL, None)
    wl.start_measure()
    assert wait(wl.measure_done)
    assert wl.end_measure() == 42
    wl.end_phase()

    script = tmp_path / "w.py"
    script.write_text("import json, sys\njson.dump({'ops': 7}, open(sys.argv[1], 'w'))\n")
    wl = CommandWorkload(
        f"{PY} {script} {tmp_path}/{{level}}.json", report="total", ops_file=f"{tmp_path}/{{level}}.json"
    )
    wl.start_phase(L50, 10.0)
    wl.start_measure()
    assert wait(wl.measure_done)
    assert wl.end_measure() == 7
    wl.close()


def test_command_errors_are_clear(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match="unknown placeholder"):
        CommandWorkload("run {speed}")
    with pytest.raises(WorkloadError, match="needs a command"):
        CommandWorkload("  ")
    wl = CommandWorkload(str(tmp_path / "does-not-exist") + " {rate}")
    with pytest.raises(WorkloadError, match="cannot start"):
        wl.start_phase(CAL, None)
    # values never split into extra arguments without a shell
    assert fill("prog --level {level}", False, level="a b") == ["prog", "--level", "a b"]
    assert read_ops_text("x\nops=5\nops=9\n", CommandWorkload("true").pattern) == 9.0


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
