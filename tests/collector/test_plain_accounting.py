"""Accounting from a batch's digest (plainbatch.plain_batch, DeviceAccount.admit_plain) against
accounting from its rows (DeviceAccount.admit): the same account after every batch, whatever the
stream, and the digest only where the rows really are plain."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import wattbench_schema as contract
from wattbench.ingest import records as rec
from wattbench.ingest.accounting import DeviceAccount
from wattbench.ingest.pipeline import Pipeline
from wattbench.ingest.plainbatch import ENERGY_SLACK_WH, PlainBatch, plain_batch
from wattbench.ingest.validate import Rejected, Validator
from wattbench.store.influx import LineEncoder
from wattbench.store.influx.fastlines import compile_sample_lines

T0 = 1_763_760_000_000
CHANNELS = ("psu1", "psu2", "gpu")


def digest(doc: dict[str, Any]) -> PlainBatch | None:
    """What a checking process hands over: only rows without flags are digested (ingest.fastlines)."""
    rows = doc["samples"]
    if any("f" in r for r in rows):
        return None
    return plain_batch(
        doc["boot"],
        doc["clk"],
        [r["s"] for r in rows],
        [r["c"] for r in rows],
        [r["t"] for r in rows],
        [r.get("Wh") for r in rows],
    )


def everything(a: DeviceAccount) -> dict[str, Any]:
    out = {k: v for k, v in vars(a).items() if k not in ("_saved", "seq")}
    out["seq"] = (a.seq.high, a.seq.floor, a.seq.starts, a.seq.ends, a.seq.origins)
    return out


@st.composite
def streams(draw: Any) -> list[dict[str, Any]]:
    """Batches of one device: mostly each the next one, as a device sends them, and now and then a
    gap, a repeat, a late or reordered batch, a reboot, a clock step, a step back in time, an energy
    counter going back, a channel without energy or with flags."""
    docs = []
    boot, next_s, t, steps = 1, 0, T0, 0
    energy = {ch: 10.0 for ch in CHANNELS}
    for _ in range(draw(st.integers(1, 12))):
        k = draw(st.integers(1, 3))
        chans = list(CHANNELS[:k])
        if draw(st.booleans()):
            chans.reverse()
        n = draw(st.integers(1, 9))
        event = draw(
            st.sampled_from(["next"] * 8 + ["gap", "repeat", "late", "shuffle", "reboot", "restart"])
        )
        start = next_s
        if event == "gap":
            start += draw(st.integers(1, 5))
        elif event in ("repeat", "late"):
            start = max(0, next_s - draw(st.integers(1, 12)))
        elif event == "reboot":
            boot += 1
        elif event == "restart":
            boot += 1
            start = draw(st.integers(0, 3))
        old_boot = event == "late" and draw(st.booleans()) and boot > 1
        if draw(st.integers(0, 9)) == 0:
            steps += 1
        rows = []
        for i in range(n):
            ch = chans[i % k]
            t += draw(st.sampled_from([1, 1, 1, 0, -3])) if draw(st.integers(0, 5)) == 0 else 1
            row: dict[str, Any] = {"s": start + i, "t": t, "c": ch, "W": 100.0}
            if ch != "gpu" or draw(st.integers(0, 3)) == 0:
                energy[ch] += draw(st.sampled_from([0.001, 0.001, 0.0, -0.5]))
                row["Wh"] = energy[ch]
            if draw(st.integers(0, 15)) == 0:
                row["f"] = draw(st.sampled_from([1, 2]))
            rows.append(row)
        if event == "shuffle":
            rows = draw(st.permutations(rows))
        clk = {"sync": "ntp", "age": 3.0, "err": 2.5, "steps": steps}
        docs.append({"v": 1, "dev": "d", "boot": boot - 1 if old_boot else boot, "clk": clk, "samples": rows})
        next_s = max(next_s, start + n)
    return docs


@settings(max_examples=400, deadline=None)
@given(streams())
def test_accounting_from_the_digest_is_accounting_from_the_rows(docs: list[dict[str, Any]]) -> None:
    by_rows, by_digest = DeviceAccount("d"), DeviceAccount("d")
    for i, doc in enumerate(docs):
        recv = T0 + 1000 * i
        kept, steps = by_rows.admit(doc, recv)
        plain = digest(doc)
        if plain is not None and by_digest.admit_plain(plain, recv):
            # Only a batch kept whole, with nothing to report, may be accounted from its digest.
            assert kept == doc["samples"] and steps == []
        else:
            assert by_digest.admit(doc, recv) == (kept, steps)
        assert everything(by_digest) == everything(by_rows)
        assert by_digest.state() == by_rows.state()


def test_the_digest_takes_only_plain_rows() -> None:
    def rows(seqs: list[int], chans: str, times: list[int], wh: list[float | None]) -> PlainBatch | None:
        return plain_batch(1, {"sync": "ntp"}, seqs, list(chans), times, wh)

    plain = rows([5, 6, 7, 8, 9], "abab" + "a", [1, 1, 2, 2, 3], [0.1, None, 0.2, None, 0.3])
    assert plain == PlainBatch(
        1, {"sync": "ntp"}, 5, 5, 3, (("a", 1, 3, 0.1, 9, 0.3), ("b", 1, 2, None, 8, None))
    )
    assert rows([5, 7], "ab", [1, 1], [None, None]) is None  # not numbered one after another
    assert rows([5, 6, 7], "aab", [1, 2, 3], [None] * 3) is None  # channels not in turn
    assert rows([5, 6, 7, 8], "abba", [1, 1, 2, 2], [None] * 4) is None
    assert rows([5, 6, 7, 8], "abab", [1, 1, 1, 2], [None] * 4) is None  # a's time does not rise
    assert rows([5, 6, 7, 8], "abab", [1, 1, 2, 2], [0.1, None, None, None]) is None  # energy in some rows
    assert rows([5, 6, 7, 8], "abab", [1, 1, 2, 2], [0.2, None, 0.1, None]) is None  # energy went back
    assert rows([5, 6, 7, 8, 9, 10], "ababab", [1, 1, 2, 2, 3, 3], [0.2, None, 0.1, None, None, None]) is None
    assert rows([], "", [], []) is None


def opened(record: rec.Record) -> rec.Record:
    """A record with its rows as a list, and without the lines (the in-process path has none)."""
    kind, body = record
    if kind != "samples":
        return record
    return kind, {"dev": body["dev"], "rows": list(body["rows"])}


LINES = compile_sample_lines(contract.inline_refs("samples"))
TOPIC = contract.topic_for("samples", dev="d")


@settings(max_examples=150, deadline=None)
@given(streams())
def test_the_pipeline_stores_and_counts_the_same_from_the_digest(docs: list[dict[str, Any]]) -> None:
    """The collector's path with checking processes (encoded rows and digest from the one pass), and its
    one-pass path in its own process (a pipeline with the store's encoder), against the complete
    check in its own process: the same records, spooled alike, and the same counters."""
    assert LINES is not None
    validator = Validator()
    ref, fast = Pipeline("c1"), Pipeline("c1")
    here = Pipeline("c1", Validator(encoder=LineEncoder()))
    for i, doc in enumerate(docs):
        raw = contract.dumps(doc)
        recv = T0 + 1000 * i
        ref.handle(TOPIC, raw, recv)
        here.handle(TOPIC, raw, recv)
        one = LINES(raw, "d", recv + validator.future_tolerance_ms)
        if one is None:  # the complete check decides, as in a checking process
            res = validator.check(TOPIC, raw, recv)
            fast.handle(TOPIC, raw, recv, (res if isinstance(res, Rejected) else None, None, None))
        else:
            fast.handle(TOPIC, raw, recv, (None, one.data, plain_batch(*one.columns)))
    want = ref.take()[0].records
    for p in (fast, here):
        got = p.take()[0].records
        assert [opened(r) for r in got] == [opened(r) for r in want]
        assert rec.decode(rec.encode(got)) == rec.decode(rec.encode(want))
        assert p.counters() == ref.counters()
        assert p.accounts.state() == ref.accounts.state()


def test_rows_are_read_from_the_payload_only_when_asked_for() -> None:
    doc = {
        "v": 1,
        "dev": "d",
        "boot": 1,
        "clk": {"sync": "ntp"},
        "samples": [{"s": 0, "t": T0, "c": "a", "W": 1.5}],
    }
    rows = rec.PayloadRows(contract.dumps(doc), 1)
    assert len(rows) == 1 and rows._rows is None
    assert rows == doc["samples"] and rows[0] == doc["samples"][0] and list(rows) == doc["samples"]
    assert rec.decode(rec.encode([rec.samples("d", rows, b"encoded")])) == [
        ("samples", {"dev": "d", "rows": doc["samples"]})
    ]


def channel_by_channel(s: list[int], c: list[str], t: list[int], wh: list[float | None]) -> PlainBatch | None:
    """plain_batch's decision read the plain way, one channel's rows at a time."""
    n = len(s)
    if not n or s != list(range(s[0], s[0] + n)):
        return None
    order = list(dict.fromkeys(c))
    if any(c[i] != order[i % len(order)] for i in range(n)):
        return None
    chans = []
    for ch in order:
        idx = [i for i in range(n) if c[i] == ch]
        times = [t[i] for i in idx]
        energy = [wh[i] for i in idx]
        if any(b <= a for a, b in itertools.pairwise(times)):
            return None
        if all(w is None for w in energy):
            first_wh = last_wh = None
        elif any(w is None for w in energy):
            return None
        else:
            if any(b < a - ENERGY_SLACK_WH for a, b in itertools.pairwise(energy)):
                return None
            first_wh, last_wh = energy[0], energy[-1]
        chans.append((ch, times[0], times[-1], first_wh, s[idx[-1]], last_wh))
    return PlainBatch(1, {}, s[0], n, t[-1], tuple(chans))


@st.composite
def columns(draw: Any) -> tuple[list[int], list[str], list[int], list[float | None]]:
    """Rows in a channel turn, now and then broken; times and energy mostly rising, now and then
    still, back within the slack or beyond it, or missing in some rows or in all of a channel's."""
    k = draw(st.integers(1, 3))
    n = draw(st.integers(1, 12))
    c = [CHANNELS[i % k] for i in range(n)]
    if draw(st.integers(0, 5)) == 0:
        c = draw(st.permutations(c))
    s0 = draw(st.integers(0, 5))
    s = [s0 + i + (draw(st.integers(0, 1)) if draw(st.integers(0, 9)) == 0 else 0) for i in range(n)]
    t, wh = [], []
    now, energy = T0, 10.0
    no_energy = draw(st.sets(st.sampled_from(CHANNELS[:k])))
    for ch in c:
        now += draw(st.sampled_from([1, 1, 1, 0, -1]))
        energy += draw(st.sampled_from([0.001, 0.0, -ENERGY_SLACK_WH / 2, -ENERGY_SLACK_WH * 2]))
        t.append(now)
        missing = ch in no_energy or draw(st.integers(0, 12)) == 0
        wh.append(None if missing else energy)
    return s, c, t, wh


@settings(max_examples=600, deadline=None)
@given(columns())
def test_the_digest_decides_as_reading_each_channel_apart(
    cols: tuple[list[int], list[str], list[int], list[float | None]],
) -> None:
    """plain_batch, which slices each channel's rows out of the columns, against the rows read one
    channel at a time."""
    s, c, t, wh = cols
    assert plain_batch(1, {}, s, c, t, wh) == channel_by_channel(s, c, t, wh)
