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
