"""Scenario 4: the appliance loses the network (5 minutes in the full run, 20 s in CI).

The appliance reaches the broker through a loopback proxy (netcut.py) that cuts every connection
and refuses new ones for the outage. The appliance keeps sampling; its RAM buffer is configured
small (4 KiB, about one second of batches) so that it spills to flash within seconds, and the test
checks that the spill really happened: the flash count in the appliance's counters, segment files
in its flash directory, and the retained status it publishes on reconnect (stored as wb_status).
After the network returns the appliance backfills flash first, then RAM, in sequence order.
"""

from __future__ import annotations

import time

import pytest

from .harness import read_truth, tally
from .netcut import NetCut

VARIANTS = [
    pytest.param("ci", 20, id="ci"),
    pytest.param("full", 300, id="full", marks=pytest.mark.slow),
]
HZ, CHANNELS = 20, 2
BEFORE_S, AFTER_S = 8, 12
RAM_BYTES = 4096


@pytest.mark.services
@pytest.mark.parametrize(("variant", "cut_s"), VARIANTS)
def test_network_loss_spills_to_flash(rig, record, variant, cut_s):  # type: ignore[no-untyped-def]
    dev = f"netcut-{variant}"
    proxy = NetCut(rig.mosquitto.port).start()
    rig.closers.append(proxy.close)
    col = rig.collector()
    col.start_subscribed()
    seconds = BEFORE_S + cut_s + AFTER_S
    app = rig.appliance(
        dev, count=HZ * CHANNELS * seconds, port=proxy.port, hz=HZ, channels=CHANNELS, ram_bytes=RAM_BYTES
    )
    t0 = time.monotonic()
    app.start()
    rig.wait_flowing(dev)
    time.sleep(BEFORE_S)

    cut_connections = proxy.cut()
    t_cut = time.monotonic()
    segments_peak = 0
    while time.monotonic() < t_cut + cut_s:
        segments_peak = max(segments_peak, app.flash_segments())
        time.sleep(1.0)
    during = [c for c in app.counter_lines() if c["link"] == "down"]
    proxy.restore()
    outage_s = time.monotonic() - t_cut

    counters = app.wait_done(seconds * 3 + 120)
    rig.wait_stored(dev, counters["samples"], timeout=180)
    status_flash = rig.influx.query(f"SELECT max(buf_flash) FROM wb_status WHERE dev = '{dev}'")
    status_flash_max = int(status_flash[0]["max"]) if status_flash else 0
    acct = col.state().get("accounts", {}).get(dev, {})
    assert col.terminate() == 0, col.tail()

    flash_peak = max((c["flash"] for c in during), default=0)
    fig = record(
        tally(
            "network_loss",
            variant,
            f"appliance network cut for {cut_s} s, RAM buffer {RAM_BYTES} B spilling to flash",
            read_truth(app.truths),
            rig.stored(dev),
            time.monotonic() - t0,
            issued=counters["samples"],
            outage_s=round(outage_s, 1),
            connections_cut=cut_connections,
            flash_peak_samples=flash_peak,
            ram_peak_samples=max((c["ram"] for c in during), default=0),
            flash_segments_peak=segments_peak,
            status_buf_flash_max=status_flash_max,
            dropped=counters["dropped"],
            out_of_order_at_collector=acct.get("out_of_order"),
        )
    )
    assert cut_connections >= 1, "the appliance was not connected through the proxy"
    assert during, "the appliance never reported the link down during the cut"
    assert flash_peak > 0 and segments_peak > 0, "the RAM buffer never spilled to flash"
    assert status_flash_max > 0, "the reconnect status did not report the flash backlog"
    assert counters["dropped"] == 0, "the appliance dropped samples"
    assert acct.get("out_of_order") == 0, "backfill was not in sequence order"
    assert fig.sent == counters["samples"] > 0
    fig.assert_clean()
