"""Fixed-rate sampling with deadline scheduling, per-channel aggregation and honest flags.

Each channel reads at hz x agg raw reads per second. Slot k is due at start + k x period, computed
from k (never "now + period"), so late reads do not push later slots back and no drift accumulates.
A slot that cannot be served before the next one is due is skipped and reported as missed.
Every output sample gets the next device sequence number, whether or not it holds a value.
"""

from wattbench_fw import port
from wattbench_fw.contract import (
    BOUNDS,
    FLAG_CLOCK_STEP,
    FLAG_MISSED,
    FLAG_OVER_RANGE,
    FLAG_PARTIAL,
    FLAG_REVERSE,
    FLAG_SENSOR_ERROR,
    FLAGS_WITHOUT_VALUES,
    QUANTITIES,
)
from wattbench_fw.errors import MeterError

# Decimal places kept per key: below every supported meter's resolution, and bytes matter.
DECIMALS = {"W": 3, "V": 3, "A": 5, "PF": 4, "Hz": 3, "Wh": 4, "T": 3, "RH": 3, "u": 5, "Wmin": 3, "Wmax": 3}
MEAN_KEYS = ("W", "V", "A", "PF", "Hz", "T", "RH")
# A stall longer than this many slots is not back-filled with missed samples one by one.
MAX_CATCHUP_SLOTS = 1000
MAX_ROWS_PER_POLL = 200
# A timestamp inversion smaller than this is read jitter, not a clock step (see Channel.stamp).
MAX_NUDGE_MS = 100


def rate_millihz(hz):
    """Rates as integer millihertz so deadlines are exact integer arithmetic (floats on small boards
    are single precision and would drift)."""
    mhz = int(round(hz * 1000))
    if mhz <= 0:
        raise ValueError("rate must be > 0")
    return mhz


def clean(vals, flags, gain=1.0, offset=0.0, energy=None):
    """Calibrate, bound-check and round one reading into contract form. Returns (vals, flags).

    Nothing is invented: a value that is not finite or outside the contract's bounds is withheld
    and flagged; a negative power is withheld and flagged as reversed flow.
    """
    if flags & FLAGS_WITHOUT_VALUES:
        return {}, flags
    out = {}
    for key in vals:
        v = vals[key]
        if key == "n":
            out["n"] = v
            continue
        if not port.isfinite(v):
            flags |= FLAG_OVER_RANGE
            continue
        if key in ("W", "Wmin", "Wmax"):
            v = v * gain + offset
        elif key == "Wh":
            v = v * gain
            if energy is not None:
                v = energy.update(v)
        out[key] = v
    if out.get("W", 0) < 0 or out.get("Wmin", 0) < 0:
        flags |= FLAG_REVERSE
        for key in ("W", "A", "Wmin", "Wmax", "u"):
            out.pop(key, None)
    for key in list(out):
        if key == "n":
            continue
        v = round(out[key], DECIMALS.get(key, 4))
        lo, hi = BOUNDS[key]
        if v < lo or v > hi:
            if key in QUANTITIES:
                flags |= FLAG_OVER_RANGE
            del out[key]
            continue
        out[key] = v
    if "W" not in out:
        for key in ("u", "Wmin", "Wmax", "n"):
            out.pop(key, None)
    has_quantity = False
    for q in QUANTITIES:
        if q in out:
            has_quantity = True
            break
    if not has_quantity:
        out = {}
        if not flags:
            flags = FLAG_SENSOR_ERROR
    return out, flags


