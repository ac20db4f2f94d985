"""The simulated DC rail: the simulated meter's models on a DC rail, reported as W, V, A and Wh only,
with the AC-only options refused.

It was added in the plug-in shape, as its folder (firmware/wattbench_fw/meters/simdc/), one row of the
meter table and this file; test_added_as_its_folder_and_one_table_row_only shows that nothing else in the
repository names it, while test_table.py runs every row check (contract, configuration, Home Assistant,
README and sample) on it as on every other meter."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from wattbench_fw import config, meters
from wattbench_fw.errors import ConfigError, NoReply

from .test_table import outside_its_plugin

ESP32 = str(Path(config.__file__).resolve().parent / "boards" / "esp32.json")

KIND = "simdc"


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_reads_dc_quantities_only() -> None:
    clock = Clock()
    meter = meters.create(KIND, None, {"watts": 60, "clock": clock})
    meter.setup()
    vals, flags = meter.read()
    assert flags == 0 and set(vals) == {"W", "V", "A", "Wh", "u"} == set(meter.QUANTITIES) | {"u"}
    assert vals["W"] == 60.0 and vals["V"] == 12.0 and vals["A"] == 5.0  # A = W / V on a DC rail
    clock.t = 60.0
    assert math.isclose(meter.read()[0]["Wh"], 1.0)  # 60 W for a minute
    assert meter.info() == {"model": "simdc-const", "acc": 0.005}


def test_models_and_faults_are_the_simulated_meters() -> None:
    clock = Clock()
    meter = meters.create(
        KIND,
        None,
        {"model": "steps", "steps": [[1, 10], [1, 30]], "volts": 5, "missed_every": 2, "clock": clock},
    )
    assert meter.read()[0]["A"] == 2.0
    with pytest.raises(NoReply):
        meter.read()
    clock.t = 1.5
    assert meter.read()[0]["W"] == 30.0


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        ({"pf": 0.9}, r"^simdc options pf: a DC rail has no pf option$"),
        ({"hz": 60}, r"^simdc options hz: a DC rail has no hz option$"),
        ({"volts": 0}, r"^simdc: volts must be a number in \[1, 100000\], got 0$"),
        ({"watts": -1}, r"^simdc: watts must be a number"),
        ({"bogus": 1}, r"^simdc options bogus: "),
    ],
)
def test_bad_options_are_config_errors_naming_the_option(opts: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        meters.create(KIND, None, opts)


def test_needs_no_bus_and_its_cpu_model_needs_a_host() -> None:
    channel = {"c": "rail", "meter": KIND, "hz": 10, "opts": {"model": "cpu"}}
    board = {"dev": "x", "board": "esp32", "broker": {"host": "b"}, "wifi": {"ssid": "lab"}}
    with pytest.raises(ConfigError, match=r"^channels\[0\]\.opts\.model: the cpu model needs a host$"):
        config.load({**board, "channels": [channel]}, ESP32)
    cfg = config.load({**board, "channels": [{**channel, "opts": {"model": "const"}}]}, ESP32)
    assert "bus" not in cfg["channels"][0]


@pytest.mark.micropython
def test_runs_under_micropython(mpy: Any) -> None:
    (out,) = mpy("""
from wattbench_fw import meters
t = [0.0]
dc = meters.create("simdc", None, {"watts": 24, "volts": 12, "clock": lambda: t[0]})
vals, flags = dc.read()
t[0] = 150.0
wh = dc.read()[0]["Wh"]
try:
    meters.create("simdc", None, {"pf": 1})
    err = None
except ValueError as e:
    err = str(e)
report({"q": sorted(vals), "a": vals["A"], "flags": flags, "wh": wh, "err": err, "info": dc.info()})
""")
    assert out["q"] == ["A", "V", "W", "Wh", "u"] and out["a"] == 2.0 and out["flags"] == 0
    assert math.isclose(out["wh"], 1.0)  # 24 W for 150 s
    assert out["err"] == "simdc options pf: a DC rail has no pf option"
    assert out["info"] == {"model": "simdc-const", "acc": 0.005}


def test_added_as_its_folder_and_one_table_row_only() -> None:
    # Besides its folder, table row and this file: `wattbench ptd`'s simdc:W port runs this meter by
    # name, as sim:W runs the AC one, with its docs and tests.
    allowed = (
        "collector/wattbench/ptd/",
        "collector/wattbench/cli/ptd.py",
        "docs/mlperf-power.md",
        "tests/ptd/",
    )
    assert [p for p in outside_its_plugin(KIND) if not p.startswith(allowed)] == []
