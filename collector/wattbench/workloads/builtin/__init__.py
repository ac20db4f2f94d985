"""The built-in transactional workload (see README.md)."""

from __future__ import annotations

from typing import Any


def from_config(config: dict[str, Any]) -> Any:
    from .workers import BuiltinWorkload

    return BuiltinWorkload(
        workers=config.get("workers") or None,
        seed=int(config.get("seed", 1)),
        min_lines=int(config.get("min_lines", 5)),
        max_lines=int(config.get("max_lines", 25)),
        nice=int(config.get("nice", 0)),
    )
