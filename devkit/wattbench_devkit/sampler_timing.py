"""The firmware's Sampler timed on MicroPython 1.27.0's unix port with a fixed heap (unixport/unix_sampler.py).

`timing()` runs one rate and channel count in a fresh interpreter and returns what it measured:
reads, missed and lost slots, how late reads began (mean, largest, and a histogram whose percentiles
`percentile()` reads), and the heap's free figures. `highest_sustained()` climbs a ladder of rates
and returns the highest that is sustained: at most MISSED_MAX of its slots missed, none lost. Used by bench/bench_sampler_drift.py --unix and
its test.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from . import unix

# A rate is sustained when at most this share of its slots is missed. The firmware flags and numbers a
# missed slot, so a rare one is an honest gap, not a wrong number; a host that shares its cores with
# other work misses the odd slot to a wake-up late by milliseconds at any rate above a few hertz, so
# "none at all" would measure the host's scheduler rather than the sampler.
MISSED_MAX = 0.001
# Per-channel rates tried when looking for the highest sustained one, lowest first.
LADDER = (10, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000)


class TimingError(RuntimeError):
    """The interpreter did not report a timing line (it crashed, or ran out of heap)."""


def timing(lib: Path, hz: float, channels: int, seconds: float, heapsize: int) -> dict[str, Any]:
    argv = [str(unix.interpreter()), "-X", f"heapsize={heapsize}", "-m", "unix_sampler"]
    argv += [repr(float(hz)), str(channels), repr(float(seconds))]
    proc = subprocess.run(
        argv,
        env={**os.environ, "MICROPYPATH": str(lib)},
        capture_output=True,
        text=True,
        timeout=seconds + 60,
        check=False,
    )
    for line in proc.stdout.splitlines():
        if line.startswith("TIMING "):
            doc: dict[str, Any] = json.loads(line[len("TIMING ") :])
            if "error" in doc:
                raise TimingError(f"{hz:g} Hz x {channels}: {doc['error']}")
            return doc
    raise TimingError(
        f"{hz:g} Hz x {channels}: exit {proc.returncode}, no TIMING line: {proc.stderr.strip()[-300:]}"
    )


def percentile(doc: dict[str, Any], q: float) -> str:
    """The histogram bucket that holds the q-th fraction of reads, as its upper bound ("<= 20 us")."""
    hist: list[int] = doc["hist"]
    bounds: list[int] = doc["bounds"]
    total = sum(hist)
    if not total:
        return "-"
    seen = 0
    for i, n in enumerate(hist):
        seen += n
        if seen >= q * total:
            return f"<= {bounds[i]:,} us" if i < len(bounds) else f"> {bounds[-1]:,} us"
    return f"> {bounds[-1]:,} us"


def sustained(doc: dict[str, Any]) -> bool:
    """At most MISSED_MAX of the slots missed, none lost to a stall."""
    return doc["reads"] > 0 and doc["lost"] == 0 and doc["missed"] <= MISSED_MAX * doc["slots"]


def highest_sustained(
    lib: Path, channels: int, seconds: float, heapsize: int, ladder: tuple[int, ...] = LADDER
) -> tuple[float | None, list[dict[str, Any]]]:
    """The highest per-channel rate of `ladder` that is sustained, and every run's figures.
    The climb stops at the first rate that misses: a rate above it is not sustained either."""
    best: float | None = None
    runs = []
    for hz in ladder:
        doc = timing(lib, hz, channels, seconds, heapsize)
        runs.append(doc)
        if not sustained(doc):
            break
        best = float(hz)
    return best, runs
