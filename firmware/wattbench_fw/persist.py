"""State that must survive a reboot: boot counter, sequence high-water mark, dropped-sample count and
energy counter offsets.

The state lives in two files written alternately, each with a generation number; a power cut while
one is being written leaves the other intact, and loading takes the newest valid one. Writes are
rare by design: the sequence reserves numbers in blocks and energy reserves a margin, so flash wear
stays low even at high sample rates.

A damaged file (a flash fault, a hand edit, a bug in an older firmware) never stops the boot. Every
field is checked on its own. One the newest copy cannot give comes from the other copy, moved forward
by as much as one save can change it for each save the copy may lag (the boot counter by one, the
sequence mark by one block), so counters do not repeat. A counter no copy can give continues from a
point above anything handed out before (see _lost_floor). What no copy can tell is not made up: an
energy entry nobody has restarts from the meter's register, and is named. `repairs` counts every
repair since the first boot (it is saved), `lost` names what had to continue from such a point at
this boot and `problems` says what was wrong; the caller reports them (status, console), since
loading does no output of its own.
"""

import json

from wattbench_fw import port

SLOTS = ("state.a.json", "state.b.json")
MAX_SEQ = 9007199254740991  # the contract's largest sequence number (2**53 - 1)
MAX_SEQ_BLOCK = 10000000  # the largest seq_block a configuration may set: one save reserves no more
BOOT_MOD = 4294967296  # the boot counter is 32 bits and wraps
MAX_GEN = 1 << 62
MAX_COUNT = 9007199254740991
MAX_WH = 1e15
MAX_GAP = 1000  # saves between two copies that a value is moved forward by, at most
MAX_PROBLEMS = 8
# Wall clocks before 2020 have not been set (a board's RTC after a power cut).
CLOCK_SET_US = 1577836800 * 1000000
# Where a lost counter continues when the clock cannot help: high in its range, above what a
# counter reaches in the life of a device.
SEQ_LOST = 1 << 52
BOOT_LOST = 1 << 31


def _count(v, lo, hi):
    """v if it is an integer (not a boolean) in [lo, hi], else None."""
    if isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi:
        return v
    return None


