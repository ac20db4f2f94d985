"""Validation in worker processes.

Checking a sample batch against the JSON Schema costs several microseconds per row in Python, which
is most of the collector's work, and the interpreter lock keeps it on one core. The stateless part of
the check (Validator.check: topic, size, JSON, version, schema, cross-field rules, signature) therefore
runs in a small pool of processes; the collector keeps the stateful part (accounting, dedup) and
decodes the accepted payloads again with the fast decoder, which is cheap.

For a store that hands out an encoder (SampleSink.start_writing; the InfluxDB store's writes line
protocol) the workers also encode an accepted sample batch's rows: encoding is stateless, and it was
the collector's largest cost under its interpreter lock. A batch is read, checked and encoded in one
pass where the encoder's one pass can vouch for it, else checked completely and encoded row by row
(encoder.encode). The collector uses those bytes when it keeps every row of the batch. The one pass
also gives the rows as columns, which the worker digests for accounting (plainbatch.plain_batch): the
collector then accounts for the batch without reading it again. What the bytes are is the store's
business: nothing here reads them.

Results come back in submission order, so the stream keeps its order.

On Linux the messages and the encoded rows do not travel through the pool's pipes: both sides map the same
memory (a memfd, which the workers open through /proc), the collector copies each chunk's payloads
into a slot of it and sends only their places, and a worker writes the bytes into the slot's other
half. Pickling the payloads and the bytes and pushing them through 64 KiB pipes cost about 0.2 us per
sample in all (docs/collector.md, Performance). A chunk or an encoded batch too large for its slot, a
worker that cannot map the memory, or a system without memfd goes the pipes' way, with the same
verdicts.
"""

from __future__ import annotations

import mmap
import multiprocessing
import os
import signal
import sys
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, NamedTuple

from ..signals import sigint_ignored
from ..store.base import SampleEncoder
from .auth import Verifier
from .plainbatch import PlainBatch
from .validate import Accepted, Rejected, Validator, Verdict

Item = tuple[str, bytes, int]  # topic, payload, receive time (ms)
# A message in shared memory: topic, offset and length of its payload, receive time (ms).
Placed = tuple[str, int, int, int]
# A verdict whose encoded rows may be in shared memory: the bytes inline (None when they are in memory or
# there are none), then their offset and length in memory (length -1: not there).
SharedVerdict = tuple[Rejected | None, bytes | None, PlainBatch | None, int, int]

# Each slot holds one chunk: its payloads, then as much room again for its encoded rows. Line protocol
# takes about as many bytes as the JSON rows it comes from (73 and 70 bytes a sample in bench_ingest's stream); a
# chunk of 48 messages of 200 rows is 0.7 MB.
SLOT_HALF = 2 << 20


class Arena(NamedTuple):
    """Where the workers find the shared memory: the collector's pid and the memfd's number in it."""

    pid: int
    fd: int
    size: int


_validator: Validator | None = None
_memory: mmap.mmap | None = None


def _init(
    verifier_args: tuple[str, bool] | None,
    encoder: SampleEncoder | None = None,
    arena: Arena | None = None,
) -> None:
    global _validator, _memory
    if arena is not None:
        _memory = _attach(arena)

    # Ctrl-C and a service manager's SIGTERM reach the whole process group; the collector shuts its
    # workers down itself once it has drained, so they must not die first.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _exit_with_parent()
    verifier = None
    if verifier_args is not None:
        path, require = verifier_args
        verifier = Verifier.from_file(path, require=require) if path else Verifier({}, require=True)
    _validator = Validator(verifier=verifier, encoder=encoder)


def _attach(arena: Arena) -> mmap.mmap | None:
    """The collector's shared memory, mapped here, or None when this process may not open it (a
    hardened /proc): its chunks then come back unchecked and go the pipes' way."""
    try:
        fd = os.open(f"/proc/{arena.pid}/fd/{arena.fd}", os.O_RDWR)
    except OSError:
        return None
    try:
        return mmap.mmap(fd, arena.size)
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)


