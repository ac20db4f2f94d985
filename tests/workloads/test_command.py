"""The command workload, driven directly (no driver, no services): stream and total modes, the ops
file, placeholders, and failures: a command that fails is a failure, not a level with fewer ops; one
the sweep stops is not."""

from __future__ import annotations

import re
import shlex
import sys
import time
from pathlib import Path

import pytest
from sweep_synth import wait

from wattbench.core.plan import Phase, Timing
from wattbench.workloads.base import WorkloadError
from wattbench.workloads.command.runner import CommandWorkload, fill, read_ops_text

PY = shlex.quote(sys.executable)
T = Timing(pre_s=0.1, measure_s=1.0, post_s=0.1, gap_s=0.0)
CAL = Phase("cal1", "calibration", T)
L50 = Phase("l50", "target", T, target=0.5)


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


def test_a_total_mode_command_told_to_run_for_the_window_has_time_to_start_and_report() -> None:
    """In total mode the window closes when the command exits, and at the planned length plus
    overrun_s at the latest. A program told to run for exactly {duration} needs its start-up and its
    report on top: with no allowance it was stopped before printing its total and its level scored
    half its ops (49.6 %). The command workload allows what the tools it runs allow."""
    from wattbench.workloads.command.runner import REPORT_OVERRUN_S
    from wattbench.workloads.fio import FioWorkload

    assert (
        CommandWorkload("true", report="total").overrun_s == FioWorkload().overrun_s == REPORT_OVERRUN_S > 0
    )
    assert CommandWorkload("true").overrun_s == 0.0  # stream: the window has its planned length


def test_from_config_takes_every_setting_and_refuses_others(tmp_path: Path) -> None:
    wl = CommandWorkload.from_config(
        {
            "run": "true {load}",
            "report": "total",
            "shell": False,
            "ops_file": f"{tmp_path}/{{level}}.ops",
            "ops_pattern": r"^done (\d+)$",
            "increment": True,
            "cwd": str(tmp_path),
            "stop_grace_s": 1.0,
        }
    )
    assert (wl.report, wl.window, wl.increment, wl.cwd, wl.stop_grace_s) == (
        "total",
        "until_done",
        True,
        str(tmp_path),
        1.0,
    )
    with pytest.raises(WorkloadError, match=r"^command workload: unknown settings \['bogus'\]; known: "):
        CommandWorkload.from_config({"run": "true", "bogus": 1})


# ---- failures -----------------------------------------------------------------------------------


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


@pytest.mark.parametrize("line", ["ops=-500", "ops=nan", "ops: 1e30", "OPS = 12abc"])
@pytest.mark.parametrize("report", ["total", "stream"])
def test_an_op_count_that_is_no_count_fails_the_level(line: str, report: str) -> None:
    """A line that says it is the op count but is not a count was skipped, so the level counted 0 ops
    (or a calibration interval did, and the 100 % level then read 199.9 %)."""
    wl = CommandWorkload(
        f"{PY} -c \"import time; print('{line}', flush=True); time.sleep(0.5)\"", report=report
    )
    wl.start_phase(L50, 10.0)
    wl.start_measure()
    time.sleep(1.0)
    with pytest.raises(
        WorkloadError, match=rf"^phase l50: the command printed {re.escape(repr(line))}, which is no op count"
    ):
        wl.end_measure()
    wl.close()


def test_a_running_total_that_goes_down_fails_the_level() -> None:
    """A program printing each interval's ops, not a running total, read as "cal1 measured no completed
    ops: the workload did no work" (its last, smaller line minus its first). A total that falls is no
    total: the level fails naming the two lines and the setting that reads per-interval counts."""
    wl = CommandWorkload(
        f"{PY} -c \"import time; print('ops=100', flush=True); print('ops=50', flush=True); time.sleep(0.5)\""
    )
    wl.start_phase(L50, 10.0)
    wl.start_measure()
    time.sleep(1.0)
    with pytest.raises(
        WorkloadError,
        match=r"^phase l50: the command's running total went down \(ops 100, then 50\): if it prints the ops "
        r"of each interval, set increment = true",
    ):
        wl.end_measure()
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
    time.sleep(3)  # for an interpreter's start on a loaded machine: at 0.5 s it had not printed yet
    assert wl.end_measure() == 7  # stopped by SIGTERM, which is ours
    assert wl.failure() is None
    wl.close()


def test_a_command_stopped_at_the_window_end_is_named_by_its_phase(caplog: pytest.LogCaptureFixture) -> None:
    """The warning printed the phase's whole record (Phase(name='cal1', kind=..., timing=Timing(...)))."""
    wl = CommandWorkload(f'{PY} -c "import time; print(7, flush=True); time.sleep(60)"', report="total")
    wl.start_phase(L50, 10.0)
    wl.start_measure()
    time.sleep(0.5)
    with caplog.at_level("WARNING"):
        wl.end_measure()
    wl.close()
    assert [r.getMessage() for r in caplog.records] == [
        "phase l50: command still running at the window's end; stopping it"
    ]


def test_a_missing_program_fails_before_the_first_phase(tmp_path: Path) -> None:
    wl = CommandWorkload(f"{tmp_path}/no-such-program {{load}}")
    with pytest.raises(WorkloadError, match="no-such-program': no such file"):
        wl.open()
    CommandWorkload(f"{PY} -c pass").open()  # found on the path or by its full name
    CommandWorkload("true {load}").open()


def test_the_program_is_resolved_as_the_shell_would_before_anything_starts(tmp_path: Path) -> None:
    """A name is looked up on PATH, a word with a slash is a path from cwd, and it must be a file that
    can be executed; a shell command line is the shell's to resolve."""
    script = tmp_path / "bench.sh"
    script.write_text("#!/bin/sh\necho 1\n")
    cases = {
        "mybenchh --threads 4": "cannot start 'mybenchh': no such program on PATH",
        f"{tmp_path}/nope": f"cannot start '{tmp_path}/nope': no such file",
        f"{tmp_path} {{load}}": f"cannot start '{tmp_path}': a folder, not a program",
        f"{script}": f"cannot start '{script}': not executable",
    }
    for template, why in cases.items():
        with pytest.raises(WorkloadError) as caught:
            CommandWorkload(template).preflight()
        assert str(caught.value) == why
    script.chmod(0o755)
    CommandWorkload(str(script)).preflight()
    CommandWorkload("./bench.sh {load}", cwd=str(tmp_path)).preflight()  # relative to its cwd
    with pytest.raises(WorkloadError, match="no such file"):
        CommandWorkload("./bench.sh {load}").preflight()
    with pytest.raises(WorkloadError, match=r"its folder \(cwd = .*\) does not exist"):
        CommandWorkload("true", cwd=str(tmp_path / "gone")).preflight()
    CommandWorkload("mybenchh || true", shell=True).preflight()
