"""What passes from the collector's ingest thread to its writer thread, and the writer thread's loop.

The ingest thread (ingest/intake.py) puts a Commit: a batch, the acknowledgements it may send once the
batch is durable, and the accounting as of that batch. The writer thread has the Writer make the batch
durable (store or spool), saves the status file, and only then acknowledges. Between commits it lets
the Writer replay the spool, in order, once the store answers again.
"""

from __future__ import annotations

import queue
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .pipeline import Batch
from .writer import Writer

Ack = tuple[int, int, int]  # (connection generation, packet id, qos)


@dataclass
class Commit:
    batch: Batch
    acks: list[Ack]
    snapshot: dict[str, Any] | None = None
    final: bool = False


class Handover:
    """One commit waiting at most, so a batch grows while the writer is busy with the one before."""

    def __init__(self) -> None:
        self._commits: queue.Queue[Commit] = queue.Queue(maxsize=1)
        self.acked = 0

    def writer_free(self) -> bool:
        return self._commits.empty()

    def put(self, commit: Commit, failed: Callable[[], bool]) -> bool:
        """Hand a commit to the writer thread; False if the collector failed meanwhile.

        Blocks only while the writer is busy with one commit and has another waiting."""
        while True:
            try:
                self._commits.put(commit, timeout=0.5)
                return True
            except queue.Full:
                if failed():
                    return False

    def run(
        self,
        writer: Writer,
        ack: Callable[[int, int, int], bool],
        save_state: Callable[[dict[str, Any]], None],
        failed: Callable[[], bool],
    ) -> None:
        """The writer thread, until the final commit or a failure. Raises the Writer's NotDurable when
        neither store nor spool can keep a batch; its messages stay unacknowledged."""
        while True:
            try:
                commit = self._commits.get(timeout=0.2)
            except queue.Empty:
                commit = None
            if commit is not None:
                self._commit(writer, commit, ack, save_state)
                if commit.final:
                    if writer.spooled:
                        writer.replay(budget_s=2.0, yield_to=self._commit_waiting)
                    return
            if writer.replay_due() and self._commits.empty():
                writer.replay(budget_s=1.0, yield_to=self._commit_waiting)
            if failed():
                return

    def _commit_waiting(self) -> bool:
        return not self._commits.empty()

    def _commit(
        self,
        writer: Writer,
        commit: Commit,
        ack: Callable[[int, int, int], bool],
        save_state: Callable[[dict[str, Any]], None],
    ) -> None:
        writer.write(commit.batch)
        if commit.snapshot is not None:
            save_state(commit.snapshot)
        acked = 0
        for gen, mid, qos in commit.acks:
            if ack(gen, mid, qos):
                acked += 1
        self.acked += acked
