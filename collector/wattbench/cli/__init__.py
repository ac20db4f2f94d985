"""The `wattbench` command's entry point. It imports nothing before main() runs: the commands and
what they need take most of a second to load, and a Ctrl-C in that time must be one line, not a
traceback (wattbench.cli.app holds the commands)."""

from __future__ import annotations

import os
import signal
import sys

from ..exits import Exit  # the standard library's enum only


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    # Started with stdout closed (`>&-`): the output is for nobody, and the command still does its work.
    if sys.stdout is None:
        sys.stdout = open(os.devnull, "w")  # held as stdout for the life of the process
    # SIGTERM as Ctrl-C from the start: while the commands load it ended the process by the signal
    # (143, nothing said). The command installs its own handlers once it runs.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        from .app import run  # late: start-up (see above)

        return run(argv)
    except KeyboardInterrupt:  # while the commands load, before one runs
        print("wattbench: interrupted", file=sys.stderr)
        return Exit.INTERRUPTED
