"""Per-device accounting of what arrived: sequence gaps, duplicates, late arrivals, reboots, clock
offset and achieved rate. Pure: the caller passes receive times in.

Sequence numbers are per device, strictly increasing across channels and reboots (samples.schema.json).
A device therefore has one sequence space; what is missing is a set of holes below the highest number
seen. A sample that lands in a hole is late, not duplicate, and is kept; a sample at or below the
highest number and in no hole has been seen before and is dropped. Dropping is only ever done on
that knowledge: anything the tracker cannot vouch for is kept, because the store is idempotent anyway.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from dataclasses import dataclass
from typing import Any

from wattbench_schema import FLAG_CLOCK_STEP

MAX_HOLES = 10_000  # per device in memory; a status file keeps the newest 1 000
OFFSET_WINDOW = 32
RATE_WINDOW_MS = 10_000
ENERGY_SLACK_WH = 1e-9


class SeqTracker:
    """The highest sequence number seen and the holes (inclusive ranges) below it."""

    __slots__ = ("ends", "floor", "high", "starts")

    def __init__(self) -> None:
        self.high = -1
        self.floor = -1  # numbers below it are no longer tracked: never called duplicate
        self.starts: list[int] = []
        self.ends: list[int] = []

    def hole_count(self) -> int:
        return len(self.starts)

    def add_hole(self, start: int, end: int) -> None:
        self.starts.append(start)
        self.ends.append(end)
        if len(self.starts) > MAX_HOLES:
            # Forget the oldest holes; a late sample from them is then kept without question.
            drop = len(self.starts) - MAX_HOLES
            self.floor = self.ends[drop - 1] + 1
            del self.starts[:drop]
            del self.ends[:drop]

    def fill(self, s: int) -> bool:
        """Remove s from the holes; False when s was not missing (a duplicate)."""
        i = bisect_right(self.starts, s) - 1
        if i < 0 or s > self.ends[i]:
            return False
        a, b = self.starts[i], self.ends[i]
        if a == b:
            del self.starts[i]
            del self.ends[i]
        elif s == a:
            self.starts[i] = a + 1
        elif s == b:
            self.ends[i] = b - 1
        else:
            self.ends[i] = s - 1
            self.starts.insert(i + 1, s + 1)
            self.ends.insert(i + 1, b)
        return True

    def state(self, max_holes: int = 1000) -> dict[str, Any]:
        """The newest max_holes holes; older ones are forgotten (the floor moves past them), which
        only means a late sample from them would be kept rather than judged."""
        drop = max(0, len(self.starts) - max_holes)
        floor = self.ends[drop - 1] + 1 if drop else self.floor
        return {
            "high": self.high,
            "floor": floor,
            "holes": [[a, b] for a, b in zip(self.starts[drop:], self.ends[drop:], strict=True)],
        }

    @classmethod
    def from_state(cls, doc: dict[str, Any]) -> SeqTracker:
        out = cls()
        out.high = int(doc.get("high", -1))
        out.floor = int(doc.get("floor", -1))
        for a, b in doc.get("holes", [])[-MAX_HOLES:]:
            out.starts.append(int(a))
            out.ends.append(int(b))
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


COUNTERS = ("received", "stored", "duplicates", "gaps", "missing", "out_of_order", "rejects")


class DeviceAccount:
    """Everything the collector knows about one appliance's stream."""

    def __init__(self, dev: str, track_gaps: bool = True) -> None:
        self.dev = dev
        self.track_gaps = track_gaps  # off when a shared subscription hands this process only part of it
        self.received = 0
        self.stored = 0
        self.duplicates = 0
        self.gaps = 0
        self.missing = 0
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
        self._lags: deque[int] = deque(maxlen=OFFSET_WINDOW)
        self._rate: deque[tuple[int, int]] = deque()
        self._chans: dict[str, list[Any]] = {}  # channel -> [last seq, its t, last energy]

    # ------------------------------------------------------------------ ingest

    def admit(self, doc: dict[str, Any], recv_ms: int) -> tuple[list[dict[str, Any]], list[EnergyStep]]:
        """Account for a validated sample batch; return the rows to store and any energy steps."""
        rows: list[dict[str, Any]] = doc["samples"]
        boot = int(doc["boot"])
        self.batches += 1
        self.received += len(rows)
        if self.first_seen_ms is None:
            self.first_seen_ms = recv_ms
        self.last_seen_ms = recv_ms
        clk = doc["clk"]
        self.clk_sync = clk["sync"]
        self.clk_age = clk.get("age")
        self.clk_err = clk.get("err")
        steps = int(clk.get("steps", 0))
        # A step count that went up within one boot means the device clock jumped since its last batch.
        stepped = self._dev_steps is not None and steps > self._dev_steps and boot == self.boot
        if self.boot is None or boot >= self.boot:
            self._dev_steps = steps

        seq = self.seq
        old_boot = False
        if self.boot is None:
            self.boot = boot
        elif boot > self.boot:
            self.reboots += 1
            self.boot = boot
            if int(rows[0]["s"]) <= seq.high:
                # The device did not keep its sequence over the reboot: start a new space rather
                # than call everything from now on a duplicate.
                self.seq_resets += 1
                seq = self.seq = SeqTracker()
                self._chans.clear()
        elif boot < self.boot:
            old_boot = True  # late data from before a reboot: keep it, decide nothing from it

        keep: list[dict[str, Any]] = []
        steps: list[EnergyStep] = []
        chans = self._chans
        high = seq.high
        for row in rows:
            s = int(row["s"])
            if old_boot:
                self.out_of_order += 1
            elif s > high:
                if high < 0:
                    seq.floor = s  # what came before the first sample seen is unknown, not duplicate
                elif s > high + 1 and self.track_gaps:
                    self.gaps += 1
                    self.missing += s - high - 1
                if high >= 0 and s > high + 1:
                    seq.add_hole(high + 1, s - 1)
                high = seq.high = s
            elif s < seq.floor:
                self.out_of_order += 1
            elif seq.fill(s):
                self.out_of_order += 1
                if self.track_gaps and self.missing > 0:
                    self.missing -= 1
            else:
                self.duplicates += 1
                continue
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
        self.last_seq = seq.high
        self.energy_steps += len(steps)
        self.stored += len(keep)
        if stepped and not old_boot:
            # Delays measured on the old clock say nothing about the new one; keeping them would hold
            # the estimate at the old offset for a whole window after a step back.
            self.steps_seen += 1
            self._lags.clear()
        if keep:
            # The newest reading is the last one taken, not the latest stamp: after a step back the
            # stamps of a batch's later rows are the smaller ones.
            newest = keep[-1]["t"]
            self._lags.append(recv_ms - int(newest))
            self._rate.append((int(newest), len(keep)))
            while len(self._rate) > 2 and self._rate[-1][0] - self._rate[0][0] > RATE_WINDOW_MS:
                self._rate.popleft()
        return keep, steps

    def note_reject(self) -> None:
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
        """Samples per second achieved, over the last RATE_WINDOW_MS of sample time."""
        if len(self._rate) < 2:
            return None
        span = self._rate[-1][0] - self._rate[0][0]
        if span <= 0:
            return None
        n = sum(n for _, n in list(self._rate)[1:])
        return n * 1000.0 / span

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
            out["missing"] = self.missing
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
        return out

    # ------------------------------------------------------------------ persistence

    def state(self) -> dict[str, Any]:
        """What a restarted collector needs to go on counting (written only for committed data)."""
        doc = self.summary()
        doc["seq"] = self.seq.state()
        doc["channels"] = {ch: list(v) for ch, v in self._chans.items()}
        doc["dev_steps"] = self._dev_steps
        return doc

    @classmethod
    def from_state(cls, doc: dict[str, Any], track_gaps: bool = True) -> DeviceAccount:
        out = cls(str(doc["dev"]), track_gaps)
        for name in (*COUNTERS, "batches", "reboots", "seq_resets", "energy_steps", "t_repeats"):
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
