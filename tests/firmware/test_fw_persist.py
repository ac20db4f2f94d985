"""State across reboots: sequence numbers never repeat (even after a crash or a torn state file),
the boot counter increases, and energy totals never go backwards."""

from __future__ import annotations

from pathlib import Path

from wattbench_fw.persist import SLOTS, EnergyTracker, Sequence, State


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
    assert state2.seq_mark == 30  # the previous slot
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
