"""Store-and-forward buffer of encoded sample batches.

New batches go to RAM. When RAM holds more than `ram_bytes`, the oldest batches move to segment
files in flash (bounded by `flash_bytes`); when flash is full too, the oldest data is dropped and
counted. Flash always holds older batches than RAM, so sending in entry order (flash first, then
RAM) backfills in order. A batch leaves the buffer only when the broker acknowledged it; after a
reconnect everything unacknowledged is sent again (duplicates are removed downstream by sequence).
Segments left in flash by a previous boot are picked up again at start.

Flash record: magic (2 bytes), sample count (2 bytes), body length (4 bytes), body. Magic b"WC":
the body is the batch in compact form (compact.py), about a sixth of its JSON, rebuilt to the same
bytes when sent. Magic b"WB": the body is the payload itself; written when the compact form would not
be smaller (a payload that is not a samples batch), and the only record earlier firmware wrote, so
its spools are still sent after an upgrade. A segment is only ever appended to and a record is complete only when its whole
body is there: after a power cut the torn last record is ignored and the segment is not appended to
again.
"""

from array import array

from wattbench_fw import port

MAGIC = b"WB"  # body: the JSON payload
MAGIC_COMPACT = b"WC"  # body: compact.pack(payload)
HEADER = 8
SEG_PREFIX = "seg"
SEG_SUFFIX = ".bin"
ACKED = 0x80000000
COMPACT = 0x40000000
N_MASK = 0x3FFFFFFF
# Calls of next_unsent (about one a loop turn, at least 50 a second) before a record whose rebuild
# never finds room is dropped as damaged: about a minute. 100 gave up on sound records while a
# backfill waited for room (MicroPython 1.27.0 unix port, esp32 heap).
OOM_TRIES = 3000
# Records a segment takes before the next opens: its index (four words a record) is one array that
# grows as records are added, and on a board's fragmented heap each growth needs a free run of the
# whole array's size. Unbounded, a 64 KB segment of small compact records grew it to 3.6 KB, which the
# picow profile's heap did not have at a clean stop (MicroPython 1.27.0 unix port, fixed heap).
MAX_SEG_RECORDS = 64


class Entry:
    """A batch still in RAM."""

    __slots__ = ("eid", "n", "payload")

    def __init__(self, eid, n, payload):
        self.eid = eid
        self.n = n
        self.payload = payload


class Segment:
    """One flash file and a compact index of its records: four words each in one array, and no
    path or per-record object, so that a long outage fills flash without filling RAM."""

    __slots__ = ("number", "recs", "bytes", "closed")

    def __init__(self, number):
        self.number = number
        # per record: eid, sample count (bit 31: acknowledged, bit 30: compact body), offset, size
        self.recs = array("I")
        self.bytes = 0
        self.closed = False

    def add(self, eid, n, offset, size):
        self.recs.extend((eid, n, offset, size))

    def __len__(self):
        return len(self.recs) >> 2

    def eid(self, i):
        return self.recs[4 * i]

    def n(self, i):
        return self.recs[4 * i + 1] & N_MASK

    def compact(self, i):
        return self.recs[4 * i + 1] & COMPACT

    def acked(self, i):
        return self.recs[4 * i + 1] & ACKED

    def set_acked(self, i):
        self.recs[4 * i + 1] |= ACKED

    def unacked_samples(self):
        total = 0
        recs = self.recs
        for j in range(1, len(recs), 4):
            if not recs[j] & ACKED:
                total += recs[j] & N_MASK
        return total

    def done(self):
        recs = self.recs
        for j in range(1, len(recs), 4):
            if not recs[j] & ACKED:
                return False
        return True

    def find(self, eid):
        """Index of record eid in this segment, or -1 (eids grow along the file)."""
        recs = self.recs
        if not recs or eid < recs[0] or eid > recs[-4]:
            return -1
        for j in range(0, len(recs), 4):
            if recs[j] == eid:
                return j >> 2
        return -1


def _header(magic, n, length):
    return magic + bytes(
        (n >> 8, n & 0xFF, (length >> 24) & 0xFF, (length >> 16) & 0xFF, (length >> 8) & 0xFF, length & 0xFF)
    )


def scan_segment(path):
    """[(n, offset, size)] of the complete records in a segment file; a torn tail is ignored. n carries
    COMPACT for a compact body."""
    out = []
    try:
        f = open(path, "rb")
        end = port.file_size(path)
    except OSError:
        return out
    try:
        offset = 0
        while True:
            head = f.read(HEADER)
            if len(head) < HEADER or head[0:2] != MAGIC and head[0:2] != MAGIC_COMPACT:
                break
            n = (head[2] << 8) | head[3]
            if head[0:2] == MAGIC_COMPACT:
                n |= COMPACT
            size = (head[4] << 24) | (head[5] << 16) | (head[6] << 8) | head[7]
            # Complete only if the whole body is in the file. Compared, not read: a damaged length
            # would otherwise ask for gigabytes, and the bodies need no RAM at boot.
            if offset + HEADER + size > end:
                break
            f.seek(offset + HEADER + size)
            out.append((n, offset + HEADER, size))
            offset += HEADER + size
    finally:
        f.close()
    return out


