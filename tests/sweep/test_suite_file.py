"""The suite file: the shipped sample builds every workload; what is wrong in a file is refused before
the first phase with the key and the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from wattbench.sweep.suite import load_suite, parse_suite
from wattbench.workloads.base import WorkloadError

SAMPLE = Path(__file__).resolve().parents[2] / "collector/wattbench/workloads/worklet/suite.toml"


def test_the_shipped_sample_suite_loads() -> None:
    suite = load_suite(SAMPLE)
    assert suite.name == "cpu-memory-storage"
    assert [(e.name, e.group) for e in suite.entries] == [
        ("sha256", "cpu"), ("compress", "cpu"), ("flood", "memory"), ("random", "storage"),
    ]  # fmt: skip
    assert suite.levels is None  # each group at SERT's loads


def test_each_group_sweeps_at_serts_loads_unless_told_otherwise() -> None:
    from wattbench.core.plan import Timing
    from wattbench.sweep.suite import plan_for

    suite = load_suite(SAMPLE)
    t = Timing(1, 1, 1, 1)

    def loads(entry_index: int, levels: tuple[float, ...] | None = None, s=suite) -> list[float | None]:
        plan = plan_for(s.entries[entry_index], entry_index == 0, s, t, 3, 2, levels, True)
        return [p.target for p in plan.phases if p.kind == "target"]

    assert loads(0) == [1.0, 0.75, 0.5, 0.25] and loads(2) == [1.0, 0.5] and loads(3) == [1.0, 0.5]
    assert loads(2, (1.0, 0.1)) == [1.0, 0.1]  # --levels given: every worklet
    only_first = [p.kind for p in plan_for(suite.entries[0], True, suite, t, 3, 2, None, True).phases]
    assert only_first.count("idle") == 1
    assert "idle" not in [
        p.kind for p in plan_for(suite.entries[1], False, suite, t, 3, 2, None, True).phases
    ]


def test_any_workload_can_join_in_a_named_group() -> None:
    suite = parse_suite(
        {
            "levels": [100, 50],
            "worklet": [
                {"worklet": "sha256", "levels": "100,60,20"},
                {"name": "sb-cpu", "workload": "sysbench", "group": "cpu", "settings": {"test": "cpu"}},
            ],
        }
    )
    assert suite.levels == (1.0, 0.5)
    assert suite.entries[0].levels == (1.0, 0.6, 0.2)
    assert suite.entries[1].workload == "sysbench" and suite.entries[1].config == {"test": "cpu"}


@pytest.mark.parametrize(
    ("doc", "why"),
    [
        ({}, "no \\[\\[worklet\\]\\]"),
        ({"worklet": [{"worklet": "nope"}]}, "'nope' is not one of"),
        ({"worklet": [{"worklet": "sha256"}, {"worklet": "sha256"}]}, "sha256 appears twice"),
        ({"worklet": [{"worklet": "sha256", "workres": 2}]}, "unknown keys \\['workres'\\]"),
        ({"worklet": [{"worklet": "sha256", "workers": "two"}]}, "workers must be an integer"),
        ({"worklet": [{"name": "x", "workload": "fio"}]}, "give worklet = ..., or name, workload and group"),
        ({"worklet": [{"name": "x", "workload": "fio", "group": "gpu"}]}, "group 'gpu'"),
        (
            {"worklet": [{"name": "x", "workload": "fio", "group": "storage", "rw": "read"}]},
            "belong in settings",
        ),
        ({"worklet": [{"worklet": "sha256", "levels": "100,150"}]}, "levels"),
        (
            {"worklet": [{"worklet": "sha256"}], "levels": "100,5O"},
            "levels: '100,5O' is not a list of numbers",
        ),
        ({"name": "Bad Name", "worklet": [{"worklet": "sha256"}]}, "name 'Bad Name'"),
        ({"worklet": [{"worklet": "sha256"}], "level": "100"}, "unknown keys \\['level'\\]"),
    ],
)
def test_a_bad_suite_is_refused_with_the_reason(doc: dict, why: str) -> None:
    with pytest.raises(WorkloadError, match=why) as caught:
        parse_suite(doc, "lab/suite.toml")
    # A worklet's mistake too names the file first: a user with several suites knows which to open.
    assert str(caught.value).startswith("lab/suite.toml: "), caught.value


def test_a_missing_or_broken_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match="cannot read"):
        load_suite(tmp_path / "none.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("name = [\n")
    with pytest.raises(WorkloadError, match=r"bad\.toml"):
        load_suite(bad)


def test_a_worklet_that_cannot_start_after_another_finished_keeps_the_finished(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The appliance goes offline between two worklets: the suite ends with the first kept and the
    reason named, instead of an error that would throw the first away. The first failing to start
    is the command's error, as for a sweep."""
    from types import SimpleNamespace

    from wattbench.core.plan import Timing, specpower_plan
    from wattbench.sweep import suite as suite_mod
    from wattbench.sweep.channels import ChannelError
    from wattbench.sweep.session import SweepSetup

    suite = parse_suite({"worklet": [{"worklet": "sha256"}, {"worklet": "flood"}]})
    result = {
        "v": 1, "run": "s-sha256", "t": 1_795_600_000_000, "valid": True, "overall": 1.0, "checks": [],
        "calibrated": 100.0, "levels": [{"phase": "l100", "kind": "target", "target": 1.0, "ops": 100.0, "W": 50.0}],
    }  # fmt: skip
    calls = []

    def fake_sweep(setup: SweepSetup) -> object:
        calls.append(setup.run)
        if len(calls) == 2:
            raise ChannelError("demo-sim: offline (retained status), cannot be measured")
        record = SimpleNamespace(interrupted=None)
        return SimpleNamespace(
            record=record, evaluation=SimpleNamespace(result=result, events=[]), channels=[], store_error=None
        )

    monkeypatch.setattr(suite_mod, "run_sweep", fake_sweep)
    plan = specpower_plan(3, (1.0,), False, Timing(1, 1, 1, 1))
    base = SweepSetup(run="s", plan=plan, workload=None)
    done = suite_mod.run_suite(suite, "s", base, lambda e, first: plan)
    assert calls == ["s-sha256", "s-flood"]
    assert [w["name"] for w in done.document["worklets"]] == ["sha256"]
    assert (
        done.interrupted
        == "worklet flood could not start: demo-sim: offline (retained status), cannot be measured"
    )
    assert not done.document["complete"] and done.document["score"]["partial"]
    calls.clear()
    calls.append("pretend the first already ran")  # so the next call is the failing one
    with pytest.raises(ChannelError):
        suite_mod.run_suite(suite, "s", base, lambda e, first: plan)


