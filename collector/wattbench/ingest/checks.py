"""The stateless checks of arrived messages, for the collector's ingest thread (ingest/intake.py).

Messages go to the checks a chunk at a time and come back in arrival order. With checking processes
(ingest/parallel.py) several chunks are in flight at once; without them, or once the pool has broken,
a chunk is checked in the ingest thread itself when its turn comes (its verdicts are None).
"""

from __future__ import annotations

import logging
from collections import deque

from ..config import CollectorConfig
from ..store import SampleEncoder
from .parallel import Checking, CheckPool, Verdict, default_workers

log = logging.getLogger(__name__)

# (connection generation, packet id, qos, topic, payload, receive time ms)
# (connection generation, packet id, qos, topic, payload, receive ms, retain flag, DUP flag)
Message = tuple[int, int, int, str, bytes, int, bool, bool]

# Chunks handed to the checking processes and not yet accounted for, per process: enough to keep each
# busy while the ingest thread accounts for the one before; each has a slot in the pool's shared memory.
PENDING_PER_WORKER = 4


class Checks:
    """The checking pool, when there is one, and the chunks in flight, oldest first."""

    def __init__(self) -> None:
        self.pool: CheckPool | None = None
        self.pending: deque[tuple[Checking | None, list[Message]]] = deque()
        self.chunk = 64
        self.depth = 1

    def start_pool(self, config: CollectorConfig, encoder: SampleEncoder | None) -> None:
        """Start the checking processes the configuration asks for. encoder: the store's, which the
        processes then run in the same pass as the check."""
        workers = config.validate_workers
        if workers < 0:
            workers = default_workers()
        if workers == 0:
            return
        verifier_args = None
        if config.hmac_keys or config.hmac_require:
            verifier_args = (config.hmac_keys, config.hmac_require)
        try:
            self.pool = CheckPool(
                workers,
                verifier_args,
                encoder=encoder,
                slots=PENDING_PER_WORKER * workers if config.validate_shared_memory else 0,
            )
        except Exception as exc:  # no processes allowed here: validate in this process instead
            log.warning("validation processes unavailable (%s); validating in-process", exc)
            self.pool = None
            return
        # Each hand-off to the pool wakes two of its threads and pickles a list: 48 messages per hand-off
        # took about 0.1 us per sample off this process against 16 (200-row messages, bench_ingest).
        # Both stay as they are if the pool breaks later.
        self.chunk = 48
        self.depth = PENDING_PER_WORKER * workers

    def room(self) -> bool:
        return len(self.pending) < self.depth

    def submit(self, items: list[Message]) -> None:
        """Queue a chunk: to the checking processes, or to be checked in this process in its turn."""
        checking = None
        if self.pool is not None:
            try:
                checking = self.pool.submit([(m[3], m[4], m[5]) for m in items])
            except Exception as exc:  # broken pool
                self._failed(exc)
        self.pending.append((checking, items))

    def front_ready(self) -> bool:
        """The oldest chunk's verdicts are in, or it is checked in this process."""
        checking = self.pending[0][0]
        return checking is None or checking.done()

    def wait_front(self, timeout: float) -> bool:
        """Wait up to timeout for the oldest chunk; False if it is still being checked."""
        checking = self.pending[0][0]
        if checking is None:
            return True
        try:
            checking.result(timeout=timeout)
        except TimeoutError:
            return False
        except Exception:
            pass  # a broken pool: pop() handles it
        return True

    def pop(self) -> tuple[list[Message], list[Verdict] | None]:
        """The oldest chunk and its verdicts; None: check it in this process."""
        checking, items = self.pending.popleft()
        verdicts = None
        if checking is not None:
            try:
                verdicts = checking.result()
            except Exception as exc:
                # A worker died (out of memory, killed): check in this process from now on.
                if self.pool is not None:
                    self._failed(exc)
        return items, verdicts

    def _failed(self, exc: BaseException) -> None:
        """Validation moves into this process for good."""
        log.warning("validation process failed (%r); validating in-process", exc)
        self.close()

    def close(self) -> None:
        pool, self.pool = self.pool, None
        if pool is not None:
            try:
                pool.close()
            except Exception as exc:
                log.debug("closing the validation pool: %s", exc)
