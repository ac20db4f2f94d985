"""argparse types for numbers, shared by the command line, the workloads' own entry points and the
benchmarks: a number is checked against its range as the command line is read, so that "nan", "inf",
0 or -5 is a usage error before anything starts. A bare `float` takes them all, a bare `int` any sign.
Where a range belongs to a rule of the core (the compliance limits, the plan's calibration
intervals, the cost inputs), the option takes a bare `number()` or `whole()` and the core says the
range, before anything starts, so that the range has one home. No imports of wattbench's own: any
unit may use it."""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable
from typing import Any

from .core import plain_number

__all__ = ["checked_by", "given", "number", "whole"]


def number(*, at_least: float | None = None, above: float | None = None, at_most: float | None = None) -> Any:
    """An argparse type: a finite number within the bounds given. "nan", "inf" and a number out of
    range are usage errors while the command line is parsed, before anything starts; a bare `float`
    would take them all."""
    return _bounded(float, "a number", at_least, above, at_most)


def whole(*, at_least: int | None = None, at_most: int | None = None) -> Any:
    """An argparse type: an integer within the bounds given (see number)."""
    return _bounded(int, "a whole number", at_least, None, at_most)


# Worker processes beyond the cores only take turns on them; far beyond, starting them one after the
# other takes the machine down before the first window (100000 took a 2-core machine to load 34).
WORKERS_PER_CORE = 8


def workers_problem(count: int, what: str = "worker processes") -> str | None:
    """Why `count` worker processes (or copies of a job on this host) are too many for the cores this
    process may run on, or None."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if count <= WORKERS_PER_CORE * cores:
        return None
    return (
        f"more than {WORKERS_PER_CORE} {what} per core ({cores} {'core' if cores == 1 else 'cores'}"
        " here): beyond the cores they only take turns on them"
    )


def worker_count(text: str) -> int:
    """An argparse type: a number of worker processes, at least 1 and at most WORKERS_PER_CORE a core."""
    count = int(whole(at_least=1)(text))
    problem = workers_problem(count)
    if problem:
        raise argparse.ArgumentTypeError(f"{text!r}: {problem}")
    return count


worker_count.__name__ = "a whole number"


def number_where(problem: Callable[[float], str | None]) -> Any:
    """An argparse type: a finite number that problem(value) finds nothing wrong with (the core's own
    rule for that quantity, so the option is refused whatever other options come with it)."""
    parse = number()

    def check(text: str) -> float:
        value = parse(text)
        why = problem(value)
        if why:
            raise argparse.ArgumentTypeError(why)
        return value

    check.__name__ = "number"  # argparse names the type in its own messages
    return check


def given(text: str) -> str:
    """An argparse type: text that is not empty. An empty value reads as "not given" wherever a default
    is taken with `or`, so `--host ''` listened on every interface and `--dev ''` took another
    device's id."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def listen_host(text: str) -> str:
    """An argparse type: a host name or address to listen on, without a port. An IPv6 address has two
    or more colons; one colon is a port, which a lookup would take for part of the name."""
    given(text)
    if "/" in text:
        raise argparse.ArgumentTypeError(f"{text!r} is not a host name or address (no scheme, no path)")
    if text.count(":") == 1:
        raise argparse.ArgumentTypeError(f"{text!r} holds a port: give it with --port")
    return text


def checked_by(parse: Any, what: str) -> Any:
    """An argparse type that runs a parser only to check the text (a ValueError becomes a usage
    error) and keeps the text, so the command parses it as before."""

    def check(text: str) -> str:
        try:
            parse(text)
        except ValueError as exc:
            message = str(exc)
            if "could not convert" in message or "invalid literal" in message:
                message = f"{text!r} is not a list of numbers"
            raise argparse.ArgumentTypeError(message) from None
        return text

    check.__name__ = what  # argparse names the type in its own messages
    return check


def _bounded(
    convert: Callable[[str], float],
    kind: str,
    at_least: float | None,
    above: float | None,
    at_most: float | None,
) -> Callable[[str], float]:
    wanted = _range_text(kind, at_least, above, at_most)

    def check(text: str) -> float:
        try:
            value = convert(plain_number(text))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {kind}") from None
        if not math.isfinite(value):
            # "1e400" is infinite once read: "must be >= 0" would name a bound it meets
            raise argparse.ArgumentTypeError(f"{text!r}: must be a finite number")
        if (
            (at_least is not None and value < at_least)
            or (above is not None and value <= above)
            or (at_most is not None and value > at_most)
        ):
            raise argparse.ArgumentTypeError(f"{text!r}: must be {wanted}")
        return value

    check.__name__ = kind.removeprefix("a ")  # argparse names the type in its own messages
    return check


def _range_text(kind: str, at_least: float | None, above: float | None, at_most: float | None) -> str:
    low = f">= {at_least:g}" if at_least is not None else f"> {above:g}" if above is not None else ""
    if low and at_most is not None:
        return f"{kind} {low} and <= {at_most:g}"
    if at_most is not None:
        return f"{kind} <= {at_most:g}"
    return f"{kind} {low}".rstrip()
