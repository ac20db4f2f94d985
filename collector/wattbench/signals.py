"""How the long-running commands stop: SIGTERM and SIGINT alike, always.

SIGTERM is what systemd, container runtimes and `kill` send; SIGINT is Ctrl-C. Both handlers are
installed explicitly. A program started in the background by a non-interactive shell inherits SIGINT
as ignored, and Python then installs no handler of its own, so without this it would ignore SIGINT.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def on_stop_signals(handler: Callable[[int, Any], Any]) -> None:
    """Call handler(signum, frame) on SIGTERM and on SIGINT (in the main thread)."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, handler)


def stop_event(log: logging.Logger | None = None) -> threading.Event:
    """An event that SIGTERM or SIGINT sets; the caller's loop waits on it and then stops cleanly."""
    stop = threading.Event()

    def handler(signum: int, _frame: Any) -> None:
        if log is not None and not stop.is_set():
            log.info("received %s: stopping", signal.Signals(signum).name)
        # Set from another thread: the handler runs in the main thread, which may be inside
        # stop.wait() holding the event's lock, and set() here would wait for that lock forever.
        threading.Thread(target=stop.set, name="wb-stop", daemon=True).start()

    on_stop_signals(handler)
    return stop


@contextlib.contextmanager
def sigint_ignored() -> Iterator[None]:
    """A process started in here begins with SIGINT blocked, which it keeps through exec, so it never
    sees one. A Ctrl-C reaches the terminal's whole foreground group, and a child still importing its
    modules died of it, or printed a KeyboardInterrupt traceback; the parent owns Ctrl-C and stops its
    children itself.

    The parent's own Ctrl-C in the meantime is held, not lost: it reaches the parent's handler as the
    block ends, so whatever the block does completes first (keep a started child's bookkeeping inside
    it). Ignoring SIGINT instead, as this once did, lost it: starting 64 workers on a loaded machine
    took seconds, and a sweep interrupted then ran all its phases."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set a handler
        return
    held: list[int] = []
    # Blocked in this thread, a Ctrl-C waits for the end of the block; one that the kernel hands to
    # another thread instead comes to this handler, run by this thread, and is raised again below.
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: held.append(signum))
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        if held:
            signal.raise_signal(signal.SIGINT)
