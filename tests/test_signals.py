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
