"""Loading the persistent state at boot: every field of both copies checked on its own, damage
repaired and named (the rules are in persist.py's docstring).

Only a boot needs it: persist.State loads it for its constructor and releases it after, so on a board
its code does not stay in RAM (MicroPython keeps an imported module's bytecode on the heap).
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


def _damage(state, text):
    state.repairs += 1
    _note(state, text)


def _note(state, text):
    if len(state.problems) < MAX_PROBLEMS:
        state.problems.append(text)


def load(state):
    """Fill `state` (a persist.State) from the newest usable copies in its directory."""
    copies = []  # (gen or None, slot index, document), newest first
    suspect = 0  # files that exist but give no dated copy: any of them may be the newest
    found = False
    for i, name in enumerate(SLOTS):
        raw = port.read_file(port.join(state.dir, name))
        if raw is None:
            continue
        found = True
        doc = _parse(raw)
        if doc is None:
            # Mostly what a power cut during a write leaves; the other copy then has the state.
            _damage(state, name + ": not a JSON object")
            suspect += 1
            continue
        gen = _count(doc.get("gen"), 0, MAX_GEN)
        if gen is None:
            _damage(state, name + ": no valid generation")
            suspect += 1
        copies.append((gen, i, doc))
    if not found:
        return  # a new device
    # Dated copies newest first, then those whose generation is unreadable.
    copies.sort(key=lambda c: -1 if c[0] is None else c[0], reverse=True)
    newest = copies[0] if copies and copies[0][0] is not None else None
    if newest is not None:
        state.gen = newest[0]
        state._slot = newest[1]
    # Repairs found so far at this boot are added to the saved count (absent from older files).
    saved, _ = _pick(state, "repairs", lambda v: _count(v, 0, MAX_COUNT), copies, quiet=True)
    state.repairs = min(state.repairs + (saved or 0), MAX_COUNT)
    blk, _ = _pick(state, "blk", lambda v: _count(v, 1, MAX_SEQ_BLOCK), copies, quiet=True)
    state.seq_block = blk
    # A value from a copy that may lag the last save is moved forward by as much as one save can
    # change it: the boot counter by one, the sequence mark by one block (the largest a
    # configuration allows when the block is not on record).
    boot = _counter(state, "boot", -1, BOOT_MOD - 1, 1, copies, newest, suspect)
    if boot is None:
        boot = _lost_floor(1000000, BOOT_LOST, BOOT_MOD - 1)
        _lose(state, "boot", boot)
    state.boot = boot
    seq = _counter(state, "seq", 0, MAX_SEQ, blk or MAX_SEQ_BLOCK, copies, newest, suspect)
    if seq is None:
        seq = _lost_floor(1, SEQ_LOST, MAX_SEQ)
        _lose(state, "seq", seq)
    state.seq_mark = seq
    dropped, _ = _pick(state, "dropped", lambda v: _count(v, 0, MAX_COUNT), copies)
    if dropped is None:
        dropped = 0
        _lose(state, "dropped", 0)
    state.dropped = dropped
    state.energy = _energy(state, copies)


def _lose(state, name, value):
    state.lost.append(name)
    _note(state, "%s unreadable in every copy, continuing from %d" % (name, value))


def _pick(state, name, check, copies, quiet=False):
    """(value, copy): the first copy, newest first, whose `name` passes `check`; (None, None)."""
    for c in copies:
        v = check(c[2].get(name))
        if v is not None:
            return v, c
        if not quiet:
            _damage(state, "%s in %s: missing or invalid" % (name, SLOTS[c[1]]))
    return None, None


def _counter(state, name, lo, hi, step, copies, newest, suspect):
    v, c = _pick(state, name, lambda v: _count(v, lo, hi), copies)
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


def _energy(state, copies):
    tables = []
    for c in copies:
        e = c[2].get("energy", {})
        if isinstance(e, dict):
            tables.append(e)
        else:
            _damage(state, "energy in %s: not an object" % SLOTS[c[1]])
    out = {}
    for table in tables:
        for ch in table:
            if ch in out:
                continue
            for t in tables:  # the newest copy that has a usable entry for this channel
                entry = _energy_entry(t.get(ch))
                if entry is not None:
                    if t is not tables[0]:
                        _damage(state, "energy of %s: taken from an older copy" % ch)
                    out[ch] = entry
                    break
            else:
                out[ch] = None
    for ch in list(out):
        if out[ch] is None:
            # Nothing says how far this counter went: it starts again from the meter's register.
            del out[ch]
            state.lost.append("energy." + ch)
            _damage(state, "energy of %s unreadable in every copy" % ch)
    return out