def _pack(payload):
    # The codec is loaded for one record and released after it: on a board its code would
    # otherwise stay in RAM through an outage and its backfill (port.release).
    compact = None
    try:
        # Loading the codec can itself fail on a fragmented heap (MemoryError): the batch is then
        # kept as JSON like one the codec cannot pack.
        from wattbench_fw import compact

        return compact.pack(payload)
    except Exception:
        return None  # kept as JSON: a batch is never lost for the sake of packing it
    finally:
        compact = None
        port.release("wattbench_fw.compact")


def _unpack(body):
    from wattbench_fw import compact

    try:
        return compact.unpack_pieces(body)
    finally:
        compact = None
        port.release("wattbench_fw.compact")


class Buffer:
    def __init__(self, ram_bytes=32768, flash_bytes=0, segment_bytes=16384, directory=None, dropped=0):
        self.ram_limit = ram_bytes
        self.flash_limit = flash_bytes if directory else 0
        self.segment_bytes = segment_bytes
        self.dir = directory
        self.ram = []  # Entry with payload, oldest first
        self.ram_used = 0
        self.segments = []  # Segment, oldest first
        self.flash_used = 0
        self.next_eid = 0
        self.cursor = -1  # highest eid handed out for sending since the last rewind
        self.dropped = dropped  # samples, since first boot (persisted by the caller)
        self.spilled = 0
        self.pushed = 0
        self.acked_samples = 0
        self._next_seg = 0
        self._oom_eid = -1  # the record whose rebuild last ran out of heap, and how often in a row
        self._oom = 0
        if self.dir and self.flash_limit:
            port.makedirs(self.dir)
            self._load_segments()

    # ---- flash ------------------------------------------------------------------------------

    def _seg_path(self, number):
        return port.join(self.dir, "%s%08d%s" % (SEG_PREFIX, number, SEG_SUFFIX))

    def _load_segments(self):
        for name in port.listdir(self.dir):
            if not (name.startswith(SEG_PREFIX) and name.endswith(SEG_SUFFIX)):
                continue
            try:
                number = int(name[len(SEG_PREFIX) : -len(SEG_SUFFIX)])
            except ValueError:
                continue
            path = port.join(self.dir, name)
            records = scan_segment(path)
            if not records:
                port.remove(path)
                continue
            seg = Segment(number)
            seg.closed = True  # never append after a torn tail
            for n, offset, size in records:
                seg.add(self.next_eid, n, offset, size)
                self.next_eid += 1
            seg.bytes = port.file_size(path)
            self.flash_used += seg.bytes
            self.segments.append(seg)
            self._next_seg = max(self._next_seg, number + 1)

    def _drop_segment(self, seg):
        self.dropped += seg.unacked_samples()
        self.flash_used -= seg.bytes
        port.remove(self._seg_path(seg.number))
        self.segments.remove(seg)

    def _spill(self, entry):
        """Move one RAM entry to flash. False if flash cannot take it."""
        body = _pack(entry.payload)
        magic = MAGIC_COMPACT
        if body is None or len(body) >= len(entry.payload):
            body = entry.payload
            magic = MAGIC
        need = HEADER + len(body)
        if need > self.flash_limit:
            return False
        while self.segments and self.flash_used + need > self.flash_limit:
            self._drop_segment(self.segments[0])
        seg = self.segments[-1] if self.segments else None
        if (
            seg is None
            or seg.closed
            or seg.bytes + need > self.segment_bytes
            and len(seg)
            or len(seg) >= MAX_SEG_RECORDS
        ):
            if seg is not None:
                seg.closed = True
            seg = Segment(self._next_seg)
            self._next_seg += 1
            self.segments.append(seg)
        # What needs heap (the header, the index's next four words) before anything is written: a
        # MemoryError after the write left a record in the file that the index did not know, so
        # every later offset in the segment was wrong and those records were dropped as damaged.
        head = _header(magic, entry.n, len(body))
        seg.add(
            entry.eid, entry.n | (COMPACT if magic == MAGIC_COMPACT else 0), seg.bytes + HEADER, len(body)
        )
        with open(self._seg_path(seg.number), "ab") as f:
            f.write(head)
            f.write(body)
        entry.payload = None
        seg.bytes += need
        self.flash_used += need
        self.spilled += 1
        return True

    def _read_flash(self, seg, i):
        with open(self._seg_path(seg.number), "rb") as f:
            f.seek(seg.recs[4 * i + 2])
            body = f.read(seg.recs[4 * i + 3])
        return _unpack(body) if seg.compact(i) else body

    # ---- public -----------------------------------------------------------------------------

    def _spill_oldest(self):
        """Move the oldest RAM batch to flash: True if it moved, False if flash cannot take it, None
        when the heap has no room to pack or index it just now (it stays in RAM)."""
        oldest = self.ram[0]
        size = len(oldest.payload)
        try:
            if not self._spill(oldest):
                return False
        except MemoryError:
            return None
        self.ram.pop(0)
        self.ram_used -= size
        return True

    def make_room(self, size):
        """Spill the oldest RAM batches to flash until a batch of `size` bytes fits under the RAM
        limit. The appliance calls this before it encodes a batch, so a board's heap holds the
        spilled batch and the codec, or the new batch, and never all three at once. Nothing is
        dropped here: push() drops and counts what flash cannot take."""
        while self.ram and self.flash_limit and self.ram_used + size > self.ram_limit:
            if not self._spill_oldest():
                return

    def push(self, payload, n):
        """Queue one encoded batch of `n` samples."""
        entry = Entry(self.next_eid, n, payload)
        self.next_eid += 1
        self.ram.append(entry)
        self.ram_used += len(payload)
        self.pushed += 1
        while self.ram_used > self.ram_limit and self.ram:
            if self.flash_limit:
                spilled = self._spill_oldest()
                if spilled is None:
                    # No heap to pack or index it just now: it stays in RAM, over the limit by a
                    # batch or so, and the next push tries again.
                    return
                if spilled:
                    continue
            oldest = self.ram.pop(0)
            self.ram_used -= len(oldest.payload)
            self.dropped += oldest.n

    def spill_all(self):
        """Move every RAM batch to flash (clean shutdown), so a restart sends them. Returns count."""
        moved = 0
        while self.ram and self.flash_limit:
            entry = self.ram[0]
            size = len(entry.payload)
            if not self._spill(entry):
                break
            self.ram.pop(0)
            self.ram_used -= size
            moved += 1
        return moved

    def next_unsent(self):
        """(eid, payload) of the oldest entry not yet handed out since the last rewind, or None. The
        payload is bytes, or for a compact record in flash a list of pieces whose concatenation is
        the payload (compact.unpack_pieces), which the MQTT client sends as they are."""
        skipped = False
        for seg in self.segments:
            for i in range(len(seg)):
                eid = seg.eid(i)
                if eid > self.cursor and not seg.acked(i):
                    before = self.cursor
                    self.cursor = eid
                    try:
                        payload = self._read_flash(seg, i)
                    except MemoryError:
                        # No run of the payload's size on the heap just now: the record is fine,
                        # so it is handed out on a later call (after a collection), not dropped.
                        # A record that never fits (a damaged size) is dropped after OOM_TRIES.
                        self._oom = self._oom + 1 if self._oom_eid == eid else 1
                        self._oom_eid = eid
                        if self._oom < OOM_TRIES:
                            self.cursor = before
                            return None
                        seg.set_acked(i)
                        self.dropped += seg.n(i)
                        skipped = True
                        continue
                    except (OSError, ValueError):
                        seg.set_acked(i)  # unreadable: counted as dropped here, not again
                        self.dropped += seg.n(i)
                        skipped = True
                        continue
                    if skipped:
                        self._collect()
                    return eid, payload
        if skipped:
            self._collect()  # a segment of nothing but unreadable records is not kept
        for e in self.ram:
            if e.eid > self.cursor:
                self.cursor = e.eid
                return e.eid, e.payload
        return None

    def has_unsent(self):
        for seg in self.segments:
            for i in range(len(seg)):
                if seg.eid(i) > self.cursor and not seg.acked(i):
                    return True
        return bool(self.ram) and self.ram[-1].eid > self.cursor

    def ack(self, eid):
        """The broker has the batch: forget it (ignored if it was dropped meanwhile)."""
        for i, e in enumerate(self.ram):
            if e.eid == eid:
                self.ram_used -= len(e.payload)
                del self.ram[i]
                self.acked_samples += e.n
                return True
        for seg in self.segments:
            i = seg.find(eid)
            if i < 0:
                continue
            if seg.acked(i):
                return False
            seg.set_acked(i)
            self.acked_samples += seg.n(i)
            self._collect()
            return True
        return False

    def _collect(self):
        while self.segments and self.segments[0].done():
            seg = self.segments[0]
            self.flash_used -= seg.bytes
            port.remove(self._seg_path(seg.number))
            self.segments.pop(0)

    def rewind(self):
        """After a reconnect: send every unacknowledged entry again, oldest first."""
        self.cursor = -1

    def ram_samples(self):
        total = 0
        for e in self.ram:
            total += e.n
        return total

    def flash_samples(self):
        total = 0
        for seg in self.segments:
            total += seg.unacked_samples()
        return total

    def empty(self):
        return not self.ram and not self.segments

    def counts(self):
        """The contract's buf object."""
        return {"ram": self.ram_samples(), "flash": self.flash_samples(), "dropped": self.dropped}
