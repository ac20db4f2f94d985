"""What differs between MicroPython and CPython, in one place.

Everything else in the package imports time, file and platform helpers from here, so the rest of
the code reads the same on a microcontroller and on a host.
"""

import sys
import time

try:
    from micropython import const
except ImportError:

    def const(x):
        return x


MICROPYTHON = sys.implementation.name == "micropython"

# Seconds between the Unix epoch and the epoch of time.time() on this port (2000-01-01 on some).
EPOCH_OFFSET_S = 0 if time.gmtime(0)[0] == 1970 else 946684800

if hasattr(time, "ticks_us"):
    ticks_us = time.ticks_us
    ticks_ms = time.ticks_ms
    ticks_diff = time.ticks_diff
    ticks_add = time.ticks_add
    sleep_ms = time.sleep_ms

    def sleep_us(us):
        if us > 0:
            time.sleep_us(us)

else:

    def ticks_us():
        return time.monotonic_ns() // 1000

    def ticks_ms():
        return time.monotonic_ns() // 1000000

    def ticks_diff(a, b):
        return a - b

    def ticks_add(a, b):
        return a + b

    def sleep_ms(ms):
        if ms > 0:
            time.sleep(ms / 1000)

    def sleep_us(us):
        if us > 0:
            time.sleep(us / 1000000)


if hasattr(time, "time_ns"):

    def utc_us():
        """Wall clock in microseconds since the Unix epoch (the port's RTC on a board)."""
        return time.time_ns() // 1000 + EPOCH_OFFSET_S * 1000000

else:  # pragma: no cover - very old ports

    def utc_us():
        return int(time.time()) * 1000000 + EPOCH_OFFSET_S * 1000000


class Mono:
    """A monotonic microsecond counter that never wraps.

    ticks_us() wraps (every 2**30 us on most boards, about 18 minutes), so deadlines far apart
    cannot be compared directly. This accumulates ticks_diff() steps; call now() at least once
    per half wrap period, which the main loop does many times a second.
    """

    def __init__(self):
        self._last = ticks_us()
        self._now = 0

    def now(self):
        t = ticks_us()
        self._now += ticks_diff(t, self._last)
        self._last = t
        return self._now


# ---- files -------------------------------------------------------------------------------------

import os  # noqa: E402


def join(*parts):
    out = ""
    for p in parts:
        if not p:
            continue
        if out and not out.endswith("/"):
            out += "/"
        out += p
    return out


def exists(path):
    try:
        os.stat(path)
        return True
    except OSError:
        return False


def file_size(path):
    try:
        return os.stat(path)[6]
    except OSError:
        return -1


def makedirs(path):
    """mkdir -p, for ports whose os has no makedirs."""
    if not path or exists(path):
        return
    parent = path.rstrip("/").rsplit("/", 1)[0] if "/" in path.rstrip("/") else ""
    if parent and parent != path:
        makedirs(parent)
    try:
        os.mkdir(path)
    except OSError:
        if not exists(path):
            raise


def remove(path):
    try:
        os.remove(path)
        return True
    except OSError:
        return False


def listdir(path):
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def replace(src, dst):
    """Rename over an existing file; FAT cannot, so fall back to remove + rename."""
    try:
        os.rename(src, dst)
    except OSError:
        remove(dst)
        os.rename(src, dst)


def write_atomic(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    replace(tmp, path)


def read_file(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def default_flash_dir():
    """Where state and spilled batches live; None on a host (the host runner picks a directory)."""
    return "/wb" if MICROPYTHON else None


def free_mem():
    try:
        import gc

        return gc.mem_free()
    except (ImportError, AttributeError):
        return None


def collect():
    try:
        import gc

        gc.collect()
    except ImportError:  # pragma: no cover
        pass


def release(name):
    """Forget a module used only now and then (config checks at boot, discovery after a connect), so
    its code, which MicroPython keeps in RAM unless the package is frozen, can be collected; the next
    import loads it again. Only on MicroPython: a host has the RAM, and tests hold module references."""
    if not MICROPYTHON:
        return
    sys.modules.pop(name, None)
    parent, _, child = name.rpartition(".")
    pkg = sys.modules.get(parent)
    if pkg is not None and child in pkg.__dict__:
        delattr(pkg, child)


def isfinite(x):
    # math.isfinite is missing on some small ports; NaN != NaN and inf - inf is NaN.
    return x == x and (x - x) == 0
