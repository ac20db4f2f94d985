"""The `wattbench` command's entry point. It imports nothing before main() runs: the commands and
what they need take most of a second to load, and a Ctrl-C in that time must be one line, not a
traceback (wattbench.cli.app holds the commands)."""

from __future__ import annotations

import os
import sys

from ..exits import Exit  # the standard library's enum only


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    import signal  # late: start-up (a built-in module: nothing to load)

    # SIGTERM (systemd, containers, kill) and a SIGINT inherited as ignored (a background job of a
    # non-interactive shell) end every command as Ctrl-C does, from main()'s first line: set after
    # anything loads, a signal in its milliseconds printed a traceback (SIGINT) or ended the process
    # by the signal (SIGTERM, 143, nothing said). The long-running commands
    # (appliance, collect, broker) install their own stop handlers in run().
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    try:
        # Started with stdout closed (`>&-`): the output is for nobody, and the command still works.
        if sys.stdout is None:
            sys.stdout = open(os.devnull, "w")  # held as stdout for the life of the process
        from .app import run  # late: start-up (see above)

        return run(argv)
    except KeyboardInterrupt:  # while the commands load, before one runs
        print("wattbench: interrupted", file=sys.stderr)
        return Exit.INTERRUPTED
