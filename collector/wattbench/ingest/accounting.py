"""Per-device accounting of what arrived: sequence gaps, duplicates, late arrivals, reboots, clock
offset and achieved rate. Pure: the caller passes receive times in.

Sequence numbers are per device, strictly increasing across channels and reboots (samples.schema.json).
A device therefore has one sequence space; what is missing is a set of holes below the highest number
seen. A sample that lands in a hole is late, not duplicate, and is kept; a sample at or below the
highest number and in no hole has been seen before and is dropped. Dropping is only ever done on
that knowledge: anything the tracker cannot vouch for is kept, because the store is idempotent anyway.

Numbers a device never handed out are no loss: at a clean restart the firmware jumps to its next
reserved block, and the numbers skipped are taken out of the holes (see DeviceAccount). Rates come
from the device's own sample times and sequence numbers, never from when batches arrived.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from dataclasses import dataclass
from operator import ge, gt
from typing import Any, NamedTuple

from wattbench_schema import FLAG_CLOCK_STEP

MAX_HOLES = 10_000  # per device in memory; a status file keeps the newest 1 000
OFFSET_WINDOW = 32
RATE_WINDOW_MS = 10_000
ENERGY_SLACK_WH = 1e-9


class SeqTracker:
    """The highest sequence number seen and the holes (inclusive ranges) below it.

    Each hole remembers the gap it is part of (the first number of the jump that opened it), because
    a sample that lands in the middle of a gap splits it: the gap is filled only once no piece of it
    is left.
    """

    __slots__ = ("ends", "floor", "high", "origins", "starts")

    def __init__(self) -> None:
        self.high = -1
        self.floor = -1  # numbers below it are no longer tracked: never called duplicate
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.origins: list[int] = []

    def hole_count(self) -> int:
        return len(self.starts)

    def gap_count(self) -> int:
        """Gaps with a number still missing (a split gap counts once)."""
        return len(set(self.origins))

    def add_hole(self, start: int, end: int) -> None:
        self.starts.append(start)
        self.ends.append(end)
        self.origins.append(start)
        if len(self.starts) > MAX_HOLES:
            # Forget the oldest holes; a late sample from them is then kept without question.
            drop = len(self.starts) - MAX_HOLES
            self.floor = self.ends[drop - 1] + 1
            del self.starts[:drop]
            del self.ends[:drop]
            del self.origins[:drop]

    def _closed(self, origin: int, i: int) -> bool:
        """True when the gap `origin` has no piece left next to index i (pieces of one gap are
        neighbours) and none of it was forgotten (then it is never called filled)."""
        for j in (i - 1, i):
            if 0 <= j < len(self.origins) and self.origins[j] == origin:
                return False
        return origin >= self.floor

    def fill(self, s: int) -> int:
        """Remove s from the holes: 0 when s was not missing (a duplicate), 1 when it filled part of a
        gap, 2 when it was the gap's last missing number."""
        i = bisect_right(self.starts, s) - 1
        if i < 0 or s > self.ends[i]:
            return 0
        a, b, o = self.starts[i], self.ends[i], self.origins[i]
        if a == b:
            del self.starts[i]
            del self.ends[i]
            del self.origins[i]
            return 2 if self._closed(o, i) else 1
        if s == a:
            self.starts[i] = a + 1
        elif s == b:
            self.ends[i] = b - 1
        else:
            self.ends[i] = s - 1
            self.starts.insert(i + 1, s + 1)
            self.ends.insert(i + 1, b)
            self.origins.insert(i + 1, o)
        return 1

    def remove_range(self, lo: int, hi: int) -> tuple[int, list[int]]:
        """Take [lo, hi] out of the holes (numbers known never to have been handed out).

        Returns how many missing numbers that removed and the gaps left with no piece at all."""
        if hi < lo:
            return 0, []
        removed = 0
        touched: set[int] = set()
        starts: list[int] = []
        ends: list[int] = []
        origins: list[int] = []
        for a, b, o in zip(self.starts, self.ends, self.origins, strict=True):
            if b < lo or a > hi:
                starts.append(a)
                ends.append(b)
                origins.append(o)
                continue
            touched.add(o)
            removed += min(b, hi) - max(a, lo) + 1
            if a < lo:
                starts.append(a)
                ends.append(lo - 1)
                origins.append(o)
            if b > hi:
                starts.append(hi + 1)
                ends.append(b)
                origins.append(o)
        self.starts, self.ends, self.origins = starts, ends, origins
        left = set(origins)
        return removed, sorted(o for o in touched if o not in left)

    def state(self, max_holes: int = 1000) -> dict[str, Any]:
        """The newest max_holes holes; older ones are forgotten (the floor moves past them), which
        only means a late sample from them would be kept rather than judged."""
        drop = max(0, len(self.starts) - max_holes)
        floor = self.ends[drop - 1] + 1 if drop else self.floor
        return {
            "high": self.high,
            "floor": floor,
            "holes": [
                [a, b, o]
                for a, b, o in zip(self.starts[drop:], self.ends[drop:], self.origins[drop:], strict=True)
            ],
        }

    @classmethod
    def from_state(cls, doc: dict[str, Any]) -> SeqTracker:
        out = cls()
        out.high = int(doc.get("high", -1))
        out.floor = int(doc.get("floor", -1))
        for hole in doc.get("holes", [])[-MAX_HOLES:]:
            # [start, end] from older state files: each hole is then its own gap
            out.starts.append(int(hole[0]))
            out.ends.append(int(hole[1]))
            out.origins.append(int(hole[2]) if len(hole) > 2 else int(hole[0]))
        return out


