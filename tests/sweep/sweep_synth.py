"""Synthetic traces, phase events and an in-memory store for sweep tests (no services needed)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from wattbench.store.base import (
    OffsetPoint,
    SampleEncoder,
    SequenceCheck,
    Series,
    StoredReject,
    StoreMissing,
    in_effect,
)

RUN = "20260101T000000Z-test"
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def make_series(
    dev: str,
    ch: str,
    t_ms: Sequence[int] | np.ndarray,
    W: Sequence[float] | np.ndarray | None = None,
    T: Sequence[float] | np.ndarray | None = None,
    u: Sequence[float] | np.ndarray | float | None = None,
    flags: Sequence[int] | np.ndarray | None = None,
    seq: Sequence[int] | np.ndarray | None = None,
) -> Series:
    """seq defaults to the readings' order in t_ms."""
    t = np.asarray(t_ms, dtype=np.int64)
    values: dict[str, np.ndarray] = {}
    if W is not None:
        values["W"] = np.asarray(W, dtype=np.float64)
    if T is not None:
        values["T"] = np.asarray(T, dtype=np.float64)
    if u is not None:
        values["u"] = np.broadcast_to(np.asarray(u, dtype=np.float64), t.shape).copy()
    f = np.zeros(t.shape, np.int64) if flags is None else np.asarray(flags, dtype=np.int64)
    q = np.arange(t.size, dtype=np.int64) if seq is None else np.asarray(seq, dtype=np.int64)
    return Series(dev, ch, t, q, f, values)


def trace(
    dev: str, ch: str, t0: int, t1: int, hz: float, fn: Callable[[np.ndarray], np.ndarray], **extra: Any
) -> Series:
    """Samples of fn(t_ms) every 1/hz seconds from t0 to t1 inclusive, on the device clock."""
    step = 1000.0 / hz
    t = np.round(np.arange(t0, t1 + step / 2, step)).astype(np.int64)
    return make_series(dev, ch, t, W=fn(t.astype(np.float64)), **extra)


class SeriesFetch:
    """fetch(dev, ch, start, end, fields) over a dict of Series, inclusive like Store.series."""

    def __init__(self, series: Sequence[Series]) -> None:
        self.by_key = {(s.dev, s.ch): s for s in series}
        self.calls: list[tuple[str, str, int, int]] = []

    def __call__(
        self, dev: str, ch: str, start_ms: int, end_ms: int, fields: tuple[str, ...] = ("W",)
    ) -> Series:
        self.calls.append((dev, ch, start_ms, end_ms))
        s = self.by_key.get((dev, ch))
        if s is None:
            return make_series(dev, ch, [])
        i0 = int(np.searchsorted(s.t_ms, start_ms, side="left"))
        i1 = int(np.searchsorted(s.t_ms, end_ms, side="right"))
        vals = {k: s.values[k][i0:i1] if k in s.values else np.full(i1 - i0, np.nan) for k in fields}
        return Series(dev, ch, s.t_ms[i0:i1], s.seq[i0:i1], s.flags[i0:i1], vals)


