"""The workload registry: one line per workload, the `--workload` choices come from it, and every
registered workload has its folder with a README and a sample configuration whose keys it owns."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from wattbench import workloads
from wattbench.cli.sweep import add_workload_arguments
from wattbench.workloads import NAMES, load_config, make_workload, sample_config, workload_class
from wattbench.workloads.base import WorkloadError


def test_sample_configs_load_and_build() -> None:
    for name in NAMES:
        path = sample_config(name)
        assert path.exists() and (path.parent / "README.md").exists()
        wl = make_workload(name, load_config(path))
        # The instance may name itself more exactly for the run's record (worklet-sha256-v1).
        assert type(wl).name == name and wl.name.startswith(name)
    with pytest.raises(WorkloadError):
        make_workload("nope")
    with pytest.raises(WorkloadError):
        make_workload("command", {"run": "true", "bogus": 1})


def test_each_registry_line_names_a_class_that_builds_itself_from_its_settings() -> None:
    assert NAMES == tuple(workloads.REGISTRY) and len(NAMES) == len(set(NAMES))
    for name in NAMES:
        cls = workload_class(name)
        assert cls.name == name
        # Its folder is named after it: the class lives in wattbench.workloads.<name>.
        assert cls.__module__.split(".")[:3] == ["wattbench", "workloads", name]
        settings = set(cls.SETTINGS) | set(getattr(cls, "PLAN_SETTINGS", ()))
        sample = load_config(sample_config(name))
        assert sample.pop("workload") == name
        assert set(sample) <= settings, f"{name}: sample.toml keys the workload does not own"
        readme = (sample_config(name).parent / "README.md").read_text()
        assert len(readme.splitlines()) >= 10, f"{name}: README.md says too little"


@pytest.mark.parametrize("bad", ["nope", ["builtin"], 3, None])
def test_an_unknown_workload_is_refused_naming_the_registered_ones(bad: object) -> None:
    with pytest.raises(
        WorkloadError,
        match=r"unknown workload .*; choose one of builtin, command, concurrency, worklet, fio, sysbench, stressng, bonnie, slurm$",
    ):
        workload_class(bad)  # type: ignore[arg-type]


def test_workload_choices_of_the_cli_are_the_registry() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    add_workload_arguments(parser)
    (action,) = [a for a in parser._actions if a.dest == "workload"]
    assert tuple(action.choices) == NAMES


@pytest.mark.parametrize(
    ("name", "config", "message"),
    [
        ("builtin", {"seed": "x"}, r'^builtin workload: seed must be an integer, got "x"$'),
        ("builtin", {"workers": True}, r"^builtin workload: workers must be an integer, got true$"),
        ("builtin", {"max_lines": 2.5}, r"^builtin workload: max_lines must be an integer, got 2.5$"),
        ("builtin", {"workers": -1}, r"^builtin workload: workers must be >= 1$"),
        ("builtin", {"nice": 30}, r"^builtin workload: nice must be 0 to 19$"),
        # 100000 processes started one after the other took the machine down before the first window
        (
            "builtin",
            {"workers": 100000},
            r"^builtin workload: workers 100000: more than 8 worker processes per core",
        ),
        (
            "worklet",
            {"worklet": "sha256", "workers": 100000},
            r"workers 100000: more than 8 worker processes per core",
        ),
        (
            "stressng",
            {"workers": 100000},
            r"^stress-ng workload: workers 100000: more than 8 worker processes per core",
        ),
        (
            "builtin",
            {"min_lines": 30, "max_lines": 5},
            r"^builtin workload: lines per order need 1 <= min_lines",
        ),
        ("command", {"run": 5}, r"^command workload: run must be a string, got 5$"),
        (
            "command",
            {"run": "true", "shell": "yes"},
            r'^command workload: shell must be true or false, got "yes"$',
        ),
        (
            "command",
            {"run": "true", "stop_grace_s": "5"},
            r"^command workload: stop_grace_s must be a number",
        ),
        ("command", {"run": "true", "ops_file": 3}, r"^command workload: ops_file must be a string, got 3$"),
        # a negative grace killed the command at once; nan never stopped waiting
        ("command", {"run": "true", "stop_grace_s": -1}, r"stop_grace_s: must be 0 to 600 seconds, not -1"),
        ("command", {"run": "true", "stop_grace_s": float("nan")}, r"stop_grace_s: must be 0 to 600 seconds"),
        ("concurrency", {"job": ["a"]}, r'^concurrency workload: job must be a string, got \["a"\]$'),
        # the message listed every option "with its type" and said neither which type nor which key
        (
            "worklet",
            {"worklet": "random", "options": {"size_mb": "big"}},
            r'^worklet workload: options\.size_mb must be an integer, got "big"$',
        ),
        (
            "worklet",
            {"worklet": "random", "options": {"sise_mb": 5}},
            r"^worklet workload: unknown option 'sise_mb' \(did you mean 'size_mb'\?\); known: direct, file, size_mb$",
        ),
        ("concurrency", {"shell": 1}, r"^concurrency workload: shell must be true or false, got 1$"),
    ],
)
def test_a_setting_of_the_wrong_type_or_range_is_a_workload_error_naming_it(
    name: str, config: dict[str, object], message: str
) -> None:
    """A workload file is checked before the sweep starts: a wrong value is one line naming the key (exit
    2 from the command line), never a traceback and never a value silently converted."""
    with pytest.raises(WorkloadError, match=message):
        make_workload(name, config)


def test_settings_of_the_right_type_are_taken() -> None:
    wl = make_workload("command", {"run": "true", "stop_grace_s": 2, "shell": True, "increment": False})
    assert wl.stop_grace_s == 2 and wl.shell is True
    assert make_workload("builtin", {"workers": 0}).workers >= 1  # 0: one per core


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('workload = "command"\nrun = 5\n', "command workload: run must be a string, got 5"),
        ('workload = "concurrency"\njob = ["a"]\n', 'concurrency workload: job must be a string, got ["a"]'),
        ('workload = "builtin"\nseed = "x"\n', 'builtin workload: seed must be an integer, got "x"'),
    ],
)
def test_a_bad_workload_file_stops_the_sweep_with_one_line(toml: str, message: str, tmp_path: Path) -> None:
    """Exit 2 (bad configuration) with one line naming the file and the key, before anything runs: no
    traceback."""
    path = tmp_path / "w.toml"
    path.write_text(toml)
    argv = [
        sys.executable,
        "-m",
        "wattbench.cli",
        "sweep",
        "--ops-only",
        "--quiet",
        "--workload-config",
        str(path),
    ]
    out = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines() == [f"wattbench sweep: {path}: {message}"]


@pytest.mark.parametrize("name", NAMES)
def test_a_setting_left_out_is_a_workload_error_naming_it_or_a_default(name: str) -> None:
    """Every setting of the sample, left out in turn, and all of them at once: the workload builds
    with its default or refuses with a WorkloadError (one line at the command line, exit 2), never a
    TypeError from a constructor missing an argument."""
    sample = load_config(sample_config(name))
    sample.pop("workload")
    for left_out in [None, *sample]:
        config = {} if left_out is None else {k: v for k, v in sample.items() if k != left_out}
        try:
            make_workload(name, config)
        except WorkloadError as exc:
            assert left_out is None or left_out in str(exc), exc
