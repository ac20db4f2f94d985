"""How a benchmark ends, on every way out: what it started is stopped, and Ctrl-C is one line.

A benchmark starts services and consumers as separate processes, some in sessions of their own (so
that a terminal's Ctrl-C does not reach them). Each is registered on an ExitStack as it starts, so
that an exception or Ctrl-C anywhere stops it; `run_main` turns Ctrl-C into one line and exit 130,
with no figures printed from a part of a run.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any, NoReturn, Protocol, TypeVar

INTERRUPTED = 130


class Service(Protocol):
    def start(self) -> Any: ...

    def stop(self) -> Any: ...


S = TypeVar("S", bound=Service)


def start_on(stack: ExitStack, service: S) -> S:
    """service.start(), its stop() registered on the stack first, so that a start cut short by Ctrl-C
    is stopped as well."""
    stack.callback(service.stop)
    service.start()
    return service


def run_main(name: str, main: Callable[[], int]) -> NoReturn:
    """sys.exit(main()), with Ctrl-C as "<name>: interrupted; no figures" and exit 130."""
    try:
        code = main()
    except KeyboardInterrupt:
        print(f"{name}: interrupted; no figures", file=sys.stderr)
        code = INTERRUPTED
    sys.exit(code)