class MemoryStore:
    """The Store protocol in memory, for tests of code that reads and writes through a store. Writes
    take effect at once (nothing is ever pending).

    It is also a third backend: registered as one row (store.register), `memory://<name>` opens the
    store of that name, the same one each time within a process."""

    named: ClassVar[dict[str, MemoryStore]] = {}

    @classmethod
    def open(cls, spec: str | None, must_exist: bool, options: dict[str, Any]) -> MemoryStore:
        name = str(spec).split("://", 1)[-1]
        if must_exist and name not in cls.named:
            raise StoreMissing(f"no in-memory store {name!r}")
        return cls.named.setdefault(name, cls())

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], dict[int, dict[str, Any]]] = {}
        self.events: dict[str, dict[int, dict[str, Any]]] = {}
        self.results: dict[str, dict[str, Any]] = {}
        self.metas: list[tuple[int, dict[str, Any]]] = []
        self.healths: dict[tuple[str, str, int], dict[str, Any]] = {}
        self.rejected: dict[tuple[str, str, int], StoredReject] = {}

    def start_writing(self) -> SampleEncoder | None:
        return None

    def write_samples(
        self, dev: str, samples: Sequence[dict[str, Any]], encoded: bytes | None = None
    ) -> None:
        for s in samples:
            self.rows.setdefault((dev, s["c"]), {})[int(s["t"])] = dict(s)

    def write_phase(self, event: dict[str, Any]) -> None:
        self.events.setdefault(event["run"], {})[int(event["n"])] = dict(event)

    def write_result(self, result: dict[str, Any]) -> None:
        self.results[result["run"]] = dict(result)

    def write_status(self, status: dict[str, Any], t_ms: int) -> None:
        pass

    def write_health(self, collector: str, dev: str, fields: dict[str, float | int], t_ms: int) -> None:
        self.healths[(dev, collector, int(t_ms))] = dict(fields)

    def write_reject(self, collector: str, reject: dict[str, Any]) -> None:
        t = int(reject["t"])
        self.rejected[(reject["reason"], collector, t)] = StoredReject(
            reason=reject["reason"],
            collector=collector,
            t=t,
            topic=reject.get("topic"),
            dev=reject.get("dev"),
            detail=reject.get("detail"),
            size=reject.get("size"),
        )

    def write_meta(self, meta: dict[str, Any], t_ms: int) -> None:
        self.metas.append((int(t_ms), dict(meta)))

    def meta_history(self, start_ms: int, end_ms: int) -> list[tuple[int, dict[str, Any]]]:
        return in_effect(sorted((m for m in self.metas if m[0] <= end_ms), key=lambda m: m[0]), start_ms)

    def pending(self) -> int:
        return 0

    def discard(self) -> None:
        pass

    def flush(self) -> None:
        pass

    def ping(self) -> bool:
        return True

    def series(
        self, dev: str, ch: str, start_ms: int, end_ms: int, fields: tuple[str, ...] = ("W",)
    ) -> Series:
        rows = sorted((t, r) for t, r in self.rows.get((dev, ch), {}).items() if start_ms <= t <= end_ms)
        t = np.array([t for t, _ in rows], dtype=np.int64)
        seq = np.array([r.get("s", 0) for _, r in rows], dtype=np.int64)
        flags = np.array([r.get("f", 0) for _, r in rows], dtype=np.int64)
        vals = {k: np.array([float(r.get(k, math.nan)) for _, r in rows], dtype=np.float64) for k in fields}
        return Series(dev, ch, t, seq, flags, vals)

    def channels(self, start_ms: int, end_ms: int) -> list[tuple[str, str]]:
        return sorted(k for k, rows in self.rows.items() if any(start_ms <= t <= end_ms for t in rows))

    def phases(self, run: str) -> list[dict[str, Any]]:
        return [self.events[run][n] for n in sorted(self.events.get(run, {}))]

    def runs(self) -> list[str]:
        return sorted(self.events, key=lambda r: -max(e["t"] for e in self.events[r].values()))

    def result(self, run: str) -> dict[str, Any] | None:
        return self.results.get(run)

    def count_samples(self, dev: str | None = None) -> int:
        return sum(len(v) for k, v in self.rows.items() if dev is None or k[0] == dev)

    def sequence_check(self, dev: str | None = None) -> list[SequenceCheck]:
        seqs: dict[str, list[int]] = {}
        for (d, _), rows in self.rows.items():
            if not dev or d == dev:
                seqs.setdefault(d, []).extend(int(r["s"]) for r in rows.values() if r.get("s") is not None)
        return [
            SequenceCheck(
                dev=d,
                count=len(s),
                first=min(s, default=None),
                last=max(s, default=None),
                missing=(max(s) - min(s) + 1 - len(s)) if s else 0,
            )
            for d, s in sorted(seqs.items())
        ]

    def newest_samples(self, devices: Sequence[str]) -> dict[str, int]:
        out: dict[str, int] = {}
        for (d, _), rows in self.rows.items():
            if d in devices and rows:
                out[d] = max(out.get(d, 0), max(int(r["t"]) for r in rows.values()))
        return out

    def health(self) -> list[dict[str, Any]]:
        latest: dict[tuple[str, str], int] = {}
        for dev, coll, t in self.healths:
            latest[(dev, coll)] = max(t, latest.get((dev, coll), t))
        return [
            {"dev": dev, "collector": coll, "t": t, **self.healths[(dev, coll, t)]}
            for (dev, coll), t in sorted(latest.items())
        ]

    def offset_history(self, devices: Sequence[str], start_ms: int, end_ms: int) -> list[OffsetPoint]:
        return [
            OffsetPoint(
                dev=dev, collector=coll, t=t, offset_ms=float(f["offset_ms"]), clk_steps=f.get("clk_steps")
            )
            for (dev, coll, t), f in sorted(self.healths.items(), key=lambda kv: (kv[0][2], kv[0][:2]))
            if dev in devices and start_ms <= t <= end_ms and f.get("offset_ms") is not None
        ]

    def rejects(self, limit: int = 50) -> list[StoredReject]:
        return sorted(self.rejected.values(), key=lambda r: -r["t"])[:limit]

    def close(self) -> None:
        pass

    def add_series(self, s: Series) -> None:
        rows = []
        for i in range(len(s)):
            row: dict[str, Any] = {"s": int(s.seq[i]), "t": int(s.t_ms[i]), "c": s.ch}
            for k, v in s.values.items():
                if math.isfinite(v[i]):
                    row[k] = float(v[i])
            if s.flags[i]:
                row["f"] = int(s.flags[i])
            rows.append(row)
        self.write_samples(s.dev, rows)


