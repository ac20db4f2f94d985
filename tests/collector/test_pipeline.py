"""From messages to records and notices, without sockets; records survive the spool encoding."""

from __future__ import annotations

from typing import Any

import wattbench_schema as contract
from wattbench.ingest import records as rec
from wattbench.ingest.pipeline import Pipeline
from wattbench.ingest.validate import Accepted

RECV = 1_800_000_000_000


class ListStore:
    """A Store double that records calls (the real stores have their own tests)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        if name.startswith("write_"):
            return lambda *a: self.calls.append((name, a))
        raise AttributeError(name)


def test_every_valid_vector_becomes_records_and_every_invalid_one_a_notice() -> None:
    p = Pipeline("collector-1")
    for vec in contract.vectors():
        if vec.schema == "reject":
            continue
        p.handle(vec.topic, vec.raw, RECV)
    batch, notices = p.take()
    invalid = [v for v in contract.vectors("invalid") if v.schema != "reject"]
    assert p.rejected == len(invalid) == len(notices)
    check = contract.jsonschema_validator("reject")
    for notice in notices:
        assert not list(check.iter_errors(notice)), notice
    assert len({n["t"] for n in notices}) == len(notices), (
        "reject times are distinct: no overwrite in the store"
    )
    kinds = {kind for kind, _ in batch.records}
    assert kinds == {"samples", "status", "meta", "phase", "result", "reject"}
    store = ListStore()
    n = rec.apply(store, rec.decode(rec.encode(batch.records)))
    assert n == batch.samples > 0
    assert {name for name, _ in store.calls} == {
        "write_samples",
        "write_status",
        "write_meta",
        "write_phase",
        "write_result",
        "write_reject",
    }


def test_metadata_is_stored_when_it_changes() -> None:
    meta = {
        "v": 1,
        "dev": "bench-a",
        "fw": "1.0",
        "board": "host",
        "channels": [{"c": "psu1", "meter": "sim", "q": ["W"], "hz": 1, "role": "power"}],
    }
    p = Pipeline("c1")
    topic = "wattbench/v1/dev/bench-a/meta"
    p.handle(topic, contract.dumps(meta), RECV)
    p.handle(topic, contract.dumps({**meta, "t": RECV}), RECV + 1)  # the same, published again
    changed = {**meta, "channels": [{**meta["channels"][0], "role": "other"}]}
    p.handle(topic, contract.dumps(changed), RECV + 2)
    batch, _ = p.take()
    stored = [body for kind, body in batch.records if kind == "meta"]
    assert [(b["t"], b["doc"]["channels"][0]["role"]) for b in stored] == [
        (RECV, "power"),
        (RECV + 2, "other"),
    ]


def test_energy_step_is_kept_and_reported() -> None:
    p = Pipeline("c1")
    rows = [
        {"s": i, "t": RECV - 1000 + i, "c": "psu1", "W": 1.0, "Wh": wh}
        for i, wh in enumerate([5.0, 6.0, 2.0])
    ]
    raw = contract.dumps({"v": 1, "dev": "bench-a", "boot": 1, "clk": {"sync": "ntp"}, "samples": rows})
    out = p.handle("wattbench/v1/dev/bench-a/samples", raw, RECV)
    assert isinstance(out, Accepted)
    batch, notices = p.take()
    assert batch.samples == 3
    assert [n["reason"] for n in notices] == ["energy"] and "kept" in notices[0]["detail"]


def test_health_records_carry_the_layout_fields() -> None:
    p = Pipeline("c1")
    vec = next(v for v in contract.vectors("valid") if v.name == "samples_full_batch_500")
    p.handle(vec.topic, vec.raw, RECV)
    p.take()
    p.add_health(RECV, spool_bytes=10, spool_age_s=1.5)
    batch, _ = p.take()
    ((kind, body),) = batch.records
    layout = contract.influx_layout()["measurements"]["wb_health"]["fields"]
    assert kind == "health" and set(body["fields"]) <= set(layout)
    assert body["fields"]["received"] == 500 and body["fields"]["spool_bytes"] == 10


def test_pre_checked_messages_take_the_same_path() -> None:
    """The worker-process path (verdict given) ends where the in-process path does."""
    from wattbench.ingest.validate import Validator

    v = Validator()
    a, b = Pipeline("c1"), Pipeline("c1")
    for vec in contract.vectors():
        if vec.schema == "reject":
            continue
        a.handle(vec.topic, vec.raw, RECV)
        res = v.check(vec.topic, vec.raw, RECV)
        b.handle(vec.topic, vec.raw, RECV, (None if isinstance(res, Accepted) else res, None, None))
    assert a.take()[0].records == b.take()[0].records
    assert a.counters() == b.counters()


def test_the_newest_sample_per_channel_is_kept_only_for_the_live_view() -> None:
    (vector,) = [v for v in contract.vectors("valid") if v.name == "samples_dc_ina228"]
    raw = contract.dumps(vector.payload)
    plain = Pipeline("c1")
    plain.handle(vector.topic, raw, RECV)
    assert plain.accepted == 1 and plain.latest == {}  # no /metrics: the hot path keeps nothing for it
    live = Pipeline("c1", keep_latest=True)
    live.handle(vector.topic, raw, RECV)
    dev = vector.payload["dev"]
    for row in vector.payload["samples"]:
        newest = max((r for r in vector.payload["samples"] if r["c"] == row["c"]), key=lambda r: r["t"])
        assert live.latest[(dev, row["c"])] == newest
