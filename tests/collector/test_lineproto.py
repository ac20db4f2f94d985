"""wb_sample lines: the per-shape template path writes exactly what the per-field path writes, the
request bodies never cut a sample batch's block, and lines made in a checking process are used only
for a batch whose every row is kept."""

from __future__ import annotations

import random
from typing import Any

import pytest

import wattbench_schema as contract
from wattbench.ingest import records as rec
from wattbench.ingest.parallel import CheckPool
from wattbench.ingest.pipeline import Pipeline
from wattbench.ingest.validate import Validator
from wattbench.store import layout
from wattbench.store.influx import InfluxStore, LineEncoder, lineproto

from .test_fastlines import points

T0 = 1_763_760_000_000
RECV = T0 + 60_000


def reference(dev: str, rows: list[dict[str, Any]]) -> list[str]:
    """Every row through the per-field path."""
    return [lineproto._field_line(f"wb_sample,ch={row['c']},dev={dev} ", row) for row in rows]


def _value(key: str, rnd: random.Random) -> Any:
    if key in layout.SAMPLE_INTS:
        # JSON integers, and the integral floats a JSON Schema also calls integers
        return rnd.choice([0, 7, 2**40, -3, 5.0, -0.0, 1e15])
    return rnd.choice([0.0, -0.0, 230, 0.1, 1e-7, 1e16, 123456.789, -0.5, 2.5e-308, 1.7976931348623157e308])


def corpus(n: int, seed: int = 19) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    keys = sorted(layout.SAMPLE_FLOATS | layout.SAMPLE_INTS)
    out = []
    for i in range(n):
        chosen = rnd.sample(keys, rnd.randint(0, 5))
        row: dict[str, Any] = {"s": i, "t": T0 + i, "c": rnd.choice(["psu1", "ac", "gpu_0"])}
        for k in chosen:
            row[k] = _value(k, rnd)
        items = list(row.items())
        rnd.shuffle(items)  # key order is the device's
        out.append(dict(items))
    return out


def test_templates_write_what_the_field_path_writes() -> None:
    rows = corpus(3000)
    for vec in contract.vectors("valid"):
        if vec.schema == "samples":
            rows.extend(vec.payload["samples"])
    assert any("f" in r for r in rows) and any(type(r["s"]) is int for r in rows)
    for dev in ("bench-a", "rack.7_b-2"):
        got: list[str] = []
        lineproto.sample_lines(dev, rows, got)
        assert got == reference(dev, rows)
    assert lineproto.sample_block("bench-a", rows) == "\n".join(reference("bench-a", rows))


def test_a_clock_step_row_keeps_its_microseconds() -> None:
    rows = [{"s": 1000, "t": T0, "c": "psu1", "W": 1.0, "f": contract.FLAG_CLOCK_STEP}]
    (line,) = reference("d", rows)
    assert line.endswith(f" {T0 * 1000 + 1 + 1000 % 999}")
    assert lineproto.sample_block("d", rows) == line


def test_integral_floats_in_integer_fields_are_written_as_integers() -> None:
    rows = [{"s": 5.0, "t": float(T0), "c": "psu1", "n": -0.0, "W": 230}]
    assert lineproto.sample_block("d", rows) == f"wb_sample,ch=psu1,dev=d s=5i,n=0i,W=230 {T0}000"


def test_the_template_cache_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lineproto, "_TEMPLATES", {})
    rows = corpus(5000, seed=7)  # far more key orders than the cache keeps
    got: list[str] = []
    lineproto.sample_lines("bench-a", rows, got)
    assert len(lineproto._TEMPLATES) == lineproto.MAX_TEMPLATES
    assert got == reference("bench-a", rows)


