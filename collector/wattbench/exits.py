"""The exit statuses of every `wattbench` command, and what each means: the one table the commands,
the collector and the docs (docs/guide.md, "exit status") follow. No imports of wattbench's own: any
unit may use it."""

from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    """A status says the kind of failure; a command names the one it met. Aliases share a status where
    the same number means the kind of failure a command can meet (INTERNAL for the collector, INVALID
    for a command that finishes)."""

    OK = 0
    INVALID = 1
    INTERNAL = 1
    USAGE = 2
    CONFIG = 2
    UNREACHABLE = 3
    BROKER = 3
    WORKLOAD = 4
    STORAGE = 4
    INTERRUPTED = 130
    BROKEN_PIPE = 141


# What each status means, for every command: the rows of the table in docs/guide.md.
MEANING: dict[Exit, str] = {
    Exit.OK: "done (for `sweep`: the run is valid); for the commands that run until told to stop "
    "(`collect`, `broker`, `appliance`, `ptd`), stopped cleanly by Ctrl-C or SIGTERM",
    Exit.INVALID: "done, but the result is invalid (`sweep`), a figure does not match (`score`) or "
    "nothing was found (`status`); or an internal error, a bug",
    Exit.USAGE: "bad arguments or configuration: nothing was done",
    Exit.UNREACHABLE: "the broker, the store or Prometheus (`compare-estimate`) cannot be reached, or the "
    "store file does not exist; the TCP port of `ptd` or `broker` is taken, or `broker --host` is not an "
    "address of this machine or does not resolve",
    Exit.WORKLOAD: "the workload could not run or failed (`sweep`); the store cannot take data "
    "(`collect`, see [collector.md](collector.md#exit-codes-and-logs)); an output cannot be written (a "
    "full or read-only disk, a file that fails as it is written: `cannot write the output: FILE: ...`)",
    Exit.INTERRUPTED: "interrupted (Ctrl-C, SIGTERM) before it was done: `sweep`, `suite`, `demo` and the "
    "other commands that end on their own; and any command stopped while it still loads (its first half "
    "second), before it has started anything. A signal in the Python interpreter's own start, before any "
    "of wattbench's code runs (tens of milliseconds, more with an editable install), is Python's: a "
    "`KeyboardInterrupt` traceback, or death by SIGTERM (143)",
    Exit.BROKEN_PIPE: "the reader of the output went away (`wattbench status --json \\| head`, "
    "`wattbench report latest \\| head -1`), for every command, table or JSON: not an error, no traceback",
}


def reference() -> str:
    """The table of docs/guide.md."""
    rows = ["| exit status | meaning, for every command |", "|---|---|"]
    rows += [f"| {int(code)} | {MEANING[code]} |" for code in Exit]
    return "\n".join(rows)
