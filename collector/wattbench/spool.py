"""A durable local spool for writes the store cannot take right now.

Frames are appended to segment files in one directory and fsync'd before append() returns, so the
collector may acknowledge the MQTT messages behind them. Replay reads frames in the order they were
written; commit() moves a cursor past them and deletes segments that are fully replayed. A crash
between a replay and its commit replays those frames again, which the idempotent store absorbs.

Frame: b"WBS1", payload length (u32), CRC-32 of the payload (u32), time of writing in ms (u64), payload.
A torn frame at the end of the last segment (power cut mid-write) is detected by length or CRC and
cut off when the spool is opened; frames before it are intact.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

MAGIC = b"WBS1"
HEADER = struct.Struct("<4sIIQ")
SUFFIX = ".spool"
CURSOR = "cursor"


class SpoolError(OSError):
    """The spool cannot be written (disk full, permissions): nothing more can be acknowledged."""


@dataclass(frozen=True)
class Cursor:
    segment: int
    offset: int


@dataclass(frozen=True)
class Frame:
    t_ms: int
    payload: bytes
    end: Cursor


class Spool:
    def __init__(self, directory: str | Path, segment_bytes: int = 64 << 20, fsync: bool = True) -> None:
        self.dir = Path(directory).expanduser()
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SpoolError(f"cannot create spool directory {self.dir}: {exc}") from None
        self.segment_bytes = int(segment_bytes)
        self.fsync = fsync
        self._lock = threading.RLock()
        self._sizes: dict[int, int] = {}
        self._writer: int | None = None  # fd of the segment being appended to
        self._writer_seg = 0
        self._oldest_ms: int | None = None
        self._frames_written = 0
        self._open()

    # ------------------------------------------------------------------ opening

    def _segments(self) -> list[int]:
        out = []
        for p in self.dir.glob(f"*{SUFFIX}"):
            try:
                out.append(int(p.stem))
            except ValueError:
                continue
        return sorted(out)

    def _path(self, seg: int) -> Path:
        return self.dir / f"{seg:012d}{SUFFIX}"

    def _open(self) -> None:
        segs = self._segments()
        for seg in segs:
            self._sizes[seg] = self._path(seg).stat().st_size
        if segs:
            self._repair_tail(segs[-1])
        self.cursor = self._read_cursor(segs)
        for seg in segs:
            if seg < self.cursor.segment:
                self._unlink(seg)
        self._writer_seg = segs[-1] if segs else max(self.cursor.segment, 1)
        self._oldest_ms = None
        if not self.empty:
            head = self._peek_header(self.cursor)
            self._oldest_ms = head[3] if head else None
            log.warning(
                "spool %s holds %d bytes from before this start; they will be replayed",
                self.dir,
                self.size_bytes,
            )

    def _repair_tail(self, seg: int) -> None:
        path = self._path(seg)
        good = 0
        with open(path, "rb") as f:
            while True:
                head = f.read(HEADER.size)
                if len(head) < HEADER.size:
                    break
                magic, length, crc, _t = HEADER.unpack(head)
                body = f.read(length)
                if magic != MAGIC or len(body) < length or zlib.crc32(body) != crc:
                    break
                good = f.tell()
        if good != self._sizes[seg]:
            log.warning(
                "spool segment %s had a torn frame at byte %d; cut off %d bytes",
                path.name,
                good,
                self._sizes[seg] - good,
            )
            with open(path, "r+b") as f:
                f.truncate(good)
                os.fsync(f.fileno())
            self._sizes[seg] = good

    def _read_cursor(self, segs: list[int]) -> Cursor:
        first = segs[0] if segs else 1
        try:
            seg_s, off_s = (self.dir / CURSOR).read_text().split()
            cur = Cursor(int(seg_s), int(off_s))
        except (OSError, ValueError):
            return Cursor(first, 0)
        if cur.segment not in self._sizes:
            later = [s for s in segs if s >= cur.segment]
            return Cursor(later[0], 0) if later else Cursor(max(cur.segment, first), 0)
        if cur.segment in self._sizes and cur.offset > self._sizes[cur.segment]:
            return Cursor(cur.segment, self._sizes[cur.segment])
        return cur

    def _write_cursor(self) -> None:
        tmp = self.dir / (CURSOR + ".tmp")
        with open(tmp, "w") as f:
            f.write(f"{self.cursor.segment} {self.cursor.offset}\n")
            f.flush()
            if self.fsync:
                os.fsync(f.fileno())
        os.replace(tmp, self.dir / CURSOR)

    def _unlink(self, seg: int) -> None:
        try:
            self._path(seg).unlink()
        except FileNotFoundError:
            pass
        self._sizes.pop(seg, None)

    # ------------------------------------------------------------------ figures

    @property
    def empty(self) -> bool:
        with self._lock:
            return self.size_bytes == 0

    @property
    def size_bytes(self) -> int:
        """Bytes not yet replayed."""
        with self._lock:
            total = sum(size for seg, size in self._sizes.items() if seg >= self.cursor.segment)
            return max(0, total - (self.cursor.offset if self.cursor.segment in self._sizes else 0))

    def age_s(self, now_ms: int | None = None) -> float:
        """Age of the oldest frame not yet replayed, in seconds (0 when empty)."""
        with self._lock:
            if self._oldest_ms is None or self.empty:
                return 0.0
            now = int(time.time() * 1000) if now_ms is None else now_ms
            return max(0.0, (now - self._oldest_ms) / 1000.0)

    @property
    def frames_written(self) -> int:
        return self._frames_written

    # ------------------------------------------------------------------ writing

    def append(self, payload: bytes, t_ms: int | None = None) -> None:
        """Write one frame and make it durable before returning."""
        t = int(time.time() * 1000) if t_ms is None else int(t_ms)
        frame = HEADER.pack(MAGIC, len(payload), zlib.crc32(payload), t) + payload
        with self._lock:
            try:
                if self._writer is not None and self._sizes.get(self._writer_seg, 0) >= self.segment_bytes:
                    os.close(self._writer)
                    self._writer = None
                    self._writer_seg += 1
                if self._writer is None:
                    self._writer = os.open(
                        self._path(self._writer_seg), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600
                    )
                    self._sizes.setdefault(self._writer_seg, os.fstat(self._writer).st_size)
                    if self.fsync:
                        _fsync_dir(self.dir)
                view = memoryview(frame)
                while view:
                    n = os.write(self._writer, view)
                    view = view[n:]
                if self.fsync:
                    os.fdatasync(self._writer)
            except OSError as exc:
                raise SpoolError(f"cannot write to spool {self.dir}: {exc}") from None
            was_empty = self.size_bytes == 0
            self._sizes[self._writer_seg] = self._sizes.get(self._writer_seg, 0) + len(frame)
            if was_empty:
                self._oldest_ms = t
            self._frames_written += 1

    # ------------------------------------------------------------------ replay

    def _peek_header(self, cur: Cursor) -> tuple[bytes, int, int, int] | None:
        try:
            with open(self._path(cur.segment), "rb") as f:
                f.seek(cur.offset)
                head = f.read(HEADER.size)
        except FileNotFoundError:
            return None
        if len(head) < HEADER.size:
            return None
        unpacked: tuple[bytes, int, int, int] = HEADER.unpack(head)
        return unpacked

    def read(self, max_bytes: int = 8 << 20) -> list[Frame]:
        """Frames from the cursor on, in order, up to about max_bytes (at least one frame)."""
        out: list[Frame] = []
        total = 0
        with self._lock:
            cur = self.cursor
            for seg in sorted(s for s in self._sizes if s >= cur.segment):
                offset = cur.offset if seg == cur.segment else 0
                size = self._sizes[seg]
                if offset >= size:
                    continue
                with open(self._path(seg), "rb") as f:
                    f.seek(offset)
                    while offset < size:
                        head = f.read(HEADER.size)
                        magic, length, crc, t = HEADER.unpack(head)
                        body = f.read(length)
                        if magic != MAGIC or len(body) < length or zlib.crc32(body) != crc:
                            # Only a bug or outside tampering gets here: skip the rest of the segment
                            # rather than replay garbage forever.
                            log.error(
                                "spool segment %s is damaged at byte %d; skipping its remainder", seg, offset
                            )
                            offset = size
                            out.append(Frame(t, b"", Cursor(seg, size)))
                            break
                        offset += HEADER.size + length
                        out.append(Frame(t, body, Cursor(seg, offset)))
                        total += length
                        if total >= max_bytes:
                            return out
        return out

    def commit(self, upto: Cursor) -> None:
        """Everything before `upto` is safely in the store."""
        with self._lock:
            self.cursor = upto
            for seg in [s for s in self._sizes if s < upto.segment]:
                self._unlink(seg)
            if upto.segment == self._writer_seg and upto.offset >= self._sizes.get(upto.segment, 0):
                # Fully drained: start a fresh segment so the old one can go.
                if self._writer is not None:
                    os.close(self._writer)
                    self._writer = None
                self._unlink(upto.segment)
                self._writer_seg = upto.segment + 1
                self.cursor = Cursor(self._writer_seg, 0)
                self._oldest_ms = None
            else:
                head = self._peek_header(self._normalise(self.cursor))
                self._oldest_ms = head[3] if head else None
            self._write_cursor()

    def _normalise(self, cur: Cursor) -> Cursor:
        if cur.segment in self._sizes and cur.offset >= self._sizes[cur.segment]:
            later = sorted(s for s in self._sizes if s > cur.segment)
            if later:
                return Cursor(later[0], 0)
        return cur

    def close(self) -> None:
        with self._lock:
            if self._writer is not None:
                os.close(self._writer)
                self._writer = None


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
