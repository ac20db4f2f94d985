"""One process per piece of local state: an appliance's folder, a collector id's status file and spool.

Two processes on one piece of state write each other's files, and on MQTT the second takes the first's
session, which then stores nothing (a second `wattbench collect` with the default id stalled the first).
The lock is flock(2) on a file beside the state: it goes with the process, also on a crash or a kill,
so a stale lock never refuses a restart."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

__all__ = ["Busy", "hold"]


class Busy(RuntimeError):
    """Another process holds the lock; pid is what it wrote there ("?" when unknown)."""

    def __init__(self, pid: str) -> None:
        super().__init__(pid)
        self.pid = pid


def hold(lock_file: Path) -> IO[str]:
    """Take lock_file (made with its folder when missing) for this process, until the returned file is
    closed or the process ends. Raises Busy when another process holds it."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    f = open(lock_file, "a+")  # held, and locked, for as long as the state is this process's
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        pid = f.read().strip() or "?"
        f.close()
        raise Busy(pid) from None
    f.truncate(0)
    f.write(f"{os.getpid()}\n")
    f.flush()
    return f
