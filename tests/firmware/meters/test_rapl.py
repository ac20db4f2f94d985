"""RAPL through Linux powercap, on a sysfs-shaped tree: power from the energy counter's increase over
the time between reads, the counter's wrap, and every bad reading (unreadable, not a number, a reset
or garbled jump) a flagged sample with its reason, never a number. Host mode only.

Added in the plug-in shape: its folder, one table row, this file, its docs page and its end-to-end
test; no configuration, contract or collector code names it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from wattbench_fw import config, meters
from wattbench_fw.contract import FLAG_SENSOR_ERROR
from wattbench_fw.errors import ConfigError, SensorError
from wattbench_fw.meters.rapl import RAPL
from wattbench_fw.sampler import Channel

from .test_table import outside_its_plugin

KIND = "rapl"
RANGE_UJ = 262143328850


def zone(root: Path, name: str = "intel-rapl:0", energy: int = 1_000_000, rng: int = RANGE_UJ) -> Path:
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "name").write_text("package-0\n")
    (d / "max_energy_range_uj").write_text(f"{rng}\n")
    (d / "energy_uj").write_text(f"{energy}\n")
    return d


class FakeTime:
    """Stands in for the time module's monotonic_ns, so intervals are exact."""

    def __init__(self) -> None:
        self.ns = 1_000_000_000

    def monotonic_ns(self) -> int:
        return self.ns


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeTime:
    import wattbench_fw.meters.rapl as mod

    t = FakeTime()
    monkeypatch.setattr(mod, "time", t)
    return t


def test_power_is_the_counters_increase_over_the_interval(tmp_path: Path, clock: FakeTime) -> None:
    d = zone(tmp_path)
    m = meters.create(KIND, None, {"root": str(tmp_path)})
    m.setup()
    assert m.info() == {"model": "RAPL package-0"}  # no accuracy claimed unless stated
    (d / "energy_uj").write_text(str(1_000_000 + 4_750_000))  # 4.75 J
    clock.ns += 100_000_000  # in 0.1 s
    assert m.read() == ({"W": pytest.approx(47.5)}, 0)


def test_a_wrap_between_two_reads_is_counted_through(tmp_path: Path, clock: FakeTime) -> None:
    d = zone(tmp_path, energy=RANGE_UJ - 1_000_000)
    m = RAPL(None, root=str(tmp_path))
    m.setup()
    (d / "energy_uj").write_text("3750000")  # 1 J to the top, 1 µJ to 0, then 3.75 J
    clock.ns += 100_000_000
    vals, flags = m.read()
    assert flags == 0 and vals["W"] == pytest.approx(47.50001)


@pytest.mark.parametrize(
    ("content", "why"),
    [("garbage\n", "not a counter"), ("", "not a counter"), ("-5\n", "negative counter")],
)
def test_a_garbled_counter_is_a_sensor_error(tmp_path: Path, clock: FakeTime, content: str, why: str) -> None:
    d = zone(tmp_path)
    m = RAPL(None, root=str(tmp_path))
    m.setup()
    (d / "energy_uj").write_text(content)
    clock.ns += 100_000_000
    with pytest.raises(SensorError, match=why):
        m.read()


def test_a_reset_or_a_jump_beyond_max_w_is_refused(tmp_path: Path, clock: FakeTime) -> None:
    d = zone(tmp_path, energy=50_000_000)
    m = RAPL(None, root=str(tmp_path), max_w=500)
    m.setup()
    (d / "energy_uj").write_text("10")  # went back: as a wrap that is about 262 kJ in 0.1 s
    clock.ns += 100_000_000
    with pytest.raises(SensorError, match="above max_w 500 W"):
        m.read()
    (d / "energy_uj").write_text("5000010")  # then 5 J in 0.1 s: 50 W again
    clock.ns += 100_000_000
    assert m.read()[0]["W"] == pytest.approx(50.0)


def test_unreadable_counters_give_flagged_samples_not_zero(tmp_path: Path) -> None:
    # A missing zone (or energy_uj readable by root only): every read is flagged with its reason.
    ch = Channel("pkg0", RAPL(None, root=str(tmp_path)), 10)
    assert not ch.setup()
    vals, flags = ch.read()
    assert vals == {} and flags == FLAG_SENSOR_ERROR
    assert "No such file" in (ch.last_error or "")
    zone(tmp_path)  # the zone appears: the next read takes a baseline, and is flagged, not 0 W
    vals, flags = ch.read()
    assert vals == {} and flags == FLAG_SENSOR_ERROR
    assert "too short to measure" in (ch.last_error or "")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_a_counter_only_root_may_read_is_a_sensor_error(tmp_path: Path) -> None:
    d = zone(tmp_path)
    (d / "energy_uj").chmod(0)
    with pytest.raises(SensorError, match="Permission denied"):
        RAPL(None, root=str(tmp_path)).setup()