@dataclass(slots=True)
class EnergyStep:
    """An energy counter that went down between two samples of one channel, in sequence order."""

    dev: str
    ch: str
    seq: int
    before: float
    after: float

    def detail(self) -> str:
        return (
            f"energy counter of channel {self.ch!r} went back from {self.before:g} Wh to {self.after:g} Wh "
            f"at s={self.seq}"
        )


class PlainBatch(NamedTuple):
    """A sample batch as accounting needs it when its rows are plain (see plain_batch)."""

    boot: int
    clk: dict[str, Any]
    first_s: int  # the rows' numbers are first_s, first_s + 1, ... in row order
    count: int
    newest_t: int  # the last row's time
    # Per channel: name, first and last time, first and last energy (None: no row has one), last number
    chans: tuple[tuple[str, int, int, float | None, int, float | None], ...]


def plain_batch(
    boot: int,
    clk: dict[str, Any],
    s: list[int],
    c: list[str],
    t: list[int],
    wh: list[Any],
    absent: object = None,
) -> PlainBatch | None:
    """The digest of a sample batch, its rows given as columns (number, channel, time, energy or
    `absent`), when they are plain: numbered one after another, the channels in the same turn
    throughout, each channel's time rising, and its energy counter given in every row or in none and
    never going back. None otherwise. Made in a checking process (ingest.parallel), so that the
    collector can account for the batch without reading its rows again (DeviceAccount.admit_plain).
    Flags are not looked at: the caller gives only rows without any."""
    n = len(s)
    if not n or s != list(range(s[0], s[0] + n)):
        return None
    k = len(set(c))
    if len(set(c[:k])) != k or c[k:] != c[: n - k]:
        return None
    chans = []
    for j in range(k):
        times = t[j::k]
        if not all(map(gt, times[1:], times)):
            return None
        energy = wh[j::k]
        try:
            # Rising outright, else within the slack that admit() allows. Every value is compared (by
            # the first when it passes, else by the second's list), so a missing one always raises.
            rising = all(map(ge, energy[1:], energy)) or all(
                map(ge, energy[1:], [w - ENERGY_SLACK_WH for w in energy])
            )
        except TypeError:  # a row without energy: fine only if no row of the channel has it
            if energy.count(absent) != len(energy):
                return None
            rising = True
        if not rising:
            return None
        last = j + (n - 1 - j) // k * k
        first_wh = None if wh[j] is absent else wh[j]
        last_wh = None if wh[last] is absent else wh[last]
        chans.append((c[j], t[j], t[last], first_wh, s[last], last_wh))
    return PlainBatch(boot, clk, s[0], n, t[-1], tuple(chans))


COUNTERS = (
    "received",
    "stored",
    "duplicates",
    "gaps",
    "gaps_filled",
    "missing",
    "unassigned",
    "out_of_order",
    "rejects",
)
BOOTS_KEPT = 8  # boots whose announced end and first number are remembered
SKIPPED_KEPT = 256  # ranges judged never handed out, remembered in case a number from one turns up


