"""The firmware's GC heap per board profile under MicroPython: the memory table.

By default under MicroPython 1.27.0's unix port (built 32-bit by scripts/provision.sh) with the heap
fixed at each profile's (esp32: 134,544 bytes less 40 KB; picow: its 100 KB budget; plus what the
rig's stand-ins hold): per profile the peak (gc.mem_alloc() after each loop turn's collection), the
smallest free heap, the largest free block at that moment, the loop's errors, samples dropped and
lost, and PASS or FAIL; a MemoryError anywhere, or a sample dropped or lost, is a FAIL. With
--wasm, the WebAssembly table below (a heap that grows, so it cannot run out):

Compiles the firmware with mpy-cross -O3, runs the whole appliance in the official MicroPython
WebAssembly build for each profile's typical configuration (HMAC off and on) through boot, sampling
in simulated time, an outage that spills to flash, the backfill, Home Assistant discovery and a clean
stop, and prints profile -> budget -> measured peak -> margin (budgets and method: docs/firmware.md).
Exit status 1 when a profile is over its budget.

    python bench/bench_firmware_memory.py [--minutes 10] [--profile esp32 ...] [--json]
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

try:
    from wattbench_devkit import memory_rig as rig
    from wattbench_devkit.mpy import micropython_available
except ImportError as exc:  # a hint on one line, not a traceback
    print(
        f"bench_firmware_memory: {exc}. Install the development kit (in the checkout): python -m pip install -e . -e ./devkit",
        file=sys.stderr,
    )
    sys.exit(2)


def main() -> int:
    from wattbench.argtypes import whole
    from wattbench.cli.parser import Parser

    p = Parser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--minutes", type=whole(at_least=8), default=10, help="simulated minutes per run (at least 8)"
    )
    p.add_argument("--profile", action="append", choices=sorted(rig.BUDGETS), help="default: all")
    p.add_argument("--json", action="store_true", help="print the raw results as JSON")
    p.add_argument(
        "--wasm", action="store_true", help="the WebAssembly build's table instead of the unix port's"
    )
    args = p.parse_args()
    if args.minutes < 8:
        p.error("--minutes must be at least 8 (the outage runs from minute 2 to minute 7)")
    if not args.wasm:
        return unix_port(args.profile or ["esp32", "picow"], args.minutes, args.json)
    reason = micropython_available()
    if reason:
        print(f"bench_firmware_memory: {reason}", file=sys.stderr)
        return 2
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        fw = rig.compile_firmware(Path(tmp))
        for profile in args.profile or sorted(rig.BUDGETS):
            for hmac in (False, True):
                results.append(rig.run_profile(profile, hmac, fw, minutes=args.minutes))
    if args.json:
        print(json.dumps(results, indent=1))
    print(rig.table(results))
    bad = [p for r in results for p in rig.problems(r)]
    for line in bad:
        print("over budget:", line)
    return 1 if bad else 0


def unix_port(profiles: list[str], minutes: int, as_json: bool) -> int:
    from wattbench_devkit.unix import unix_available

    reason = unix_available()
    if reason:
        print(f"bench_firmware_memory: {reason}", file=sys.stderr)
        return 2
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        lib = rig.unix_lib(Path(tmp))
        for profile in profiles:
            for hmac in (False, True):
                results.append(rig.run_profile_unix(profile, hmac, lib, minutes=minutes))
    if as_json:
        print(json.dumps(results, indent=1))
    print(rig.unix_table(results))
    bad = [p for r in results for p in rig.unix_problems(r)]
    for line in bad:
        print("FAIL:", line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