@pytest.mark.parametrize(
    ("opts", "why"),
    [
        ({"domain": "../../etc"}, "domain must be a powercap zone"),
        ({"domain": ""}, "domain must be a powercap zone"),
        ({"max_w": 0}, "max_w must be a number"),
        ({"acc": 2}, "acc must be a number"),
        ({"root": 5}, "root must be a directory path"),
    ],
)
def test_options_are_checked(opts: dict[str, Any], why: str) -> None:
    with pytest.raises(ValueError, match=why):
        RAPL(None, **opts)


def test_a_stated_accuracy_goes_on_the_samples_and_the_meta(tmp_path: Path, clock: FakeTime) -> None:
    d = zone(tmp_path)
    m = RAPL(None, root=str(tmp_path), acc=0.1)
    m.setup()
    assert m.info()["acc"] == 0.1
    (d / "energy_uj").write_text(str(1_000_000 + 1_000_000))
    clock.ns += 100_000_000
    assert m.read()[0] == {"W": pytest.approx(10.0), "u": 0.1}


def _host_config(board: str) -> dict[str, Any]:
    return {
        "dev": "srv1",
        "board": board,
        "broker": {"host": "127.0.0.1", "port": 1883},
        "wifi": {"ssid": "lab", "password": "secret"},
        "channels": [{"c": "pkg0", "meter": KIND, "hz": 10, "role": "component", "opts": {}}],
    }


def test_a_board_configuration_naming_it_is_refused() -> None:
    with pytest.raises(ConfigError, match="rapl reads this host's own interfaces and needs board host"):
        config.load(_host_config("esp32"))


def test_real_powercap_tree_if_this_machine_has_one() -> None:
    root = Path("/sys/class/powercap/intel-rapl:0")
    if not (root / "energy_uj").exists():
        pytest.skip("this machine has no RAPL zone in /sys/class/powercap")
    m = RAPL(None)
    try:
        m.setup()
    except SensorError as exc:
        pytest.skip(f"the real counter is not readable here: {exc}")
    import time

    time.sleep(0.2)
    vals, flags = m.read()
    assert flags == 0 and 0 <= vals["W"] < 2000


def test_added_as_its_folder_and_one_table_row_only() -> None:
    # Besides its folder, table row and this file: only its docs page, its end-to-end test and the
    # architecture page, which shows it as the worked example of adding a meter; and `wattbench ptd`'s
    # page and range tests, which name it among the sources an analyzer's ranging cannot use.
    allowed = (
        "docs/sources/",
        "tests/sources/",
        "docs/architecture.md",
        "docs/mlperf-power.md",
        "tests/ptd/",
    )
    assert [p for p in outside_its_plugin(KIND) if not p.startswith(allowed)] == []


def test_a_read_that_waited_after_the_counter_was_taken_is_timed_by_a_tight_retry(
    tmp_path: Path, clock: FakeTime
) -> None:
    """On a host the counter is read in a few system calls, and the thread may wait (for the interpreter
    lock, for a CPU) after the value is taken and before the clock is read. Timed after that wait, an
    interval looked 40 ms longer than it was: 33.9 W instead of 47.5 (a loaded machine put one level of
    a sweep 3 % off). The read is bracketed by the clock and taken again when the bracket is loose."""
    zone(tmp_path)
    m = meters.create(KIND, None, {"root": str(tmp_path)})
    t0 = clock.ns
    waits = [40_000_000]  # the first read of the next slot waits 40 ms after taking the counter

    def counter(leaf: str) -> int:
        if leaf != "energy_uj":
            return RANGE_UJ
        value = 1_000_000 + round(47.5 * (clock.ns - t0) / 1e3)  # 47.5 W, in uJ from ns
        if waits and clock.ns > t0:
            clock.ns += waits.pop()
        return value

    m._read_int = counter  # type: ignore[method-assign]
    m.setup()
    clock.ns += 100_000_000
    vals, flags = m.read()
    assert flags == 0 and vals["W"] == pytest.approx(47.5, rel=1e-6)
