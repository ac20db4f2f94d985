"""Scenario 6: the appliance's clock jumps +2 s, and later -2 s (an NTP step), mid-run.

The appliance runs in its own process (steppable.py, the firmware's HostAppliance) and steps its
clock on a signal. Its simulated meter follows a square wave on the appliance's monotonic clock
(2 s at 100 W, 2 s at 300 W), so which power belongs to which host-clock instant is known exactly,
whatever the appliance's wall clock says.

What must hold:
- the first sample after the +2 s step carries the clock_step flag; after the -2 s step every
  sample stamped at or before a time its channel already used carries it (the contract's rule);
- nothing is lost or doubled: after the -2 s step the appliance stamps times it already used, so a
  store keyed by time alone would overwrite the earlier samples with the later ones;
- the collector measures the device-minus-host offset (its health series shows the step);
- scoring (sweep.channels.offsets_from_store + sweep.evaluate, the path `wattbench sweep` takes)
  reports the step, moves each window by the offset of its own stretch of clock (the steps placed
  from the flagged samples), and its windows still get the power that was really drawn in them.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from dataclasses import dataclass
from typing import Any

import pytest

from .harness import HERE, Figures, Proc, Rig, Row, read_truth, stored_rows, tally, wait_until

FLAG_CLOCK_STEP = 8
STEP_MS = 2000
HZ, CHANNELS = 10, 2
LOW_W, HIGH_W, HALF_S = 100.0, 300.0, 2.0
# (before, stepped, after) seconds. The full variant stays on after the step back for longer than
# the collector's offset estimate remembers (32 batches), as a long sweep would.
TIMINGS = {"ci": (10, 14, 14), "full": (10, 40, 45)}


@dataclass
class ClockRun:
    rig: Rig
    dev: str
    counters: dict[str, Any]
    steps_host_ms: list[float]
    truth: dict[int, Row]
    stored: list[Row]
    figures: Figures
    health: list[dict[str, Any]]


@pytest.fixture(scope="module", params=[pytest.param("ci"), pytest.param("full", marks=pytest.mark.slow)])
def clock_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    rig = Rig.open(tmp_path_factory.mktemp(f"clock-{request.param}"))
    try:
        yield _run(rig, request.param)
    finally:
        rig.close()


def _run(rig: Rig, variant: str) -> ClockRun:
    from .harness import appliance_config

    before_s, stepped_s, after_s = TIMINGS[variant]
    dev = f"clock-{variant}"
    col = rig.collector()
    col.start_subscribed()
    cfg = appliance_config(
        dev,
        rig.mosquitto.port,
        rig.workdir / "flash",
        hz=HZ,
        channels=CHANNELS,
        model="steps",
        steps=[[HALF_S, LOW_W], [HALF_S, HIGH_W]],
    )
    cfg_path = rig.workdir / "clockstep.json"
    cfg_path.write_text(json.dumps(cfg))
    truth = rig.workdir / "clockstep-truth.csv"
    app = Proc(
        "appliance-clockstep",
        rig.workdir,
        [
            sys.executable,
            str(HERE / "steppable.py"),
            "--config",
            str(cfg_path),
            "--truth",
            str(truth),
            "--step-ms",
            str(STEP_MS),
        ],
    )
    rig.procs.append(app)
    t0 = time.monotonic()
    app.start()
    rig.wait_flowing(dev)
    time.sleep(before_s)
    app.signal(signal.SIGUSR1)  # +2 s
    time.sleep(stepped_s)
    app.signal(signal.SIGUSR2)  # -2 s
    time.sleep(after_s)
    app.signal(signal.SIGTERM)
    assert app.wait(60) == 0, app.tail()
    counters = json.loads(app.text().strip().splitlines()[-1])
    # Wait on the collector's own count: InfluxDB may keep fewer points than were written to it.
    wait_until(
        lambda: col.state().get("accounts", {}).get(dev, {}).get("stored", 0) >= counters["samples"],
        60,
        what="the collector to write every sample",
    )
    rig.wait_stored(dev, counters["samples"], timeout=5)
    acct = col.state().get("accounts", {}).get(dev, {})
    health = rig.influx.query(f"SELECT offset_ms FROM wb_health WHERE dev = '{dev}'")
    assert col.terminate() == 0, col.tail()
    truth_rows = read_truth([truth])
    stored = stored_rows(rig.influx, dev)
    flagged = sorted(r.s for r in stored if r.f & FLAG_CLOCK_STEP)
    offsets = [h["offset_ms"] for h in health if h.get("offset_ms") is not None]
    fig = tally(
        "clock_step",
        variant,
        f"appliance clock stepped +2 s, then -2 s {stepped_s} s later",
        truth_rows,
        stored,
        time.monotonic() - t0,
        issued=counters["samples"],
        steps_ms=[s["ms"] for s in counters["steps"]],
        flagged_clock_step=len(flagged),
        collector_wrote=acct.get("stored"),
        collector_offset_ms_range=[min(offsets, default=None), max(offsets, default=None)],
    )
    run = ClockRun(
        rig, dev, counters, [s["host_ms"] for s in counters["steps"]], truth_rows, stored, fig, health
    )
    fig.details["scoring"] = score(run, rig.influx)
    return run


def expected_power(host_ms: float, origin_ms: float) -> float:
    phase = ((host_ms - origin_ms) / 1000.0) % (2 * HALF_S)
    return LOW_W if phase < HALF_S else HIGH_W


def plateau_windows(run: ClockRun) -> list[tuple[str, int, int, float]]:
    """(label, start, end, expected W) on the host clock: the middle second of every plateau that does
    not hold a step (with 300 ms to spare), labelled by the part of the run it falls in. The windows
    right after the step back lie in its overlap, where the device stamps times it already used."""
    first = min(run.truth.values(), key=lambda r: r.s)  # sampled before any step: host time
    origin = first.t
    step_up, step_down = run.steps_host_ms
    end = max(r.t for r in run.truth.values()) - 2 * STEP_MS
    out = []
    k = 1
    while True:
        start = origin + k * HALF_S * 1000 + 500
        stop = start + 1000
        if stop > end:
            break
        k += 1
        if any(start - 300 < edge < stop + 300 for edge in (step_up, step_down)):
            continue
        label = "before" if stop < step_up else ("stepped" if stop < step_down else "after")
        out.append((f"{label}-{k:02d}", int(start), int(stop), expected_power(start + 500, origin)))
    return out


def score(run: ClockRun, influx: Any) -> dict[str, Any]:
    """Score plateau windows the way `wattbench sweep` does (offsets from the store, then evaluate):
    which clock checks fail, and which window/channel means differ from the power really drawn."""
    from wattbench.core import align as al
    from wattbench.core.clocktrack import as_track
    from wattbench.core.evaluate import evaluate
    from wattbench.store import open_store
    from wattbench.sweep import channels as chans

    windows = plateau_windows(run)
    assert {w[0].split("-")[0] for w in windows} == {"before", "stepped", "after"}
    events: list[dict[str, Any]] = []
    n = 0
    for label, start, stop, _ in windows:
        for event, t in (("phase_start", start - 100), ("measure_start", start), ("measure_end", stop)):
            n += 1
            ev = {"v": 1, "run": "clock", "phase": label, "event": event, "t": t, "n": n, "kind": "target"}
            if event == "measure_end":
                ev["ops"] = 1000
            events.append(ev)
        n += 1
        events.append({"v": 1, "run": "clock", "phase": label, "event": "phase_end", "t": stop + 100, "n": n})
    events.append({"v": 1, "run": "clock", "event": "run_end", "t": windows[-1][2] + 200, "n": n + 1})
    store = open_store(influx.url, db=influx.db)
    try:
        span = (events[0]["t"], events[-1]["t"])
        offsets = chans.offsets_from_store(store, [run.dev], *span)
        specs = [al.ChannelSpec(run.dev, "sim1", hz=HZ), al.ChannelSpec(run.dev, "sim2", hz=HZ)]
        ev = evaluate("clock", events, store.series, specs, offsets)
    finally:
        store.close()
    wrong = []
    for wp in ev.aligned:
        expected = next(w[3] for w in windows if w[0] == wp.window.phase)
        for c in wp.power:
            if not abs(c.mean - expected) < 1.0:
                wrong.append(f"{wp.window.phase}/{c.spec.ch}: {c.mean:.1f} W, drawn {expected:.0f} W")
    failed = [f"{c.name}: {c.reason}" for c in ev.checks if not c.ok and "clock" in f"{c.name} {c.reason}"]
    return {
        "offsets_ms": {d: as_track(o).worst() for d, o in offsets.items()},
        "stretches": {d: repr(o) for d, o in offsets.items()},
        "clock_checks_failed": failed,
        "window_channels": sum(len(wp.power) for wp in ev.aligned),
        "misaligned": wrong,
        "window_offsets_ms": {wp.window.phase: sorted({c.offset_ms for c in wp.power}) for wp in ev.aligned},
        "uncertain": [
            f"{wp.window.phase}/{c.spec.ch}" for wp in ev.aligned for c in wp.power if c.clock_uncertain
        ],
    }


@pytest.mark.services
def test_clock_step_flagged(clock_run: ClockRun, record: Any) -> None:
    fig = record(clock_run.figures)
    assert len(clock_run.steps_host_ms) == 2
    flagged = {r.s for r in clock_run.stored if r.f & FLAG_CLOCK_STEP}
    # Samples stamped at or before a time their channel had already used: after the step back.
    overlapping = set()
    newest: dict[str, int] = {}
    for s in sorted(clock_run.truth):
        row = clock_run.truth[s]
        if row.ch in newest and row.t <= newest[row.ch]:
            overlapping.add(s)
        newest[row.ch] = max(row.t, newest.get(row.ch, row.t))
    stored = {r.s for r in clock_run.stored}
    assert overlapping, "the step back produced no overlapping times"
    unflagged = sorted((overlapping & stored) - flagged)
    assert not unflagged, f"overlapping samples without the clock_step flag: {unflagged[:10]}"
    # Besides those: the first sample after the step forward, and perhaps the first after the step back.
    others = sorted(flagged - overlapping)
    assert 1 <= len(others) <= 2, f"clock_step flags outside the overlap: {others}"
    assert fig.duplicated == 0, fig.summary()
    assert fig.altered == 0 and fig.invented == 0, fig.summary()


@pytest.mark.services
def test_clock_step_nothing_lost(clock_run: ClockRun) -> None:
    fig = clock_run.figures
    assert fig.lost == 0, fig.summary()


@pytest.mark.services
def test_collector_measures_the_step(clock_run: ClockRun) -> None:
    step_up, step_down = clock_run.steps_host_ms
    during = [h["offset_ms"] for h in clock_run.health if step_up + 3000 < h["time"] < step_down]
    assert during, "no health points while the clock was stepped"
    # offset_ms is receive time minus sample time: a device 2 s ahead shows about -2000 ms.
    assert min(during) == pytest.approx(-STEP_MS, abs=300)


@pytest.mark.services
def test_scoring_reports_step_and_stays_aligned(clock_run: ClockRun) -> None:
    scoring = clock_run.figures.details["scoring"]
    problems = []
    if not scoring["clock_checks_failed"]:
        problems.append(f"no check reports the clock step (offsets used: {scoring['offsets_ms']})")
    if scoring["misaligned"]:
        problems.append(
            f"{len(scoring['misaligned'])} of {scoring['window_channels']} window/channel means misaligned: "
            + "; ".join(scoring["misaligned"][:6])
        )
    # Each window moved by the offset of its own stretch of clock: +2 s between the steps, about
    # nothing (the smallest delay) on either side; no step is left unplaced next to a window.
    for phase, offs in scoring["window_offsets_ms"].items():
        want = STEP_MS if phase.startswith("stepped") else 0
        if len(offs) != 1 or abs(offs[0] - want) > 300:
            problems.append(f"{phase} moved by {offs} ms, expected about {want} ms")
    if scoring["uncertain"]:
        problems.append(f"windows next to an unplaced step: {scoring['uncertain']}")
    assert not problems, " | ".join(problems)