def test_request_bodies_hold_whole_blocks() -> None:
    store = InfluxStore("http://127.0.0.1:1", batch_lines=10)
    for i in range(7):
        rows = [{"s": 4 * i + k, "t": T0 + 4 * i + k, "c": "psu1", "W": 1.0} for k in range(4)]
        store.write_samples("d", rows)
    store.write_lines(["wb_reject,reason=x,collector=c size=1i 1"])
    assert store.pending() == 29
    bodies = store.http._bodies(store._pending)
    assert [b.count(b"\n") + 1 for b in bodies] == [12, 12, 5], "blocks of 4 lines, never cut"
    assert b"\n".join(bodies).split(b"\n") == [
        line for text, _ in store._pending for line in text.split(b"\n")
    ]


def _batch(dev: str, seqs: list[int]) -> tuple[str, bytes]:
    doc = {
        "v": 1,
        "dev": dev,
        "boot": 1,
        "clk": {"sync": "ntp"},
        "samples": [{"s": s, "t": T0 + s, "c": "psu1", "W": 100.0 + s} for s in seqs],
    }
    return contract.topic_for("samples", dev=dev), contract.dumps(doc)


def test_lines_made_elsewhere_are_used_only_when_every_row_is_kept() -> None:
    p = Pipeline("c1")
    topic, first = _batch("bench-a", [0, 1, 2])
    _, again = _batch("bench-a", [2, 3])  # s=2 is a duplicate and is dropped
    block = lineproto.sample_block("bench-a", contract.strict_loads(first)["samples"]).encode()
    p.handle(topic, first, RECV, (None, block, None))
    p.handle(topic, again, RECV, (None, b"not these", None))
    whole, part = p.take()[0].records
    assert whole[1]["encoded"] == block
    assert "encoded" not in part[1] and [r["s"] for r in part[1]["rows"]] == [3]
    # The spool keeps the rows only: the encoded form is made again when it is replayed.
    assert rec.decode(rec.encode([whole])) == [("samples", {"dev": "bench-a", "rows": whole[1]["rows"]})]


def test_the_checking_process_returns_each_batch_as_lines() -> None:
    topic, good = _batch("bench-a", [0, 1])
    pool = CheckPool(1, encoder=LineEncoder())
    try:
        verdicts = pool.submit([(topic, good, RECV), (topic, b"{", RECV)]).result(timeout=60)
    finally:
        pool.close()
    (ok, lines, plain), (bad, none, no_plain) = verdicts
    # read in one pass (store/influx/fastlines.py): the points of the row-by-row formatter, in the layout's order
    assert ok is None and lines is not None
    assert points(lines.decode()) == points(
        lineproto.sample_block("bench-a", contract.strict_loads(good)["samples"])
    )
    # and digested for accounting: numbered one after another, one channel
    assert plain is not None and (plain.first_s, plain.count) == (0, 2)
    assert bad is not None and bad.reason == "decode" and none is None and no_plain is None


def test_a_fault_in_the_one_pass_way_leaves_the_batch_to_the_complete_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The one-pass way may only say "valid": even a bug in it must not turn into a refusal."""
    from wattbench.ingest import parallel

    topic, good = _batch("bench-a", [0, 1])
    validator = Validator(encoder=LineEncoder())

    def broken(*_: Any) -> bytes | None:
        raise IndexError("a fault in the one-pass way")

    monkeypatch.setattr(validator, "_one_pass", broken)
    # what the worker's initializer sets, without its signal handling
    monkeypatch.setattr(parallel, "_validator", validator)
    [(verdict, lines, plain)] = parallel._check([(topic, good, RECV)])
    assert verdict is None and plain is None
    # and in the collector's own process (no checking process: the low-latency profile)
    p = Pipeline("c1", validator=validator)
    p.handle(topic, good, RECV)
    ((kind, body),) = p.take()[0].records
    assert kind == "samples" and "encoded" not in body and len(body["rows"]) == 2 and p.rejected == 0
    assert lines == lineproto.sample_block("bench-a", contract.strict_loads(good)["samples"]).encode()
