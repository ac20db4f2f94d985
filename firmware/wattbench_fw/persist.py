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
from wattbench_fw.stateload import BOOT_MOD, SLOTS


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
            # The checks run once, at boot: their code is released after them (stateload.py).
            from wattbench_fw import stateload

            stateload.load(self)
            stateload = None
            port.release("wattbench_fw.stateload")

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
