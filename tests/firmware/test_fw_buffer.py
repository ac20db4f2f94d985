"""Store-and-forward buffer: bounded RAM, spill to bounded flash, in-order backfill, drop oldest
and count it, acknowledged batches only leave, and segments survive a reboot."""

from __future__ import annotations

from pathlib import Path

from wattbench_fw.buffer import Buffer, scan_segment


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