def sweep_events(
    phases: Sequence[tuple[str, str, float | None, int]],
    t0: int = T0,
    pre_ms: int = 2000,
    measure_ms: int = 10000,
    post_ms: int = 2000,
    gap_ms: int = 1000,
    run: str = RUN,
    workload: str = "builtin",
    abort_after: str | None = None,
) -> list[dict[str, Any]]:
    """Phase events of a sweep: (phase, kind, target, ops) per interval, each with the given timing.
    abort_after stops the run in that phase's measurement window with a run_abort event."""
    ev: list[dict[str, Any]] = []

    def add(event: str, phase: str, t: int, **kw: Any) -> None:
        ev.append({"v": 1, "run": run, "n": len(ev), "t": t, "event": event, "phase": phase, **kw})

    add("run_start", "run", t0, kind="run", workload=workload)
    t = t0
    for phase, kind, target, ops in phases:
        extra: dict[str, Any] = {"kind": kind}
        if target is not None:
            extra["target"] = target
        add("phase_start", phase, t, **extra)
        add("measure_start", phase, t + pre_ms, **extra)
        if phase == abort_after:
            add(
                "run_abort",
                "run",
                t + pre_ms + measure_ms // 2,
                kind="run",
                reason=f"interrupted during {phase}",
            )
            return ev
        add("measure_end", phase, t + pre_ms + measure_ms, ops=ops, **extra)
        add("phase_end", phase, t + pre_ms + measure_ms + post_ms, **extra)
        t += pre_ms + measure_ms + post_ms + gap_ms
    add("run_end", "run", t - gap_ms, kind="run")
    return ev


def specpower_phases(
    cal_ops: int = 30000, measure_s: float = 10.0
) -> list[tuple[str, str, float | None, int]]:
    """3 calibration intervals at 3000 ops/s, target loads hitting their targets exactly, idle."""
    cal_rate = cal_ops / measure_s
    out: list[tuple[str, str, float | None, int]] = [
        ("cal1", "calibration", None, int(cal_ops * 0.9)),
        ("cal2", "calibration", None, cal_ops),
        ("cal3", "calibration", None, cal_ops),
    ]
    for pct in range(100, 0, -10):
        out.append((f"l{pct}", "target", pct / 100, round(cal_rate * pct / 100 * measure_s)))
    out.append(("idle", "idle", 0.0, 0))
    return out


def wait(pred: Callable[[], Any], timeout: float = 20.0) -> bool:
    """Poll pred until it is true (True) or the timeout passes (False)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.02)
    return False
