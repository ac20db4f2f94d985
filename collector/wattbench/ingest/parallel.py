"""Validation in worker processes.

Checking a sample batch against the JSON Schema costs several microseconds per row in Python, which
is most of the collector's work, and the interpreter lock keeps it on one core. The stateless part of
the check (Validator.check: topic, size, JSON, version, schema, cross-field rules, signature) therefore
runs in a small pool of processes; the collector keeps the stateful part (accounting, dedup) and
decodes the accepted payloads again with the fast decoder, which is cheap.

For a store that writes InfluxDB line protocol the workers also format an accepted sample batch's rows:
formatting is stateless, and it was the collector's largest cost under its interpreter lock. A batch
is read, checked and formatted in one pass where ingest.fastlines can vouch for it, else checked
completely and formatted row by row (lineproto.sample_block). The collector uses those lines when it
keeps every row of the batch. The one pass also digests plain rows for accounting
(accounting.plain_batch): the collector then accounts for the batch without reading it again.

Results come back in submission order, so the stream keeps its order.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

from ..store.lineproto import sample_block
from .accounting import PlainBatch
from .auth import Verifier
from .validate import Accepted, Rejected, Validator

Item = tuple[str, bytes, int]  # topic, payload, receive time (ms)
# A message's rejection (None: it passed) and, for an accepted sample batch, its rows as line protocol
# and, when they are plain, what accounting needs of them (accounting.plain_batch).
Verdict = tuple[Rejected | None, str | None, PlainBatch | None]

_validator: Validator | None = None
_lines = False


def _init(verifier_args: tuple[str, bool] | None, lines: bool = False) -> None:
    global _validator, _lines
    _lines = lines
    import signal

    # Ctrl-C and a service manager's SIGTERM reach the whole process group; the collector shuts its
    # workers down itself once it has drained, so they must not die first.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _exit_with_parent()
    verifier = None
    if verifier_args is not None:
        path, require = verifier_args
        verifier = Verifier.from_file(path, require=require) if path else Verifier({}, require=True)
    _validator = Validator(verifier=verifier)


def _exit_with_parent() -> None:
    """A worker waits on its call queue forever if the collector is killed (SIGKILL, OOM killer), so
    it watches its parent and leaves with it. Polling the parent pid is used instead of Linux's
    PR_SET_PDEATHSIG, which fires when the creating *thread* exits, not the process."""
    import os
    import threading
    import time

    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _check(items: list[Item]) -> list[Verdict]:
    assert _validator is not None
    out: list[Verdict] = []
    for topic, raw, recv_ms in items:
        try:
            if _lines:
                one = _validator.sample_lines(topic, raw, recv_ms)
                if one is not None:
                    out.append((None, one.text, one.plain))
                    continue
            res = _validator.check(topic, raw, recv_ms)
            lines = None
            if isinstance(res, Accepted) and _lines and res.kind == "samples":
                lines = sample_block(res.payload["dev"], res.payload["samples"])
        except Exception as exc:  # never lose the whole chunk to one odd message
            res = Rejected(
                "schema", f"could not be checked ({exc.__class__.__name__}: {exc})", topic, len(raw)
            )
        out.append((None, lines, None) if isinstance(res, Accepted) else (res, None, None))
    return out


class CheckPool:
    """A process pool running Validator.check. Use submit() and Future.result(). lines: also format
    accepted sample batches as line protocol."""

    def __init__(
        self, workers: int, verifier_args: tuple[str, bool] | None = None, lines: bool = False
    ) -> None:
        # spawn: the child starts clean, with no copy of the collector's threads or locks.
        ctx = multiprocessing.get_context("spawn")
        self.workers = workers
        self._pool = ProcessPoolExecutor(
            workers, mp_context=ctx, initializer=_init, initargs=(verifier_args, lines)
        )
        # Start the workers now (schema compilation included) rather than on the first message.
        for f in [self._pool.submit(_check, []) for _ in range(workers)]:
            f.result(timeout=60)

    def submit(self, items: list[Item]) -> Future[list[Verdict]]:
        return self._pool.submit(_check, items)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def default_workers() -> int:
    """One validation process per spare core, at most two; none on a single core."""
    import os

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(0, min(2, cores - 1))


def describe(pool: Any) -> str:
    return f"{pool.workers} validation process(es)" if pool is not None else "validation in-process"
