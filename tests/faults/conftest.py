"""Fault scenarios: the rig fixture, the figures recorder, and the short/full split.

Every scenario has a short variant that runs in the default `pytest` (CI) and, where the fault is
long by nature (a 5-minute network loss, a 60 s database outage), a full variant marked slow that
runs only with WATTBENCH_FAULTS=full (scripts/faults.sh sets it).

Figures of every scenario go to a JSON file: $WATTBENCH_FAULT_REPORT if set, else faults.json in
pytest's temporary directory.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .harness import Figures, Rig

HERE = Path(__file__).resolve().parent


def full_run() -> bool:
    return os.environ.get("WATTBENCH_FAULTS", "").lower() == "full"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if full_run():
        return
    skip = pytest.mark.skip(reason="long fault scenario: runs with WATTBENCH_FAULTS=full (scripts/faults.sh)")
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents and item.get_closest_marker("slow"):
            item.add_marker(skip)


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    r = Rig.open(tmp_path)
    try:
        yield r
    finally:
        r.close()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """The report is read, changed and written again by every scenario: under one lock across the
    threads of a run and across parallel workers writing the same $WATTBENCH_FAULT_REPORT."""
    with _report_lock, open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


_report_lock = threading.Lock()


@pytest.fixture(scope="session")
def report_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("WATTBENCH_FAULT_REPORT")
    path = Path(given) if given else tmp_path_factory.getbasetemp() / "faults.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def record(report_path: Path, request: pytest.FixtureRequest) -> Callable[[Figures], Figures]:
    """record(figures): add one scenario's figures to the report (replacing an earlier entry of the
    same scenario and variant) and print them."""

    def add(fig: Figures) -> Figures:
        entry = fig.as_dict()
        entry["test"] = request.node.nodeid
        entry["clean"] = fig.clean
        with _locked(report_path):
            try:
                doc = json.loads(report_path.read_text())
            except (OSError, ValueError):
                doc = {"scenarios": []}
            doc["scenarios"] = [
                e for e in doc["scenarios"] if (e["scenario"], e["variant"]) != (fig.scenario, fig.variant)
            ] + [entry]
            report_path.write_text(json.dumps(doc, indent=1, default=str))
        print(fig.summary())
        return fig

    return add
