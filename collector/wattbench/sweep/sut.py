"""The system under test as the sweep finds it at run_start: CPU model, cores, memory, OS and kernel.

Each fact is read on its own and left out when it cannot be read, so a report says "not recorded"
rather than a guess. The keys are those of the run_start event's `sut` object (phase.schema.json)."""

from __future__ import annotations

import os
import platform
from typing import Any


def _cpuinfo() -> tuple[str | None, int | None]:
    """CPU model name and socket count from /proc/cpuinfo (Linux)."""
    model = None
    sockets: set[str] = set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("model name", "Model", "Hardware", "cpu model") and model is None:
                    model = value.strip() or None
                elif key == "physical id":
                    sockets.add(value.strip())
    except OSError:
        pass
    return model, len(sockets) or None


def _memory_mib() -> int | None:
    try:
        pages = os.sysconf("SC_PHYS_PAGES")
        size = os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
    if pages <= 0 or size <= 0:
        return None
    return int(pages * size // (1024 * 1024))


def _os_name() -> str | None:
    try:
        release = platform.freedesktop_os_release()
        return release.get("PRETTY_NAME") or release.get("NAME")
    except (OSError, AttributeError):
        pass
    name = f"{platform.system()} {platform.version()}".strip()
    return name or None


def system_facts() -> dict[str, Any]:
    """What is known about this machine, trimmed to the contract's limits."""
    model, sockets = _cpuinfo()
    facts: dict[str, Any] = {
        "cpu": model or platform.processor() or None,
        "sockets": sockets,
        "cores": os.cpu_count(),
        "memory_MiB": _memory_mib(),
        "os": _os_name(),
        "kernel": platform.release() or None,
        "arch": platform.machine() or None,
    }
    limits = {"cpu": 128, "os": 128, "kernel": 128, "arch": 32}
    return {k: (v[: limits[k]] if k in limits else v) for k, v in facts.items() if v}
