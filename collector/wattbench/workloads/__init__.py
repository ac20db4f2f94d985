"""Workloads the sweep can drive: builtin (transactional, on all cores), command (any program, one run
per phase) and concurrency (N copies of a job). Each lives in its own folder with a README and a sample
configuration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

NAMES = ("builtin", "command", "concurrency")
HERE = Path(__file__).resolve().parent


def sample_config(name: str) -> Path:
    return HERE / name / "sample.toml"


def load_config(path: str | Path) -> dict[str, Any]:
    """A workload configuration file (TOML)."""
    import tomllib

    from .base import WorkloadError

    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as exc:
        raise WorkloadError(f"cannot read {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise WorkloadError(f"{path}: {exc}") from None


def make_workload(name: str, config: dict[str, Any] | None = None) -> Any:
    """Build a workload from its name and configuration (the keys of its sample.toml)."""
    from .base import WorkloadError

    config = dict(config or {})
    config.pop("workload", None)
    if name == "builtin":
        from .builtin import from_config

        _check_keys(name, config, {"workers", "seed", "min_lines", "max_lines", "nice"})
        return from_config(config)
    if name == "command":
        from .command.runner import CommandWorkload

        allowed = {"run", "report", "shell", "ops_file", "ops_pattern", "increment", "cwd", "stop_grace_s"}
        _check_keys(name, config, allowed)
        return CommandWorkload(**config)
    if name == "concurrency":
        from .concurrency.runner import ConcurrencyWorkload

        allowed = {"job", "shell", "cwd"}
        _check_keys(name, {k: v for k, v in config.items() if k not in ("copies", "timeout_s")}, allowed)
        return ConcurrencyWorkload(**{k: v for k, v in config.items() if k in allowed})
    raise WorkloadError(f"unknown workload {name!r}; choose one of {', '.join(NAMES)}")


def _check_keys(name: str, config: dict[str, Any], allowed: set[str]) -> None:
    from .base import WorkloadError

    unknown = set(config) - allowed
    if unknown:
        raise WorkloadError(f"{name} workload: unknown settings {sorted(unknown)}; known: {sorted(allowed)}")
