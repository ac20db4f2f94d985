"""Store-and-forward buffer: bounded RAM, spill to bounded flash, in-order backfill, drop oldest
and count it, acknowledged batches only leave, and segments survive a reboot."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from wattbench_fw import encode
from wattbench_fw.buffer import COMPACT, Buffer, scan_segment


def payload(i: int, size: int = 100) -> bytes:
    return (b"%06d" % i) + b"x" * (size - 6)


def drain(buf: Buffer) -> list[int]:
    """Send and acknowledge everything; returns batch numbers in sending order."""
    order = []
    while (nxt := buf.next_unsent()) is not None:
        eid, data = nxt
        order.append(int(data[:6]))
        buf.ack(eid)
    return order


def test_ram_only_in_order_and_acked() -> None:
    buf = Buffer(ram_bytes=10_000)
    for i in range(5):
        buf.push(payload(i), 10)
    assert buf.counts() == {"ram": 50, "flash": 0, "dropped": 0}
    assert drain(buf) == [0, 1, 2, 3, 4]
    assert buf.empty() and buf.acked_samples == 50


def test_unacked_batches_are_resent_after_rewind() -> None:
    buf = Buffer(ram_bytes=10_000)
    for i in range(4):
        buf.push(payload(i), 1)
    sent = [buf.next_unsent() for _ in range(3)]
    assert buf.ack(sent[1][0])  # only the middle one was acknowledged before the link dropped
    buf.rewind()
    assert drain(buf) == [0, 2, 3]


def test_ram_full_drops_oldest_without_flash() -> None:
    buf = Buffer(ram_bytes=350)
    for i in range(6):
        buf.push(payload(i), 7)
    assert buf.dropped == 21  # three oldest batches of 7 samples
    assert drain(buf) == [3, 4, 5]


def test_spill_to_flash_and_backfill_in_order(tmp_path: Path) -> None:
    buf = Buffer(ram_bytes=350, flash_bytes=100_000, segment_bytes=250, directory=str(tmp_path))
    for i in range(20):
        buf.push(payload(i), 5)
    assert buf.spilled == 17 and buf.dropped == 0
    c = buf.counts()
    assert c["ram"] == 15 and c["flash"] == 85
    assert len(list(tmp_path.glob("seg*.bin"))) > 3
    assert drain(buf) == list(range(20))
    assert buf.empty() and not list(tmp_path.glob("seg*.bin"))


def test_room_is_made_in_flash_before_the_next_batch_is_encoded(tmp_path: Path) -> None:
    """make_room spills the oldest RAM batches until one of the given size fits under the limit, so a
    board's heap never holds a spilled batch, the codec and the new batch at once; without flash it
    drops nothing (push drops and counts, as before)."""
    buf = Buffer(ram_bytes=350, flash_bytes=100_000, segment_bytes=250, directory=str(tmp_path))
    for i in range(3):
        buf.push(payload(i), 5)
    assert buf.ram_used == 300 and buf.spilled == 0
    buf.make_room(100)  # 300 + 100 > 350: the oldest goes to flash first
    assert buf.ram_used == 200 and buf.spilled == 1
    buf.push(payload(3), 5)
    assert buf.spilled == 1 and buf.dropped == 0
    assert drain(buf) == [0, 1, 2, 3]
    ram_only = Buffer(ram_bytes=350)
    for i in range(3):
        ram_only.push(payload(i), 5)
    ram_only.make_room(100)
    assert ram_only.ram_used == 300 and ram_only.dropped == 0


def test_a_segment_indexes_a_bounded_number_of_records(tmp_path: Path) -> None:
    """Many small records open new segments instead of growing one index without bound: the index is
    one array, and each growth needs a free run of its whole size on a board's heap."""
    from wattbench_fw.buffer import MAX_SEG_RECORDS

    buf = Buffer(ram_bytes=1, flash_bytes=1_000_000, segment_bytes=1_000_000, directory=str(tmp_path))
    n = 3 * MAX_SEG_RECORDS + 5
    for i in range(n):
        buf.push(payload(i, 20), 1)
    assert max(len(seg) for seg in buf.segments) == MAX_SEG_RECORDS and len(buf.segments) == 4
    assert drain(buf) == list(range(n))


def test_flash_full_drops_oldest_segment_and_counts(tmp_path: Path) -> None:
    buf = Buffer(ram_bytes=250, flash_bytes=1_000, segment_bytes=220, directory=str(tmp_path))
    for i in range(30):
        buf.push(payload(i), 3)
    kept = drain(buf)
    assert kept == sorted(kept) and kept[-1] == 29
    assert buf.dropped == 3 * (30 - len(kept))
    assert buf.flash_used == 0