class Aggregate:
    """Mean, min and max of W (and means of the other quantities) over one window of raw reads."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.slots = 0
        self.first_t = None
        self.last_t = None
        self.sums = {}
        self.counts = {}
        self.wmin = None
        self.wmax = None
        self.wh = None
        self.u = None
        self.flags = 0
        self.failed = 0

    def add(self, mono, vals, flags):
        self.slots += 1
        if self.first_t is None:
            self.first_t = mono
        self.last_t = mono
        if flags & FLAGS_WITHOUT_VALUES or "W" not in vals:
            self.failed += 1
        self.flags |= flags
        if flags & FLAGS_WITHOUT_VALUES:
            return
        for key in vals:
            v = vals[key]
            if key in MEAN_KEYS:
                if not port.isfinite(v):
                    self.flags |= FLAG_OVER_RANGE
                    continue
                self.sums[key] = self.sums.get(key, 0.0) + v
                self.counts[key] = self.counts.get(key, 0) + 1
                if key == "W":
                    self.wmin = v if self.wmin is None or v < self.wmin else self.wmin
                    self.wmax = v if self.wmax is None or v > self.wmax else self.wmax
            elif key == "Wh":
                self.wh = v
            elif key == "u":
                self.u = v if self.u is None or v > self.u else self.u

    def result(self):
        """(vals, flags, mid-window mono) for the finished window."""
        vals = {}
        for key in self.sums:
            vals[key] = self.sums[key] / self.counts[key]
        n = self.counts.get("W", 0)
        flags = self.flags
        if n:
            vals["n"] = n
            vals["Wmin"] = self.wmin
            vals["Wmax"] = self.wmax
            if self.u is not None:
                vals["u"] = self.u
            # Successful reads exist, so failures only make the window partial.
            flags &= ~FLAGS_WITHOUT_VALUES
            if self.failed:
                flags |= FLAG_PARTIAL
        elif vals:
            flags &= ~FLAGS_WITHOUT_VALUES
        elif not flags & FLAGS_WITHOUT_VALUES:
            flags |= FLAG_MISSED
        if self.wh is not None and (n or vals):
            vals["Wh"] = self.wh
        mid = (self.first_t + self.last_t) // 2
        return vals, flags, mid


class Channel:
    def __init__(self, name, driver, hz, agg=1, gain=1.0, offset=0.0, energy=None, max_late_us=None):
        self.name = name
        self.driver = driver
        self.hz = hz
        self.agg = max(1, int(agg))
        self.raw_mhz = rate_millihz(hz) * self.agg
        # A slot later than this is skipped as missed; by default, once the next slot is due. A host
        # whose scheduler hiccups can allow more and read late (each read keeps its real timestamp).
        self.max_late_us = max_late_us
        self.gain = gain
        self.offset = offset
        self.energy = energy
        self.start = 0
        self.k = 0
        self.next_due = 0
        self.window = Aggregate() if self.agg > 1 else None
        self.ready = False  # setup() succeeded
        self.reads = 0
        self.failed_reads = 0
        self.missed_slots = 0
        self.lost_slots = 0
        self.last_error = None
        self.last_t = None  # UTC ms of the newest sample issued, for strictly increasing stamps
        self.overlap = False  # after a backward clock step, until the clock passes last_t again

    def stamp(self, t, flags):
        """Keep this channel's timestamps strictly increasing: (dev, ch, t) is a sample's identity in
        storage, so two samples in one millisecond would overwrite each other.

        A late read is stamped at its midpoint, which can pass the next slot's deadline by the read's
        duration; such a small inversion is nudged to 1 ms after the previous sample. A backward clock
        step is larger: those samples keep their true time but are flagged clock_step until the clock
        passes the last time issued before the step, so consumers can tell them apart."""
        last = self.last_t
        if last is not None and t <= last:
            if not self.overlap and last - t < MAX_NUDGE_MS:
                self.last_t = last + 1
                return last + 1, flags
            self.overlap = True
            return t, flags | FLAG_CLOCK_STEP
        self.overlap = False
        self.last_t = t
        return t, flags

    def due(self, k):
        return self.start + k * 1000000000 // self.raw_mhz

    def begin(self, start):
        self.start = start
        self.k = 0
        self.next_due = start

    def setup(self):
        try:
            self.driver.setup()
            self.ready = True
        except Exception as exc:  # noqa: BLE001 - any bus fault; retried on the next read
            self.ready = False
            self.last_error = repr(exc)
        return self.ready

    def read(self):
        """One raw read: (vals, flags). Never raises."""
        self.reads += 1
        if not self.ready and not self.setup():
            self.failed_reads += 1
            return {}, FLAG_SENSOR_ERROR
        try:
            vals, flags = self.driver.read()
        except MeterError as exc:
            self.failed_reads += 1
            self.last_error = repr(exc)
            return {}, exc.flag
        except OSError as exc:
            # A bus error (I2C NACK, UART fault): no reading for this slot.
            self.failed_reads += 1
            self.last_error = repr(exc)
            return {}, FLAG_MISSED
        except Exception as exc:  # noqa: BLE001 - a driver bug must not stop the appliance
            self.failed_reads += 1
            self.last_error = repr(exc)
            return {}, FLAG_SENSOR_ERROR
        return vals, flags


class Sampler:
    """Serves all channels' slots in deadline order and turns readings into contract rows."""

    def __init__(self, channels, seq, clock, now):
        self.channels = channels
        self.seq = seq
        self.clock = clock
        self.now = now  # callable -> monotonic microseconds
        self.rows_out = 0
        self.pending_time = 0  # rows held because the clock has no time yet

    def start(self, at=None):
        t = self.now() if at is None else at
        for ch in self.channels:
            ch.setup()
            ch.begin(t)

    def next_due(self):
        return min(ch.next_due for ch in self.channels) if self.channels else None

    def _emit(self, ch, vals, flags, mono, rows):
        vals, flags = clean(vals, flags, ch.gain, ch.offset, ch.energy)
        flags |= self.clock.sample_flags()
        row = vals
        row["s"] = self.seq.take()
        row["c"] = ch.name
        u = self.clock.utc_us(mono)
        if u is None:
            row["t"] = None
            row["_m"] = mono
            self.pending_time += 1
        else:
            t, flags = ch.stamp(u // 1000, flags)
            row["t"] = t
        if flags:
            row["f"] = flags
        rows.append(row)
        self.rows_out += 1

    def _slot_result(self, ch, vals, flags, mono, rows):
        if ch.window is None:
            self._emit(ch, vals, flags, mono, rows)
            return
        ch.window.add(mono, vals, flags)
        if ch.window.slots >= ch.agg:
            v, f, mid = ch.window.result()
            ch.window.reset()
            self._emit(ch, v, f, mid, rows)

    def poll(self, limit=MAX_ROWS_PER_POLL):
        """Serve every slot that is due. Returns the rows produced (possibly none)."""
        rows = []
        if not self.channels:
            return rows
        now = self.now()
        while len(rows) < limit:
            ch = self.channels[0]
            for c in self.channels:
                if c.next_due < ch.next_due:
                    ch = c
            if ch.next_due > now:
                break
            late = ch.due(ch.k + 1) - ch.next_due if ch.max_late_us is None else ch.max_late_us
            if now - ch.next_due >= max(1, late):
                # This slot's window has passed: it is missed, not read late.
                behind = 1
                while behind <= MAX_CATCHUP_SLOTS and now - ch.due(ch.k + behind) >= late:
                    behind += 1
                if behind > MAX_CATCHUP_SLOTS:
                    # A long stall (suspended host, blocked bus): restart the schedule at now.
                    skipped = (now - ch.next_due) * ch.raw_mhz // 1000000000
                    ch.lost_slots += skipped
                    ch.k += skipped
                    ch.next_due = ch.due(ch.k)
                    continue
                ch.missed_slots += 1
                self._slot_result(ch, {}, FLAG_MISSED, ch.next_due, rows)
            else:
                m0 = self.now()
                vals, flags = ch.read()
                m1 = self.now()
                self._slot_result(ch, vals, flags, (m0 + m1) // 2, rows)
                now = m1
            ch.k += 1
            ch.next_due = ch.due(ch.k)
        return rows

    def resolve_pending(self, rows):
        """Give held rows their UTC time once the clock knows it. Returns True if all resolved."""
        done = True
        for row in rows:
            if row.get("t") is None:
                u = self.clock.utc_us(row["_m"])
                if u is None:
                    done = False
                    continue
                row["t"] = u // 1000
                del row["_m"]
                self.pending_time -= 1
        return done
