"""The appliance of the power sources' end-to-end tests (`e2e.collecting`) samples on its own clock
however busy the test's process is, as a user's appliance does: a slot it skips is a hole in the
channel's readings, and a sweep's `no_gaps` check fails on it."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from .e2e import collecting

pytestmark = [pytest.mark.services, pytest.mark.timeout(300)]

DEV = "e2e-clock"


def test_the_appliance_samples_on_time_while_this_process_is_busy(tmp_path: Path, mosquitto: Any) -> None:
    from wattbench.store import open_store
    from wattbench_fw.host import sim_config

    broker = f"{mosquitto.host}:{mosquitto.port}"
    cfg = sim_config(dev=DEV, broker=broker, hz=10, model="const", watts=100.0, batch_ms=250)
    start_ms = int(time.time() * 1000)
    with collecting(tmp_path, broker, cfg) as db:
        interval = sys.getswitchinterval()
        sys.setswitchinterval(100.0)  # this thread keeps the GIL for as long as it computes
        try:
            end = time.monotonic() + 2.5
            while time.monotonic() < end:
                pass
        finally:
            sys.setswitchinterval(interval)
        busy_end_ms = int(time.time() * 1000)
        # Samples on both sides of the busy spell, so that a hole in it would be inside the series.
        store = open_store(db)
        try:
            deadline = time.monotonic() + 30
            while store.series(DEV, "sim", busy_end_ms + 500, busy_end_ms + 10_000).t_ms.size == 0:
                assert time.monotonic() < deadline, "no sample after the busy spell"
                time.sleep(0.1)
        finally:
            store.close()

    store = open_store(db)
    try:
        s = store.series(DEV, "sim", start_ms, int(time.time() * 1000))
    finally:
        store.close()
    assert s.t_ms.size > 25
    assert not (s.flags != 0).any(), f"{int((s.flags != 0).sum())} flagged samples (missed slots)"
    widest = int(np.diff(s.t_ms).max())
    assert widest < 200, f"a hole of {widest} ms in 10 Hz readings"
