"""Workloads the sweep can drive: builtin (transactional, on all cores), command (any program, one run
per phase), concurrency (N copies of a job), slurm (cluster-load
sweeps through a Slurm cluster), and ready-made tools on the command workload (fio,
sysbench, stress-ng, bonnie++). Each lives in its own folder with a README and a sample configuration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .base import WorkloadError

# One line per workload: its name and where its class lives (module relative to this package, class).
# The class owns its settings through from_config; `--workload` offers these names. A module is
# imported only when its workload is chosen.
REGISTRY: dict[str, tuple[str, str]] = {
    "builtin": (".builtin.workers", "BuiltinWorkload"),
    "command": (".command.runner", "CommandWorkload"),
    "concurrency": (".concurrency.runner", "ConcurrencyWorkload"),
    "worklet": (".worklet", "WorkletWorkload"),
    "fio": (".fio", "FioWorkload"),
    "sysbench": (".sysbench", "SysbenchWorkload"),
    "stressng": (".stressng", "StressNgWorkload"),
    "bonnie": (".bonnie", "BonnieWorkload"),
    "slurm": (".slurm", "SlurmWorkload"),
}
NAMES = tuple(REGISTRY)
HERE = Path(__file__).resolve().parent


def sample_config(name: str) -> Path:
    """The workload's sample configuration, in its folder (the first part of its module path)."""
    return HERE / REGISTRY[name][0].lstrip(".").split(".")[0] / "sample.toml"


def load_config(path: str | Path) -> dict[str, Any]:
    """A workload configuration file (TOML)."""
    import tomllib

    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as exc:
        raise WorkloadError(f"cannot read {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise WorkloadError(f"{path}: {exc}") from None


def workload_class(name: str) -> Any:
    """The class of a registered workload."""
    from importlib import import_module

    if not isinstance(name, str) or name not in REGISTRY:
        raise WorkloadError(f"unknown workload {name!r}; choose one of {', '.join(NAMES)}")
    module, cls = REGISTRY[name]
    return getattr(import_module(module, __name__), cls)


def make_workload(name: str, config: dict[str, Any] | None = None) -> Any:
    """Build a workload from its name and configuration (the keys of its sample.toml)."""
    config = dict(config or {})
    config.pop("workload", None)
    return workload_class(name).from_config(config)
