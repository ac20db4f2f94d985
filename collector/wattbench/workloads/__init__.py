"""Workloads the sweep can drive: builtin (transactional, on all cores), command (any program, one run
per phase), concurrency (N copies of a job), slurm (cluster-load
sweeps through a Slurm cluster), and ready-made tools on the command workload (fio,
sysbench, stress-ng, bonnie++). Each lives in its own folder with a README and a sample configuration,
and is known by its one row in REGISTRY, which is all the command line knows of it: the sweep's
workload options, the choice of workload and its settings from those options are made here from what
each workload declares."""

from __future__ import annotations

import argparse
import tomllib
from collections.abc import Mapping
from importlib import import_module
from pathlib import Path
from typing import Any, NamedTuple

from .base import Option, WorkloadError


class Entry(NamedTuple):
    """A workload's registry row. module and cls: where its class lives (relative to this package);
    the class owns its settings (from_config), its pre-flight and its plan, and is imported only when
    its workload is chosen. options: the module whose OPTIONS are the workload's options of
    `wattbench sweep`, or None for a workload with none; it is read whenever a parser is built, so
    it is the folder's light module, never the class's."""

    module: str
    cls: str
    options: str | None = None


# One line per workload; `--workload` offers these names in this order, and an option given without
# --workload chooses the first workload that declares it. Nothing else lists the workloads.
REGISTRY: dict[str, Entry] = {
    "builtin": Entry(".builtin.workers", "BuiltinWorkload", ".builtin"),
    "command": Entry(".command.runner", "CommandWorkload", ".command"),
    "concurrency": Entry(".concurrency.runner", "ConcurrencyWorkload", ".concurrency"),
    "worklet": Entry(".worklet", "WorkletWorkload"),
    "fio": Entry(".fio", "FioWorkload"),
    "sysbench": Entry(".sysbench", "SysbenchWorkload"),
    "stressng": Entry(".stressng", "StressNgWorkload"),
    "bonnie": Entry(".bonnie", "BonnieWorkload"),
    "slurm": Entry(".slurm.workload", "SlurmWorkload", ".slurm"),
}
NAMES = tuple(REGISTRY)
# The workload of a sweep that names none and gives no option that chooses one.
DEFAULT = "builtin"
HERE = Path(__file__).resolve().parent


def sample_config(name: str) -> Path:
    """The workload's sample configuration, in its folder (the first part of its module path)."""
    return HERE / REGISTRY[name][0].lstrip(".").split(".")[0] / "sample.toml"


def load_config(path: str | Path) -> dict[str, Any]:
    """A workload configuration file (TOML)."""

    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as exc:
        raise WorkloadError(f"cannot read {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise WorkloadError(f"{path}: {exc}") from None
    except UnicodeDecodeError as exc:
        raise WorkloadError(f"{path}: not UTF-8 text (byte {exc.start})") from None


def workload_class(name: str) -> Any:
    """The class of a registered workload."""
    if not isinstance(name, str) or name not in REGISTRY:
        raise WorkloadError(f"unknown workload {name!r}; choose one of {', '.join(REGISTRY)}")
    entry = REGISTRY[name]
    return getattr(import_module(entry.module, __name__), entry.cls)


def options_of(name: Any) -> tuple[Option, ...]:
    """The options a registered workload declares; () for one without, or a name not registered."""
    entry = REGISTRY.get(name) if isinstance(name, str) else None
    if entry is None or entry.options is None:
        return ()
    options: tuple[Option, ...] = import_module(entry.options, __name__).OPTIONS
    return options


def all_options() -> list[Option]:
    """Every workload's options, each once, in registry order. Two declarations of one flag are a
    mistake of the declaring modules: a shared option is one declaration that each workload lists."""
    seen: dict[str, Option] = {}
    for name in REGISTRY:
        for option in options_of(name):
            if seen.setdefault(option.flag, option) != option:
                raise WorkloadError(f"{name} workload: {option.flag} is declared differently by another")
    return list(seen.values())


def add_arguments(group: argparse._ArgumentGroup) -> None:
    """The workloads' options, into the sweep's option group; every value defaults to None (not
    given), so the workload file's setting or the workload's own default applies."""
    for o in all_options():
        kwargs: dict[str, Any] = {"help": o.help}
        if o.type is not None:
            kwargs["type"] = o.type
        if o.choices is not None:
            kwargs["choices"] = list(o.choices)
        if o.metavar is not None:
            kwargs["metavar"] = o.metavar
        group.add_argument(o.flag, **kwargs)


def option_values(parsed: Mapping[str, Any]) -> dict[str, Any]:
    """The workloads' options from a parsed command line (vars(args)), by dest."""
    return {o.dest: parsed.get(o.dest) for o in all_options()}


def choose(named: Any, given: Mapping[str, Any]) -> Any:
    """The workload of a sweep: the one named (by --workload or the workload file), or else the first
    registered workload with an option given that chooses it, or else DEFAULT."""
    if named:
        return named
    for name in REGISTRY:
        if any(o.chooses and given.get(o.dest) for o in options_of(name)):
            return name
    return DEFAULT


def _only_for(option: Option) -> str:
    names = [n for n in REGISTRY if option in options_of(n)]
    return f"for the {' and '.join(names)} workload{'s' if len(names) > 1 else ''} only"


def settings_for(name: Any, given: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """The workload's settings: its file's (without `workload`), with the options given for it on
    top. An option of another workload that says so, given here, or a setting required and given by
    neither, is a WorkloadError of one line."""
    own = options_of(name)
    misplaced: dict[str, list[str]] = {}
    for o in all_options():
        if given.get(o.dest) is not None and o not in own:
            # Ignored, the run would go on without what was asked for: each option names where it
            # belongs (its own reason, or the workloads that declare it).
            misplaced.setdefault(o.elsewhere or _only_for(o), []).append(o.flag)
    if misplaced:
        # One line: the first reason, with every option given that it covers.
        reason, flags = next(iter(misplaced.items()))
        raise WorkloadError(f"{', '.join(flags)}: {reason} (this is {name})")
    settings = {k: v for k, v in config.items() if k != "workload"}
    for o in own:
        if o.required and o.key is not None and not given.get(o.dest) and o.key not in settings:
            raise WorkloadError(o.required)
    for o in own:
        if o.key is not None and given.get(o.dest):
            settings[o.key] = given[o.dest]
    return settings


def program_source(name: Any, given: Mapping[str, Any], config_path: str | None) -> str:
    """Where the workload's program came from, as the user gave it (the option, or the key in the
    workload file), so a pre-flight refusal points at what to correct."""
    option = next((o for o in options_of(name) if o.program and o.key is not None), None)
    if option is None:
        return f"{name} workload"
    if given.get(option.dest):
        return option.flag
    return f"{config_path}: {option.key}" if config_path else str(option.key)


def setting_source(name: Any, key: str, given: Mapping[str, Any], config_path: str | None) -> str:
    """A workload setting as the user gave it: the option whose key it is when that was given, else
    the key in the workload file."""
    for option in options_of(name):
        # an option the plan reads (no key) gives the setting of its own name: --copies, copies
        if (option.key or option.dest) == key and given.get(option.dest) is not None:
            return option.flag
    # neither given: the setting's default, named as the workload's
    return f"{config_path}: {key}" if config_path else f"{name} workload: {key}"


def make_workload(name: str, config: dict[str, Any] | None = None) -> Any:
    """Build a workload from its name and configuration (the keys of its sample.toml)."""
    config = dict(config or {})
    config.pop("workload", None)
    return workload_class(name).from_config(config)
