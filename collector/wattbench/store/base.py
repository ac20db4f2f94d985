"""What every sample store offers. The collector writes through it; alignment, scoring and reports
read through it, so they work the same on the embedded SQLite store and on InfluxDB."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np


class StoreError(RuntimeError):
    """The store cannot be used: not reachable, not there, or not a store."""


class StoreMissing(StoreError):
    """A store that was to be read does not exist (reading never creates one)."""


@dataclass
class Series:
    """Samples of one device channel over a time range, in time order.

    t_ms and seq are int64; flags is int64 (0 where the sample had none); each requested quantity
    is float64 with NaN where the sample did not carry it (a flagged read). Nothing is interpolated.
    """

    dev: str
    ch: str
    t_ms: np.ndarray
    seq: np.ndarray
    flags: np.ndarray
    values: dict[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.t_ms.size)


class Store(Protocol):
    """Writes are idempotent: the same (measurement, tags, time) written twice is stored once."""

    def write_samples(self, dev: str, samples: list[dict[str, Any]]) -> None:
        """Rows of a validated sample batch (the `samples` array of the contract)."""

    def write_phase(self, event: dict[str, Any]) -> None:
        """A validated phase event."""

    def write_result(self, result: dict[str, Any]) -> None:
        """A validated run result."""

    def write_status(self, status: dict[str, Any], t_ms: int) -> None: ...

    def write_health(self, collector: str, dev: str, fields: dict[str, float | int], t_ms: int) -> None: ...

    def write_reject(self, collector: str, reject: dict[str, Any]) -> None: ...

    def write_meta(self, meta: dict[str, Any], t_ms: int) -> None:
        """A validated metadata document of a device as the collector received it at t_ms."""

    def flush(self) -> None:
        """Block until everything written so far is durable."""

    def discard(self) -> None:
        """Forget writes not yet flushed (after a failed flush the caller keeps its own copy)."""

    def series(
        self, dev: str, ch: str, start_ms: int, end_ms: int, fields: tuple[str, ...] = ("W",)
    ) -> Series:
        """Samples with start_ms <= t <= end_ms (inclusive; callers choose strictness)."""

    def channels(self, start_ms: int, end_ms: int) -> list[tuple[str, str]]:
        """(dev, ch) pairs with at least one sample in the range."""

    def phases(self, run: str) -> list[dict[str, Any]]:
        """Phase events of a run, ordered by n."""

    def runs(self) -> list[str]:
        """Run ids that have phase events, newest first."""

    def result(self, run: str) -> dict[str, Any] | None: ...

    def meta_history(self, start_ms: int, end_ms: int) -> list[tuple[int, dict[str, Any]]]:
        """Device metadata in effect during the span, as (store time, document), oldest first: for each
        device the last document stored at or before start_ms and every later one up to end_ms."""

    def count_samples(self, dev: str | None = None) -> int: ...

    def close(self) -> None: ...


def in_effect(rows: list[tuple[int, dict[str, Any]]], start_ms: int) -> list[tuple[int, dict[str, Any]]]:
    """From (time, document) rows up to a span's end, oldest first: what applied during the span, i.e.
    per device the last one at or before start_ms and all later ones."""
    before: dict[str, int] = {}
    for i, (t, doc) in enumerate(rows):
        if t <= start_ms:
            before[str(doc.get("dev"))] = i
    return [
        (t, doc) for i, (t, doc) in enumerate(rows) if t > start_ms or before.get(str(doc.get("dev"))) == i
    ]