def test_in_flight_batch_spilled_before_its_ack(tmp_path: Path) -> None:
    buf = Buffer(ram_bytes=250, flash_bytes=10_000, segment_bytes=1_000, directory=str(tmp_path))
    buf.push(payload(0), 1)
    eid, _ = buf.next_unsent()
    for i in range(1, 5):
        buf.push(payload(i), 1)  # pushes batch 0 out to flash while it is in flight
    assert buf.ack(eid)
    assert drain(buf) == [1, 2, 3, 4]


def test_segments_survive_reboot_including_a_torn_tail(tmp_path: Path) -> None:
    buf = Buffer(ram_bytes=250, flash_bytes=10_000, segment_bytes=10_000, directory=str(tmp_path))
    for i in range(6):
        buf.push(payload(i), 2)
    assert buf.spill_all() == 2
    (seg,) = tmp_path.glob("seg*.bin")
    with open(seg, "ab") as f:
        f.write(b"WB\x00\x02\x00\x00\x01\x00partial")  # power cut in the middle of a record
    assert len(scan_segment(str(seg))) == 6
    again = Buffer(ram_bytes=250, flash_bytes=10_000, segment_bytes=10_000, directory=str(tmp_path))
    assert again.counts()["flash"] == 12
    again.push(payload(6), 2)
    assert drain(again) == [0, 1, 2, 3, 4, 5, 6]


def test_oversized_batch_cannot_spill_and_is_counted(tmp_path: Path) -> None:
    buf = Buffer(ram_bytes=100, flash_bytes=150, segment_bytes=1_000, directory=str(tmp_path))
    buf.push(payload(0, size=300), 9)
    assert buf.dropped == 9 and buf.empty()


# ---- the compact flash record ---------------------------------------------------------------

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "firmware" / "spool-v1"
CLK = {"sync": "ntp", "age": 42.5, "off": -3.2, "err": 4.1, "ppm": 11.7, "steps": 0}


def real_batch(i: int, rows: int = 40) -> bytes:
    return encode.batch(
        "bench-a",
        3,
        CLK,
        [
            encode.row(
                {
                    "s": i * rows + k,
                    "t": 1_763_709_600_000 + (i * rows + k) * 25,
                    "c": f"psu{k % 4}",
                    "W": round(231.4 + (k % 17) * 0.3, 1),
                    "V": 229.8,
                    "A": round(1.012 + (k % 5) * 0.001, 3),
                    "PF": 0.99,
                    "Hz": 50.0,
                    "Wh": 1234.5 + i,
                }
            )
            for k in range(rows)
        ],
    )


def drain_payloads(buf: Buffer, pieces: list[list[bytes]] | None = None) -> list[bytes]:
    """Every payload handed out, as the wire carries it (a compact record comes as pieces, which
    go to `pieces` when given)."""
    out = []
    while (nxt := buf.next_unsent()) is not None:
        payload = nxt[1]
        if isinstance(payload, list):
            if pieces is not None:
                pieces.append(payload)
            payload = b"".join(payload)
        out.append(payload)
        buf.ack(nxt[0])
    return out


def test_real_batches_spill_compact_and_come_back_byte_for_byte(tmp_path: Path) -> None:
    batches = [real_batch(i) for i in range(10)]
    buf = Buffer(ram_bytes=1, flash_bytes=100_000, segment_bytes=4096, directory=str(tmp_path))
    for p in batches:
        buf.push(p, 40)
    assert buf.spilled == 10 and buf.counts()["flash"] == 400
    records = [r for seg in sorted(tmp_path.glob("seg*.bin")) for r in scan_segment(str(seg))]
    assert len(records) == 10 and all(n == 40 | COMPACT for n, _, _ in records)
    assert sum(len(p) for p in batches) >= 4 * buf.flash_used
    # and after a reboot, from the files alone
    again = Buffer(ram_bytes=1, flash_bytes=100_000, segment_bytes=4096, directory=str(tmp_path))
    assert again.counts()["flash"] == 400
    pieces: list[list[bytes]] = []
    assert drain_payloads(again, pieces) == batches
    assert again.empty() and not list(tmp_path.glob("seg*.bin"))
    # Sent from flash as pieces of a row or so, never as one run of the batch's size: after a long
    # outage a board's heap has no free run that large.
    assert len(pieces) == 10
    assert max(len(piece) for record in pieces for piece in record) < 512


