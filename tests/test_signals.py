"""Ctrl-C while a command starts its child processes: the children must not see it, and the command
must."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import os, signal, subprocess, sys, time
    from wattbench.signals import sigint_ignored

    try:
        with sigint_ignored():
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(2); print('child done')"])
            time.sleep(0.5)  # the child is past its start
            os.kill(child.pid, signal.SIGINT)  # as Ctrl-C reaches the terminal's whole group
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.2)
        print("not interrupted")
    except KeyboardInterrupt:
        print("interrupted after the block")
    print("child exit", child.wait())
    """
)


def test_a_ctrl_c_while_children_start_reaches_the_parent_and_not_the_children() -> None:
    """The parent ignored SIGINT while it started children so that they began with it ignored: a Ctrl-C
    in that time was lost. With 64 workers on a loaded machine their start took seconds, and a sweep
    interrupted then ran all its phases and stored the run."""
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert out.stdout.splitlines() == ["interrupted after the block", "child done", "child exit 0"], (
        out.stdout + out.stderr
    )


STOP_WHILE_WAITING = textwrap.dedent(
    """
    import os, signal
    from wattbench.signals import stop_event

    stop = stop_event()
    # Event.wait(0.2) holds the event's lock for a moment as it returns; a signal handled right then
    # ran stop.set() in this same thread, which waited for that lock forever.
    with stop._cond:
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(10000):  # the handler runs here, between two bytecodes of this thread
            pass
    print("stopped" if stop.wait(10) else "not stopped")
    """
)


def test_a_stop_signal_while_the_loop_waits_on_its_event_stops_it() -> None:
    """An appliance given SIGTERM hung for good (found in a test run under load): its main loop was in
    stop.wait(0.2) holding the event's lock when the handler called stop.set() in the same thread."""
    out = subprocess.run(
        [sys.executable, "-c", STOP_WHILE_WAITING], capture_output=True, text=True, timeout=60
    )
    assert out.stdout.strip() == "stopped", out.stdout + out.stderr