def _amount(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and port.isfinite(v) and 0 <= v <= MAX_WH


def _energy_entry(e):
    """[offset_wh, last_raw_wh or None, mark_wh] as floats, or None when the entry is unusable."""
    if not isinstance(e, (list, tuple)) or len(e) != 3:
        return None
    offset, last, mark = e
    if not _amount(offset) or not _amount(mark) or not (last is None or _amount(last)):
        return None
    offset = float(offset)
    last = None if last is None else float(last)
    # The mark is at least every total published so far, the last one included; a lower mark would
    # let a meter reset take the total back, so it is raised to that total.
    return [offset, last, max(float(mark), offset + (last or 0.0))]


def _parse(raw):
    try:
        doc = json.loads(raw)
    except ValueError:
        return None  # a torn write, or not JSON at all
    except (RuntimeError, MemoryError):
        return None  # nested too deeply (CPython's RecursionError is a RuntimeError) or too large
    return doc if isinstance(doc, dict) else None


def _lost_floor(per_us, fixed, limit):
    """A counter value above every one handed out before, when no copy remembers the counter.

    The wall clock counts microseconds (for the sequence) and seconds (for the boot counter) since
    1970. A sequence mark grows by at most 160 000 samples a second plus one block per boot, the boot
    counter by one per boot, so a set clock is above either unless the appliance spent most of its
    life rebooting every few seconds. Without a set clock the counter continues from `fixed`, high in
    its range; a second loss before the clock is set would then repeat numbers, which `lost` shows.
    """
    now = port.utc_us()
    if now > CLOCK_SET_US and now // per_us < limit:
        return now // per_us
    return fixed


class State:
    def __init__(self, directory):
        self.dir = directory
        self.gen = 0
        self.boot = -1
        self.seq_mark = 0
        self.dropped = 0
        self.energy = {}  # channel -> [offset_wh, last_raw_wh or None, mark_wh]
        self.writes = 0
        self.repairs = 0  # damaged copies and fields found, since the first boot
        self.lost = []  # counters no copy could give at this boot, continued from a safe point
        self.problems = []  # what was damaged at this boot (the first MAX_PROBLEMS)
        self.seq_block = None  # the block of the last sequence reservation, once known
        self._slot = 0  # slot holding the newest copy; the next save writes the other one
        if directory:
            port.makedirs(directory)
            self._load()

    def _damage(self, text):
        self.repairs += 1
        self._note(text)

    def _note(self, text):
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(text)

    def _load(self):
        copies = []  # (gen or None, slot index, document), newest first
        suspect = 0  # files that exist but give no dated copy: any of them may be the newest
        found = False
        for i, name in enumerate(SLOTS):
            raw = port.read_file(port.join(self.dir, name))
            if raw is None:
                continue
            found = True
            doc = _parse(raw)
            if doc is None:
                # Mostly what a power cut during a write leaves; the other copy then has the state.
                self._damage(name + ": not a JSON object")
                suspect += 1
                continue
            gen = _count(doc.get("gen"), 0, MAX_GEN)
            if gen is None:
                self._damage(name + ": no valid generation")
                suspect += 1
            copies.append((gen, i, doc))
        if not found:
            return  # a new device
        # Dated copies newest first, then those whose generation is unreadable.
        copies.sort(key=lambda c: -1 if c[0] is None else c[0], reverse=True)
        newest = copies[0] if copies and copies[0][0] is not None else None
        if newest is not None:
            self.gen = newest[0]
            self._slot = newest[1]
        # Repairs found so far at this boot are added to the saved count (absent from older files).
        saved, _ = self._pick("repairs", lambda v: _count(v, 0, MAX_COUNT), copies, quiet=True)
        self.repairs = min(self.repairs + (saved or 0), MAX_COUNT)
        blk, _ = self._pick("blk", lambda v: _count(v, 1, MAX_SEQ_BLOCK), copies, quiet=True)
        self.seq_block = blk
        # A value from a copy that may lag the last save is moved forward by as much as one save can
        # change it: the boot counter by one, the sequence mark by one block (the largest a
        # configuration allows when the block is not on record).
        boot = self._counter("boot", -1, BOOT_MOD - 1, 1, copies, newest, suspect)
        if boot is None:
            boot = _lost_floor(1000000, BOOT_LOST, BOOT_MOD - 1)
            self._lose("boot", boot)
        self.boot = boot
        seq = self._counter("seq", 0, MAX_SEQ, blk or MAX_SEQ_BLOCK, copies, newest, suspect)
        if seq is None:
            seq = _lost_floor(1, SEQ_LOST, MAX_SEQ)
            self._lose("seq", seq)
        self.seq_mark = seq
        dropped, _ = self._pick("dropped", lambda v: _count(v, 0, MAX_COUNT), copies)
        if dropped is None:
            dropped = 0
            self._lose("dropped", 0)
        self.dropped = dropped
        self.energy = self._energy(copies)

    def _lose(self, name, value):
        self.lost.append(name)
        self._note("%s unreadable in every copy, continuing from %d" % (name, value))

    def _pick(self, name, check, copies, quiet=False):
        """(value, copy): the first copy, newest first, whose `name` passes `check`; (None, None)."""
        for c in copies:
            v = check(c[2].get(name))
            if v is not None:
                return v, c
            if not quiet:
                self._damage("%s in %s: missing or invalid" % (name, SLOTS[c[1]]))
        return None, None

    def _counter(self, name, lo, hi, step, copies, newest, suspect):
        v, c = self._pick(name, lambda v: _count(v, lo, hi), copies)
        if v is None:
            return None
        # Saves the source copy may lag: those between it and the newest dated copy, plus one for
        # each file that could not be dated (it may be newer). An undated source is one of those.
        if newest is not None and c[0] is not None:
            lag = newest[0] - c[0] + suspect
        else:
            lag = suspect
        lag = min(max(lag, 0), MAX_GAP)
        if name == "boot" and v + step * lag > hi:
            return (v + step * lag) % BOOT_MOD
        return min(v + step * lag, hi)

    def _energy(self, copies):
        tables = []
        for c in copies:
            e = c[2].get("energy", {})
            if isinstance(e, dict):
                tables.append(e)
            else:
                self._damage("energy in %s: not an object" % SLOTS[c[1]])
        out = {}
        for table in tables:
            for ch in table:
                if ch in out:
                    continue
                for t in tables:  # the newest copy that has a usable entry for this channel
                    entry = _energy_entry(t.get(ch))
                    if entry is not None:
                        if t is not tables[0]:
                            self._damage("energy of %s: taken from an older copy" % ch)
                        out[ch] = entry
                        break
                else:
                    out[ch] = None
        for ch in list(out):
            if out[ch] is None:
                # Nothing says how far this counter went: it starts again from the meter's register.
                del out[ch]
                self.lost.append("energy." + ch)
                self._damage("energy of %s unreadable in every copy" % ch)
        return out

    def save(self):
        self.gen += 1
        self.writes += 1
        if not self.dir:
            return
        doc = {
            "gen": self.gen,
            "boot": self.boot,
            "seq": self.seq_mark,
            "dropped": self.dropped,
            "energy": self.energy,
            "repairs": self.repairs,
        }
        if self.seq_block is not None:
            doc["blk"] = self.seq_block
        slot = 1 - self._slot
        with open(port.join(self.dir, SLOTS[slot]), "w") as f:
            f.write(json.dumps(doc))
        self._slot = slot

    def next_boot(self):
        self.boot = (self.boot + 1) % BOOT_MOD
        self.save()
        return self.boot


class Sequence:
    """Per-device sample numbers that never repeat, across reboots and crashes.

    Before handing out numbers the mark (first number not yet reserved) is advanced by `block` and
    saved. After a crash the next boot starts at the saved mark, skipping at most one block.
    """

    def __init__(self, state, block=1000):
        self.state = state
        self.block = max(1, int(block))
        self.next = state.seq_mark
        # On record so that, if the newest state copy is ever lost, the next boot knows how far
        # one save can have moved the mark.
        state.seq_block = self.block
        self._reserve()

    def _reserve(self):
        self.state.seq_mark = self.next + self.block
        self.state.save()

    def take(self):
        s = self.next
        self.next = s + 1
        if self.next >= self.state.seq_mark:
            self._reserve()
        return s


class EnergyTracker:
    """Turns a meter's energy register into a counter that never goes backwards.

    When the register goes down (meter reset, power-cycled meter, rollover) the offset becomes the
    last reported total, so counting continues from there. The highest total that may have been
    published is reserved in steps of `margin_wh`; after an unclean reboot where the meter also
    restarted from zero, counting resumes from that reservation, so the total never decreases
    (it may then overstate by less than one margin).
    """

    def __init__(self, state, channel, margin_wh=5.0):
        self.state = state
        self.channel = channel
        self.margin = margin_wh
        entry = state.energy.get(channel)  # checked by State when it was loaded
        if entry:
            self.offset, self.last_raw, self.mark = float(entry[0]), entry[1], float(entry[2])
        else:
            self.offset, self.last_raw, self.mark = 0.0, None, 0.0
        # Until the first reading of this boot, the floor is everything that may have been sent.
        self.last_out = None
        self.resets = 0

    def update(self, raw):
        if self.last_raw is not None and raw < self.last_raw - 1e-9:
            self.resets += 1
            base = self.last_out if self.last_out is not None else self.mark
            self.offset = base
        out = raw + self.offset
        if self.last_out is not None and out < self.last_out:
            out = self.last_out
        self.last_raw = raw
        self.last_out = out
        if out > self.mark:
            self.mark = out + self.margin
            self._store()
            self.state.save()
        else:
            self._store()
        return out

    def _store(self):
        self.state.energy[self.channel] = [self.offset, self.last_raw, self.mark]

    def close(self):
        """Clean shutdown: nothing beyond last_out was sent, so the reservation can shrink to it."""
        if self.last_out is not None:
            self.mark = self.last_out
            self._store()
