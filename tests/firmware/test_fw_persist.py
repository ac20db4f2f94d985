"""State across reboots: sequence numbers never repeat (even after a crash or a torn state file),
the boot counter increases, and energy totals never go backwards."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from wattbench_fw import port
from wattbench_fw.persist import EnergyTracker, Sequence, State
from wattbench_fw.stateload import BOOT_LOST, MAX_SEQ_BLOCK, SEQ_LOST, SLOTS


def test_sequence_continues_after_clean_and_unclean_reboots(tmp_path: Path) -> None:
    seen: list[int] = []
    for _boot in range(5):
        state = State(str(tmp_path))
        state.next_boot()
        seq = Sequence(state, block=100)
        seen += [seq.take() for _ in range(250)]
        # no shutdown hook: the process just stops (power cut)
    assert len(seen) == len(set(seen)) == 1250
    assert seen == sorted(seen)
    assert State(str(tmp_path)).boot == 4


class PowerCut(Exception):
    pass


def test_power_cut_while_reserving_falls_back_to_the_other_slot(tmp_path: Path) -> None:
    state = State(str(tmp_path))
    seq = Sequence(state, block=10)
    used = [seq.take() for _ in range(29)]
    real_save = state.save

    def torn_save() -> None:
        real_save()
        newest = tmp_path / SLOTS[state.gen % 2]
        newest.write_text(newest.read_text()[:17])  # the write never completed
        raise PowerCut

    state.save = torn_save  # type: ignore[method-assign]
    try:
        used.append(seq.take())  # number 29 is the last of the block: reserving the next one fails
    except PowerCut:
        pass
    state2 = State(str(tmp_path))
    # The previous slot, one block on: an unreadable copy cannot be dated, so it may have been newer.
    assert state2.seq_mark == 30 + 10 and state2.lost == [] and state2.repairs == 1
    assert Sequence(state2, block=10).take() > max(used)


def test_sequence_writes_are_rare(tmp_path: Path) -> None:
    state = State(str(tmp_path))
    seq = Sequence(state, block=1000)
    before = state.writes
    for _ in range(10_000):
        seq.take()
    assert state.writes - before == 10


def test_energy_continues_when_meter_keeps_counting(tmp_path: Path) -> None:
    state = State(str(tmp_path))
    e = EnergyTracker(state, "psu1", margin_wh=5)
    assert [e.update(w) for w in (100.0, 101.0, 102.5)] == [100.0, 101.0, 102.5]
    e.close()
    state.save()
    e2 = EnergyTracker(State(str(tmp_path)), "psu1", margin_wh=5)
    assert e2.update(103.0) == 103.0  # a PZEM keeps its counter across our reboot


def test_energy_survives_meter_reset_and_rollover(tmp_path: Path) -> None:
    state = State(str(tmp_path))
    e = EnergyTracker(state, "psu1")
    out = [e.update(w) for w in (9_999_990.0, 9_999_999.0, 0.0, 4.0, 2.0)]
    # 0 after 9999999: reset or rollover; 2 after 4: reset again with 2 Wh counted since
    assert out == [9_999_990.0, 9_999_999.0, 9_999_999.0, 10_000_003.0, 10_000_005.0]
    assert e.resets == 2
    assert out == sorted(out)


def test_energy_never_backwards_after_crash_with_reset_meter(tmp_path: Path) -> None:
    state = State(str(tmp_path))
    e = EnergyTracker(state, "sim", margin_wh=5)
    emitted = [e.update(w) for w in (0.0, 1.0, 2.0, 3.0, 4.0, 5.5, 6.0)]
    # crash: no close(), no final save; the simulated meter restarts at zero
    e2 = EnergyTracker(State(str(tmp_path)), "sim", margin_wh=5)
    after = e2.update(0.25)
    assert after >= max(emitted)
    assert after - max(emitted) <= 5 + 0.25


def test_energy_exact_after_clean_shutdown_with_reset_meter(tmp_path: Path) -> None:
    state = State(str(tmp_path))
    e = EnergyTracker(state, "sim", margin_wh=5)
    for w in (0.0, 1.0, 2.0):
        e.update(w)
    e.close()
    state.save()
    e2 = EnergyTracker(State(str(tmp_path)), "sim", margin_wh=5)
    assert e2.update(0.5) == 2.5


# ---- damaged state files: the boot goes on, counters never repeat or go back ---------------------


def _write(tmp_path: Path, a: object = None, b: object = None) -> None:
    for name, doc in zip(SLOTS, (a, b), strict=True):
        if doc is not None:
            (tmp_path / name).write_bytes(doc if isinstance(doc, bytes) else json.dumps(doc).encode())


def _run(tmp_path: Path) -> tuple[State, int, int, float]:
    state = State(str(tmp_path))
    boot = state.next_boot()
    s = Sequence(state, block=1000).take()
    wh = EnergyTracker(state, "psu1").update(1.0)
    return state, boot, s, wh


@pytest.mark.parametrize(
    "slot",
    [
        b'{"gen": 1, "boot": "x"}',
        b'{"gen": 1e999}',
        b'{"gen": "1", "boot": 3}',
        b'{"gen": 1, "energy": [1]}',
        b'{"gen": 1, "energy": {"psu1": [1]}}',
        b'{"gen": 1, "seq": -5}',
        b'{"gen": 1, "seq": 1.5e3, "boot": true, "dropped": -1}',
        b'{"gen": 1, "energy": {"psu1": [-5, 1, -1]}}',
        b'{"gen": 1, "energy": {"psu1": [1e999, 1, 1e999]}}',
        b'{"gen": 1, "energy": {"psu1": [NaN, null, 1]}}',
        b"[" * 100_000,
        b"\xff\xfe",
        b"",
    ],
)
def test_damaged_state_never_stops_the_boot(tmp_path: Path, slot: bytes) -> None:
    _write(tmp_path, slot)
    state, boot, s, wh = _run(tmp_path)
    assert 0 <= boot < 2**32 and 0 <= s <= 2**53 - 1
    assert math.isfinite(wh) and wh >= 0
    assert state.repairs >= 1 and state.problems
    state2, boot2, s2, _ = _run(tmp_path)  # the repaired state is written back and read cleanly
    assert boot2 == boot + 1 and s2 > s and state2.lost == []


def _history(tmp_path: Path) -> tuple[list[int], int]:
    """Three boots of normal running; the numbers handed out and the last boot."""
    used: list[int] = []
    for _ in range(3):
        state = State(str(tmp_path))
        boot = state.next_boot()
        seq = Sequence(state, block=100)
        used += [seq.take() for _ in range(250)]
    return used, boot


def _newest(tmp_path: Path) -> Path:
    docs = [(json.loads((tmp_path / n).read_text())["gen"], tmp_path / n) for n in SLOTS]
    return max(docs)[1]


@pytest.mark.parametrize("value", ["x", -5, None, 2**53, 1.5, 2**50])
def test_a_damaged_mark_in_the_newest_copy_comes_from_the_older_moved_forward(
    tmp_path: Path, value: object
) -> None:
    used, boot = _history(tmp_path)
    newest = _newest(tmp_path)
    doc = json.loads(newest.read_text())
    doc["seq"] = value
    doc["boot"] = value
    newest.write_text(json.dumps(doc))
    state, boot2, s, _ = _run(tmp_path)
    if value == 2**50:  # a number in range cannot be told from the truth
        assert s == 2**50
    else:
        # The older copy is one save behind: one block (100, on record) and one boot forward.
        assert max(used) < s <= max(used) + 1 + 2 * 100 and boot2 == boot + 2
        assert state.lost == [] and any("seq" in p for p in state.problems)


def test_counters_no_copy_remembers_continue_from_the_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    now_us = 1_763_709_600_123_456
    monkeypatch.setattr(port, "utc_us", lambda: now_us)
    _write(tmp_path, {"gen": 3, "seq": -5, "boot": "x"}, b"{torn")
    state, boot, s, _ = _run(tmp_path)
    assert s == now_us and boot == now_us // 1_000_000 + 1
    assert set(state.lost) == {"boot", "seq", "dropped"}
    assert state.repairs == 4  # the torn copy, and the seq, boot and dropped count of the other


def test_without_a_set_clock_lost_counters_continue_high_in_their_range(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(port, "utc_us", lambda: 946_684_800_000_000)  # a board RTC after a power cut
    _write(tmp_path, b"\x00" * 40)
    state, boot, s, _ = _run(tmp_path)
    assert s == SEQ_LOST and boot == BOOT_LOST + 1 and "seq" in state.lost


def test_a_copy_with_a_damaged_generation_still_sets_a_floor(tmp_path: Path) -> None:
    _write(tmp_path, {"gen": "7", "boot": 3, "seq": 500, "dropped": 2})
    state, boot, s, _ = _run(tmp_path)
    # Undated, so it may lag a save: one boot and (no block on record) the largest block forward.
    assert boot == 5 and s == 500 + MAX_SEQ_BLOCK and state.dropped == 2 and state.lost == []
    (tmp_path / "b").mkdir()
    _write(tmp_path / "b", {"gen": "7", "boot": 3, "seq": 500, "blk": 50})
    assert State(str(tmp_path / "b")).seq_mark == 550


def test_a_torn_newest_copy_is_counted_not_lost(tmp_path: Path) -> None:
    used, boot = _history(tmp_path)
    newest = _newest(tmp_path)
    newest.write_bytes(newest.read_bytes()[:20])
    state, boot2, s, _ = _run(tmp_path)
    # The torn copy may have been the newest: one boot number and one block are skipped.
    assert boot2 == boot + 2 and max(used) < s <= max(used) + 1 + 2 * 100
    assert state.repairs == 1 and state.lost == []
    assert State(str(tmp_path)).repairs == 1  # saved, so the count outlives this boot


def test_the_next_save_never_overwrites_the_newest_copy(tmp_path: Path) -> None:
    _write(tmp_path, {"gen": 5, "boot": 1, "seq": 100, "dropped": 0, "energy": {}}, b"garbage")
    state = State(str(tmp_path))
    state.save()
    assert json.loads((tmp_path / SLOTS[0]).read_text())["gen"] == 5
    assert json.loads((tmp_path / SLOTS[1]).read_text())["gen"] == 6


def test_energy_entry_damaged_in_the_newest_copy_comes_from_the_older(tmp_path: Path) -> None:
    good = {"gen": 4, "boot": 1, "seq": 10, "dropped": 0, "energy": {"psu1": [100.0, 20.0, 125.0]}}
    bad = dict(good, gen=5, energy={"psu1": [100.0, "x", 125.0]})
    _write(tmp_path, good, bad)
    state = State(str(tmp_path))
    assert state.energy["psu1"] == [100.0, 20.0, 125.0] and state.lost == []
    assert EnergyTracker(state, "psu1").update(0.0) == 125.0  # meter reset: resumes from the mark


def test_energy_nobody_remembers_starts_again_and_is_named(tmp_path: Path) -> None:
    _write(tmp_path, {"gen": 1, "boot": 1, "seq": 10, "dropped": 0, "energy": {"psu1": [-1, 2, 3]}})
    state = State(str(tmp_path))
    assert "psu1" not in state.energy and state.lost == ["energy.psu1"]
    assert EnergyTracker(state, "psu1").update(7.0) == 7.0


def test_a_mark_below_the_last_total_is_raised_to_it(tmp_path: Path) -> None:
    _write(tmp_path, {"gen": 1, "boot": 1, "seq": 10, "dropped": 0, "energy": {"psu1": [100.0, 50.0, 3.0]}})
    state = State(str(tmp_path))
    assert state.energy["psu1"][2] == 150.0
    assert EnergyTracker(state, "psu1").update(1.0) >= 150.0  # meter reset: never below what was sent


def test_an_older_state_file_without_a_repair_count_is_not_damage(tmp_path: Path) -> None:
    _write(tmp_path, {"gen": 2, "boot": 4, "seq": 3000, "dropped": 1, "energy": {}})
    state = State(str(tmp_path))
    assert (state.boot, state.seq_mark, state.dropped, state.repairs, state.problems) == (4, 3000, 1, 0, [])


def test_repairs_are_reported_in_status(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A damaged state file is repaired at boot and the status message says so."""
    import json

    import wattbench_schema as contract
    from wattbench_fw.host import HostAppliance, sim_config

    cfg = sim_config(dev="repair", broker="127.0.0.1:1", model="const", spool_dir=tmp_path)
    HostAppliance(cfg).app.persist()
    for path in tmp_path.iterdir():
        if path.is_file() and "state" in path.name:
            path.write_text('{"gen": 1e999}')
    app = HostAppliance(cfg).app
    assert app.counters()["state_repairs"] > 0
    doc = json.loads(app._status_payload("online", "boot"))
    assert doc["repairs"] == app.counters()["state_repairs"]
    assert not list(contract.jsonschema_validator("status").iter_errors(doc))
