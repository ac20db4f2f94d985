"""The command line: every subcommand is reachable and says what it does."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from wattbench.cli import app as cli


def test_every_subcommand_imports_and_has_help() -> None:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert set(sub.choices) == set(cli.COMMANDS) | {"help"}
    for name, p in sub.choices.items():
        error = p.get_default("_import_error")
        assert not error, f"wattbench {name}: {error}"


@pytest.mark.parametrize("name", list(cli.COMMANDS))
def test_help_exits_zero(name: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "wattbench.cli", name, "--help"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert "usage: wattbench" in out.stdout


def test_no_command_prints_help_and_exits_2() -> None:
    out = subprocess.run([sys.executable, "-m", "wattbench.cli"], capture_output=True, text=True)
    assert out.returncode == 2 and "COMMAND" in out.stdout


def test_every_numeric_option_is_checked_when_the_command_line_is_read() -> None:
    """A bare int or float type takes "nan", "inf", 0 or -5 and leaves the check to whatever runs
    later, if anything does: `wattbench demo --measure -5` was an internal error (exit 1) after the
    demo had started, `--workers 0` ran, `appliance --count -3` exited 0 having sent nothing. Every
    numeric option goes through wattbench.argtypes (number, whole), which says the range."""
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    bare = [
        f"wattbench {name} {'/'.join(action.option_strings) or action.dest}"
        for name, p in sub.choices.items()
        for action in p._actions
        if action.type in (int, float)
    ]
    assert bare == []


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["demo", "--measure", "-5"], "--measure"),
        (["demo", "--gap", "nan"], "--gap"),
        (["demo", "--workers", "0"], "--workers"),
        (["demo", "--nice", "20"], "--nice"),
        (["sweep", "--measure", "inf"], "--measure"),
        (["sweep", "--calibrations", "two"], "--calibrations"),
        (["sweep", "--load-tolerance", "nan"], "--load-tolerance"),
        (["appliance", "--sim", "--count", "-3"], "--count"),
        (["appliance", "--sim", "--every", "0"], "--every"),
        (["appliance", "--sim", "--hz", "ten"], "--hz"),
        (["score", "x.csv", "--tolerance", "nan"], "--tolerance"),
        (["ptd", "--silence", "0", "-p", "8888", "8"], "--silence"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else v,
)
def test_a_number_out_of_range_is_a_usage_error_before_anything_starts(
    argv: list[str], option: str, tmp_path: Path
) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "wattbench.cli", *argv],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=30,
    )
    assert out.returncode == 2, out.stderr
    assert out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1 and option in out.stderr, out.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "argv",
    [
        ["wattbench.workloads.builtin", "--ops", "-5"],
        ["wattbench.workloads.builtin", "--seconds", "1", "--rate", "nan"],
        ["wattbench.workloads.builtin", "--ops", "3", "--every", "0"],
        ["wattbench.workloads.worklet", "sha256", "--ops", "3", "--every", "-1"],
    ],
    ids=" ".join,
)
def test_a_workload_entry_point_refuses_a_wrong_number(argv: list[str]) -> None:
    """The workloads' own commands (a concurrency job, a command workload's sample) read their numbers
    with the same types: `--ops -5` ran nothing and said "ops=0" with exit 0, `--rate nan` ran flat
    out, `--every 0` printed without pause."""
    out = subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True, timeout=30)
    assert out.returncode == 2, out.stderr
    assert out.stdout == ""
    assert argv[-2] in out.stderr.strip().splitlines()[-1]


def _shown(default: object, text: str) -> bool:
    """The default is in the help as a user would type or read it."""
    if "%(default)" in text:
        return True
    forms = {str(default)}
    if isinstance(default, bool):
        return "default" in text  # a --flag/--no-flag pair says which of the two it is
    if isinstance(default, float):
        forms |= {f"{default:g}", f"{default:,g}"}
    if isinstance(default, (list, tuple)):
        forms |= {",".join(map(str, default)), " ".join(map(str, default))}
    return any(form in text for form in forms)


def test_every_option_has_help_and_shows_its_default() -> None:
    """--help is the reference a newcomer reads: an option with no text (`compare --price`) or whose
    default is left out (`ptd -p`, `sweep --levels`) sends them to the source."""
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    missing, unshown = [], []
    for name, p in sub.choices.items():
        for action in p._actions:
            if isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
                continue
            if action.help == argparse.SUPPRESS:
                continue
            where = f"wattbench {name} {'/'.join(action.option_strings) or action.dest}"
            if not action.help:
                missing.append(where)
                continue
            default = action.default
            if isinstance(action, argparse._CountAction) or not action.option_strings:
                continue  # -v counts from none; a positional's value is always given
            if default is None or default is False or default == [] or default == argparse.SUPPRESS:
                continue
            if not _shown(default, action.help):
                unshown.append(f"{where} (default {default!r}): {action.help}")
    assert missing == [], "options without help:\n" + "\n".join(missing)
    assert unshown == [], "defaults not shown in help:\n" + "\n".join(unshown)