def _exit_with_parent() -> None:
    """A worker waits on its call queue forever if the collector is killed (SIGKILL, OOM killer), so
    it watches its parent and leaves with it. Polling the parent pid is used instead of Linux's
    PR_SET_PDEATHSIG, which fires when the creating *thread* exits, not the process."""

    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _check(items: list[Item]) -> list[Verdict]:
    validator = _validator
    assert validator is not None
    encoder = validator.encoder
    out: list[Verdict] = []
    for topic, raw, recv_ms in items:
        try:
            if encoder is not None:
                one = validator.encoded(topic, raw, recv_ms)
                if one is not None:
                    out.append((None, *one))
                    continue
            res = validator.check(topic, raw, recv_ms)
            data = None
            if isinstance(res, Accepted) and encoder is not None and res.kind == "samples":
                data = encoder.encode(res.payload["dev"], res.payload["samples"])
        except Exception as exc:  # never lose the whole chunk to one odd message
            res = Rejected(
                "schema", f"could not be checked ({exc.__class__.__name__}: {exc})", topic, len(raw)
            )
        out.append((None, data, None) if isinstance(res, Accepted) else (res, None, None))
    return out


def _check_placed(out_at: int, placed: list[Placed]) -> list[SharedVerdict] | None:
    """_check for messages in shared memory, writing the encoded rows from out_at on, as far as the
    slot goes. None when this process has no shared memory."""
    memory = _memory
    if memory is None:
        return None
    items = [(topic, memory[at : at + n], recv_ms) for topic, at, n, recv_ms in placed]
    out: list[SharedVerdict] = []
    at, end = out_at, out_at + SLOT_HALF
    for verdict, data, plain in _check(items):
        if data is not None:
            if at + len(data) <= end:
                memory[at : at + len(data)] = data
                out.append((verdict, None, plain, at, len(data)))
                at += len(data)
                continue
        out.append((verdict, data, plain, 0, -1))
    return out


class Checking:
    """A chunk submitted to the pool: done(), and result() with its verdicts in order. Its slot in the
    shared memory is free again once the verdicts are read."""

    def __init__(self, pool: CheckPool, future: Future[Any], items: list[Item], slot: int | None) -> None:
        self._pool = pool
        self._future = future
        self._items = items
        self._slot = slot
        self._verdicts: list[Verdict] | None = None

    def done(self) -> bool:
        return self._future.done()

    def result(self, timeout: float | None = None) -> list[Verdict]:
        """Raises TimeoutError if not done in time, and what the pool raised if it broke."""
        if self._verdicts is not None:
            return self._verdicts
        if self._slot is None:
            self._verdicts = self._future.result(timeout)
            return self._verdicts
        try:
            answer = self._future.result(timeout)
        except TimeoutError:
            raise
        except BaseException:
            self._release()
            raise
        try:
            if answer is None:  # that worker has no shared memory: the pipes, from now on
                self._pool.unshare()
                self._verdicts = self._pool.piped(self._items).result()
            else:
                self._verdicts = [self._pool.encoded_at(v) for v in answer]
        finally:
            self._release()
        return self._verdicts

    def _release(self) -> None:
        if self._slot is not None:
            self._pool.free(self._slot)
            self._slot = None


