"""The contract holds a cluster's messages: a run that names the channels of hundreds of nodes, and a
result that lists them, validate (a 256-node cluster with 4 channels per node has 1 024)."""

from __future__ import annotations

import json
from pathlib import Path

from wattbench.core import contract

VALID = Path(__file__).resolve().parents[1] / "schema" / "vectors" / "valid"


def _channels(n: int) -> list[str]:
    return [f"node{i // 4:03d}/psu{i % 4}" for i in range(n)]


def test_a_run_start_of_a_1024_channel_cluster_validates() -> None:
    event = json.loads((VALID / "phase_run_start.json").read_text())["payload"]
    event["channels"] = _channels(1024)
    contract.validate_phase(event)


def test_a_result_listing_1024_channels_validates() -> None:
    result = json.loads((VALID / "result_channels_listed.json").read_text())["payload"]
    row = dict(result["channels"][0])
    rows = []
    for key in _channels(1024):
        dev, ch = key.split("/")
        rows.append({**row, "dev": dev, "ch": ch, "node": dev})
    result["channels"] = rows
    contract.validate_result(result)


def test_the_json_report_of_a_300_node_run_validates() -> None:
    """`wattbench report --json` carries each node's power per window and each device's offset: a
    cluster of more than 256 nodes must fit."""
    import numpy as np

    from wattbench.core.align import ChannelSpec
    from wattbench.core.evaluate import evaluate
    from wattbench.core.plan import Timing, concurrency_plan
    from wattbench.report.jsonreport import to_json
    from wattbench.store.base import Series

    t0 = 1_767_225_600_000
    plan = concurrency_plan((1, 2), timing=Timing(1, 4, 1, 0.5))
    events: list[dict] = []

    def add(event: str, phase: str, t: float, **kw: object) -> None:
        events.append(
            {"v": 1, "run": "big", "n": len(events), "t": int(t), "event": event, "phase": phase, **kw}
        )

    add("run_start", "run", t0, kind="run", workload="slurm", unit="jobs")
    for p, ps, ms, me, pe in plan.offsets():
        kw: dict = {"kind": p.kind}
        if p.kind == "idle":
            kw["target"] = 0.0
        if p.kind == "concurrency":
            kw["copies"] = p.copies
        add("phase_start", p.name, t0 + ps * 1000, **kw)
        add("measure_start", p.name, t0 + ms * 1000, **kw)
        add("measure_end", p.name, t0 + me * 1000, ops=int(p.copies or 0), **kw)
        add("phase_end", p.name, t0 + pe * 1000, **kw)
    add("run_end", "run", events[-1]["t"], kind="run")
    t = np.arange(t0 - 2000, events[-1]["t"] + 2000, 100, dtype=np.int64)
    specs = [ChannelSpec(f"n{i:03d}", "psu", node=f"n{i:03d}", hz=10, acc=0.01) for i in range(300)]

    def fetch(dev: str, ch: str, start: int, end: int, fields: tuple[str, ...]) -> Series:
        sel = t[(t >= start) & (t <= end)]
        vals = {"W": np.full(sel.size, 100.0), "u": np.full(sel.size, 0.005)}
        return Series(dev, ch, sel, np.arange(sel.size, dtype=np.int64), np.zeros(sel.size, np.int64), vals)

    ev = evaluate("big", events, fetch, specs, {f"n{i:03d}": 5.0 for i in range(300)}, now_ms=events[-1]["t"])
    doc = json.loads(to_json(ev))
    assert len(doc["detail"]["node_W"]["c2"]) == 300
    assert doc["result"]["levels"][0]["W"] == 30000.0
