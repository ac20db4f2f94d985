"""The checking processes: chunks that go through the shared memory come back with the verdicts the
pipes give, whatever does not fit goes the pipes' way, and a worker that cannot map the memory
costs nothing but the speed."""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

import wattbench_schema as contract
from wattbench.ingest import parallel
from wattbench.ingest.parallel import SLOT_HALF, Arena, CheckPool, Item, Verdict
from wattbench.store.influx import LineEncoder

T0 = 1_763_760_000_000
RECV = T0 + 60_000

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="memfd is Linux's")


def _batch(dev: str, first: int, rows: int, fields: dict[str, Any] | None = None) -> Item:
    doc = {
        "v": 1,
        "dev": dev,
        "boot": 1,
        "clk": {"sync": "ntp"},
        "samples": [
            {"s": s, "t": T0 + s, "c": "psu1", **(fields or {"W": 100.0 + s, "V": 230.1})}
            for s in range(first, first + rows)
        ],
    }
    return contract.topic_for("samples", dev=dev), contract.dumps(doc), RECV


def _mixed() -> list[Item]:
    """Sample batches, one of them refused, broken JSON, a status message and a vector of each kind."""
    items = [_batch(f"bench-{d}", k * 50, 50) for k in range(6) for d in "ab"]
    items.append(_batch("bench-c", 0, 3, {"W": -1.0}))  # below the schema's minimum
    items.append(("wattbench/v1/dev/bench-a/samples", b"{", RECV))
    for vec in contract.vectors("valid") + contract.vectors("invalid"):
        if vec.topic is not None and vec.raw is not None:
            items.append((vec.topic, vec.raw, RECV))
    return items


def _run(pool: CheckPool, items: list[Item], chunk: int) -> list[Verdict]:
    out: list[Verdict] = []
    pending = [pool.submit(items[i : i + chunk]) for i in range(0, len(items), chunk)]
    for checking in pending:
        out.extend(checking.result(timeout=60))
    return out


def _piped(items: list[Item], chunk: int) -> list[Verdict]:
    pool = CheckPool(1, encoder=LineEncoder())
    try:
        assert not pool.shared
        return _run(pool, items, chunk)
    finally:
        pool.close()


def _one_chunk_in_one_slot(items: list[Item]) -> list[Verdict]:
    pool = CheckPool(1, encoder=LineEncoder(), slots=1)
    try:
        got = pool.submit(items).result(timeout=120)
        assert pool.shared
        return got
    finally:
        pool.close()


def test_chunks_in_shared_memory_come_back_as_through_the_pipes() -> None:
    items = _mixed()
    assert len(items) > 20
    pool = CheckPool(1, encoder=LineEncoder(), slots=2)
    try:
        assert pool.shared
        # more chunks than slots at once: the rest go the pipes' way, in the same order
        got = _run(pool, items, 4)
        again = _run(pool, items, 4)  # the slots were given back
        assert pool.shared
    finally:
        pool.close()
    want = _piped(items, 4)
    assert got == want == again
    assert sum(lines is not None for _, lines, _ in got) >= 12
    assert sum(rejected is not None for rejected, _, _ in got) >= 2


def test_lines_longer_than_their_half_slot_come_back_inline() -> None:
    # Rows of one short field make lines longer than their JSON: a chunk that fits its slot's first
    # half overflows the second, and the lines that no longer fit travel in the verdict.
    items: list[Item] = []
    size = 0
    while True:
        item = _batch("bench-a", len(items) * 500, 500, {"W": 1})
        if size + len(item[1]) > SLOT_HALF:
            break
        items.append(item)
        size += len(item[1])
    got = _one_chunk_in_one_slot(items)
    assert got == _piped(items, len(items))
    assert sum(len(lines or "") for _, lines, _ in got) > SLOT_HALF


def test_a_chunk_larger_than_a_slot_goes_through_the_pipes() -> None:
    items = [_batch("bench-a", k * 500, 500) for k in range(80)]
    assert sum(len(raw) for _, raw, _ in items) > SLOT_HALF
    assert _one_chunk_in_one_slot(items) == _piped(items, len(items))


def test_a_worker_that_cannot_map_the_memory_leaves_every_chunk_to_the_pipes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def unreachable(fd: int, size: int) -> Arena:
        # a descriptor number the collector does not have open: /proc refuses it, as a hardened one would
        return Arena(os.getpid(), 999_999, size)

    monkeypatch.setattr(CheckPool, "_arena", staticmethod(unreachable))
    items = _mixed()
    pool = CheckPool(1, encoder=LineEncoder(), slots=2)
    try:
        assert pool.shared
        got = _run(pool, items, 4)
        assert not pool.shared
    finally:
        pool.close()
    assert got == _piped(items, 4)


def test_lines_left_in_a_closed_pool_are_an_error_not_nothing() -> None:
    pool = CheckPool(1, encoder=LineEncoder(), slots=1)
    checking = pool.submit([_batch("bench-a", 0, 5)])
    assert checking._future.result(timeout=60) is not None  # the worker has written the lines
    pool.close()
    with pytest.raises(RuntimeError, match="closed"):
        checking.result()


def test_the_worker_side_without_memory_answers_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "_memory", None)
    assert parallel._check_placed(0, [("t", 0, 1, RECV)]) is None


def test_the_checking_processes_leave_ctrl_c_to_the_collector() -> None:
    """A Ctrl-C reaches the terminal's whole group: a checking process still importing its modules
    printed a KeyboardInterrupt traceback, and the collector fell back to checking in-process. They
    start with SIGINT ignored; the collector stops them itself. Here a process with a SIGINT handler of
    its own (as the collector has) starts two of them while its group gets a SIGINT every 5 ms."""
    import subprocess
    import sys

    script = """
import os, signal, threading, time
from wattbench.ingest.parallel import CheckPool
from wattbench.store.influx.lineproto import LineEncoder
seen = []
signal.signal(signal.SIGINT, lambda *_: seen.append(1))
done = threading.Event()
def storm():
    while not done.is_set():
        os.killpg(0, signal.SIGINT)
        time.sleep(0.005)
threading.Thread(target=storm, daemon=True).start()
try:
    pool = CheckPool(2, encoder=LineEncoder())
    pool.close()
    print("started")
finally:
    done.set()
"""
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, start_new_session=True
    )
    assert "Traceback" not in out.stderr and "KeyboardInterrupt" not in out.stderr, out.stderr[-3000:]
    assert out.stdout.strip() == "started", out.stderr[-3000:]
