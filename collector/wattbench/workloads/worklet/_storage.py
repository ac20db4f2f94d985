"""The file the storage worklets read: laid out once at its full size (written, so reads hit the
device, not holes), opened with O_DIRECT where the filesystem allows it, and an aligned buffer."""

from __future__ import annotations

import mmap
import os
import shutil
import tempfile

ALIGN = 4096


MAX_SIZE_MB = 1 << 24


def check_file(path: str, size_mb: int) -> None:
    """What open_file needs, checked without writing anything: raises ValueError."""
    if not 1 <= size_mb <= MAX_SIZE_MB:
        raise ValueError(f"size_mb must be 1 to {MAX_SIZE_MB}, not {size_mb}")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ValueError(f"file {path}: no folder {folder}")
    if not os.path.exists(path) and not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"file {path}: cannot be made in {folder} (not writable)")
    have = os.path.getsize(path) if os.path.isfile(path) else 0
    need = size_mb * 1024 * 1024
    if have < need:
        # laid out before the first phase: a disk that fills then fails the run after it started
        free = shutil.disk_usage(folder).free
        if free < need:
            raise ValueError(
                f"file {path}: {size_mb} MiB do not fit in {folder} ({free >> 20} MiB free); give a smaller "
                "size_mb or another file"
            )


def open_file(path: str, size_mb: int, direct: bool, block: int) -> tuple[int, mmap.mmap, int]:
    check_file(path, size_mb)
    size = size_mb * 1024 * 1024
    if not os.path.exists(path) or os.path.getsize(path) < size:
        # Written under another name and renamed, so a worker never reads a half-made file.
        folder = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".wattbench-")
        try:
            chunk = os.urandom(1 << 20)
            for _ in range(size_mb):
                os.write(fd, chunk)
            os.fsync(fd)
        except BaseException:
            os.unlink(tmp)  # a half-made file helps nobody and holds the disk
            raise
        finally:
            os.close(fd)
        if not os.path.exists(path) or os.path.getsize(path) < size:
            os.replace(tmp, path)
        else:
            os.unlink(tmp)
    flags = os.O_RDONLY
    if direct:
        flags |= getattr(os, "O_DIRECT", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if direct:
            raise ValueError(
                f"{path}: no direct I/O here ({exc.strerror}); set direct = false to read through the page cache"
            ) from None
        raise
    buf = mmap.mmap(-1, block)  # page-aligned, as O_DIRECT needs
    return fd, buf, size // block
