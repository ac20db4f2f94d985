"""IPMI end to end: OpenIPMI's BMC simulator (ipmi_sim) on loopback, read by the real host-mode
appliance's ipmi meter through ipmitool, published through real Mosquitto, stored by the collector in
the embedded store and scored by a short sweep. Every level is the BMC's reading within 0.1 %; a
sensor that stops reading for a moment before the sweep gives flagged samples, not 0 W; the report
states the BMC's accuracy class and update period and the standard they allow."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from wattbench_devkit.services import IpmiSim

from .e2e import sweep_with

pytestmark = [pytest.mark.services, pytest.mark.timeout(300)]

DEV = "srv1-ipmi"


def test_ipmi_power_end_to_end(tmp_path: Path, mosquitto: Any, ipmi_sim: IpmiSim) -> None:
    from wattbench.core import contract
    from wattbench.store import open_store

    channel = {
        "c": "bmc",
        "meter": "ipmi",
        # The sample config's rate and the BMC's update period. At 2 Hz, one ipmitool process (fork,
        # RMCP+ session, two round trips) late by 250 ms on a machine busy with the suite's other
        # workers made a hole of 1.5 periods, and CI failed on no_gaps.
        "hz": 1,
        "role": "power",
        "node": "srv1",
        "opts": {
            "host": "127.0.0.1",
            "port": ipmi_sim.port,
            "user": ipmi_sim.USER,
            "password": ipmi_sim.PASSWORD,
            "cipher": 3,
            "timeout_s": 2,
        },
    }

    def outage() -> None:
        # Before the sweep: the sensor has no reading for a moment; those samples are flagged, not 0 W.
        ipmi_sim.set_scanning(False)
        time.sleep(2.6)  # at 1 Hz, two reading slots fall in it
        ipmi_sim.set_scanning(True)

    run = sweep_with(tmp_path, mosquitto, DEV, [channel], before=outage)

    ev = run.outcome.evaluation
    assert [s.key for s in run.outcome.channels] == [f"{DEV}/bmc"]
    rows = {r["phase"]: r for r in ev.result["levels"]}
    assert set(rows) == {"l100", "l50", "idle"}
    for phase, row in rows.items():
        assert row["W"] == pytest.approx(344.0, rel=1e-3), phase
    failed = {c.name for c in ev.checks if not c.ok} - {"load_within_2pct", "inlet_temp"}
    assert not failed, [c for c in ev.checks if not c.ok]
    ch = ev.result["channels"][0]
    assert (ch["meter"], ch["role"], ch["acc"], ch["upd"]) == ("ipmi", "power", 0.05, 1.0)
    st = ev.result["standard"]
    assert st["eehpc_level"] == 0 and not st["spec"]

    # The outage is in the store as flagged samples with no power, never as a 0 W reading.
    store = open_store(run.db)
    try:
        start = min(e["t"] for e in ev.events)
        s = store.series(DEV, "bmc", start - 120_000, start)
    finally:
        store.close()
    assert s.t_ms.size > 0
    watts = s.values["W"]
    assert not (watts == 0).any()
    assert (s.flags != 0).any(), "the moment without a reading is flagged"

    p = run.report("--json")
    doc = json.loads(p.stdout)
    contract.validate("report", doc)
    assert doc["result"]["overall"] == pytest.approx(ev.result["overall"])
    text = run.report().stdout
    assert "every 1 s" in text and "5 %" in text  # the channel's update period and accuracy class