def test_a_spool_of_the_previous_format_is_sent_after_an_upgrade(tmp_path: Path) -> None:
    """Segments written by the firmware before the compact record (tests/data/firmware/spool-v1:
    b"WB" records, AC and DC batches, some signed) are read and sent exactly as they were stored,
    before what the new firmware spills after them."""
    for seg in FIXTURE.glob("seg*.bin"):
        shutil.copy(seg, tmp_path / seg.name)
    expected = json.loads((FIXTURE / "expected.json").read_text())
    buf = Buffer(ram_bytes=1, flash_bytes=1 << 20, segment_bytes=8192, directory=str(tmp_path))
    assert buf.counts()["flash"] == sum(e["n"] for e in expected)
    newer = [real_batch(i) for i in range(3)]
    for p in newer:
        buf.push(p, 40)
    assert drain_payloads(buf) == [e["payload"].encode() for e in expected] + newer
    assert buf.empty() and not list(tmp_path.glob("seg*.bin"))


def test_a_torn_compact_record_is_dropped_at_boot_like_a_json_one(tmp_path: Path) -> None:
    batches = [real_batch(i) for i in range(3)]
    buf = Buffer(ram_bytes=1, flash_bytes=100_000, segment_bytes=100_000, directory=str(tmp_path))
    for p in batches:
        buf.push(p, 40)
    (seg,) = tmp_path.glob("seg*.bin")
    whole = seg.read_bytes()
    last = scan_segment(str(seg))[-1]
    for cut in (last[1] - 8 + 1, last[1] - 1, last[1], last[1] + last[2] // 2, len(whole) - 1):
        seg.write_bytes(whole[:cut])  # the power went while the last record was being written
        again = Buffer(ram_bytes=1, flash_bytes=100_000, segment_bytes=100_000, directory=str(tmp_path))
        assert again.counts()["flash"] == 80
        again.push(real_batch(9), 40)
        assert drain_payloads(again) == [*batches[:2], real_batch(9)]


def test_a_damaged_compact_record_is_counted_as_dropped(tmp_path: Path) -> None:
    buf = Buffer(ram_bytes=1, flash_bytes=100_000, segment_bytes=100_000, directory=str(tmp_path))
    for i in range(3):
        buf.push(real_batch(i), 40)
    (seg,) = tmp_path.glob("seg*.bin")
    data = bytearray(seg.read_bytes())
    first = scan_segment(str(seg))[0]
    data[first[1] : first[1] + first[2]] = b"\x07" * first[2]  # same length, nonsense inside
    seg.write_bytes(bytes(data))
    again = Buffer(ram_bytes=1, flash_bytes=100_000, segment_bytes=100_000, directory=str(tmp_path))
    assert drain_payloads(again) == [real_batch(1), real_batch(2)]
    assert again.dropped == 40


def test_a_record_whose_rebuild_runs_out_of_heap_is_sent_later_not_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On a fixed heap the rebuild may find no room for a while (MicroPython's unix port at the esp32
    # heap): the record was counted as damaged and dropped.
    from wattbench_fw import compact

    buf = Buffer(ram_bytes=1, flash_bytes=100_000, segment_bytes=100_000, directory=str(tmp_path))
    for i in range(2):
        buf.push(real_batch(i), 40)
    rebuild = compact._unpack
    fails = [3]

    def short_of_heap(data: bytes) -> tuple[list[bytes], int]:
        if fails[0]:
            fails[0] -= 1
            raise MemoryError("memory allocation failed, allocating 96 bytes")
        return rebuild(data)

    monkeypatch.setattr(compact, "_unpack", short_of_heap)
    for _ in range(3):
        assert buf.next_unsent() is None
    assert drain_payloads(buf) == [real_batch(0), real_batch(1)]
    assert buf.dropped == 0 and buf.empty()


def test_a_record_that_never_fits_the_heap_is_dropped_in_the_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from wattbench_fw import buffer, compact

    buf = Buffer(ram_bytes=1, flash_bytes=100_000, segment_bytes=100_000, directory=str(tmp_path))
    for i in range(2):
        buf.push(real_batch(i), 40)

    def short_of_heap(data: bytes) -> None:
        raise MemoryError

    monkeypatch.setattr(compact, "_unpack", short_of_heap)
    for _ in range(buffer.OOM_TRIES - 1):
        assert buf.next_unsent() is None
    assert buf.next_unsent() is None  # both records given up on: the first, then the second's turn
    assert buf.dropped == 40
    monkeypatch.undo()
    assert drain_payloads(buf) == [real_batch(1)]


def test_a_spill_the_heap_cannot_index_keeps_the_batch_in_ram(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A MemoryError growing the flash index came after the record was written: the batch was lost
    # uncounted and the unindexed bytes shifted every later record of the segment (dropped as damaged).
    from wattbench_fw import buffer

    buf = Buffer(ram_bytes=1, flash_bytes=100_000, segment_bytes=100_000, directory=str(tmp_path))
    buf.push(real_batch(0), 40)
    add = buffer.Segment.add
    fails = [1]

    def short_of_heap(seg: buffer.Segment, *args: int) -> None:
        if fails[0]:
            fails[0] -= 1
            raise MemoryError
        add(seg, *args)

    monkeypatch.setattr(buffer.Segment, "add", short_of_heap)
    buf.push(real_batch(1), 40)
    assert buf.counts() == {"ram": 40, "flash": 40, "dropped": 0}
    buf.push(real_batch(2), 40)
    assert buf.counts() == {"ram": 0, "flash": 120, "dropped": 0}
    assert drain_payloads(buf) == [real_batch(0), real_batch(1), real_batch(2)]
    again = Buffer(ram_bytes=1, flash_bytes=100_000, segment_bytes=100_000, directory=str(tmp_path))
    assert again.counts()["flash"] == 0 and again.dropped == 0


def test_a_codec_that_cannot_load_keeps_the_batch_as_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Loading the codec's code was outside the fallback: a MemoryError there failed the push.
    import builtins

    real_import = builtins.__import__

    def no_room_for_the_codec(name: str, globals=None, locals=None, fromlist=(), level=0):
        if name == "wattbench_fw" and fromlist and "compact" in fromlist:
            raise MemoryError("memory allocation failed, allocating 464 bytes")
        return real_import(name, globals, locals, fromlist, level)

    buf = Buffer(ram_bytes=1, flash_bytes=100_000, segment_bytes=100_000, directory=str(tmp_path))
    monkeypatch.setattr(builtins, "__import__", no_room_for_the_codec)
    buf.push(real_batch(0), 40)
    monkeypatch.undo()
    (seg,) = tmp_path.glob("seg*.bin")
    assert seg.read_bytes()[:2] == b"WB"
    assert drain_payloads(buf) == [real_batch(0)]


def test_a_batch_the_compact_form_cannot_shrink_is_stored_as_json(tmp_path: Path) -> None:
    buf = Buffer(ram_bytes=1, flash_bytes=100_000, segment_bytes=100_000, directory=str(tmp_path))
    buf.push(payload(0), 3)
    buf.push(real_batch(1), 40)
    (seg,) = tmp_path.glob("seg*.bin")
    assert [n for n, _, _ in scan_segment(str(seg))] == [3, 40 | COMPACT]
    assert seg.read_bytes()[:2] == b"WB"
    assert drain_payloads(buf) == [payload(0), real_batch(1)]


def test_a_damaged_length_is_a_torn_tail_not_a_huge_read(tmp_path: Path) -> None:
    buf = Buffer(ram_bytes=1, flash_bytes=100_000, segment_bytes=100_000, directory=str(tmp_path))
    buf.push(real_batch(0), 40)
    (seg,) = tmp_path.glob("seg*.bin")
    with open(seg, "ab") as f:
        f.write(b"WC\x00\x28\xff\xff\xff\xf0" + b"x" * 50)  # a header that claims almost 4 GiB
    assert len(scan_segment(str(seg))) == 1
    again = Buffer(ram_bytes=1, flash_bytes=100_000, segment_bytes=100_000, directory=str(tmp_path))
    assert drain_payloads(again) == [real_batch(0)]


def test_a_segment_of_only_damaged_records_is_removed(tmp_path: Path) -> None:
    buf = Buffer(ram_bytes=1, flash_bytes=100_000, segment_bytes=100_000, directory=str(tmp_path))
    buf.push(real_batch(0), 40)
    (seg,) = tmp_path.glob("seg*.bin")
    data = bytearray(seg.read_bytes())
    data[9:] = b"\x07" * (len(data) - 9)
    seg.write_bytes(bytes(data))
    again = Buffer(ram_bytes=1, flash_bytes=100_000, segment_bytes=100_000, directory=str(tmp_path))
    assert again.next_unsent() is None
    assert again.dropped == 40 and again.empty() and again.flash_used == 0
    assert not list(tmp_path.glob("seg*.bin"))
