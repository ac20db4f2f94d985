"""Checks of a command line that hold for every command, made before the command runs: what its
output files would overwrite, and options that would be ignored beside the store given."""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
from pathlib import Path

from ..store import file_path
from .options import CliError, default_store, resolve


def check_output_files(args: argparse.Namespace) -> None:
    """Each file output of add_output_options has a file of its own, checked before the command runs:
    two options naming one file left only the second's content, silently. CliError (exit 2)."""
    seen: dict[Path, str] = {}
    for name in getattr(args, "_file_outputs", ()):
        path = vars(args).get(name.replace("-", "_"))
        if not path:
            continue
        resolved = Path(path).expanduser().resolve()
        if resolved in seen:
            raise CliError(
                f"--{seen[resolved]} and --{name} both name {resolved}: each output needs a file of its own"
            )
        seen[resolved] = name
    # An output onto a file the command reads would destroy it: the store (a live one, as like as not)
    # or an input file named anywhere on the command line.
    outputs = {n.replace("-", "_") for n in getattr(args, "_file_outputs", ())}
    reads: list[tuple[str, str]] = []
    store = file_path(_store(args))
    if store:
        reads.append((store, "the store"))
    for key, value in vars(args).items():
        if key.startswith("_") or key in outputs:
            continue
        for v in value if isinstance(value, list | tuple) else [value]:
            if isinstance(v, str | os.PathLike) and str(v):
                reads.append((str(v), "an input"))
                # a command line (--cmd "python3 mybench.py {rate}") reads the files its words name
                if isinstance(v, str) and " " in v.strip():
                    with contextlib.suppress(ValueError):
                        reads.extend((word, "an input") for word in shlex.split(v))
    for out, name in seen.items():
        if not out.is_file():
            continue  # a new file cannot be one the command reads
        for path, what in reads:
            with contextlib.suppress(OSError, ValueError):
                if os.path.samefile(out, Path(path).expanduser()):
                    raise CliError(f"--{name} {out} is {what} of this command: it would be overwritten")


def check_store_options(args: argparse.Namespace) -> None:
    """--db on the command line names an InfluxDB database; beside a SQLite store it would be ignored
    and the command would read or write another store than the one meant. CliError (exit 2). The
    environment's WATTBENCH_INFLUX_DB is left alone: it is set for other commands too."""
    db = getattr(args, "db", None)
    spec = _store(args) if db else None
    if spec is not None and not spec.startswith(("http://", "https://")):
        raise CliError(
            f"--db {db} names an InfluxDB database, but the store is the SQLite file "
            f"{file_path(spec) or spec}: give --influx URL with it, or leave --db out"
        )


def _store(args: argparse.Namespace) -> str | None:
    """The store a command with store options uses: the options, the environment, a --config file
    (collect), else the default; None for a command without a store, or a configuration the command
    itself refuses, in its own words."""
    if not hasattr(args, "store"):
        return None
    try:
        return str(resolve(args, ["store"], getattr(args, "config", None)).store or default_store())
    except (ValueError, OSError):
        return None
