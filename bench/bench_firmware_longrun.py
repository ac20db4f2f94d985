"""A day of the appliance under MicroPython: heap creep, dropped samples and sequence continuity.

Runs the whole appliance (firmware compiled with mpy-cross -O3; MicroPython 1.27.0's unix port with
the heap fixed at the esp32 profile's, or with --wasm the official WebAssembly build, whose heap grows
on demand; the esp32 profile) in simulated time for `--hours` at `--hz` samples a second on each of
`--channels` INA228 channels, with network outages spread over the run (each spills the RAM buffer to
flash and ends with a backfill), and a clean stop. The broker stand-in reads the sequence number of
every sample it receives. Prints:

- the steady-state heap (after a full collection, connected and drained) in the first and the last
  hour, and the creep between them (the goal: within 2 KB);
- samples taken, acknowledged, dropped and still buffered at the stop (handed to flash for the next
  boot), sequence numbers missing and received twice (QoS 1 resends, which the collector removes);
- the peak live heap against the profile's budget.

Exit status 1 when the heap crept by more than 2 KB, a sequence number is missing or a sample was
dropped; on the unix port also when the run ended in a MemoryError (it then prints the fixed-heap
table and the error instead). A day takes hours on one core of a 2-core machine; it is a bench, not a
CI test (tests/firmware/test_fw_memory_unix.py runs 10 minutes of the typical configuration).

    python bench/bench_firmware_longrun.py [--hours 24] [--hz 10] [--channels 4] [--hmac] [--wasm] [--json]
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

try:
    from wattbench_devkit import memory_rig as rig
    from wattbench_devkit.mpy import micropython_available
    from wattbench_devkit.unix import unix_available
except ImportError as exc:  # a hint on one line, not a traceback
    print(
        f"bench_firmware_longrun: {exc}. Install the development kit (in the checkout): python -m pip install -e . -e ./devkit",
        file=sys.stderr,
    )
    sys.exit(2)


def main() -> int:
    from wattbench.argtypes import number, whole
    from wattbench.cli.parser import Parser

    p = Parser(description=__doc__.split("\n")[0])
    p.add_argument("--hours", type=number(at_least=2), default=24.0, help="simulated hours (at least 2)")
    p.add_argument("--hz", type=whole(at_least=1), default=10, help="samples a second per channel")
    p.add_argument(
        "--channels",
        type=whole(at_least=1, at_most=4),
        default=4,
        help="INA228 channels on one I2C bus (1-4)",
    )
    p.add_argument("--hmac", action="store_true", help="sign every batch")
    p.add_argument("--json", action="store_true", help="print the raw result as JSON")
    p.add_argument(
        "--wasm",
        action="store_true",
        help="the WebAssembly build (a heap that grows) instead of the unix port",
    )
    args = p.parse_args()
    if args.hours < 2:
        p.error("--hours must be at least 2 (the creep compares the first hour with the last)")
    if not 1 <= args.channels <= 4:
        p.error("--channels must be 1 to 4 (INA228 addresses 0x40-0x43)")
    if not 1 <= args.hz <= 100:
        p.error("--hz must be 1 to 100")
    reason = micropython_available() if args.wasm else unix_available()
    if reason:
        print(f"bench_firmware_longrun: {reason}", file=sys.stderr)
        return 2
    minutes = int(args.hours * 60)
    outages = rig.long_outages(minutes * 60)
    config = rig.long_config(args.channels, args.hz, args.hmac)
    started = time.monotonic()
    # The run itself, the same on both interpreters; the broker stand-in reads every sequence number.
    run = {
        "minutes": minutes,
        "outages": tuple(outages),
        "config": config,
        "seq_log": True,
        "steady_every_s": 300,
    }
    with tempfile.TemporaryDirectory() as tmp:
        if args.wasm:
            fw = rig.compile_firmware(Path(tmp))
            # block_watch: only allocations that could break the 8 KB block limit.
            r = rig.run_profile("esp32", args.hmac, fw, block_watch=8 * rig.KB, timeout=12 * 3600, **run)
        else:
            lib = rig.unix_lib(Path(tmp))
            r = rig.run_profile_unix("esp32", args.hmac, lib, timeout=48 * 3600, **run)
    wall = time.monotonic() - started
    if args.json:
        print(json.dumps(r, indent=1))
    where = "WebAssembly build" if args.wasm else "unix port, fixed heap"
    if not args.wasm and (r["died"] or r["memory_error"]):
        print(
            f"simulated {args.hours:g} h at {args.hz} Hz x {args.channels} channels ({where}): ended early in {wall / 60:.1f} min"
        )
        print(rig.unix_table([r]))
        for line in rig.unix_problems(r):
            print("problem:", line)
        return 1
    summary = rig.long_summary(r)
    print(
        f"simulated {r['sim_s'] / 3600:.1f} h at {args.hz} Hz x {args.channels} channels (esp32 profile, "
        f"HMAC {'on' if args.hmac else 'off'}, {where}) in {wall / 60:.1f} min"
    )
    print("outages (s from boot):", ", ".join(f"{a}-{b}" for a, b in outages))
    print(rig.long_table(summary))
    bad = rig.long_problems(summary) + ([] if args.wasm else rig.unix_problems(r))
    for line in bad:
        print("problem:", line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
