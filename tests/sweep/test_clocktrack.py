"""Clock offsets over a run that spans device clock steps: stretches from the collector's health points,
steps placed from the flagged samples, each window moved by its own stretch's offset."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from sweep_synth import SeriesFetch, make_series

from wattbench.core import align as al
from wattbench.core.clocktrack import ClockTrack, as_track, window_offset
from wattbench.store.sqlite import SqliteStore
from wattbench.store.sqlitefile import SCHEMA

T0 = 1_763_800_000_000
HZ = 10
DELAY = 30  # receive time minus the newest sample's time with synced clocks
STEP_UP, STEP_DOWN = T0 + 20_000, T0 + 50_000  # host times of the two steps
END = T0 + 80_000
FLAG_CLOCK_STEP = 8


def device_offset(host_ms: float) -> float:
    """Device minus host: 2 s ahead between the steps."""
    return 2000.0 if STEP_UP <= host_ms < STEP_DOWN else 0.0


def power(host_ms: np.ndarray) -> np.ndarray:
    """100 W and 300 W in turn, 2 s each, on the host clock."""
    return np.where(((host_ms - T0) // 2000) % 2 == 0, 100.0, 300.0)


def stepped_series(dev: str = "d", ch: str = "psu1", flagged: bool = True):
    """10 Hz readings stamped on the device clock, in stored order (by device time). The first reading
    after each step carries the flag, and so does every reading after the step back whose time its
    channel had already used (the firmware's rule)."""
    host = np.arange(T0, END, 1000 // HZ, dtype=np.int64)
    dev_t = host + np.array([device_offset(h) for h in host], dtype=np.int64)
    flags = np.zeros(host.size, dtype=np.int64)
    newest = -1
    for i, (h, t) in enumerate(zip(host, dev_t, strict=True)):
        first_after = i and device_offset(h) != device_offset(host[i - 1])
        if flagged and (first_after or t <= newest):
            flags[i] = FLAG_CLOCK_STEP
        newest = max(newest, t)
    order = np.argsort(dev_t, kind="stable")
    seq = np.arange(host.size)  # the order the readings were taken in
    return make_series(dev, ch, dev_t[order], W=power(host)[order], flags=flags[order], seq=seq[order]), host


def health_rows(collector: str = "c1", period_ms: int = 1000, phase_ms: int = 0, start_steps: int = 0):
    """wb_health points as the collector writes them. Batches close every second on the host clock and
    arrive DELAY ms later; a point holds the receive-minus-sample offset of the latest batch in, and
    the count of steps seen, which moves on with the batch holding the first reading after a step."""
    rows = []
    for h in range(T0 + phase_ms, END, period_ms):
        batch = T0 + (h - DELAY - T0) // 1000 * 1000  # close time of the latest batch received
        steps = start_steps + sum(1 for s in (STEP_UP, STEP_DOWN) if batch >= s)
        off = DELAY - device_offset(batch)
        rows.append({"dev": "d", "collector": collector, "t": h, "offset_ms": off, "clk_steps": steps})
    return rows


def windows() -> list[al.Window]:
    """The middle second of every 2 s plateau, named by where it lies."""
    out = []
    for k in range(1, 39):
        start = T0 + k * 2000 + 500
        label = "before" if start < STEP_UP else ("stepped" if start < STEP_DOWN else "after")
        out.append(al.Window(f"{label}-{k:02d}", "target", start, start + 1000))
    return out


def expected(w: al.Window) -> float:
    return float(power(np.array([w.start_ms + 500]))[0])


def test_stretches_from_health() -> None:
    track = ClockTrack.from_health(health_rows())
    assert len(track.steps) == 2
    assert track.offsets() == pytest.approx([-DELAY, 2000 - DELAY, -DELAY])
    assert track.worst() == pytest.approx(2000 - DELAY)
    up, down = track.steps
    # Known only to within the health period (plus the latency allowance) until pinned.
    assert up.lo_ms < STEP_UP <= up.hi_ms and down.lo_ms < STEP_DOWN <= down.hi_ms
    assert not up.pinned and up.hi_ms - up.lo_ms <= 4000


def test_pin_places_steps_at_the_flagged_reading() -> None:
    series, _ = stepped_series()
    track = ClockTrack.from_health(health_rows()).pin(series.t_ms[(series.flags & FLAG_CLOCK_STEP) != 0])
    up, down = track.steps
    assert up.pinned and down.pinned
    # The first reading after the step, moved by the new offset estimate (short by DELAY).
    assert up.hi_ms == pytest.approx(STEP_UP + DELAY, abs=1)
    assert down.hi_ms == pytest.approx(STEP_DOWN + DELAY, abs=1)


def test_window_offsets_follow_the_stretches() -> None:
    series, _ = stepped_series()
    track = ClockTrack.from_health(health_rows()).pin(series.t_ms[(series.flags & FLAG_CLOCK_STEP) != 0])
    for w in windows():
        wc = track.window(w.start_ms, w.end_ms)
        want = 2000 - DELAY if w.phase.startswith("stepped") else -DELAY
        assert wc.offset_ms == pytest.approx(want), w.phase
        assert not wc.stepped and not wc.uncertain, w.phase
    across = track.window(STEP_UP - 5000, STEP_UP + 1000)
    assert across.stepped and across.offset_ms == pytest.approx(-DELAY)  # most of it before the step


def test_unplaced_step_marks_nearby_windows_uncertain() -> None:
    track = ClockTrack.from_health(health_rows())  # no flagged readings to place the steps with
    near = track.window(STEP_UP + 200, STEP_UP + 1200)
    far = track.window(STEP_UP + 8000, STEP_UP + 9000)
    assert near.uncertain
    assert not far.uncertain and far.offset_ms == pytest.approx(2000 - DELAY)


def test_align_with_a_track_gets_every_window_right() -> None:
    series, _ = stepped_series()
    spec = al.ChannelSpec("d", "psu1", hz=HZ)
    fetch = SeriesFetch([series])
    track = ClockTrack.from_health(health_rows())
    got = al.align(windows(), [spec], fetch, {"d": track}, deadband_ms=250.0)
    for wp in got:
        c = wp.channels[0]
        assert c.mean == pytest.approx(expected(wp.window)), wp.window.phase
        assert c.n in (HZ - 1, HZ) and c.clock_steps == 0 and not c.clock_uncertain, wp.window.phase
        assert c.offset_ms == (2000 - DELAY if wp.window.phase.startswith("stepped") else 0.0)
    # One offset for the whole run (what a single estimate gives) puts one side of the steps 2 s off.
    single = al.align(windows(), [spec], fetch, {"d": track.worst()})
    wrong = [wp.window.phase for wp in single if wp.channels[0].mean != pytest.approx(expected(wp.window))]
    assert {w.phase for w in windows() if not w.phase.startswith("stepped")} <= set(wrong)


def test_overlap_after_a_step_back_is_split_by_sequence() -> None:
    """Just before and just after the step back the device stamps the same times: a window on either
    side, moved by its own offset, must take only its own clock's readings."""
    series, _ = stepped_series()
    spec = al.ChannelSpec("d", "psu1", hz=HZ)
    fetch = SeriesFetch([series])
    near = [
        al.Window("just-before", "target", STEP_DOWN - 1900, STEP_DOWN - 400),
        al.Window("just-after", "target", STEP_DOWN + 500, STEP_DOWN + 1500),
    ]
    track = ClockTrack.from_health(health_rows())
    got = al.align(near, [spec], fetch, {"d": track}, deadband_ms=250.0)
    for wp in got:
        c = wp.channels[0]
        # Each window lies on one plateau: a reading of the other clock would pull the mean off it.
        assert c.mean == expected(wp.window), wp.window.phase
        assert abs(c.n - wp.window.duration_s * HZ) <= 1, wp.window.phase
        # The readings after the step back carry the overlap flag, but the step is placed and outside.
        assert c.clock_steps == 0 and not c.clock_uncertain, wp.window.phase


def test_window_containing_a_step_is_flagged() -> None:
    series, _ = stepped_series()
    spec = al.ChannelSpec("d", "psu1", hz=HZ)
    w = al.Window("across", "target", STEP_DOWN - 3000, STEP_DOWN + 3000)
    (wp,) = al.align([w], [spec], SeriesFetch([series]), {"d": ClockTrack.from_health(health_rows())})
    assert wp.channels[0].clock_steps > 0 and wp.channels[0].clock_uncertain


def test_two_collectors_see_one_step() -> None:
    rows = health_rows("c1") + health_rows("c2", period_ms=1000, phase_ms=400)
    track = ClockTrack.from_health(rows)
    assert len(track.steps) == 2
    assert track.offsets() == pytest.approx([-DELAY, 2000 - DELAY, -DELAY])
    up = track.steps[0]
    assert up.lo_ms < STEP_UP <= up.hi_ms
    assert set(up.seen_ms) == {"c1", "c2"}


def test_collector_restart_is_not_a_step() -> None:
    rows = [r for r in health_rows() if r["t"] < STEP_UP - 5000]
    later = [
        dict(r, collector="c1", clk_steps=0) for r in health_rows() if STEP_UP - 3000 <= r["t"] < STEP_UP
    ]
    track = ClockTrack.from_health(rows + later)  # the restarted process counts from 0 again
    assert not track.steps
    assert track.offsets() == pytest.approx([-DELAY])


def test_two_steps_between_points_leave_an_unknown_stretch() -> None:
    rows = [
        {"collector": "c", "t": T0, "offset_ms": 20.0, "clk_steps": 0},
        {"collector": "c", "t": T0 + 5000, "offset_ms": 25.0, "clk_steps": 2},
        {"collector": "c", "t": T0 + 10_000, "offset_ms": 22.0, "clk_steps": 2},
    ]
    track = ClockTrack.from_health(rows)
    assert len(track.steps) == 2 and math.isnan(track.offsets()[1])
    assert track.window(T0 + 3000, T0 + 3500).uncertain


def test_constant_offsets_and_helpers() -> None:
    assert window_offset(None, 0, 1) == 0.0
    assert window_offset(120.0, 0, 1) == 120.0
    track = as_track(-340.0)
    assert not track.steps and track.worst() == -340.0 and track.at(T0) == -340.0
    assert as_track(track) is track
    assert track.span() == (-340.0, -340.0)
    empty = ClockTrack.from_health([{"t": T0, "offset_ms": None}, {"t": T0, "offset_ms": math.nan}])
    assert empty.worst() == 0.0 and empty.window(T0, T0 + 1).offset_ms == 0.0


def test_sqlite_offset_history_and_an_older_file(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    # A file from before clk_steps existed: the table lacks the column.
    db = sqlite3.connect(path)
    db.execute(SCHEMA.split(";")[0])  # wb_sample, as every store has had it
    db.execute(
        "CREATE TABLE wb_health (dev TEXT NOT NULL, collector TEXT NOT NULL, time INTEGER NOT NULL, "
        "offset_ms, PRIMARY KEY (dev, collector, time)) WITHOUT ROWID"
    )
    db.execute("INSERT INTO wb_health VALUES ('d', 'c', ?, 12.5)", (T0 - 1000,))
    db.commit()
    db.close()
    store = SqliteStore(path)
    try:
        for r in health_rows():
            store.write_health(
                r["collector"], r["dev"], {"offset_ms": r["offset_ms"], "clk_steps": r["clk_steps"]}, r["t"]
            )
        store.write_health("c1", "other", {"offset_ms": 1.0, "clk_steps": 0}, T0 + 1000)
        store.flush()
        rows = store.offset_history(["d"], T0 - 5000, END)
        assert rows[0] == {"dev": "d", "collector": "c", "t": T0 - 1000, "offset_ms": 12.5, "clk_steps": None}
        assert len(rows) == 1 + len(health_rows()) and all(r["dev"] == "d" for r in rows)
        track = ClockTrack.from_health(rows)
        assert len(track.steps) == 2
        assert store.offset_history([], T0, END) == []
    finally:
        store.close()


def test_evaluate_and_json_report_show_the_stretches() -> None:
    from wattbench.core.evaluate import evaluate
    from wattbench.report.jsonreport import report_dict

    series, _ = stepped_series()
    events: list[dict] = []
    for w in windows()[::6]:
        n = len(events)
        events += [
            {"v": 1, "run": "r", "phase": w.phase, "event": "phase_start", "t": w.start_ms - 100, "n": n + 1},
            {"v": 1, "run": "r", "phase": w.phase, "event": "measure_start", "t": w.start_ms, "n": n + 2},
            {
                "v": 1,
                "run": "r",
                "phase": w.phase,
                "event": "measure_end",
                "t": w.end_ms,
                "n": n + 3,
                "ops": 10,
            },
            {"v": 1, "run": "r", "phase": w.phase, "event": "phase_end", "t": w.end_ms + 100, "n": n + 4},
        ]
    events.append({"v": 1, "run": "r", "event": "run_end", "t": END, "n": len(events) + 1})
    track = ClockTrack.from_health(health_rows())
    ev = evaluate(
        "r",
        events,
        SeriesFetch([series]),
        [al.ChannelSpec("d", "psu1", hz=HZ)],
        {"d": track},
        deadband_ms=250,
    )
    skew = next(c for c in ev.checks if c.name == "clock_skew")
    assert not skew.ok and "stepped 2 times" in skew.reason
    assert all(c.ok for c in ev.checks if c.name == "stable_range_and_clock")
    assert ev.measured_offsets_ms == {"d": pytest.approx(2000 - DELAY)}
    for wp in ev.aligned:
        assert wp.watts == expected(wp.window), wp.window.phase
    detail = report_dict(ev)["detail"]
    stretches = detail["clock_stretches"]["d"]
    assert [s["offset_ms"] for s in stretches] == pytest.approx([-DELAY, 2000 - DELAY, -DELAY])
    assert stretches[1]["from_ms"] == pytest.approx(STEP_UP + DELAY, abs=1)
    moved = {p: o["d"] for p, o in detail["window_offsets_ms"].items()}
    assert moved and all(o == pytest.approx(2000 - DELAY) for o in moved.values())
    assert set(moved) == {w.phase for w in windows()[::6] if w.phase.startswith("stepped")}
    from wattbench.report.html import render_html

    page = render_html(ev)
    assert "<h2>Device clocks</h2>" in page and "+1970 ms" in page and "-30 ms" in page
    assert "not placed" not in page  # both steps were placed from the flagged readings
    ev.clock = {"d": ClockTrack.from_health(health_rows())}  # as read from the store, before placing
    assert "not placed" in render_html(ev)
