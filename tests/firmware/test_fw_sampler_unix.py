"""The firmware's Sampler on MicroPython 1.27.0's unix port with the esp32 profile's fixed heap
(wattbench_devkit.sampler_timing, which bench/bench_sampler_drift.py --unix prints): every slot of the
run is accounted for as a read, a missed or a lost slot, each read produces its row, and the lateness
histogram holds every read. Timings are the benchmark's to print, not this test's to judge.

Skipped where ../shared/micropython-1.27.0 is missing; in CI, sources without a built interpreter fail.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from wattbench_devkit import sampler_timing as st
from wattbench_devkit import unix

pytestmark = [pytest.mark.services, pytest.mark.timeout(180)]

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_sampler_drift.py"


@pytest.mark.parametrize("channels", [1, 4])
def test_every_slot_of_a_run_is_read_missed_or_lost(lib: Path, channels: int) -> None:
    hz, seconds = 50.0, 1.0
    doc = st.timing(lib, hz, channels, seconds, unix.ESP32_HEAP)
    assert doc["channels"] == channels and doc["hz"] == hz
    # The run ends at the first poll after its last second: about hz x seconds slots a channel.
    assert doc["slots"] == doc["reads"] + doc["missed"] + doc["lost"]
    assert channels * hz * seconds <= doc["slots"] <= channels * (hz * seconds + 2)
    assert doc["rows"] == doc["reads"] + doc["missed"]
    assert sum(doc["hist"]) == doc["reads"]
    assert 0 <= doc["late_mean_us"] <= doc["late_max_us"]
    assert 0 < doc["heap_free_min"] <= doc["heap_free_start"] < unix.ESP32_HEAP


def test_a_heap_too_small_is_reported_not_taken_for_a_timing(lib: Path) -> None:
    with pytest.raises(st.TimingError):
        st.timing(lib, 10.0, 1, 0.2, 16 * 1024)


def test_the_histogram_percentile_names_the_bucket_that_holds_it() -> None:
    doc = {"hist": [0, 5, 4, 1], "bounds": [5, 10, 20]}
    assert st.percentile(doc, 0.5) == "<= 10 us"
    assert st.percentile(doc, 0.9) == "<= 20 us"
    assert st.percentile(doc, 1.0) == "> 20 us"
    assert st.percentile({"hist": [0, 0], "bounds": [5]}, 0.5) == "-"


def test_a_rate_is_sustained_with_a_rare_missed_slot_and_never_with_a_lost_one() -> None:
    base = {"reads": 1000, "slots": 1000, "missed": 0, "lost": 0}
    assert st.sustained(base)
    assert st.sustained({**base, "missed": 1, "reads": 999})
    assert not st.sustained({**base, "missed": 2, "reads": 998})
    assert not st.sustained({**base, "lost": 1})
    assert not st.sustained({**base, "reads": 0})


def test_the_bench_prints_a_row_per_channel_count(lib: Path) -> None:
    res = subprocess.run(
        [sys.executable, str(BENCH), "--unix", "--seconds", "0.5", "--rung", "0.3"],
        capture_output=True,
        text=True,
        timeout=170,
    )
    assert res.returncode == 0, res.stderr
    rows = [line.split() for line in res.stdout.splitlines() if line.split()[:1] in (["1"], ["2"], ["4"])]
    assert [r[0] for r in rows] == ["1", "2", "4"], res.stdout
    assert "heapsize=93584" in res.stdout
