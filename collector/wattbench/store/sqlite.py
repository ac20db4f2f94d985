"""The embedded store: one SQLite file, used when no InfluxDB URL is given.

Tables mirror the InfluxDB measurements of schema/v1/influx.json, and their primary keys are the
InfluxDB point identity (tags + time), so a replayed write replaces itself exactly as it would in
InfluxDB. WAL mode lets `wattbench status` and the analysis read while the collector writes.
Writes are buffered by write_* and committed by flush() in one transaction.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from . import layout, sqlitefile
from .base import (
    OffsetPoint,
    SampleEncoder,
    SequenceCheck,
    Series,
    StoredReject,
    StoreError,
    file_path,
    in_effect,
)
from .sqlitefile import HEALTH_COLS, PHASE_COLS, RESULT_COLS, SAMPLE_COLS, SAMPLE_FLOATS, STATUS_COLS


def _insert(table: str, cols: tuple[str, ...]) -> str:
    names = ", ".join(f'"{c}"' for c in cols)
    return f"INSERT OR REPLACE INTO {table} ({names}) VALUES ({', '.join('?' * len(cols))})"


INSERT_SAMPLE = _insert("wb_sample", SAMPLE_COLS)
INSERT_STATUS = _insert("wb_status", ("dev", "time", *STATUS_COLS, "doc"))
INSERT_HEALTH = _insert("wb_health", ("dev", "collector", "time", *HEALTH_COLS))
INSERT_PHASE = _insert("wb_phase", ("run", "phase", "event", "time", *PHASE_COLS, "doc"))
INSERT_RESULT = _insert("wb_result", ("run", "phase", "time", *RESULT_COLS, "doc"))
INSERT_META = _insert("wb_meta", ("dev", "time", "fw", "board", "channels", "doc"))
INSERT_REJECT = _insert("wb_reject", ("reason", "collector", "time", "topic", "dev", "detail", "size"))


def _int(v: Any) -> int | None:
    return None if v is None else int(v)


class SqliteStore:
    """synchronous: "FULL" (default) makes each flush survive power loss, "NORMAL" only a crash of
    this process, which is cheaper on slow storage."""

    @classmethod
    def open(cls, spec: str | None, must_exist: bool, options: dict[str, Any]) -> SqliteStore:
        """None, a path or sqlite:///path."""
        return cls(file_path(spec) or "wattbench.sqlite", must_exist=must_exist, **options)

    def __init__(
        self,
        path: str | Path = "wattbench.sqlite",
        synchronous: str = "FULL",
        must_exist: bool = False,
        read_only: bool = False,
        **_ignored: Any,
    ) -> None:
        self.path = str(path)
        if synchronous.upper() not in ("FULL", "NORMAL", "EXTRA", "OFF"):
            raise ValueError(f"synchronous must be FULL, NORMAL or EXTRA, not {synchronous!r}")
        self._db = sqlitefile.connect(self.path, synchronous, must_exist=must_exist, read_only=read_only)
        self._lock = threading.RLock()
        self._identity = self._file_identity()
        self._pending: list[tuple[str, list[tuple[Any, ...]]]] = []
        self._samples: list[tuple[Any, ...]] = []

    def __repr__(self) -> str:
        return f"SqliteStore({self.path!r})"

    def _file_identity(self) -> tuple[int, int] | None:
        """The file the path names now (device, inode); None for memory or a file not there."""
        if self.path == ":memory:":
            return None
        try:
            st = os.stat(Path(self.path).expanduser())
        except OSError:
            return None
        return st.st_dev, st.st_ino

    def _check_still_there(self) -> None:
        # SQLite goes on writing into a deleted file's inode, and every commit "succeeds" into a file
        # nobody can open: the collector would acknowledge, and lose, all that follows.
        if self.path != ":memory:" and self._file_identity() != self._identity:
            raise StoreError(
                f"store {self.path} was deleted or replaced while in use: nothing more is written to it "
                "(restart the collector to open a new one; until then it keeps the data in its spool)"
            )

    # ------------------------------------------------------------------ writes

    def start_writing(self) -> SampleEncoder | None:
        """Rows are what this store takes: no encoder."""
        return None

    def write_samples(
        self, dev: str, samples: Sequence[dict[str, Any]], encoded: bytes | None = None
    ) -> None:
        rows = [
            (
                dev,
                r["c"],
                int(r["t"]),
                layout.sub_us(r),
                _int(r.get("s")),
                _int(r.get("f")),
                _int(r.get("n")),
                *(r.get(k) for k in SAMPLE_FLOATS),
            )
            for r in samples
        ]
        with self._lock:
            self._samples.extend(rows)

    def _queue(self, sql: str, row: tuple[Any, ...]) -> None:
        with self._lock:
            self._pending.append((sql, [row]))

    def write_phase(self, event: dict[str, Any]) -> None:
        fields = layout.phase_fields(event)
        self._queue(
            INSERT_PHASE,
            (
                event["run"],
                event["phase"],
                event["event"],
                int(event["t"]),
                *(fields[c] for c in PHASE_COLS),
                json.dumps(event),
            ),
        )

    def write_result(self, result: dict[str, Any]) -> None:
        for tags, fields in layout.result_points(result):
            doc = json.dumps(result) if tags["phase"] == "overall" else None
            self._queue(
                INSERT_RESULT,
                (tags["run"], tags["phase"], int(result["t"]), *(fields.get(c) for c in RESULT_COLS), doc),
            )

    def write_status(self, status: dict[str, Any], t_ms: int) -> None:
        fields = layout.status_fields(status)
        self._queue(
            INSERT_STATUS, (status["dev"], int(t_ms), *(fields[c] for c in STATUS_COLS), json.dumps(status))
        )

    def write_health(self, collector: str, dev: str, fields: dict[str, float | int], t_ms: int) -> None:
        self._queue(INSERT_HEALTH, (dev, collector, int(t_ms), *(fields.get(c) for c in HEALTH_COLS)))

    def write_reject(self, collector: str, reject: dict[str, Any]) -> None:
        self._queue(
            INSERT_REJECT,
            (
                reject["reason"],
                collector,
                int(reject["t"]),
                reject.get("topic"),
                reject.get("dev"),
                reject.get("detail"),
                reject.get("size"),
            ),
        )

    def write_meta(self, meta: dict[str, Any], t_ms: int) -> None:
        f = layout.meta_fields(meta)
        doc = layout.meta_doc(meta)
        self._queue(INSERT_META, (meta["dev"], int(t_ms), f["fw"], f["board"], f["channels"], doc))

    def pending(self) -> int:
        return len(self._samples) + len(self._pending)

    def discard(self) -> None:
        with self._lock:
            self._samples = []
            self._pending = []

    def flush(self) -> None:
        """Commit everything buffered in one transaction. On failure nothing of it is kept."""
        with self._lock:
            samples, self._samples = self._samples, []
            pending, self._pending = self._pending, []
            if not samples and not pending:
                return
            self._check_still_there()
            db = self._db
            try:
                db.execute("BEGIN IMMEDIATE")
                if samples:
                    db.executemany(INSERT_SAMPLE, samples)
                for sql, rows in pending:
                    db.executemany(sql, rows)
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise

    def ping(self) -> bool:
        return True

    # ------------------------------------------------------------------ reads

    def _rows(self, sql: str, args: tuple[Any, ...] | dict[str, Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return self._db.execute(sql, args).fetchall()
            except sqlite3.Error as exc:  # damaged, locked past the timeout, unreadable
                raise StoreError(f"store {self.path}: {exc}") from None

    def series(
        self, dev: str, ch: str, start_ms: int, end_ms: int, fields: tuple[str, ...] = ("W",)
    ) -> Series:
        for f in fields:
            if f not in SAMPLE_FLOATS:
                raise ValueError(f"unknown sample field {f!r}")
        cols = ", ".join(["time", "s", "f", *(f'"{f}"' for f in fields)])
        rows = self._rows(
            f"SELECT {cols} FROM wb_sample WHERE dev = ? AND ch = ? AND time >= ? AND time <= ? ORDER BY time, sub",
            (dev, ch, int(start_ms), int(end_ms)),
        )
        n = len(rows)
        columns = list(zip(*rows, strict=True)) if rows else [() for _ in range(3 + len(fields))]
        t = np.array(columns[0], dtype=np.int64) if n else np.empty(0, dtype=np.int64)
        seq = (
            np.array([-1 if s is None else s for s in columns[1]], dtype=np.int64)
            if n
            else np.empty(0, np.int64)
        )
        flags = np.array([f or 0 for f in columns[2]], dtype=np.int64) if n else np.empty(0, dtype=np.int64)
        values = {
            f: np.array(columns[3 + i], dtype=np.float64) if n else np.empty(0, dtype=np.float64)
            for i, f in enumerate(fields)
        }
        return Series(dev=dev, ch=ch, t_ms=t, seq=seq, flags=flags, values=values)

    def channels(self, start_ms: int, end_ms: int) -> list[tuple[str, str]]:
        rows = self._rows(
            "SELECT DISTINCT dev, ch FROM wb_sample WHERE time >= ? AND time <= ? ORDER BY dev, ch",
            (int(start_ms), int(end_ms)),
        )
        return [(str(d), str(c)) for d, c in rows]

    def phases(self, run: str) -> list[dict[str, Any]]:
        rows = self._rows("SELECT doc FROM wb_phase WHERE run = ?", (run,))
        out = [json.loads(doc) for (doc,) in rows]
        out.sort(key=lambda e: (e.get("n", 0), e["t"]))
        return out

    def runs(self) -> list[str]:
        rows = self._rows(
            "SELECT run, MIN(time) AS first FROM wb_phase GROUP BY run ORDER BY first DESC, run"
        )
        return [str(r) for r, _ in rows]

    def result(self, run: str) -> dict[str, Any] | None:
        rows = self._rows(
            "SELECT doc FROM wb_result WHERE run = ? AND phase = 'overall' ORDER BY time DESC LIMIT 1", (run,)
        )
        return json.loads(rows[0][0]) if rows else None

    def meta_history(self, start_ms: int, end_ms: int) -> list[tuple[int, dict[str, Any]]]:
        rows = self._rows("SELECT time, doc FROM wb_meta WHERE time <= ? ORDER BY time, dev", (int(end_ms),))
        return in_effect([(int(t), json.loads(doc)) for t, doc in rows], int(start_ms))

    def count_samples(self, dev: str | None = None) -> int:
        if dev is None:
            return int(self._rows("SELECT COUNT(*) FROM wb_sample")[0][0])
        return int(self._rows("SELECT COUNT(*) FROM wb_sample WHERE dev = ?", (dev,))[0][0])

    def sequence_check(self, dev: str | None = None) -> list[SequenceCheck]:
        """Per device: samples stored, first and last sequence number, numbers with no sample."""
        where, args = ("WHERE dev = ?", (dev,)) if dev else ("", ())
        rows = self._rows(
            f"SELECT dev, COUNT(*), MIN(s), MAX(s) FROM wb_sample {where} GROUP BY dev ORDER BY dev", args
        )
        return [
            SequenceCheck(
                dev=d, count=c, first=lo, last=hi, missing=(hi - lo + 1 - c) if c and lo is not None else 0
            )
            for d, c, lo, hi in rows
        ]

    def newest_samples(self, devices: Sequence[str]) -> dict[str, int]:
        # The key leads with (dev, ch, time): the device's channels are walked one index seek at a
        # time and each one's newest time is another, so a store of millions of rows answers at once
        # (a plain MAX(time) per device reads every row of the device).
        q = (
            "WITH RECURSIVE c(ch) AS ("
            " SELECT MIN(ch) FROM wb_sample WHERE dev = :d"
            " UNION ALL SELECT (SELECT MIN(ch) FROM wb_sample WHERE dev = :d AND ch > c.ch) FROM c"
            " WHERE c.ch IS NOT NULL)"
            " SELECT MAX((SELECT MAX(time) FROM wb_sample WHERE dev = :d AND ch = c.ch)) FROM c"
            " WHERE c.ch IS NOT NULL"
        )
        out = {}
        for dev in dict.fromkeys(devices):
            rows = self._rows(q, {"d": dev})
            if rows and rows[0][0] is not None:
                out[dev] = int(rows[0][0])
        return out

    def health(self) -> list[dict[str, Any]]:
        """The latest wb_health row of every (device, collector)."""
        cols = ("dev", "collector", "time", *HEALTH_COLS)
        rows = self._rows(
            f"SELECT {', '.join(f'h.[{c}]' for c in cols)} "
            "FROM wb_health h JOIN (SELECT dev, collector, MAX(time) AS time FROM wb_health GROUP BY dev, collector) m "
            "ON h.dev = m.dev AND h.collector = m.collector AND h.time = m.time ORDER BY h.dev, h.collector"
        )
        out = [{k: v for k, v in zip(cols, r, strict=True) if v is not None} for r in rows]
        for row in out:
            row["t"] = row.pop("time")
        return out

    def offset_history(self, devices: Sequence[str], start_ms: int, end_ms: int) -> list[OffsetPoint]:
        """Every wb_health clock offset of the given devices in the span, oldest first."""
        if not devices:
            return []
        marks = ", ".join("?" for _ in devices)
        rows = self._rows(
            "SELECT dev, collector, time, offset_ms, clk_steps FROM wb_health "
            f"WHERE dev IN ({marks}) AND time >= ? AND time <= ? AND offset_ms IS NOT NULL "
            "ORDER BY time, dev, collector",
            (*devices, int(start_ms), int(end_ms)),
        )
        return [
            OffsetPoint(dev=d, collector=c, t=t, offset_ms=off, clk_steps=steps)
            for d, c, t, off, steps in rows
        ]

    def rejects(self, limit: int = 50) -> list[StoredReject]:
        rows = self._rows(
            "SELECT reason, collector, time, topic, dev, detail, size FROM wb_reject ORDER BY time DESC LIMIT ?",
            (int(limit),),
        )
        return [
            StoredReject(reason=r, collector=c, t=t, topic=topic, dev=dev, detail=detail, size=size)
            for r, c, t, topic, dev, detail, size in rows
        ]

    def close(self) -> None:
        with self._lock:
            if self._samples or self._pending:
                self.flush()
            self._db.close()