class CheckPool:
    """A process pool running Validator.check. submit() a chunk and read its Checking's result().
    encoder: the store's, to encode accepted sample batches with (None: rows only). slots: chunks that may be in the
    shared memory at once (the caller's most pending); 0 for none. submit, result and close are for
    one thread."""

    def __init__(
        self,
        workers: int,
        verifier_args: tuple[str, bool] | None = None,
        encoder: SampleEncoder | None = None,
        slots: int = 0,
    ) -> None:
        # spawn: the child starts clean, with no copy of the collector's threads or locks.
        ctx = multiprocessing.get_context("spawn")
        self.workers = workers
        self._memory, self._fd = self._share(slots)
        self._view = memoryview(self._memory) if self._memory is not None else None
        arena = self._arena(self._fd, len(self._memory)) if self._memory is not None else None
        self._free = list(range(slots)) if self._memory is not None else []
        self._sharing = self._memory is not None
        try:
            self._pool = ProcessPoolExecutor(
                workers, mp_context=ctx, initializer=_init, initargs=(verifier_args, encoder, arena)
            )
            # Start the workers now (schema compilation included) rather than on the first message;
            # submit starts them, with SIGINT blocked for good (see sigint_ignored).
            with sigint_ignored():
                started = [self._pool.submit(_check, []) for _ in range(workers)]
            for f in started:
                f.result(timeout=60)
        except BaseException:
            self._unmap()
            raise

    @staticmethod
    def _share(slots: int) -> tuple[mmap.mmap | None, int]:
        """Memory for the slots, and its memfd (-1 without)."""
        if slots < 1 or not sys.platform.startswith("linux"):
            return None, -1
        try:
            # The pages are the memfd's, not a file's: nothing to clean up if the collector is killed.
            fd = os.memfd_create("wattbench-checks")
        except OSError:
            return None, -1
        try:
            os.ftruncate(fd, slots * 2 * SLOT_HALF)
            return mmap.mmap(fd, slots * 2 * SLOT_HALF), fd
        except (OSError, ValueError):
            os.close(fd)
            return None, -1

    @staticmethod
    def _arena(fd: int, size: int) -> Arena:
        """How the workers find the memory: the fd stays open for them to open through /proc, until
        close()."""
        return Arena(os.getpid(), fd, size)

    @property
    def shared(self) -> bool:
        """True while chunks go through the shared memory."""
        return self._sharing

    def submit(self, items: list[Item]) -> Checking:
        view = self._view
        if (
            view is not None
            and self._sharing
            and self._free
            and sum(len(raw) for _, raw, _ in items) <= SLOT_HALF
        ):
            slot = self._free.pop()
            at = slot * 2 * SLOT_HALF
            placed: list[Placed] = []
            for topic, raw, recv_ms in items:
                view[at : at + len(raw)] = raw
                placed.append((topic, at, len(raw), recv_ms))
                at += len(raw)
            try:
                future = self._pool.submit(_check_placed, slot * 2 * SLOT_HALF + SLOT_HALF, placed)
            except BaseException:
                self._free.append(slot)
                raise
            return Checking(self, future, items, slot)
        return Checking(self, self.piped(items), items, None)

    def piped(self, items: list[Item]) -> Future[list[Verdict]]:
        return self._pool.submit(_check, items)

    def encoded_at(self, verdict: SharedVerdict) -> Verdict:
        rejected, data, plain, at, n = verdict
        if n >= 0:
            if self._view is None:
                raise RuntimeError("the checking pool was closed before its encoded rows were read")
            data = bytes(self._view[at : at + n])
        return rejected, data, plain

    def free(self, slot: int) -> None:
        if self._sharing:
            self._free.append(slot)

    def unshare(self) -> None:
        """From now on every chunk goes through the pipes (the memory stays mapped for the chunks
        already in it)."""
        self._sharing = False
        self._free = []

    def close(self) -> None:
        try:
            self._pool.shutdown(wait=True, cancel_futures=True)
        finally:
            self._unmap()

    def _unmap(self) -> None:
        memory, view, fd = self._memory, self._view, self._fd
        self._memory = self._view = None
        self._fd = -1
        self._sharing = False
        self._free = []
        if view is not None:
            view.release()
        if memory is not None:
            memory.close()
        if fd >= 0:
            os.close(fd)


def default_workers() -> int:
    """One validation process per spare core, at most two; none on a single core."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(0, min(2, cores - 1))