class DeviceAccount:
    """Everything the collector knows about one appliance's stream.

    A restart is not a loss. The firmware reserves sequence numbers in blocks and a new boot starts at
    the next reservation, so the numbers between where a boot stopped and where the next one starts
    were never handed out. A clean stop says where it stopped: its `shutdown` status carries `seq`, the
    next number it would have used. The numbers from there up to the first one seen from a later boot
    are `unassigned`, neither missing nor a gap. A power cut announces nothing, so its jump stays
    missing: an upper bound, since what was only in RAM is lost but the rest of the block never existed.
    """

    def __init__(self, dev: str, track_gaps: bool = True) -> None:
        # The state as last saved; dropped by every change (admit, note_status, note_reject), so an
        # unchanged device costs nothing at the next commit's save.
        self._saved: dict[str, Any] | None = None
        self.dev = dev
        self.track_gaps = track_gaps  # off when a shared subscription hands this process only part of it
        self.received = 0
        self.stored = 0
        self.duplicates = 0
        self.gaps = 0
        self.gaps_filled = 0  # gaps whose every missing number arrived later
        self.missing = 0
        self.unassigned = 0  # numbers skipped at clean restarts: never handed out, so not missing
        self.out_of_order = 0
        self.rejects = 0
        self.batches = 0
        self.reboots = 0
        self.seq_resets = 0
        self.energy_steps = 0
        self.t_repeats = 0  # samples not later than the channel's previous one: same-ms keys overwrite
        self.boot: int | None = None
        self.clk_sync: str | None = None
        self.clk_age: float | None = None
        self.clk_err: float | None = None
        self._dev_steps: int | None = None  # the device's own count of clock steps since boot
        self.steps_seen = 0  # clock steps this collector has noticed in the stream
        self.first_seen_ms: int | None = None
        self.last_seen_ms: int | None = None
        self.last_seq: int | None = None
        self.seq = SeqTracker()
        self.space_boot: int | None = None  # the boot that started the current sequence space
        self.ends: dict[int, int] = {}  # boot -> next number it would have used, from its shutdown status
        self.firsts: dict[int, int] = {}  # boot -> lowest number seen from it
        self.skipped: list[list[int]] = []  # [lo, hi] ranges judged never handed out
        self._lags: deque[int] = deque(maxlen=OFFSET_WINDOW)
        self._rate: deque[tuple[int, int]] = deque()  # (device time, sequence number), in sequence order
        self._chans: dict[str, list[Any]] = {}  # channel -> [last seq, its t, last energy]

    # ------------------------------------------------------------------ ingest

    def note_status(self, doc: dict[str, Any]) -> None:
        """A validated status message: a clean stop's `seq` bounds what its boot handed out."""
        self._saved = None
        if doc.get("reason") != "shutdown" or not isinstance(doc.get("boot"), int):
            return
        if not isinstance(doc.get("seq"), int):
            return
        boot = int(doc["boot"])
        if self.space_boot is not None and boot < self.space_boot:
            return  # a boot of an older sequence space
        self.ends[boot] = int(doc["seq"])
        _trim(self.ends)
        self._apply_ends()

    def _apply_ends(self) -> None:
        """Take the numbers between each announced end and the next boot's first one out of the holes."""
        for boot, end in self.ends.items():
            later = [s for b, s in self.firsts.items() if b > boot]
            if not later:
                continue
            first = min(later)
            removed, gone = self.seq.remove_range(end, first - 1)
            if not removed:
                continue
            self.unassigned += removed
            self.skipped.append([end, first - 1])
            del self.skipped[:-SKIPPED_KEPT]
            if self.track_gaps:
                self.missing -= removed
                for origin in gone:
                    if origin >= end:
                        self.gaps -= 1  # the whole jump was never handed out: it was no gap
                    else:
                        self.gaps_filled += 1  # what was really missing of it had arrived

    def _turned_up(self, s: int) -> bool:
        """True when s lies in a range judged never handed out: it was, after all. Kept and counted
        as neither unassigned nor duplicate."""
        for i, (lo, hi) in enumerate(self.skipped):
            if lo <= s <= hi:
                pieces = [p for p in ([lo, s - 1], [s + 1, hi]) if p[0] <= p[1]]
                self.skipped[i : i + 1] = pieces
                self.unassigned -= 1
                return True
        return False

    def _begin(self, boot: int, clk: dict[str, Any], count: int, recv_ms: int) -> bool:
        """The batch-level part of admitting a batch of count rows; True when the device's own count
        of clock steps says its clock jumped since its last batch."""
        self._saved = None
        self.batches += 1
        self.received += count
        if self.first_seen_ms is None:
            self.first_seen_ms = recv_ms
        self.last_seen_ms = recv_ms
        self.clk_sync = clk["sync"]
        self.clk_age = clk.get("age")
        self.clk_err = clk.get("err")
        steps = int(clk.get("steps", 0))
        # A step count that went up within one boot means the device clock jumped since its last batch.
        stepped = self._dev_steps is not None and steps > self._dev_steps and boot == self.boot
        if self.boot is None or boot >= self.boot:
            self._dev_steps = steps
        return stepped

    def _end(
        self,
        boot: int,
        first: int | None,
        stepped: bool,
        old_boot: bool,
        kept: int,
        newest: int,
        top: int,
        energy_steps: int,
        recv_ms: int,
    ) -> None:
        """The batch-level part after the rows: first, the lowest number kept (None: none that
        counts); newest and top, the time and number of the last row kept (unused when none was)."""
        seq = self.seq
        self.last_seq = seq.high
        self.energy_steps += energy_steps
        self.stored += kept
        if first is not None and first < self.firsts.get(boot, first + 1):
            self.firsts[boot] = first
            _trim(self.firsts)
            if self.ends:
                self._apply_ends()
        if stepped and not old_boot:
            # Delays measured on the old clock say nothing about the new one; keeping them would hold
            # the estimate at the old offset for a whole window after a step back.
            self.steps_seen += 1
            self._lags.clear()
            self._rate.clear()
        if kept:
            # The newest reading is the last one taken, not the latest stamp: after a step back the
            # stamps of a batch's later rows are the smaller ones.
            self._lags.append(recv_ms - newest)
            if not old_boot and top == seq.high:
                # Only the batch that moved the sequence on: a late batch's numbers and stamps lie
                # inside the span already measured and say nothing new about the rate.
                self._rate.append((newest, top))
                while len(self._rate) > 2 and self._rate[-1][0] - self._rate[1][0] >= RATE_WINDOW_MS:
                    self._rate.popleft()

    def admit_plain(self, rows: PlainBatch, recv_ms: int) -> bool:
        """Account for a validated sample batch from its digest (plain_batch) instead of its rows, as
        admit() would and with the same result, keeping every row; False, with nothing changed, when
        the batch is not simply the next one of the current boot (or an energy counter went back at
        its start), and admit() must see the rows."""
        seq = self.seq
        boot = rows.boot
        if boot != self.boot or seq.high < 0 or rows.first_s != seq.high + 1:
            return False
        chans = self._chans
        repeats = 0
        for ch, t0, _t1, wh0, _s1, _wh1 in rows.chans:
            last = chans.get(ch)
            if last is not None:
                if last[0] >= rows.first_s:  # a late row of an older sequence space came last
                    return False
                if wh0 is not None and last[2] is not None and wh0 < last[2] - ENERGY_SLACK_WH:
                    return False
                if t0 <= last[1]:
                    repeats += 1
        stepped = self._begin(boot, rows.clk, rows.count, recv_ms)
        self.t_repeats += repeats
        for ch, _t0, t1, _wh0, s1, wh1 in rows.chans:
            last = chans.get(ch)
            if last is None:
                chans[ch] = [s1, t1, wh1, 0]
            else:
                last[0] = s1
                last[1] = t1
                if wh1 is not None:
                    last[2] = wh1
                last[3] = 0
        top = rows.first_s + rows.count - 1
        seq.high = top
        self._end(boot, rows.first_s, stepped, False, rows.count, rows.newest_t, top, 0, recv_ms)
        return True

    def admit(self, doc: dict[str, Any], recv_ms: int) -> tuple[list[dict[str, Any]], list[EnergyStep]]:
        """Account for a validated sample batch; return the rows to store and any energy steps."""
        rows: list[dict[str, Any]] = doc["samples"]
        boot = int(doc["boot"])
        stepped = self._begin(boot, doc["clk"], len(rows), recv_ms)

        seq = self.seq
        old_boot = False  # from a boot before the newest: fills holes, but moves nothing on
        other_space = False  # from before the sequence was restarted: kept, decides nothing
        if self.boot is None:
            self.boot = boot
        elif boot > self.boot:
            self.reboots += 1
            self.boot = boot
            self._rate.clear()  # the numbers jump at a reboot; rate is measured within one boot
            if int(rows[0]["s"]) <= seq.high:
                # The device did not keep its sequence over the reboot: start a new space rather
                # than call everything from now on a duplicate.
                self.seq_resets += 1
                seq = self.seq = SeqTracker()
                self._chans.clear()
                self.space_boot = boot
                self.ends.clear()
                self.firsts.clear()
                self.skipped.clear()
        elif boot < self.boot:
            old_boot = True
            other_space = self.space_boot is not None and boot < self.space_boot

        keep: list[dict[str, Any]] = []
        steps: list[EnergyStep] = []
        chans = self._chans
        high = seq.high
        first = None
        for row in rows:
            s = int(row["s"])
            if other_space:
                self.out_of_order += 1
            elif s > high and not old_boot:
                if high < 0:
                    seq.floor = s  # what came before the first sample seen is unknown, not duplicate
                elif s > high + 1 and self.track_gaps:
                    self.gaps += 1
                    self.missing += s - high - 1
                if high >= 0 and s > high + 1:
                    seq.add_hole(high + 1, s - 1)
                high = seq.high = s
            elif s > high or s < seq.floor:
                self.out_of_order += 1
            elif filled := seq.fill(s):
                self.out_of_order += 1
                if self.track_gaps:
                    self.missing -= 1
                    if filled == 2:
                        self.gaps_filled += 1
            elif (self.skipped and self._turned_up(s)) or old_boot:
                # An older boot's sample that fills no hole is kept unjudged: nothing says for sure
                # that its boot numbered in the same space.
                self.out_of_order += 1
            else:
                self.duplicates += 1
                continue
            if not other_space and (first is None or s < first):
                first = s
            keep.append(row)
            # Per channel, in sequence order: time must move on (the store keys a sample by device,
            # channel and ms, so a repeated ms overwrites) and the energy counter must not go back.
            ch = row["c"]
            last = chans.get(ch)
            wh = row.get("Wh")
            if last is None:
                chans[ch] = [s, row["t"], wh, row.get("f", 0) & FLAG_CLOCK_STEP]
            elif s > last[0]:
                t = row["t"]
                step_flag = row.get("f", 0) & FLAG_CLOCK_STEP
                if step_flag and not last[3]:
                    stepped = True  # a device that does not count its steps still flags them
                last[3] = step_flag
                if t <= last[1]:
                    self.t_repeats += 1
                if wh is not None:
                    if last[2] is not None and wh < last[2] - ENERGY_SLACK_WH:
                        steps.append(EnergyStep(self.dev, ch, s, last[2], wh))
                    last[2] = wh
                last[0] = s
                last[1] = t
        newest, top = (int(keep[-1]["t"]), int(keep[-1]["s"])) if keep else (0, 0)
        self._end(boot, first, stepped, old_boot, len(keep), newest, top, len(steps), recv_ms)
        return keep, steps

    def note_reject(self) -> None:
        self._saved = None
        self.rejects += 1

    # ------------------------------------------------------------------ figures

    @property
    def offset_ms(self) -> float | None:
        """Receive time minus the newest sample time, minimum over recent batches.

        The minimum filters out queueing and batching delay, so this is the collector-minus-device
        clock difference plus the smallest one-way delay: a few ms with synced clocks, large or
        negative when the device clock is off.
        """
        return float(min(self._lags)) if self._lags else None

    @property
    def rate_hz(self) -> float | None:
        """Sequence numbers the device handed out per second of its own clock, over about the last
        RATE_WINDOW_MS: arrival order and time play no part, so a backlog arriving late does not
        inflate it, and what was lost on the way shows in `missing`, not here. A reboot or a clock
        step starts the window again."""
        if len(self._rate) < 2:
            return None
        (t0, s0), (t1, s1) = self._rate[0], self._rate[-1]
        if t1 <= t0:
            return None
        return (s1 - s0) * 1000.0 / (t1 - t0)

    def health(self) -> dict[str, float | int]:
        """Fields of the wb_health point (schema/v1/influx.json), without the spool figures."""
        out: dict[str, float | int] = {
            "received": self.received,
            "stored": self.stored,
            "duplicates": self.duplicates,
            "out_of_order": self.out_of_order,
            "rejects": self.rejects,
        }
        if self.track_gaps:
            out["gaps"] = self.gaps
            out["gaps_filled"] = self.gaps_filled
            out["missing"] = self.missing
        out["unassigned"] = self.unassigned
        for name in ("offset_ms", "rate_hz", "clk_age", "clk_err"):
            value = getattr(self, name)
            if value is not None:
                out[name] = float(value)
        out["clk_steps"] = self.steps_seen
        return out

    def summary(self) -> dict[str, Any]:
        """Everything for `wattbench status`, JSON-ready."""
        out: dict[str, Any] = dict(self.health())
        out.update(
            dev=self.dev,
            batches=self.batches,
            reboots=self.reboots,
            seq_resets=self.seq_resets,
            energy_steps=self.energy_steps,
            t_repeats=self.t_repeats,
            boot=self.boot,
            clk_sync=self.clk_sync,
            last_seq=self.last_seq,
            last_seen_ms=self.last_seen_ms,
            holes=self.seq.hole_count(),
            track_gaps=self.track_gaps,
        )
        if self.track_gaps:
            out["gaps_open"] = self.gaps - self.gaps_filled
        return out

    # ------------------------------------------------------------------ persistence

    def state(self) -> dict[str, Any]:
        """What a restarted collector needs to go on counting (written only for committed data). The
        same object is returned until the account changes: callers must not modify it."""
        if self._saved is not None:
            return self._saved
        doc = self.summary()
        doc["seq"] = self.seq.state()
        doc["channels"] = {ch: list(v) for ch, v in self._chans.items()}
        doc["dev_steps"] = self._dev_steps
        doc["space_boot"] = self.space_boot
        doc["ends"] = [[b, e] for b, e in self.ends.items()]
        doc["firsts"] = [[b, f] for b, f in self.firsts.items()]
        doc["skipped"] = [list(r) for r in self.skipped]
        self._saved = doc
        return doc

    @classmethod
    def from_state(cls, doc: dict[str, Any], track_gaps: bool = True) -> DeviceAccount:
        out = cls(str(doc["dev"]), track_gaps)
        for name in (*COUNTERS, "batches", "reboots", "seq_resets", "energy_steps", "t_repeats"):
            # A field an older collector did not write stays at 0.
            if isinstance(doc.get(name), int):
                setattr(out, name, doc[name])
        out.boot = doc.get("boot")
        out.clk_sync = doc.get("clk_sync")
        out.last_seq = doc.get("last_seq")
        out.last_seen_ms = doc.get("last_seen_ms")
        if isinstance(doc.get("seq"), dict):
            out.seq = SeqTracker.from_state(doc["seq"])
        # Carried over so that a step made while the collector was down is still seen (the device's
        # count differs from the one kept here) and the count in wb_health goes on rather than restarts.
        if isinstance(doc.get("clk_steps"), int):
            out.steps_seen = doc["clk_steps"]
        if isinstance(doc.get("dev_steps"), int):
            out._dev_steps = doc["dev_steps"]
        if isinstance(doc.get("space_boot"), int):
            out.space_boot = doc["space_boot"]
        out.ends = {int(b): int(e) for b, e in doc.get("ends") or []}
        out.firsts = {int(b): int(f) for b, f in doc.get("firsts") or []}
        out.skipped = [[int(lo), int(hi)] for lo, hi in (doc.get("skipped") or [])[-SKIPPED_KEPT:]]
        for ch, last in (doc.get("channels") or {}).items():
            # [seq, t, Wh] from older state files, [seq, t, Wh, clock_step flag] now
            if isinstance(last, list) and len(last) in (3, 4):
                out._chans[str(ch)] = [int(last[0]), last[1], last[2], int(last[3]) if len(last) == 4 else 0]
        return out


def _trim(by_boot: dict[int, int]) -> None:
    """Keep the newest BOOTS_KEPT boots."""
    for boot in sorted(by_boot)[:-BOOTS_KEPT]:
        del by_boot[boot]


class Accounts:
    """The accounts of every device seen, created on first sight."""

    def __init__(self, track_gaps: bool = True) -> None:
        self.track_gaps = track_gaps
        self.devices: dict[str, DeviceAccount] = {}

    def get(self, dev: str) -> DeviceAccount:
        acct = self.devices.get(dev)
        if acct is None:
            acct = self.devices[dev] = DeviceAccount(dev, self.track_gaps)
        return acct

    def totals(self) -> dict[str, int]:
        out = dict.fromkeys(COUNTERS, 0)
        for acct in self.devices.values():
            for name in COUNTERS:
                out[name] += getattr(acct, name)
        return out

    def state(self) -> dict[str, Any]:
        return {dev: acct.state() for dev, acct in self.devices.items()}

    def restore(self, doc: dict[str, Any]) -> None:
        for dev, item in doc.items():
            try:
                self.devices[dev] = DeviceAccount.from_state(item, self.track_gaps)
            except (KeyError, TypeError, ValueError):
                continue  # a damaged entry only costs the history of that device
