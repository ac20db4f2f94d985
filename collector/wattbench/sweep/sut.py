"""The system under test as the sweep finds it at run_start: CPU model, cores, memory, OS and kernel.

Each fact is read on its own and left out when it cannot be read, so a report says "not recorded"
rather than a guess. The keys are those of the run_start event's `sut` object (phase.schema.json)."""

from __future__ import annotations

import os
import platform
import re
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


MAX_LOAD = 1e6  # the contract's bound (phase.schema.json, `load`)
MAX_COMMAND = 500  # the contract's bound (phase.schema.json, `command`)


def load_average() -> float | None:
    """The host's 1-minute load average (what `uptime` shows first), None where the system has none.
    A run records it at its start and end, so a reader can tell a quiet machine from a busy one."""
    try:
        load = os.getloadavg()[0]
    except (OSError, AttributeError):
        return None
    return round(min(max(load, 0.0), MAX_LOAD), 2)


# The redaction rule (docs/sweep.md, "What a run records"): a word whose name contains one of these
# (any case) names a secret, and its value is written as ***.
SECRET_NAME = re.compile(r"pass|token|secret|key", re.IGNORECASE)
REDACTED = "***"
# A shell word: unquoted text and quoted strings run together, as the shell reads them.
_WORD = re.compile(r"""(?:[^\s'"\\]+|\\.|'[^']*'|"(?:\\.|[^"\\])*"|['"].*)+""", re.DOTALL)
# NAME=value or --name=value (with or without dashes): an environment assignment or an option.
_ASSIGNED = re.compile(r"^(-{0,2}[A-Za-z_][A-Za-z0-9_.-]*)=")
# An option whose value is the next word: -name or --name.
_OPTION = re.compile(r"^-{1,2}[A-Za-z][A-Za-z0-9_.-]*$")
# One quoted string with a space in it: a command line of its own.
_QUOTED = re.compile(r"""^(['"])([^'"]*\s[^'"]*)\1$""")
# scheme://userinfo@ in a URL: the userinfo is a user name and often a password.
_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s'\"]+@")


def redact_command(line: str | None) -> str | None:
    """A workload's command line as a run records it, with secrets replaced by ***:
    - the value of an option or an environment-like assignment whose name contains pass, token,
      secret or key, in any case: `--password=x`, `--api-key x`, `DB_PASS=x`, `-token x`;
    - the user information of a URL: `https://user:pw@host` becomes `https://***@host`.
    Everything else is kept as typed (the placeholders too), cut to the contract's 500 characters.
    A word is read as the shell reads it; a name that merely contains one of the four (`--passes 3`)
    is redacted too, as the rule cannot tell it from a secret."""
    if line is None or not line.strip():
        return None
    text = _redact(line).strip()
    return text if len(text) <= MAX_COMMAND else text[: MAX_COMMAND - 1] + "…"


def _redact(line: str) -> str:
    out: list[str] = []
    last = 0
    hide_next = False
    for m in _WORD.finditer(line):
        word = m.group(0)
        out.append(line[last : m.start()])
        last = m.end()
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        word = _USERINFO.sub(rf"\1{REDACTED}@", word)
        quoted = _QUOTED.match(word)
        if quoted:  # a command line inside one (sh -c "..."), read by the same rule
            word = f"{quoted.group(1)}{_redact(quoted.group(2))}{quoted.group(1)}"
        assigned = _ASSIGNED.match(word)
        if assigned and SECRET_NAME.search(assigned.group(1)):
            word = f"{assigned.group(1)}={REDACTED}"
        elif _OPTION.match(word) and SECRET_NAME.search(word):
            hide_next = True
        out.append(word)
    out.append(line[last:])
    return "".join(out)
