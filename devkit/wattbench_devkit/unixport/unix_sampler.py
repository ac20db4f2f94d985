# The firmware's Sampler timed on MicroPython's unix port: how late each read starts against its
# deadline, and how many slots are missed, at a rate and channel count. Started by
# wattbench_devkit.unix.sampler_timing as
#
#     MICROPYPATH=LIB micropython -X heapsize=N -m unix_sampler HZ CHANNELS SECONDS
#
# The meter is a stand-in that returns at once, so the figures are the sampler's own cost on this
# interpreter (deadline arithmetic, cleaning, a row per sample, the garbage collector of a fixed heap),
# not a bus's: a real INA226 read over I2C adds its own transfer time on a board.
#
# Lateness is kept in a fixed histogram, not a list: a list of every read would take more heap than a
# board has at the rates worth measuring. One line on stdout: "TIMING <json>".
import gc
import json
import sys

from wattbench_fw import port
from wattbench_fw.clock import Clock
from wattbench_fw.sampler import Channel, Sampler

# Upper bounds of the histogram's buckets, in microseconds; the last bucket holds everything above.
BOUNDS = (5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000)


class Meter:
    """Returns one reading at once and records how late its slot's read began."""

    QUANTITIES = ("W",)

    def __init__(self, mono, hist):
        self.mono = mono
        self.hist = hist
        self.channel = None
        self.worst = 0
        self.total = 0
        self.n = 0

    def setup(self):
        pass

    def read(self):
        late = self.mono.now() - self.channel.next_due
        if late < 0:
            late = 0
        i = 0
        while i < len(BOUNDS) and late > BOUNDS[i]:
            i += 1
        self.hist[i] += 1
        if late > self.worst:
            self.worst = late
        self.total += late
        self.n += 1
        return {"W": 1.0}, 0


class Seq:
    def __init__(self):
        self.next = 0

    def take(self):
        self.next += 1
        return self.next - 1


def run(hz, channels, seconds):
    mono = port.Mono()
    hist = [0] * (len(BOUNDS) + 1)
    meters = []
    chans = []
    for i in range(channels):
        m = Meter(mono, hist)
        ch = Channel("c%d" % i, m, hz)
        m.channel = ch
        meters.append(m)
        chans.append(ch)
    clock = Clock(rtc_us=port.utc_us(), mono_now=mono.now())
    sampler = Sampler(chans, Seq(), clock, mono.now)
    gc.collect()
    free0 = gc.mem_free()
    free_min = free0
    sampler.start()
    t0 = mono.now()
    end = t0 + int(seconds * 1000000)
    rows = 0
    while True:
        now = mono.now()
        if now >= end:
            break
        rows += len(sampler.poll())
        f = gc.mem_free()
        if f < free_min:
            free_min = f
        wait = sampler.next_due() - mono.now()
        if wait > 0:
            port.sleep_us(wait)
    elapsed = mono.now() - t0
    reads = sum(m.n for m in meters)
    return {
        "hz": hz,
        "channels": channels,
        "seconds": elapsed / 1e6,
        "slots": reads + sum(ch.missed_slots + ch.lost_slots for ch in chans),
        "reads": reads,
        "rows": rows,
        "missed": sum(ch.missed_slots for ch in chans),
        "lost": sum(ch.lost_slots for ch in chans),
        "late_mean_us": (sum(m.total for m in meters) / reads) if reads else None,
        "late_max_us": max(m.worst for m in meters),
        "hist": hist,
        "bounds": BOUNDS,
        "heap_free_start": free0,
        "heap_free_min": free_min,
    }


def main():
    hz = float(sys.argv[-3])
    channels = int(sys.argv[-2])
    seconds = float(sys.argv[-1])
    try:
        doc = run(hz, channels, seconds)
    except MemoryError:
        doc = {"hz": hz, "channels": channels, "error": "MemoryError"}
    print("TIMING " + json.dumps(doc))


main()
