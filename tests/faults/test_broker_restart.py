"""Scenario 1: the broker restarts twice during a sweep (short phases).

A real `wattbench sweep` (builtin workload, one worker, seconds-long phases) runs against the
appliance and the collector while Mosquitto is stopped and started again twice. Mosquitto keeps its
sessions and queued messages across the restart (persistence on, as deploy/mosquitto.conf ships);
the appliance buffers while the broker is away and backfills; the collector resumes its persistent
session; the sweep's publisher queues its phase events. The run must still be scored from complete
data: every sample stored exactly once, every phase event stored, and every window scored with all
the samples the appliance sent inside it.
"""

from __future__ import annotations

import itertools
import json
import sys
import time

import pytest

from .harness import Proc, read_truth, tally

VARIANTS = [
    # variant, measure seconds, broker down seconds
    pytest.param("ci", 4, 3, id="ci"),
    pytest.param("full", 20, 15, id="full", marks=pytest.mark.slow),
]
HZ, CHANNELS = 10, 2
PRE, POST, GAP = 1, 1, 1
LEVELS = "100,50"
EVENTS_PER_PHASE = 4  # phase_start, measure_start, measure_end, phase_end


@pytest.mark.services
@pytest.mark.parametrize(("variant", "measure_s", "down_s"), VARIANTS)
def test_broker_restarts_during_sweep(rig, record, variant, measure_s, down_s):  # type: ignore[no-untyped-def]
    dev = f"sweep-{variant}"
    run_id = f"faults-{variant}"
    col = rig.collector()
    col.start_subscribed()
    app = rig.appliance(dev, hz=HZ, channels=CHANNELS, model="cpu", idle_w=60.0, peak_w=250.0)
    app.start()
    rig.wait_flowing(dev)

    phases = 3 + len(LEVELS.split(",")) + 1  # calibrations, levels, active idle
    sweep_s = phases * (PRE + measure_s + POST + GAP)
    result_path = rig.workdir / "result.json"
    argv = [sys.executable, "-m", "wattbench.cli", "sweep", "--run", run_id, "--quiet"]
    argv += ["--broker", rig.mosquitto.url, "--influx", rig.influx.url, "--db", rig.influx.db]
    argv += ["--calibrations", "3", "--levels", LEVELS, "--workers", "1"]
    argv += ["--pre", str(PRE), "--measure", str(measure_s), "--post", str(POST), "--gap", str(GAP)]
    argv += ["--channel", f"{dev}/sim1", "--channel", f"{dev}/sim2", "--no-inlet-required"]
    argv += ["--wait-data", "60", "--json-out", str(result_path)]
    sweep = Proc("sweep", rig.workdir, argv)
    rig.procs.append(sweep)
    t0 = time.monotonic()
    sweep.start()

    restarts = []
    for k in (1, 2):
        time.sleep(max(0.0, t0 + k * sweep_s / 3 - down_s / 2 - time.monotonic()))
        rig.mosquitto.stop()
        t_stop = time.monotonic()
        time.sleep(down_s)
        rig.mosquitto.start()
        restarts.append(round(time.monotonic() - t_stop, 1))
    sweep_rc = sweep.wait(sweep_s * 3 + 180)
    sweep_s_real = time.monotonic() - t0
    app.signal(2)  # SIGINT: a clean stop, the appliance drains first
    assert app.wait(60) == 0, app.tail()
    counters = app.final_counters(app.starts)
    rig.wait_stored(dev, counters["samples"], timeout=120)
    acct = col.state().get("accounts", {}).get(dev, {})
    assert col.terminate() == 0, col.tail()

    result = json.loads(result_path.read_text())
    events = rig.influx.query(f"SELECT count(n) FROM wb_phase WHERE run = '{run_id}' GROUP BY phase")
    per_phase = {r["phase"]: int(r["count"]) for r in events}
    run_events = per_phase.pop("run", 0)  # run_start and run_end
    links = [c["link"] for c in app.counter_lines()][:-1]  # the last line is printed after disconnecting
    outages_seen = sum(1 for a, b in itertools.pairwise(links) if a == "up" and b != "up")
    # What the scoring saw in each window against what the appliance sent in it: a window scored
    # before the backfill arrived would be short by seconds of samples.
    truth = read_truth(app.truths)
    edges: dict[str, dict[str, int]] = {}
    for r in rig.influx.query(f"SELECT n FROM wb_phase WHERE run = '{run_id}' GROUP BY phase, event"):
        edges.setdefault(r["phase"], {})[r["event"]] = int(r["time"])
    window_samples = {}
    for level in result["levels"]:
        w = edges[level["phase"]]
        sent = sum(1 for row in truth.values() if w["measure_start"] < row.t < w["measure_end"])
        window_samples[level["phase"]] = [level.get("samples"), sent]
    gap_checks = [c for c in result["checks"] if c["name"] == "no_gaps"]
    fig = record(
        tally(
            "broker_restart",
            variant,
            f"broker restarted twice ({down_s} s down) during a sweep with {measure_s} s windows",
            truth,
            rig.stored(dev),
            time.monotonic() - t0,
            issued=counters["samples"],
            broker_down_s=restarts,
            sweep_exit=sweep_rc,
            failed_checks=sorted({c["name"] for c in result["checks"] if not c["ok"]}),
            sweep_s=round(sweep_s_real, 1),
            levels_scored=len(result["levels"]),
            window_samples_scored_vs_sent=window_samples,
            windows_without_gaps=sum(1 for c in gap_checks if c["ok"]),
            windows_with_gaps=[c.get("reason") for c in gap_checks if not c["ok"]],
            phase_events_stored=sum(per_phase.values()) + run_events,
            appliance_saw_broker_down=outages_seen,
            collector_out_of_order=acct.get("out_of_order"),
        )
    )
    assert sweep_rc in (0, 1), f"the sweep did not complete (exit {sweep_rc})\n{sweep.tail()}"
    assert not result.get("partial"), result
    assert len(result["levels"]) == len(LEVELS.split(",")) + 1, result["levels"]
    for phase, (scored, sent) in window_samples.items():
        # One sample per channel of slack: the scoring may shift windows by the measured clock offset.
        assert scored is not None and abs(scored - sent) <= CHANNELS, f"{phase}: scored {scored} of {sent}"
    for phase, n in per_phase.items():
        assert n >= EVENTS_PER_PHASE, f"phase {phase} has {n} stored events"
    assert len(per_phase) == phases and run_events == 2, per_phase
    assert outages_seen == 2, f"the appliance saw {outages_seen} broker outages"
    assert fig.sent == counters["samples"] > 0
    fig.assert_clean()
