"""The Store protocol is the whole contract between the stores and the code that holds one.

- mypy checks that both stores (and the in-memory test store) are a `Store`, and that the code holding a
  store calls nothing the protocol does not promise;
- every protocol method has the same parameters and defaults in both stores;
- no code asks a store which methods it has (getattr/hasattr probing) or holds a store as Any;
- both stores give the same answers to the accounting reads (health, clock offsets, sequence check,
  rejects), the InfluxDB one against the real InfluxDB 1.8.
"""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from wattbench.store.base import SampleSink, Store, StoreReader
from wattbench.store.influx import InfluxStore
from wattbench.store.sqlite import SqliteStore

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "collector" / "wattbench"
T0 = 1_763_760_000_000

# The store package and every module that is handed a store: [tool.mypy] files in pyproject.toml.
CHECKED: list[str] = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]["files"]

CONFORMANCE = """
from sweep_synth import MemoryStore

from wattbench.store import Store, open_store
from wattbench.store.influx import InfluxStore
from wattbench.store.sqlite import SqliteStore


def sqlite_store(store: SqliteStore) -> Store:
    return store


def influx_store(store: InfluxStore) -> Store:
    return store


def memory_store(store: MemoryStore) -> Store:
    return store


def opened(spec: str) -> Store:
    return open_store(spec)
"""

# A store that lacks most methods: mypy must refuse it, or the check above proves nothing.
CONTROL = """
from typing import Any

from wattbench.store import Store


class OnlyWrites:
    def write_samples(self, dev: str, samples: list[dict[str, Any]]) -> None:
        pass


def only_writes(store: OnlyWrites) -> Store:
    return store  # REFUSED
"""


def _mypy(tmp_path: Path, *extra: Path) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("mypy")
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--cache-dir",
            str(tmp_path / "mypy-cache"),
            "--no-error-summary",
            "--show-error-codes",
            *CHECKED,
            *map(str, extra),
        ],
        cwd=REPO,  # the [tool.mypy] settings of pyproject.toml apply
        capture_output=True,
        text=True,
    )


def test_both_stores_are_a_store_for_mypy(tmp_path: Path) -> None:
    conformance = tmp_path / "store_conformance.py"
    conformance.write_text(CONFORMANCE)
    control = tmp_path / "store_control.py"
    control.write_text(CONTROL)
    out = _mypy(tmp_path, conformance, control)
    errors = [line for line in out.stdout.splitlines() if ": error:" in line]
    refused_line = next(i for i, line in enumerate(CONTROL.splitlines(), 1) if "# REFUSED" in line)
    control_errors = [e for e in errors if e.startswith(str(control))]
    others = [e for e in errors if not e.startswith(str(control))]
    assert not others, "\n".join(others) + out.stderr
    # The check is live: the store that is not one is refused, at its return.
    assert len(control_errors) == 1, out.stdout + out.stderr
    assert f":{refused_line}:" in control_errors[0] and "return-value" in control_errors[0], control_errors


def _protocol_methods() -> list[str]:
    # Store is its two halves: the sink's methods and the reader's.
    return sorted(
        {
            name
            for half in (SampleSink, StoreReader)
            for name, value in vars(half).items()
            if inspect.isfunction(value) and not name.startswith("_")
        }
    )


@pytest.mark.parametrize("impl", [SqliteStore, InfluxStore], ids=["sqlite", "influx"])
def test_every_protocol_method_has_the_protocols_parameters(impl: type) -> None:
    """mypy accepts an implementation whose defaults differ from the protocol's; callers that rely on a
    default would then get different answers from the two stores."""
    assert len(_protocol_methods()) >= 20
    for name in _protocol_methods():
        assert callable(getattr(impl, name, None)), f"{impl.__name__} has no {name}()"
        want = inspect.signature(getattr(Store, name))
        got = inspect.signature(getattr(impl, name))
        assert [(p.name, p.kind, p.default) for p in got.parameters.values()] == [
            (p.name, p.kind, p.default) for p in want.parameters.values()
        ], f"{impl.__name__}.{name}{got} differs from Store.{name}{want}"
        assert str(got.return_annotation) == str(want.return_annotation), f"{impl.__name__}.{name}"


PROBE = re.compile(r"\b(?:getattr|hasattr)\(\s*(?:self\.)?_?store\b")
UNTYPED = re.compile(r"\b_?store\s*:\s*Any\b")
NOT_YET: set[str] = set()  # files allowed to probe while they are being moved over: none


