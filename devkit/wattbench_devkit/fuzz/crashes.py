"""What counts as a crash, and the crashes already reported and waiting for a fix.

A fuzz target either returns an outcome label or raises. AssertionError means a property of the
parser is broken; any other exception escaped a parser that promised a documented error. Both are
crashes. A crash is identified by its signature: the exception type and the innermost frame in the
project's packages ("ValueError in wattbench_schema.strict_loads"), or for a broken property the
head of its message.

KNOWN lists the crashes that have a strict-xfail regression test in tests/fuzz/test_regressions.py.
The broad property tests tolerate exactly these signatures so that CI stays green meanwhile. When a
fix lands, its regression test passes, strict xfail turns that into a failure, and the entry here and
the xfail mark are removed together.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

PROJECT_MODULES = re.compile(r"^wattbench(_fw|_schema)?(\.|$)")


def signature(exc: BaseException) -> str:
    if isinstance(exc, AssertionError):
        head = str(exc).split(":", 1)[0].strip()[:80]
        return f"AssertionError: {head}"
    where = None
    last = None
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        module = str(frame.f_globals.get("__name__", "?"))
        last = f"{module}.{frame.f_code.co_name}"
        if PROJECT_MODULES.match(module):
            where = last
        tb = tb.tb_next
    return f"{type(exc).__name__} in {where or last or '?'}"


@dataclass(frozen=True)
class KnownCrash:
    id: str
    pattern: str  # regular expression over signature()
    summary: str

    def matches(self, sig: str) -> bool:
        return re.search(self.pattern, sig) is not None


# Empty: every crash found so far is fixed and its regression test passes.
KNOWN: tuple[KnownCrash, ...] = ()


def known(exc: BaseException) -> KnownCrash | None:
    sig = signature(exc)
    for k in KNOWN:
        if k.matches(sig):
            return k
    return None


def tolerate(fn: Callable[..., str], *args: Any) -> str:
    """Run a target; a known crash becomes the outcome 'known:<id>', anything else propagates."""
    try:
        return fn(*args)
    except Exception as exc:
        k = known(exc)
        if k is None:
            raise
        return f"known:{k.id}"
