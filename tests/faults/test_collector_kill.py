"""Scenario 2: the collector is killed with SIGKILL mid-stream and started again.

The collector acknowledges a message only after its samples are in InfluxDB (or its spool), so a
kill at any instant leaves every unacknowledged message with the broker, which delivers it again to
the restarted collector (persistent session). What was stored and acknowledged is not sent again;
what was stored but not yet acknowledged comes back, and the idempotent point keys absorb it.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from .harness import process_group, read_truth, tally, wait_until

VARIANTS = [
    pytest.param("ci", 20, 2, 30, 2, id="ci"),
    pytest.param("full", 50, 4, 180, 6, id="full", marks=pytest.mark.slow),
]


@pytest.mark.services
@pytest.mark.parametrize(("variant", "hz", "channels", "seconds", "kills"), VARIANTS)
def test_collector_sigkill(rig, record, variant, hz, channels, seconds, kills):  # type: ignore[no-untyped-def]
    dev = f"kill-{variant}"
    col = rig.collector()
    col.start_subscribed()
    app = rig.appliance(dev, count=hz * channels * seconds, hz=hz, channels=channels)
    t0 = time.monotonic()
    app.start()
    down_s = 0.0
    for k in range(kills):
        # Kills spread over the stream, each at a different point of the collector's commit cycle.
        time.sleep(max(0.0, t0 + (k + 1) * seconds / (kills + 1) - time.monotonic()))
        rc = col.kill()
        assert rc == -signal.SIGKILL, f"collector did not die by SIGKILL (rc {rc})"
        t_down = time.monotonic()
        time.sleep(2.0 + k % 3)  # the appliance keeps publishing; the broker queues for the collector
        col.start_subscribed()
        down_s += time.monotonic() - t_down
    counters = app.wait_done(seconds * 3 + 120)
    rig.wait_stored(dev, counters["samples"], timeout=120)
    state = col.state()
    assert col.terminate() == 0, col.tail()

    truth = read_truth(app.truths)
    acct = state.get("accounts", {}).get(dev, {})
    fig = record(
        tally(
            "collector_sigkill",
            variant,
            f"collector killed with SIGKILL {kills}x and restarted",
            truth,
            rig.stored(dev),
            time.monotonic() - t0,
            issued=counters["samples"],
            kills=kills,
            collector_down_s=round(down_s, 1),
            redelivered_dropped=acct.get("duplicates"),
            rate=f"{channels} ch x {hz} Hz",
        )
    )
    assert fig.sent == counters["samples"] > 0
    fig.assert_clean()


@pytest.mark.services
def test_collector_helpers_exit_after_sigkill(rig):  # type: ignore[no-untyped-def]
    """SIGKILL of the collector's main process alone (the OOM killer's way): its helper processes
    must not live on without it."""
    col = rig.collector(settings={"validate_workers": 1})
    col.start_subscribed()
    wait_until(lambda: len(process_group(col.pid)) > 1, 30, what="the validation worker")
    group = col.pid
    os.kill(col.pid, signal.SIGKILL)
    col.wait(10)
    time.sleep(5)
    left = process_group(group)
    assert not left, f"{len(left)} helper processes of the killed collector still run: {left}"