def _hits(pattern: re.Pattern[str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line):
                found.setdefault(path.relative_to(PACKAGE).as_posix(), []).append(f"{n}: {line.strip()}")
    return found


def test_the_patterns_find_probes_and_untyped_stores() -> None:
    for text in ('getattr(store, "health", None)', "hasattr(self.store, 'x')", "getattr(self._store, n)"):
        assert PROBE.search(text), text
    assert not PROBE.search('getattr(exc, "permanent", False)')
    assert not PROBE.search("getattr(args, 'store', None)")
    for text in ("def f(store: Any) -> None:", "    store: Any = None", "self.store: Any = store"):
        assert UNTYPED.search(text), text
    assert not UNTYPED.search("store: Store | None = None")


def test_no_code_asks_a_store_which_methods_it_has() -> None:
    probes = {path: hits for path, hits in _hits(PROBE).items() if path not in NOT_YET}
    assert not probes, f"call the Store protocol's methods instead: {probes}"


def test_no_code_holds_a_store_as_any() -> None:
    untyped = {path: hits for path, hits in _hits(UNTYPED).items() if path not in NOT_YET}
    assert not untyped, f"type it as wattbench.store.Store: {untyped}"


def test_the_collector_does_not_probe_its_store() -> None:
    assert not {path: hits for path, hits in _hits(PROBE).items() if path.startswith("ingest/")}


# ---------------------------------------------------------------------- the same answers from both


def _rows(dev_seqs: list[int], ch: str = "psu1") -> list[dict[str, Any]]:
    return [{"s": s, "t": T0 + 100 * s, "c": ch, "W": 100.0 + s} for s in dev_seqs]


def _accounting_answers(store: Store) -> dict[str, Any]:
    assert store.ping() is True
    store.write_samples("bench-a", _rows([0, 1, 2, 3, 5, 6, 7, 8, 9]))
    store.write_samples("bench-b", _rows([40, 41], "psu2"))
    store.write_health("c1", "bench-a", {"received": 10, "offset_ms": 12.5, "clk_steps": 0}, T0)
    store.write_health("c2", "bench-a", {"received": 9, "offset_ms": -3.0}, T0)  # same time, other collector
    store.write_health("c1", "bench-a", {"received": 20, "offset_ms": 11.0, "clk_steps": 1}, T0 + 5000)
    store.write_health("c1", "bench-b", {"received": 2, "stored": 2}, T0 + 1000)  # no offset
    store.write_reject("c1", {"v": 1, "t": T0, "reason": "decode", "topic": "wattbench/v1/dev/x/samples"})
    store.write_reject("c1", {"v": 1, "t": T0 + 10, "reason": "schema", "dev": "x", "size": 12})
    assert store.pending() > 0
    store.flush()
    assert store.pending() == 0
    store.write_samples("bench-c", _rows([1]))
    assert store.pending() > 0
    store.discard()
    assert store.pending() == 0
    store.flush()
    assert store.count_samples("bench-c") == 0, "discarded writes are never stored"
    return {
        "sequence_check": store.sequence_check(),
        "sequence_check_a": store.sequence_check("bench-a"),
        "health": store.health(),
        "offsets": store.offset_history(["bench-a", "bench-b"], T0, T0 + 5000),
        "offsets_after": store.offset_history(["bench-a"], T0 + 1, T0 + 5000),
        "offsets_none": store.offset_history([], T0, T0 + 5000),
        "rejects": store.rejects(),
        "newest_reject": store.rejects(1),
    }


EXPECTED = {
    "sequence_check": [
        {"dev": "bench-a", "count": 9, "first": 0, "last": 9, "missing": 1},
        {"dev": "bench-b", "count": 2, "first": 40, "last": 41, "missing": 0},
    ],
    "sequence_check_a": [{"dev": "bench-a", "count": 9, "first": 0, "last": 9, "missing": 1}],
    "health": [
        {
            "dev": "bench-a",
            "collector": "c1",
            "t": T0 + 5000,
            "received": 20,
            "offset_ms": 11.0,
            "clk_steps": 1,
        },
        {"dev": "bench-a", "collector": "c2", "t": T0, "received": 9, "offset_ms": -3.0},
        {"dev": "bench-b", "collector": "c1", "t": T0 + 1000, "received": 2, "stored": 2},
    ],
    "offsets": [
        {"dev": "bench-a", "collector": "c1", "t": T0, "offset_ms": 12.5, "clk_steps": 0},
        {"dev": "bench-a", "collector": "c2", "t": T0, "offset_ms": -3.0, "clk_steps": None},
        {"dev": "bench-a", "collector": "c1", "t": T0 + 5000, "offset_ms": 11.0, "clk_steps": 1},
    ],
    "offsets_after": [
        {"dev": "bench-a", "collector": "c1", "t": T0 + 5000, "offset_ms": 11.0, "clk_steps": 1}
    ],
    "offsets_none": [],
    "rejects": [
        {
            "reason": "schema",
            "collector": "c1",
            "t": T0 + 10,
            "topic": None,
            "dev": "x",
            "detail": None,
            "size": 12,
        },
        {
            "reason": "decode",
            "collector": "c1",
            "t": T0,
            "topic": "wattbench/v1/dev/x/samples",
            "dev": None,
            "detail": None,
            "size": None,
        },
    ],
    "newest_reject": [
        {
            "reason": "schema",
            "collector": "c1",
            "t": T0 + 10,
            "topic": None,
            "dev": "x",
            "detail": None,
            "size": 12,
        }
    ],
}


def test_sqlite_store_answers_the_accounting_reads(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "wb.sqlite")
    try:
        assert _accounting_answers(store) == EXPECTED
    finally:
        store.close()


@pytest.mark.services
def test_influx_store_answers_the_accounting_reads_as_sqlite_does(influxdb) -> None:  # type: ignore[no-untyped-def]
    store = InfluxStore(influxdb.url, db=influxdb.db)
    try:
        got = _accounting_answers(store)
    finally:
        store.close()
    for key, want in EXPECTED.items():
        assert got[key] == want, key


def test_a_sqlite_read_that_fails_is_a_store_error(tmp_path: Path) -> None:
    """As with InfluxDB, a read the file cannot answer is a StoreError: commands report it in one line
    (exit 3), and a sweep whose store fails after the run still keeps and reports what it measured."""
    import sqlite3

    from wattbench.store.base import StoreError

    path = tmp_path / "wb.sqlite"
    store = SqliteStore(path)
    try:
        damage = sqlite3.connect(path)
        damage.execute("DROP TABLE wb_phase")
        damage.commit()
        damage.close()
        with pytest.raises(StoreError, match="wb_phase"):
            store.runs()
        assert store.count_samples() == 0, "the rest of the file still reads"
    finally:
        store.close()
