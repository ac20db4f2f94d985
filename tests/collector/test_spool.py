"""The local spool: durable, in order, survives restarts and torn writes, reports size and age."""

from __future__ import annotations

from pathlib import Path

import pytest

from wattbench.spool import Spool, SpoolError


def drain(sp: Spool, max_bytes: int = 1 << 20) -> list[bytes]:
    out: list[bytes] = []
    while not sp.empty:
        frames = sp.read(max_bytes)
        out += [f.payload for f in frames]
        sp.commit(frames[-1].end)
    return out


def test_frames_come_back_in_order(tmp_path: Path) -> None:
    sp = Spool(tmp_path, segment_bytes=1000)
    payloads = [f"frame {i}".encode() * (1 + i % 7) for i in range(300)]
    for p in payloads:
        sp.append(p, t_ms=1000 + len(p))
    assert sp.size_bytes > 0 and len(list(tmp_path.glob("*.spool"))) > 3  # rolled over segments
    assert drain(sp, max_bytes=500) == payloads
    assert sp.empty and sp.size_bytes == 0 and sp.age_s() == 0.0
    assert list(tmp_path.glob("*.spool")) == []  # replayed segments are deleted


def test_size_and_age(tmp_path: Path) -> None:
    sp = Spool(tmp_path)
    sp.append(b"a" * 100, t_ms=10_000)
    sp.append(b"b" * 100, t_ms=20_000)
    assert sp.size_bytes == 2 * (100 + 20)
    assert sp.age_s(now_ms=40_000) == 30.0
    frames = sp.read(max_bytes=50)
    assert len(frames) == 1
    sp.commit(frames[0].end)
    assert sp.age_s(now_ms=40_000) == 20.0 and sp.size_bytes == 120


def test_reopen_resumes_after_the_last_commit(tmp_path: Path) -> None:
    sp = Spool(tmp_path, segment_bytes=200)
    for i in range(20):
        sp.append(b"%d" % i * 10)
    frames = sp.read(max_bytes=100)
    sp.commit(frames[-1].end)
    done = len(frames)
    sp.close()
    again = Spool(tmp_path, segment_bytes=200)
    assert drain(again) == [b"%d" % i * 10 for i in range(done, 20)]


def test_uncommitted_frames_are_replayed_again_after_a_crash(tmp_path: Path) -> None:
    sp = Spool(tmp_path)
    for i in range(5):
        sp.append(b"x%d" % i)
    sp.read()  # replayed into the store, then the process dies before commit
    assert drain(Spool(tmp_path)) == [b"x%d" % i for i in range(5)]


def test_torn_tail_is_cut_off_and_earlier_frames_survive(tmp_path: Path) -> None:
    sp = Spool(tmp_path)
    for i in range(3):
        sp.append(b"frame-%d" % i)
    sp.close()
    seg = next(tmp_path.glob("*.spool"))
    with open(seg, "ab") as f:
        f.write(b"WBS1\x10\x00\x00\x00partial")  # a power cut in the middle of a write
    again = Spool(tmp_path)
    assert drain(again) == [b"frame-0", b"frame-1", b"frame-2"]
    again.append(b"after")
    assert drain(again) == [b"after"]


def test_unwritable_directory_is_a_spool_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(SpoolError):
        Spool(blocker / "spool")
