"""A workload plugs in with its folder and one registry row: the command line names no workload, and
a workload registered by one row (here a test double, declared in this module) gets its options, its
choice, its settings, its pre-flight and its plan through `wattbench sweep` without a line of cli/."""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

import wattbench.cli.app
from wattbench import workloads
from wattbench.argtypes import whole
from wattbench.cli import main
from wattbench.cli.options import CliError
from wattbench.cli.sweep import plan_from_args, workload_from_args
from wattbench.core.plan import Phase, Plan, concurrency_plan
from wattbench.workloads import REGISTRY, Entry
from wattbench.workloads.base import Option, PlanRequest, WorkloadDefaults, WorkloadError, check_keys

CLI = Path(wattbench.cli.__file__).resolve().parent

# Where a workload's name in cli/ is another word: the subcommand's dest, a phase kind of the core,
# and the key of a suite file's worklet entries.
OTHER_MEANINGS = {
    ("app.py", "command"),
    ("compare.py", "concurrency"),
    ("demo.py", "worklet"),
}


def _cli_modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(CLI.glob("*.py")):
        yield path.name, ast.parse(path.read_text(), str(path))


def test_the_command_line_imports_no_workload() -> None:
    """cli/ reaches workloads through the registry (wattbench.workloads) and the interface (base)
    only: no import of a workload's folder, so a workload is added or removed without touching cli/."""
    found = []
    for file, tree in _cli_modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                paths = [f"{node.module or ''}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                paths = [a.name for a in node.names]
            else:
                continue
            for path in paths:
                parts = path.strip(".").split(".")
                if "workloads" in parts[:-1] and parts[parts.index("workloads") + 1] in REGISTRY:
                    found.append(f"{file}:{node.lineno} {path}")
    assert not found, f"cli/ imports a workload: {found}"


def test_the_command_line_names_no_workload() -> None:
    """No string in cli/ is a workload's name (but where the word means something else): the sweep
    branches on no workload, and its options, choice, plan and nodes come from the workload."""
    named = set()
    for file, tree in _cli_modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in REGISTRY:
                named.add((file, node.value))
    assert named - OTHER_MEANINGS == set(), "cli/ names a workload"
    assert OTHER_MEANINGS <= named, "an exception above is no longer needed: remove it"


def test_building_the_parser_imports_no_workload_class() -> None:
    """Every command builds the whole parser, so the workloads' options are declared in their light
    folder modules: no workload class (multiprocessing, Slurm's client) is imported for --help."""
    code = (
        "import sys, wattbench.cli.app as c; c.build_parser(); "
        "from wattbench.workloads import REGISTRY; "
        "print([n for n, e in REGISTRY.items() "
        "if e.module.replace('.', 'wattbench.workloads.', 1) in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[]"], out.stdout


def test_every_option_module_is_in_its_workload_folder() -> None:
    for name, entry in REGISTRY.items():
        assert entry.module.split(".")[1] == name
        if entry.options is not None:
            assert entry.options.split(".")[1] == name


# ---------------------------------------------------------------------------------- the test double


class DoubleWorkload(WorkloadDefaults):
    """Copies of nothing: each level of its own plan counts its copies as done at once."""

    name = "double"
    ops_unit = "ops"
    window = "until_done"
    overrun_s = 0.0
    calibrates = False
    SETTINGS = ("rounds", "tool")

    def __init__(self, rounds: int = 2, tool: str = "fine") -> None:
        self.rounds = rounds
        self.tool = tool
        self._copies = 0
        self._done = 0

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> DoubleWorkload:
        check_keys(cls.name, config, cls.SETTINGS)
        return cls(**config)

    def preflight(self) -> None:
        if self.tool == "missing":
            raise WorkloadError("cannot start 'missing': no such program on PATH")

    def plan(self, request: PlanRequest) -> Plan | None:
        copies = tuple(range(1, self.rounds + 1))
        return concurrency_plan(copies, idle=request.idle, timing=request.timing)

    def open(self) -> None:
        pass

    def start_phase(self, phase: Phase, rate: float | None) -> None:
        self._copies = int(phase.copies or 0)

    def start_measure(self) -> None:
        pass

    def measure_done(self) -> bool:
        return True

    def end_measure(self) -> int:
        self._done += self._copies
        return self._copies

    def end_phase(self) -> None:
        pass

    def completed(self) -> int:
        return self._done

    def close(self) -> None:
        pass


OPTIONS = (
    Option("--double-rounds", "double: levels of copies (2)", key="rounds", type=whole(at_least=1),
           metavar="N", chooses=True),
    Option("--double-tool", "double: its program", key="tool", metavar="NAME", program=True),
    Option("--double-only", "double: a flag for it alone", metavar="X", elsewhere="for the double only"),
)  # fmt: skip


@pytest.fixture
def double(monkeypatch: pytest.MonkeyPatch) -> None:
    """The double registered by its one row, as a workload folder would be."""
    monkeypatch.setitem(REGISTRY, "double", Entry(__name__, "DoubleWorkload", __name__))


def _sweep_args(*argv: str) -> argparse.Namespace:
    args = wattbench.cli.app.build_parser().parse_args(["sweep", "--ops-only", *argv])
    assert isinstance(args, argparse.Namespace)
    return args


def test_a_workload_registered_by_one_row_is_parsed_built_and_planned(double: None) -> None:
    args = _sweep_args("--workload", "double", "--double-rounds", "3", "--measure", "5", "--no-idle")
    workload, config = workload_from_args(args)
    assert isinstance(workload, DoubleWorkload) and workload.rounds == 3 and config == {"rounds": 3}
    plan = plan_from_args(args, workload, config)
    assert [p.copies for p in plan.phases] == [1, 2, 3]
    assert {p.timing.measure_s for p in plan.phases} == {5.0}


def test_its_options_are_in_the_help_and_one_of_them_chooses_it(
    double: None, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main(["sweep", "--help"])
    out = capsys.readouterr().out
    assert "--double-rounds N" in out and "double: levels of copies (2)" in out
    assert "{builtin,command,concurrency,worklet,fio,sysbench,stressng,bonnie,slurm,double}" in out
    workload, _ = workload_from_args(_sweep_args("--double-rounds", "1"))
    assert isinstance(workload, DoubleWorkload)


def test_its_settings_file_is_overridden_by_its_options(double: None, tmp_path: Path) -> None:
    path = tmp_path / "double.toml"
    path.write_text('workload = "double"\nrounds = 4\ntool = "fine"\n')
    workload, config = workload_from_args(_sweep_args("--workload-config", str(path)))
    assert isinstance(workload, DoubleWorkload) and workload.rounds == 4
    _, config = workload_from_args(_sweep_args("--workload-config", str(path), "--double-rounds", "2"))
    assert config == {"rounds": 2, "tool": "fine"}


def test_its_option_given_for_another_workload_is_refused_with_its_reason(double: None) -> None:
    with pytest.raises(CliError, match=r"^--double-only: for the double only \(this is builtin\)$"):
        workload_from_args(_sweep_args("--double-only", "x"))


def test_its_preflight_refusal_names_the_option_or_the_key_given(
    double: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["sweep", "--ops-only", "--workload", "double", "--double-tool", "missing"])
    assert code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "wattbench sweep: --double-tool: cannot start 'missing': no such program on PATH"
    ]
    path = tmp_path / "d.toml"
    path.write_text('workload = "double"\ntool = "missing"\n')
    assert main(["sweep", "--ops-only", "--workload-config", str(path)]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith(f"{path}: tool: cannot start 'missing': no such program on PATH")
    )


def test_it_runs_a_whole_sweep(double: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Through the driver to a scored result: ops only, so not valid (exit 1), its levels its own."""
    fast = ["--pre", "0", "--measure", "0.05", "--post", "0", "--gap", "0", "--wait-data", "0"]
    result = tmp_path / "r.json"
    argv = ["sweep", "--ops-only", "--quiet", "--double-rounds", "2", "--json-out", str(result), *fast]
    code = main(argv)
    out = capsys.readouterr()
    assert code == 1, out.err
    doc = json.loads(result.read_text())
    assert doc["workload"] == "double" and doc["unit"] == "ops"
    assert "Active Idle" in out.out


def test_two_different_declarations_of_one_flag_are_refused(
    double: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        sys.modules[__name__], "OPTIONS", (Option("--workers", "double: something else", key="rounds"),)
    )
    with pytest.raises(WorkloadError, match="--workers is declared differently"):
        workloads.all_options()


def test_the_architecture_page_names_files_that_exist() -> None:
    """docs/architecture.md says which files adding a workload touches: each one it names is there."""
    root = Path(__file__).resolve().parents[2]
    doc = (root / "docs" / "architecture.md").read_text()
    section = doc.split("### A workload", 1)[1].split("\n##", 1)[0]
    named = set(re.findall(r"`((?:tests|workloads|collector)/[^`<> ]+)`", section))
    assert {
        "workloads/base.py",
        "collector/wattbench/workloads/__init__.py",
        "tests/workloads/test_plugin.py",
    } <= named
    for path in named:
        assert (root / path).exists() or (root / "collector" / "wattbench" / path).exists(), path
    assert "`REGISTRY`" in section and "`OPTIONS`" in section and "`DEFAULT`" in section
