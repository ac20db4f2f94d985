"""The simulated AC meter: its power models, energy and fault injection, and its options, checked when a
channel is configured (the cpu model only on a host)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from wattbench_fw import config, meters
from wattbench_fw.errors import ConfigError, CRCError, NoReply

ESP32 = str(Path(config.__file__).resolve().parent / "boards" / "esp32.json")

KIND = "sim"


# ---- options from the configuration ----------------------------------------------------------


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        ({"watts": 10**400}, r"watts"),
        ({"volts": 0}, r"volts must be a number in \[1, 100000\]"),
        ({"model": "sine", "period_s": 0}, r"period_s"),
        ({"model": "steps", "steps": [[10, 100], [0, 50]]}, r"steps\[1\] seconds"),
        ({"model": "steps", "steps": [[10]]}, r"steps\[0\] must be a \[seconds, watts\] pair"),
        ({"seed": "x"}, r"seed must be an integer"),
        ({"clock": 5}, r"clock must be a function"),
        ({"bogus": 1}, r"^sim options bogus: "),
    ],
)
def test_bad_options_are_config_errors_naming_the_option(opts: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        meters.create(KIND, None, opts)


@pytest.mark.parametrize(
    "opts",
    [
        {"model": "steps", "steps": [[1, 0], [2.5, 300]], "watts": 0, "amp": -5, "seed": 7},
    ],
)
def test_sane_options_are_accepted(opts: dict[str, object]) -> None:
    assert meters.create(KIND, None, opts).KIND == KIND


# ---- the power models and fault injection -------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_models_follow_their_definition() -> None:
    assert meters.create(KIND, None, {"watts": 42}).power_at(123.0) == 42.0
    sine = meters.create(KIND, None, {"model": "sine", "watts": 100, "amp": 20, "period_s": 60})
    assert math.isclose(sine.power_at(15.0), 120.0) and math.isclose(sine.power_at(45.0), 80.0)
    steps = meters.create(KIND, None, {"model": "steps", "steps": [[10, 50], [5, 200]]})
    assert [steps.power_at(t) for t in (0, 9.9, 10, 14.9, 15, 26)] == [50, 50, 200, 200, 50, 200]


def test_read_reports_ac_quantities_and_integrates_energy() -> None:
    clock = Clock()
    meter = meters.create(KIND, None, {"watts": 360, "volts": 240, "pf": 0.5, "clock": clock})
    vals, flags = meter.read()
    assert flags == 0 and set(vals) == set(meter.QUANTITIES) | {"u"}
    assert vals["A"] == 3.0 and vals["PF"] == 0.5 and vals["Hz"] == 50.0 and vals["Wh"] == 0.0
    clock.t = 10.0
    assert math.isclose(meter.read()[0]["Wh"], 1.0)  # 360 W for 10 s
    assert meter.info() == {"model": "sim-const", "acc": 0.005}


def test_injected_faults_raise_the_errors_a_real_meter_raises() -> None:
    clock = Clock()
    meter = meters.create(KIND, None, {"missed_every": 3, "crc_every": 4, "clock": clock})
    outcomes = []
    for _ in range(6):
        try:
            meter.read()
            outcomes.append("ok")
        except (NoReply, CRCError) as exc:
            outcomes.append(type(exc).__name__)
    assert outcomes == ["ok", "ok", "NoReply", "CRCError", "ok", "NoReply"]
    outage = meters.create(KIND, None, {"fail_from_s": 5, "fail_for_s": 2, "clock": clock})
    clock.t = 6.0
    with pytest.raises(NoReply, match="outage"):
        outage.read()
    clock.t = 7.0
    assert outage.read()[1] == 0


def test_the_cpu_model_is_refused_on_a_board_and_taken_on_a_host() -> None:
    channel = {"c": "sim", "meter": KIND, "hz": 1, "opts": {"model": "cpu"}}
    board = {"dev": "x", "board": "esp32", "broker": {"host": "b"}, "wifi": {"ssid": "lab"}}
    with pytest.raises(ConfigError, match=r"^channels\[0\]\.opts\.model: the cpu model needs a host$"):
        config.load({**board, "channels": [channel]}, ESP32)
    config.load({**board, "channels": [{**channel, "opts": {"model": "sine"}}]}, ESP32)
    cfg = config.load({"dev": "x", "broker": {"host": "b"}, "channels": [channel]})
    assert cfg["channels"][0]["opts"] == {"model": "cpu"}


def test_the_cpu_model_maps_utilisation_onto_idle_to_peak_watts() -> None:
    """The cpu model's two halves, each without depending on what else this machine runs: the meter
    maps a utilisation onto idle_w..peak_w, and CpuLoad turns /proc/stat's counters into that
    utilisation (the end-to-end sweep test uses a deterministic model since the load of other work
    would move it)."""
    from wattbench_fw.meters.sim import CpuLoad

    meter = meters.create(KIND, None, {"model": "cpu", "idle_w": 60.0, "peak_w": 260.0, "clock": lambda: 0.0})

    class Scripted:
        def __init__(self, u: float) -> None:
            self.u = u

        def value(self, now_s: float) -> float:
            return self.u

    for u, watts in ((0.0, 60.0), (0.25, 110.0), (1.0, 260.0)):
        meter.cpu = Scripted(u)
        assert meter.power_at(0.0) == pytest.approx(watts)

    counters = iter([(1000, 800), (1400, 900), (1800, 1300), (1800, 1300)])  # (total, idle) jiffies
    load = CpuLoad.__new__(CpuLoad)
    load.refresh_s, load._last_t, load._value, load._psutil = 0.1, None, 0.0, None
    load._proc_stat = lambda: next(counters)  # type: ignore[method-assign]
    load._prev = load._proc_stat()
    assert load.value(0.0) == pytest.approx(0.75)  # 400 jiffies, 100 of them idle
    assert load.value(0.05) == pytest.approx(0.75)  # within refresh_s: the last value, no read
    assert load.value(0.2) == pytest.approx(0.0)  # 400 jiffies, all idle
    assert load.value(0.4) == pytest.approx(0.0)  # no time passed on the counters: unchanged
