"""RAPL: a CPU's own energy counters, read from Linux powercap (/sys/class/powercap/intel-rapl:*).

The counter is energy in microjoules; power is its increase over the time between two reads, so a
sample is the mean power since the previous one. The counter wraps at max_energy_range_uj, which is
taken into account; a single increase larger than max_w could deliver in the interval is refused as a
reading (a reset or a garbled value), never turned into a number.

RAPL measures a part of the machine (a CPU package, its cores, or DRAM), not what the server draws at
the wall: its channels take role `component`, which no sweep sums unless named. Host mode only: there
is no sysfs on a board. Needs no bus (pass None).
"""

import time

from wattbench_fw.errors import SensorError
from wattbench_fw.meters import number, show

# The shortest interval a power is computed over: the counter moves about once a millisecond.
MIN_INTERVAL_S = 0.01
# A counter read whose moment is known to within 2 ms. The value is taken in the read system call, but
# the clock can only be read before or after it, and on a host the thread may wait there (for the
# interpreter lock, for a CPU). A looser bracket is read again, up to READ_TRIES times.
READ_BRACKET_NS = 2000000
READ_TRIES = 3
_DOMAIN_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789:-"


class RAPL:
    KIND = "rapl"
    QUANTITIES = ("W",)
    HOST_ONLY = True

    def __init__(self, bus=None, domain="intel-rapl:0", root="/sys/class/powercap", max_w=2000.0, acc=None):
        # The domain is a directory name under root: nothing that could walk out of it.
        if not isinstance(domain, str) or not domain or any(c not in _DOMAIN_CHARS for c in domain):
            raise ValueError("domain must be a powercap zone such as intel-rapl:0, got %s" % show(domain))
        if not isinstance(root, str) or not root:
            raise ValueError("root must be a directory path, got %s" % show(root))
        self.domain = domain
        self.root = root
        self.max_w = float(number("max_w", max_w, 0, 1e6, lo_open=True))
        # RAPL's accuracy is not published as a class: model-based on older CPUs, measured on newer
        # ones. Unknown unless the user states one (and a report then claims no level).
        self.acc = None if acc is None else number("acc", acc, 0, 1)
        self.name = None
        self.range_uj = None
        self._prev = None  # (energy_uj, monotonic ns) of the previous read

    def _path(self, leaf):
        return "%s/%s/%s" % (self.root, self.domain, leaf)

    def _read_int(self, leaf):
        path = self._path(leaf)
        try:
            with open(path) as f:
                text = f.read(64)
        except OSError as exc:
            # Since Linux 5.10 energy_uj is readable by root only.
            raise SensorError("%s: %s" % (path, exc.strerror or exc))
        try:
            value = int(text.strip())
        except ValueError:
            raise SensorError("%s: not a counter: %r" % (path, text[:20]))
        if value < 0:
            raise SensorError("%s: negative counter %d" % (path, value))
        return value

    def _energy_now(self):
        """(energy_uj, monotonic ns): the counter and the middle of the tightest clock bracket around its
        read. Timed only after the read, an interval that waited after taking the value looked longer
        than it was, and its power too low (and the next one's too high)."""
        best = None
        for _ in range(READ_TRIES):
            before = time.monotonic_ns()
            e = self._read_int("energy_uj")
            after = time.monotonic_ns()
            if best is None or after - before < best[2]:
                best = (e, (before + after) // 2, after - before)
            if after - before <= READ_BRACKET_NS:
                break
        return best[0], best[1]

    def setup(self):
        try:
            with open(self._path("name")) as f:
                self.name = f.read(32).strip() or None
        except OSError:
            self.name = None
        rng = self._read_int("max_energy_range_uj")
        if rng <= 0:
            raise SensorError("%s: range %d" % (self._path("max_energy_range_uj"), rng))
        self.range_uj = rng
        self._prev = self._energy_now()

    def info(self):
        out = {"model": "RAPL " + (self.name or self.domain)}
        if self.acc is not None:
            out["acc"] = self.acc
        return out

    def read(self):
        if self._prev is None or self.range_uj is None:
            self.setup()
            raise SensorError("no previous reading of %s yet" % self.domain)
        e, t = self._energy_now()
        e0, t0 = self._prev
        dt = (t - t0) / 1e9
        if dt < MIN_INTERVAL_S:
            # The first slot comes right after setup's baseline: too short an interval for the
            # counter, which moves about once a millisecond. Keep the baseline for the next slot.
            raise SensorError("%.1f ms since the previous reading: too short to measure" % (dt * 1e3))
        self._prev = (e, t)
        de = e - e0
        if de < 0:
            # The counter runs from 0 to max_energy_range_uj inclusive, then starts again at 0.
            de += self.range_uj + 1
        w = de / 1e6 / dt
        if w > self.max_w:
            raise SensorError(
                "%.0f J in %.3f s is above max_w %g W: counter reset or garbled" % (de / 1e6, dt, self.max_w)
            )
        vals = {"W": w}
        if self.acc is not None:
            vals["u"] = self.acc
        return vals, 0
