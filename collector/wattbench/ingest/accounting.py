"""Per-device accounting of what arrived: sequence gaps, duplicates, late arrivals, reboots, clock
offset and achieved rate. Pure: the caller passes receive times in.

Sequence numbers are per device, strictly increasing across channels and reboots (samples.schema.json).
A device therefore has one sequence space; what is missing is a set of holes below the highest number
seen. A sample that lands in a hole is late, not duplicate, and is kept; a sample at or below the
highest number and in no hole has been seen before and is dropped. Dropping is only ever done on
that knowledge: anything the tracker cannot vouch for is kept, because the store is idempotent anyway.

Numbers a device never handed out are no loss: at a clean restart the firmware jumps to its next
reserved block, and the numbers skipped are taken out of the holes (restarts.py). Rates come
from the device's own sample times and sequence numbers, never from when batches arrived.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from wattbench_schema import FLAG_CLOCK_STEP

from .continuity import EnergyStep, follow_plain, plain_repeats
from .plainbatch import ENERGY_SLACK_WH, PlainBatch
from .restarts import Restarts
from .seqtrack import SeqTracker

__all__ = ["COUNTERS", "Accounts", "DeviceAccount", "EnergyStep"]

OFFSET_WINDOW = 32
RATE_WINDOW_MS = 10_000


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


class DeviceAccount:
    """Everything the collector knows about one appliance's stream.

    A restart is not a loss: the numbers between where a boot stopped cleanly and where the next one
    started were never handed out (restarts.py) and are `unassigned`, neither missing nor a gap. A power
    cut announces nothing, so its jump stays missing: an upper bound, since what was only in RAM is lost
    but the rest of the block never existed.
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
        self.restarts = Restarts()
        self._lags: deque[int] = deque(maxlen=OFFSET_WINDOW)
        self._rate: deque[tuple[int, int]] = deque()  # (device time, sequence number), in sequence order
        self._chans: dict[str, list[Any]] = {}  # channel -> [last seq, its t, last energy, clock step flag]

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
        self.restarts.note_end(boot, int(doc["seq"]))
        self._apply_ends()

    def _apply_ends(self) -> None:
        """Take the numbers between each announced end and the next boot's first one out of the holes."""
        for end, last in self.restarts.between():
            removed, gone = self.seq.remove_range(end, last)
            if not removed:
                continue
            self.unassigned += removed
            self.restarts.skip(end, last)
            if self.track_gaps:
                self.missing -= removed
                for origin in gone:
                    if origin >= end:
                        self.gaps -= 1  # the whole jump was never handed out: it was no gap
                    else:
                        self.gaps_filled += 1  # what was really missing of it had arrived

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
        if first is not None and self.restarts.note_first(boot, first) and self.restarts.ends:
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
        repeats = plain_repeats(self._chans, rows)
        if repeats is None:
            return False
        stepped = self._begin(boot, rows.clk, rows.count, recv_ms)
        self.t_repeats += repeats
        follow_plain(self._chans, rows)
        top = rows.first_s + rows.count - 1
        seq.high = top
        self._end(boot, rows.first_s, stepped, False, rows.count, rows.newest_t, top, 0, recv_ms)
        return True

    def admit(self, doc: dict[str, Any], recv_ms: int) -> tuple[list[dict[str, Any]], list[EnergyStep]]:
        """Account for a validated sample batch; return the rows to store and any energy steps."""
        rows: list[dict[str, Any]] = doc["samples"]
        boot = int(doc["boot"])
        stepped = self._begin(boot, doc["clk"], len(rows), recv_ms)
        old_boot, other_space = self._place_boot(boot, int(rows[0]["s"]))
        keep, first, steps, flagged = self._take_rows(rows, old_boot, other_space)
        newest, top = (int(keep[-1]["t"]), int(keep[-1]["s"])) if keep else (0, 0)
        self._end(boot, first, stepped or flagged, old_boot, len(keep), newest, top, len(steps), recv_ms)
        return keep, steps

    def _place_boot(self, boot: int, first_s: int) -> tuple[bool, bool]:
        """Where the batch's boot stands against the newest one: the same, a new one (a reboot, after
        which a sequence that started again opens a new space), or an older one. Returns old_boot (from
        a boot before the newest: fills holes, but moves nothing on) and other_space (from before the
        sequence was restarted: kept, decides nothing)."""
        if self.boot is None:
            self.boot = boot
        elif boot > self.boot:
            self.reboots += 1
            self.boot = boot
            self._rate.clear()  # the numbers jump at a reboot; rate is measured within one boot
            if first_s <= self.seq.high:
                # The device did not keep its sequence over the reboot: start a new space rather
                # than call everything from now on a duplicate.
                self.seq_resets += 1
                self.seq = SeqTracker()
                self._chans.clear()
                self.space_boot = boot
                self.restarts.clear()
        elif boot < self.boot:
            return True, self.space_boot is not None and boot < self.space_boot
        return False, False

    def _take_rows(
        self, rows: list[dict[str, Any]], old_boot: bool, other_space: bool
    ) -> tuple[list[dict[str, Any]], int | None, list[EnergyStep], bool]:
        """Each row's number against the sequence (the next ones, opening a gap when numbers were
        skipped; late ones that fill a hole; duplicates, which are dropped), then each row kept against
        its channel's last one. Returns the rows kept, the lowest number kept that counts (None: none),
        the energy steps, and whether a row's flag shows a clock step its channel had not shown.

        One pass over the rows for both, since this runs for every sample the collector receives: a
        second pass for the channels cost a tenth more."""
        seq = self.seq
        chans = self._chans
        keep: list[dict[str, Any]] = []
        steps: list[EnergyStep] = []
        flagged = False
        high = seq.high
        first = None
        for row in rows:
            s = int(row["s"])
            if other_space:
                self.out_of_order += 1
            elif s > high and not old_boot:
                if high < 0:
                    seq.floor = s  # what came before the first sample seen is unknown, not duplicate
                elif s > high + 1:
                    self._open_gap(high, s)
                high = seq.high = s
            elif s > high or s < seq.floor:
                self.out_of_order += 1
            elif not self._late(s, old_boot):
                self.duplicates += 1
                continue
            if not other_space and (first is None or s < first):
                first = s
            keep.append(row)
            # The channel, in sequence order: time must move on (the store keys a sample by device,
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
                    flagged = True  # a device that does not count its steps still flags them
                last[3] = step_flag
                if t <= last[1]:
                    self.t_repeats += 1
                if wh is not None:
                    if last[2] is not None and wh < last[2] - ENERGY_SLACK_WH:
                        steps.append(EnergyStep(self.dev, ch, s, last[2], wh))
                    last[2] = wh
                last[0] = s
                last[1] = t
        return keep, first, steps, flagged

    def _open_gap(self, high: int, s: int) -> None:
        """s came after high with numbers between them missing."""
        if self.track_gaps:
            self.gaps += 1
            self.missing += s - high - 1
        self.seq.add_hole(high + 1, s - 1)

    def _late(self, s: int, old_boot: bool) -> bool:
        """A number at or below the highest seen: True (kept, out of order) when it fills a hole, was
        judged never handed out, or comes from an older boot; False when it is a duplicate."""
        filled = self.seq.fill(s)
        if filled:
            self.out_of_order += 1
            if self.track_gaps:
                self.missing -= 1
                if filled == 2:
                    self.gaps_filled += 1
            return True
        if self.restarts.skipped and self.restarts.turned_up(s):
            # It was handed out after all: kept, and counted as neither unassigned nor duplicate.
            self.unassigned -= 1
            self.out_of_order += 1
            return True
        if old_boot:
            # An older boot's sample that fills no hole is kept unjudged: nothing says for sure that
            # its boot numbered in the same space.
            self.out_of_order += 1
            return True
        return False

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
        doc.update(self.restarts.state())
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
        out.restarts = Restarts.from_state(doc)
        for ch, last in (doc.get("channels") or {}).items():
            # [seq, t, Wh] from older state files, [seq, t, Wh, clock_step flag] now
            if isinstance(last, list) and len(last) in (3, 4):
                out._chans[str(ch)] = [int(last[0]), last[1], last[2], int(last[3]) if len(last) == 4 else 0]
        return out


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
