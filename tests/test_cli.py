"""The command line: every subcommand is reachable and says what it does."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from wattbench import cli


def test_every_subcommand_imports_and_has_help() -> None:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert set(sub.choices) == set(cli.COMMANDS)
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
