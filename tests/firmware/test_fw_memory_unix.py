"""The appliance fits its boards' heap where it can fail: MicroPython 1.27.0's unix port, built 32-bit,
with `-X heapsize` fixed at the profile's heap (esp32: 134,544 bytes less the 40 KB kept for Wi-Fi and
TLS; picow: its 100 KB budget) plus what the rig's stand-ins hold. The whole firmware, compiled with
mpy-cross -O3 as `wattbench flash` deploys it, boots with the profile's typical configuration (HMAC on
and off), samples 10 simulated minutes with the network down from minute 2 to minute 7 (the RAM
buffer spills to flash), backfills, runs Home Assistant discovery twice and stops cleanly. A
MemoryError anywhere, a sample dropped or lost, or a peak over the budget fails (docs/firmware.md,
"RAM budget"). This heap cannot grow, so unlike the WebAssembly build's it fragments and runs out.

Skipped where ../shared/micropython-1.27.0 is missing; in CI, sources without a built interpreter fail.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from wattbench_devkit import memory_rig as rig

pytestmark = pytest.mark.timeout(900)
RUNS = [(p, h) for p in ("esp32", "picow") for h in (False, True)]


@pytest.fixture(scope="module")
def memlib(lib: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The unix port's MICROPYPATH with the memory rig and its `machine` stand-in beside the firmware
    (`lib` says whether the interpreter can run here)."""
    return rig.unix_lib(tmp_path_factory.mktemp("upy-memlib"))


@pytest.fixture(scope="module")
def results(memlib: Path) -> Iterator[dict[tuple[str, bool], dict[str, Any]]]:
    with ThreadPoolExecutor(2) as pool:
        futures = {
            run: pool.submit(rig.run_profile_unix, run[0], run[1], memlib, seq_log=True) for run in RUNS
        }
        yield {run: f.result() for run, f in futures.items()}


@pytest.mark.parametrize("run", RUNS, ids=[f"{p}-hmac-{'on' if h else 'off'}" for p, h in RUNS])
def test_the_whole_appliance_fits_the_fixed_heap(
    run: tuple[str, bool], results: dict[tuple[str, bool], dict[str, Any]]
) -> None:
    r = results[run]
    assert rig.unix_problems(r) == [], rig.unix_table([r])
    c = r["counters"]
    # The run did what it claims: an outage that reached flash, a backfill, a second connection.
    assert r["sim_s"] >= 600 and r["outage_seen"] and r["max_flash_rows"] > 0
    assert r["backfill_done_s"] is not None and c["connects"] == 2
    assert c["samples"] == r["seq_next"] > 0 and r["lost"] == 0 and c["dropped"] == 0
    # Discovery ran at boot and after the outage, and its module was released after each round.
    assert r["discovery"] >= 2 * 3 and not r["hass_loaded"] and r["sign_loaded"] == run[1]
    assert r["free_block"] is not None and r["free_block"] > 0


def test_four_channels_at_10_hz_survive_a_four_minute_outage_and_its_backfill(memlib: Path) -> None:
    """The long run's configuration (four INA228s at 10 Hz, 40 samples a second, discovery on) through
    its longest outage. After 4 minutes offline the heap had 20 to 25 KB free in runs of at most 1.5
    KB; the backfill's 2 KB rebuild of a flash record never found room, RAM filled and the run died
    with a MemoryError a minute after the reconnect. Now the record is sent in pieces and discovery
    waits for the backlog."""
    r = rig.run_profile_unix(
        "esp32",
        False,
        memlib,
        minutes=7,
        outages=((60, 300),),
        config=rig.long_config(4, 10, False),
        seq_log=True,
    )
    assert rig.unix_problems(r) == [], rig.unix_table([r])
    c = r["counters"]
    assert r["max_flash_rows"] > 9000 and r["backfill_done_s"] is not None and c["connects"] == 2
    assert c["samples"] == r["seq_next"] >= 16000 and r["lost"] == 0 and c["dropped"] == 0
    assert r["seq"]["missing"] == 0


def test_a_larger_ram_buffer_does_not_fit(memlib: Path) -> None:
    """The check is not vacuous: the esp32 profile keeping 24 KB of batches in RAM (2 KB ships) runs
    out of this heap during the outage, and the run says so."""
    r = rig.run_profile_unix("esp32", True, memlib, board_override={"buffer": {"ram_bytes": 24 * 1024}})
    assert rig.unix_problems(r) != [], rig.unix_table([r])
    assert "FAIL" in rig.unix_table([r]).splitlines()[-1]


def test_the_fixed_heap_table_fails_a_run_that_dropped_or_lost_samples() -> None:
    # The unix port's table said PASS for an esp32 run whose outage dropped 528 samples.
    ok = {
        "profile": "esp32",
        "hmac": False,
        "heap": 125440,
        "rig": 31856,
        "budget": rig.BUDGETS["esp32"],
        "peak": 70000,
        "free_min": 20000,
        "free_block": 4096,
        "creep": 500,
        "died": False,
        "memory_error": False,
        "counters": {"errors": 0, "dropped": 0, "last_error": None},
        "lost": 0,
    }
    assert rig.unix_problems(ok) == []
    dropped = {**ok, "counters": {**ok["counters"], "dropped": 528}}
    assert rig.unix_problems(dropped) == ["esp32: 528 samples dropped"]
    assert "FAIL" in rig.unix_table([dropped]).splitlines()[-1]
    lost = {**ok, "lost": 16}
    assert rig.unix_problems(lost) == ["esp32: 16 samples lost (neither acknowledged, dropped nor buffered)"]
    assert rig.unix_table([ok]).splitlines()[-1].endswith("PASS")