def test_ctrl_c_before_the_first_worklet_measured_anything_is_the_commands_interruption(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ctrl-C while the first worklet checks its channels: there is no suite to report, so the
    interruption reaches the command (one line, exit 130), not an empty suite result."""
    from wattbench.core.plan import Timing, specpower_plan
    from wattbench.sweep import suite as suite_mod
    from wattbench.sweep.session import SweepSetup

    def interrupted(setup: SweepSetup) -> object:
        raise KeyboardInterrupt

    monkeypatch.setattr(suite_mod, "run_sweep", interrupted)
    suite = parse_suite({"worklet": [{"worklet": "sha256"}, {"worklet": "flood"}]})
    plan = specpower_plan(3, (1.0,), False, Timing(1, 1, 1, 1))
    base = SweepSetup(run="s", plan=plan, workload=None)
    with pytest.raises(KeyboardInterrupt):
        suite_mod.run_suite(suite, "s", base, lambda e, first: plan)


def test_a_worklet_whose_program_is_not_there_stops_the_suite_before_any_starts(tmp_path: Path) -> None:
    """The third worklet's program is missing: the suite refuses at once (exit 2), naming the file and
    the worklet, rather than after the first two have run."""
    import subprocess
    import sys

    suite = tmp_path / "suite.toml"
    suite.write_text(
        '[[worklet]]\nworklet = "sha256"\n\n[[worklet]]\nworklet = "flood"\n\n'
        '[[worklet]]\nname = "mine"\nworkload = "command"\ngroup = "cpu"\n'
        'settings = { run = "mybenchh {load}" }\n'
    )
    wattbench = str(Path(sys.executable).with_name("wattbench"))
    out = subprocess.run(
        [wattbench, "suite", str(suite), "--ops-only", "--quiet"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2, out.stderr
    assert out.stderr == (
        f"wattbench suite: {suite}: worklet mine: cannot start 'mybenchh': no such program on PATH\n"
    )


@pytest.mark.parametrize(
    ("options", "why"),
    [
        ({"size_mb": -64}, "size_mb must be 1 to 16777216, not -64"),
        ({"file": "{tmp}/nodir/w.dat"}, "file {tmp}/nodir/w.dat: no folder {tmp}/nodir"),
    ],
)
def test_a_storage_worklet_that_cannot_run_is_refused_before_the_first_worklet(
    tmp_path: Path, options: dict, why: str
) -> None:
    """A second worklet's file in a missing folder, or a negative size, was found once the first
    worklet had run and been stored."""
    from wattbench.sweep.suite import preflight_suite

    options = {k: v.format(tmp=tmp_path) if isinstance(v, str) else v for k, v in options.items()}
    suite = parse_suite(
        {"worklet": [{"worklet": "sha256"}, {"worklet": "random", "options": options}]}, "lab/suite.toml"
    )
    with pytest.raises(WorkloadError) as caught:
        preflight_suite(suite, "lab/suite.toml")
    # the worklet named once, though both the suite and the worklet name it
    assert str(caught.value) == f"lab/suite.toml: worklet random: {why.format(tmp=tmp_path)}"
    assert not (tmp_path / "nodir").exists()
