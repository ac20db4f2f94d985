"""The appliance's GC heap under MicroPython, per board profile: the runs, the budgets, the table.

Shared by tests/firmware/test_fw_memory.py and bench/bench_firmware_memory.py. Each run compiles the
firmware with `mpy-cross -O3` (what `wattbench flash` deploys), loads it into the official MicroPython
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
import tempfile
from pathlib import Path
from typing import Any

from wattbench.cli.flash import compile_mpy

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
    """The package as .mpy files (mpy-cross -O3, as `wattbench flash` makes them) plus its .json files,
    under dest/wattbench_fw."""
    out = dest / "wattbench_fw"
    for src in FIRMWARE.rglob("*"):
        if "__pycache__" in src.parts or src.is_dir():
            continue
        rel = src.relative_to(FIRMWARE)
        target = out / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.suffix == ".py" and rel.parts[0] != "boards":
            compile_mpy(src, target.with_suffix(".mpy"), "wattbench_fw/" + rel.as_posix())
        elif src.suffix == ".json":
            shutil.copyfile(src, target)
    return out


def mpy_cross(src: Path, target: Path) -> None:
    """A rig or shim file compiled as the firmware is, named by its file name alone."""
    compile_mpy(src, target, src.name)


_BLK = re.compile(r"max blk sz: (\d+)")


def long_config(channels: int, hz: int, hmac: bool) -> dict[str, Any]:
    """The long run's configuration on the esp32 profile: `channels` INA228s on one I2C bus, each
    at `hz` published samples a second, Home Assistant discovery on."""
    cfg = typical_config("esp32", hmac)
    cfg["channels"] = [
        {"c": f"psu{i + 1}", "meter": "ina228", "bus": "i2c0", "hz": hz, "role": "power",
         "node": f"srv{i + 1}", "opts": {"addr": 64 + i, "shunt_ohm": 0.002, "max_a": 16.384}}
        for i in range(channels)
    ]  # fmt: skip
    return cfg


def run_profile(
    profile: str,
    hmac: bool,
    firmware: Path,
    minutes: int = 10,
    outages: tuple[tuple[int, int], ...] = ((120, 420),),
    board_override: dict[str, Any] | None = None,
    turn_us: int = 500,
    *,
    config: dict[str, Any] | None = None,
    seq_log: bool = False,
    steady_every_s: int = 60,
    block_watch: int = 1024,
    timeout: float = 1800,
) -> dict[str, Any]:
    """One run; the result holds peak (bytes over the interpreter's own), the largest live block
    (bytes) and the steady-state heap once every `steady_every_s` simulated seconds. With `seq_log`
    the broker stand-in reads every sample's sequence number: `seq` says which arrived."""
    job = {
        "config": config or typical_config(profile, hmac),
        "board": _board(profile, board_override),
        "minutes": minutes,
        "outages": [list(o) for o in outages],
        "turn_us": turn_us,
        "block_watch": block_watch,
        "seq_log": seq_log,
        "steady_every_s": steady_every_s,
    }
    lines: list[str] = []
    (result,) = run_micropython(
        RIG.read_text(),
        data=job,
        firmware=firmware,
        timeout=timeout,
        stdout_lines=lines,
        repeat="rig_step()",
        heapsize=256 * KB,  # grows on demand; a small heap keeps the collection after each turn quick
    )
    blocks = [int(m.group(1)) for line in lines for m in [_BLK.search(line)] if m]
    result["max_block"] = max(blocks) * 16 if blocks else 0  # 16-byte GC blocks on a 32-bit port
    _read_lines(result, lines, seq_log)
    result["peak"] = result["live_peak"]
    result["profile"] = profile
    result["hmac"] = hmac
    result["budget"] = BUDGETS[profile]
    result["block_limit"] = BLOCK_LIMITS[profile]
    return result


def _board(profile: str, override: dict[str, Any] | None) -> dict[str, Any]:
    board = board_profile(profile)
    for key, val in (override or {}).items():
        board[key] = {**board[key], **val} if isinstance(val, dict) else val
    return board


def _read_lines(result: dict[str, Any], lines: list[str], seq_log: bool) -> None:
    """What a run printed besides its result: the steady heap, the backfills, the sequence numbers the
    broker stand-in saw (both interpreters print the same lines)."""
    result["steady"] = [[int(w) for w in line.split()[1:3]] for line in lines if line.startswith("STEADY ")]
    result["backfills"] = [int(line.split()[1]) for line in lines if line.startswith("BACKFILL ")]
    steady = [v for _, v in result["steady"]]
    result["creep"] = steady[-1] - steady[0] if len(steady) >= 2 else None
    if seq_log and "seq_rows" in result:
        runs = [
            (int(a), int(b)) for line in lines if line.startswith("SEQRUN ") for a, b in [line.split()[1:3]]
        ]
        c = result["counters"]
        result["seq"] = sequence_report(
            runs, result["seq_rows"], result["seq_next"], c["samples"] - c["acked_samples"]
        )


def sequence_report(runs: list[tuple[int, int]], rows: int, seq_next: int, unsent: int = 0) -> dict[str, Any]:
    """What the broker received against what the appliance numbered: runs of consecutive sequence
    numbers in arrival order, merged. `missing` are numbers below the last assigned that never
    arrived, less the `unsent` samples the clean stop handed to flash for the next boot;
    `duplicates` arrived more than once (a QoS 1 resend: the collector keeps one)."""
    merged: list[list[int]] = []
    for a, b in sorted(runs):
        if merged and a <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    unique = sum(b - a + 1 for a, b in merged)
    first = merged[0][0] if merged else None
    last = merged[-1][1] if merged else None
    holes = [[merged[i][1] + 1, merged[i + 1][0] - 1] for i in range(len(merged) - 1)]
    tail = seq_next - 1 - last if last is not None else seq_next
    return {
        "first": first,
        "last": last,
        "unique": unique,
        "rows": rows,
        "duplicates": rows - unique,
        "holes": holes[:20],
        "missing": sum(b - a + 1 for a, b in holes) + max(tail - unsent, 0),
        "unsent_at_stop": unsent,
        "runs": len(runs),
    }


def long_outages(total_s: int) -> list[tuple[int, int]]:
    """A few outages spread over a long run: 2 min, 4 min and 45 s (at 15 %, 50 % and 80 %)."""
    return [(int(total_s * f), int(total_s * f) + d) for f, d in ((0.15, 120), (0.5, 240), (0.8, 45))]


def long_summary(r: dict[str, Any]) -> dict[str, Any]:
    """The long run's figures: steady heap in the first and last hour and the creep between them
    (the last hour's highest against the first hour's lowest), samples and sequence numbers."""
    steady = r["steady"]
    end = r["sim_s"]
    first = [v for t, v in steady if t <= 3600]
    last = [v for t, v in steady if t >= end - 3600]
    c = r["counters"]
    return {
        "first_hour": [min(first), max(first)] if first else None,
        "last_hour": [min(last), max(last)] if last else None,
        "creep": max(last) - min(first) if first and last else None,
        "peak": r["peak"],
        "peak_at": r["live_peak_at"],
        "budget": r["budget"],
        "samples": c["samples"],
        "acked": c["acked_samples"],
        "dropped": c["dropped"],
        "errors": c["errors"],
        "seq": r["seq"],
        "backfills": r["backfills"],
        "max_flash_rows": r["max_flash_rows"],
    }


def long_table(s: dict[str, Any]) -> str:
    q = s["seq"]
    fh, lh = s["first_hour"], s["last_hour"]
    return "\n".join(
        [
            f"steady heap, first hour    {fh[0] / KB:.1f}-{fh[1] / KB:.1f} KB"
            if fh
            else "steady heap, first hour    none",
            f"steady heap, last hour     {lh[0] / KB:.1f}-{lh[1] / KB:.1f} KB"
            if lh
            else "steady heap, last hour     none",
            f"creep (last max - first min) {s['creep']} B (limit {2 * KB} B)",
            f"peak live heap             {s['peak'] / KB:.1f} KB at {s['peak_at']} (esp32 budget {s['budget'] / KB:.0f} KB)",
            f"samples taken              {s['samples']}",
            f"acknowledged by the broker {s['acked']}",
            f"dropped                    {s['dropped']}",
            f"buffered at the stop       {q['unsent_at_stop']} (in flash for the next boot)",
            f"sequence numbers received  {q['unique']} unique of {q['rows']} rows, {q['first']}..{q['last']}",
            f"missing                    {q['missing']}",
            f"received twice             {q['duplicates']} (QoS 1 resends after a reconnect)",
            f"largest flash backlog      {s['max_flash_rows']} samples; backfills done at {s['backfills']} s",
            f"firmware errors            {s['errors']}",
        ]
    )


def long_problems(s: dict[str, Any]) -> list[str]:
    out = []
    if s["creep"] is None or s["creep"] > 2 * KB:
        out.append(f"steady-state heap crept by {s['creep']} B from the first hour to the last")
    if s["seq"]["missing"]:
        out.append(f"{s['seq']['missing']} sequence numbers never reached the broker: {s['seq']['holes']}")
    if s["dropped"]:
        out.append(f"{s['dropped']} samples dropped")
    return out


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


# ---- the same rig under MicroPython's unix port, with the heap fixed ------------------------------

MOCKS = Path(__file__).resolve().parent / "mocks"
MARK = "\x1e"
UNIX_PRELUDE = f"""
import json
import sys

import mock_machine

sys.modules["machine"] = mock_machine
with open(sys.argv[-1]) as f:
    DATA = json.load(f)


def report(value):
    print("{MARK}" + json.dumps(value))
"""
UNIX_DRIVER = """
rig_step()
if JOB.get("probe"):
    report({"base": RIG["base"]})
else:
    while AGAIN:
        rig_step()
"""


def unix_lib(dest: Path) -> Path:
    """The firmware as .mpy files, the `machine` stand-in and the rig with its driver loop, compiled:
    the unix port's MICROPYPATH for run_profile_unix."""
    from .unix import compile_lib

    compile_lib(dest)
    mpy_cross(MOCKS / "machine.py", dest / "mock_machine.mpy")
    src = dest / "unix_rig.py"
    src.write_text(UNIX_PRELUDE + RIG.read_text() + UNIX_DRIVER)
    mpy_cross(src, dest / "unix_rig.mpy")
    src.unlink()
    return dest


def _run_unix(lib: Path, job: dict[str, Any], heapsize: int, timeout: float) -> tuple[int, list[str], str]:
    from .unix import interpreter

    with tempfile.TemporaryDirectory(prefix="wattbench-unixrig-") as tmp:
        job = {**job, "root": tmp, "fixed_heap": True}
        job["config"] = {**job["config"], "flash_dir": tmp + "/wb"}
        path = Path(tmp) / "job.json"
        path.write_text(json.dumps(job))
        proc = subprocess.run(
            [str(interpreter()), "-X", f"heapsize={heapsize}", "-m", "unix_rig", str(path)],
            env={"MICROPYPATH": str(lib), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    return proc.returncode, proc.stdout.split("\n"), proc.stderr


# The heap each profile's firmware may fill (docs/firmware.md, "RAM budget"): the esp32's is the
# 134,544 bytes it boots with less the 40 KB kept for Wi-Fi and TLS.
UNIX_HEAPS = {"esp32": 134544 - 40 * KB, "picow": BUDGETS["picow"], "esp32-psram": BUDGETS["esp32-psram"]}
_FREE = re.compile(r"max free sz: (\d+)")


def run_profile_unix(
    profile: str,
    hmac: bool,
    lib: Path,
    minutes: int = 10,
    outages: tuple[tuple[int, int], ...] = ((120, 420),),
    *,
    config: dict[str, Any] | None = None,
    board_override: dict[str, Any] | None = None,
    seq_log: bool = False,
    steady_every_s: int = 60,
    timeout: float = 3600,
) -> dict[str, Any]:
    """The memory rig's run under the unix port with the heap fixed at the profile's (UNIX_HEAPS) plus
    what the rig and its stand-ins hold before the firmware loads (a board spends nothing on them).
    A MemoryError anywhere, in the firmware's loop (its error count) or out of it (the run dies), is a
    failure. The result holds, besides run_profile's figures, `heap` (the -X heapsize given), `rig`
    (bytes the rig holds), `free_min` (the smallest free heap after a loop turn's collection) and
    `free_block` (the largest free run at that moment, in bytes)."""
    job = {
        "config": config or typical_config(profile, hmac),
        "board": _board(profile, board_override),
        "minutes": minutes,
        "outages": [list(o) for o in outages],
        "turn_us": 500,
        "block_watch": 1 << 30,  # the largest-allocation probe is the WebAssembly run's
        "seq_log": seq_log,
        "steady_every_s": steady_every_s,
    }
    rc, lines, err = _run_unix(lib, {**job, "probe": True}, 1024 * KB, 120)
    if rc != 0:
        raise RuntimeError(f"the rig did not start under the unix port:\n{err}")
    rig_base = next(json.loads(line[1:]) for line in lines if line.startswith(MARK))["base"]
    heap = UNIX_HEAPS[profile] + rig_base
    rc, lines, err = _run_unix(lib, job, heap, timeout)
    results = [json.loads(line[1:]) for line in lines if line.startswith(MARK)]
    memory_error = "MemoryError" in err
    if rc != 0 and not memory_error:
        raise RuntimeError(
            f"the rig failed under the unix port (exit {rc}):\n{err}\n" + "\n".join(lines[-20:])
        )
    result: dict[str, Any] = (
        results[0] if results else {"counters": {"errors": None, "last_error": err[-300:]}}
    )
    worst = max((i for i, line in enumerate(lines) if line == "WORST"), default=None)
    block = None
    if worst is not None:
        found = [int(m.group(1)) for line in lines[worst:] for m in [_FREE.search(line)] if m]
        block = found[0] * 16 if found else None  # 16-byte GC blocks on a 32-bit port
    result.update(
        profile=profile,
        hmac=hmac,
        heap=heap,
        rig=rig_base,
        budget=BUDGETS[profile],
        free_block=block,
        died=rc != 0,
        memory_error=memory_error or "MemoryError" in str(result["counters"].get("last_error")),
    )
    result["peak"] = result.get("live_peak")
    c = result["counters"]
    if result.get("rows_out") is not None:
        result["lost"] = result["rows_out"] - c["acked_samples"] - c["dropped"] - result["unsent"]
    _read_lines(result, lines, seq_log)
    return result


def unix_problems(r: dict[str, Any]) -> list[str]:
    out = []
    if r["died"]:
        out.append(f"{r['profile']}: the run died: {r['counters'].get('last_error')}")
    if r["memory_error"]:
        out.append(f"{r['profile']}: MemoryError ({r['counters'].get('last_error')})")
    if r["counters"].get("errors"):
        out.append(
            f"{r['profile']}: {r['counters']['errors']} errors in the loop ({r['counters'].get('last_error')})"
        )
    if r.get("peak") is not None and r["peak"] > r["budget"]:
        out.append(f"{r['profile']}: peak {r['peak']} B over the budget of {r['budget']} B")
    if r["counters"].get("dropped"):
        out.append(f"{r['profile']}: {r['counters']['dropped']} samples dropped")
    if r.get("lost"):
        out.append(f"{r['profile']}: {r['lost']} samples lost (neither acknowledged, dropped nor buffered)")
    return out


def unix_table(results: list[dict[str, Any]]) -> str:
    """Per profile under the fixed heap: peak, smallest free, largest free block, PASS or FAIL."""
    rows = [
        "MicroPython 1.27.0 unix port, 32-bit, -X heapsize = the profile's heap + the rig's own",
        "profile      hmac  heap B   rig B  budget KB  peak KB  min free KB  max free block B  creep B"
        "  errors  dropped  lost  result",
    ]
    for r in results:
        peak = f"{r['peak'] / KB:7.1f}" if r.get("peak") is not None else "      -"
        free = f"{r['free_min'] / KB:11.1f}" if r.get("free_min") is not None else "          -"
        rows.append(
            f"{r['profile']:<12} {'on' if r['hmac'] else 'off':<4} {r['heap']:>6}  {r['rig']:>6}"
            f"  {r['budget'] / KB:>9.0f}  {peak}  {free}  {r['free_block']!s:>16}  {r.get('creep')!s:>7}"
            f"  {r['counters'].get('errors')!s:>6}  {r['counters'].get('dropped')!s:>7}  {r.get('lost')!s:>4}"
            f"  {'FAIL' if unix_problems(r) else 'PASS'}"
        )
    return "\n".join(rows)
