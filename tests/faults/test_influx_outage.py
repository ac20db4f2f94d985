"""Scenario 3: InfluxDB is down (60 s in the full run, 15 s in CI) while samples keep coming.

The collector's writes fail, so it appends each batch to its local spool (fsync'd) and acknowledges
the messages only then; when InfluxDB answers again it replays the spool in order.
"""

from __future__ import annotations

import time

import pytest

from .harness import read_truth, tally, wait_until

VARIANTS = [
    pytest.param("ci", 15, 40, id="ci"),
    pytest.param("full", 60, 100, id="full", marks=pytest.mark.slow),
]
HZ, CHANNELS = 20, 2


@pytest.mark.services
@pytest.mark.parametrize(("variant", "down_s", "seconds"), VARIANTS)
def test_influxdb_down(rig, record, variant, down_s, seconds):  # type: ignore[no-untyped-def]
    dev = f"influx-{variant}"
    col = rig.collector()
    col.start_subscribed()
    app = rig.appliance(dev, count=HZ * CHANNELS * seconds, hz=HZ, channels=CHANNELS)
    t0 = time.monotonic()
    app.start()
    rig.wait_flowing(dev)
    time.sleep(5)
    rig.influx.stop()
    t_down = time.monotonic()
    wait_until(lambda: col.state().get("store_down"), 30, what="the collector to notice the outage")
    time.sleep(max(0.0, t_down + down_s - time.monotonic()))
    spool_peak = col.state().get("spool", {}).get("bytes", 0)
    rig.influx.start()
    outage_s = time.monotonic() - t_down
    counters = app.wait_done(seconds * 3 + 120)
    rig.wait_stored(dev, counters["samples"], timeout=120)
    wait_until(
        lambda: not col.state().get("store_down") and col.state()["spool"]["bytes"] == 0,
        60,
        what="the spool to drain",
    )
    writer = col.state()["writer"]
    assert col.terminate() == 0, col.tail()

    fig = record(
        tally(
            "influxdb_down",
            variant,
            f"InfluxDB down for {down_s} s",
            read_truth(app.truths),
            rig.stored(dev),
            time.monotonic() - t0,
            issued=counters["samples"],
            outage_s=round(outage_s, 1),
            spooled_samples=writer["spooled_samples"],
            replayed_samples=writer["replayed_samples"],
            spool_peak_bytes=spool_peak,
            store_errors=writer["store_errors"],
        )
    )
    log = col.text()
    assert "store unavailable" in log and "spooling" in log, "the outage is not in the collector's log"
    assert writer["spooled_samples"] > 0 and writer["replayed_samples"] >= writer["spooled_samples"]
    assert fig.sent == counters["samples"] > 0
    fig.assert_clean()
