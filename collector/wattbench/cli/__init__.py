"""The `wattbench` command's entry point. It imports nothing before main() runs: the commands and
what they need take most of a second to load, and a Ctrl-C in that time must be one line, not a
traceback (wattbench.cli.app holds the commands)."""

from __future__ import annotations

import os
import sys

from ..exits import Exit  # the standard library's enum only


def main(argv: list[str] | None = None) -> int:
    # Started with stdout closed (`>&-`): the output is for nobody, and the command still does its work.
    if sys.stdout is None:
        sys.stdout = open(os.devnull, "w")  # held as stdout for the life of the process
    # SIGTERM (systemd, containers, kill) and a SIGINT inherited as ignored (a background job of a
    # non-interactive shell) end every command as Ctrl-C does, from the start: SIGTERM while the
    # commands load ended the process by the signal (143, nothing said). The long-running ones
    # (appliance, collect, broker) install their own stop handlers in run().
    from ..signals import interrupt_on_stop_signals  # late: start-up (it needs only the standard library)

    interrupt_on_stop_signals()
    try:
        from .app import run  # late: start-up (see above)

        return run(argv)
    except KeyboardInterrupt:  # while the commands load, before one runs
        print("wattbench: interrupted", file=sys.stderr)
        return Exit.INTERRUPTED
