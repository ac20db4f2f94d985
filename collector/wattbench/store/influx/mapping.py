"""The InfluxDB store: the layout of schema/influx-layout.md mapped onto InfluxDB's measurements, tags
and fields. Writes become line protocol (lineproto.py), buffered by the caller's write_* calls and sent
by flush() through the transport (http.py) synchronously, so that flush() returning means InfluxDB has
the points: the collector acknowledges MQTT messages only then. Reads are InfluxQL.

Credentials come as options, resolved by the settings (config.py) from the command line, the
environment or the file, and are never logged or shown in repr().
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...config import redact_url
from ..base import OffsetPoint, SampleEncoder, SequenceCheck, Series, StoredReject, in_effect
from ..layout import SAMPLE_FLOATS, is_doc_field, loaded_doc
from . import lineproto
from .http import InfluxHttp, StoreRejected, StoreUnavailable, _ident

log = logging.getLogger(__name__)


def _q(value: str) -> str:
    """An InfluxQL string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


class InfluxStore:
    @classmethod
    def open(cls, spec: str | None, must_exist: bool, options: dict[str, Any]) -> InfluxStore:
        """http(s)://host:port; must_exist: the server must answer now (StoreUnavailable)."""
        store = cls(str(spec), **options)
        if must_exist:
            store.http._ping()  # raises StoreUnavailable with the reason
        return store

    def __init__(
        self,
        url: str,
        db: str | None = None,
        rp: str | None = None,
        bucket: str | None = None,
        org: str | None = None,
        token: str | None = None,
        user: str | None = None,
        password: str | None = None,
        batch_lines: int = 10_000,
        timeout_s: float = 15.0,
        create_db: bool = True,
        verify_ssl: bool = True,
        gzip: bool = False,
        parallel_writes: int = 4,
        **_ignored: Any,
    ) -> None:
        # The values come resolved (config.py's settings: options, environment, file); a backend that
        # read the environment itself would give it a second order of precedence.
        self.http = InfluxHttp(
            url,
            db=db or "wattbench",
            rp=rp or "",
            bucket=bucket or "",
            org=org or "",
            token=token or "",
            user=user or "",
            password=password or "",
            batch_lines=batch_lines,
            timeout_s=timeout_s,
            create_db=create_db,
            verify_ssl=verify_ssl,
            gzip=gzip,
            parallel_writes=parallel_writes,
        )
        # (UTF-8 line protocol, lines in it): one line, or one sample batch's block of lines
        self._pending: list[tuple[bytes, int]] = []
        self._lock = threading.RLock()
        self.written_lines = 0

    def __repr__(self) -> str:  # never show credentials
        return f"InfluxStore({redact_url(self.url)!r}, db={self.db!r}, version={self.version!r})"

    @property
    def url(self) -> str:
        return self.http.url

    @property
    def db(self) -> str:
        return self.http.db

    @property
    def version(self) -> str | None:
        return self.http.version

    # ------------------------------------------------------------------ writes

    def start_writing(self) -> SampleEncoder | None:
        lineproto.load_point_writer()
        return lineproto.LineEncoder()

    def write_samples(
        self, dev: str, samples: Sequence[dict[str, Any]], encoded: bytes | None = None
    ) -> None:
        with self._lock:
            if encoded is None:
                encoded = lineproto.sample_block(dev, samples).encode()
            if encoded:
                self._pending.append((encoded, len(samples)))

    def write_lines(self, lines: list[str]) -> None:
        self._add(*lines)

    def _add(self, *lines: str | None) -> None:
        """Buffer single lines; None (a point with no field left) is skipped."""
        with self._lock:
            self._pending.extend((line.encode(), 1) for line in lines if line)

    def write_phase(self, event: dict[str, Any]) -> None:
        self._add(lineproto.phase_line(event))

    def write_result(self, result: dict[str, Any]) -> None:
        self._add(*lineproto.result_lines(result))

    def write_status(self, status: dict[str, Any], t_ms: int) -> None:
        self._add(lineproto.status_line(status, t_ms))

    def write_health(self, collector: str, dev: str, fields: dict[str, float | int], t_ms: int) -> None:
        self._add(lineproto.health_line(collector, dev, fields, t_ms))

    def write_reject(self, collector: str, reject: dict[str, Any]) -> None:
        self._add(lineproto.reject_line(collector, reject))

    def write_meta(self, meta: dict[str, Any], t_ms: int) -> None:
        self._add(lineproto.meta_line(meta, t_ms))

    def pending(self) -> int:
        return sum(n for _, n in self._pending)

    def discard(self) -> None:
        """Forget unsent writes (the caller has them elsewhere, e.g. in the spool)."""
        with self._lock:
            self._pending = []

    def flush(self) -> None:
        """Send everything buffered. On failure the buffer is emptied and the error raised: the caller
        keeps its own copy (the collector spools it), so nothing is held twice."""
        with self._lock:
            items, self._pending = self._pending, []
        if not items:
            return
        self.http.send(items)
        self.written_lines += sum(n for _, n in items)

    def ping(self) -> bool:
        return self.http.ping()

    # ------------------------------------------------------------------ reads (InfluxQL over /query)

    def query(self, q: str, chunked: bool = False) -> list[dict[str, Any]]:
        """Rows of an InfluxQL query as dicts (tags included, time in epoch ms)."""
        return self.http.query(q, chunked)

    def series(
        self, dev: str, ch: str, start_ms: int, end_ms: int, fields: tuple[str, ...] = ("W",)
    ) -> Series:
        for f in fields:
            if f not in SAMPLE_FLOATS:
                raise ValueError(f"unknown sample field {f!r}")
        cols = ",".join(_ident(f) for f in ("s", "f", *fields))
        q = (
            f"SELECT {cols} FROM wb_sample WHERE dev = {_q(dev)} AND ch = {_q(ch)} "
            f"AND time >= {int(start_ms)}ms AND time <= {int(end_ms)}ms ORDER BY time ASC"
        )
        rows = self.query(q, chunked=True)
        n = len(rows)
        t = np.fromiter((r["time"] for r in rows), dtype=np.int64, count=n)
        seq = np.fromiter(
            (r.get("s") if r.get("s") is not None else -1 for r in rows), dtype=np.int64, count=n
        )
        flags = np.fromiter((r.get("f") or 0 for r in rows), dtype=np.int64, count=n)
        values = {
            f: np.array([r.get(f) for r in rows], dtype=np.float64) if n else np.empty(0, dtype=np.float64)
            for f in fields
        }
        return Series(dev=dev, ch=ch, t_ms=t, seq=seq, flags=flags, values=values)

    def channels(self, start_ms: int, end_ms: int) -> list[tuple[str, str]]:
        q = (
            f'SELECT count("s") FROM wb_sample WHERE time >= {int(start_ms)}ms AND time <= {int(end_ms)}ms '
            'GROUP BY "dev","ch"'
        )
        return sorted({(r["dev"], r["ch"]) for r in self.query(q) if r.get("count")})

    def phases(self, run: str) -> list[dict[str, Any]]:
        rows = self.query(f"SELECT * FROM wb_phase WHERE run = {_q(run)}")
        out = []
        for r in rows:
            what = f"run {run}, {r.get('event')} of phase {r.get('phase')}"
            doc = loaded_doc(r, what)
            if doc is not None:
                out.append(doc)
                continue
            # written without the whole event (e.g. by Telegraf): what the fields hold
            event: dict[str, Any] = {"v": 1, "t": r.pop("time")}
            event.update({k: v for k, v in r.items() if v is not None and not is_doc_field("wb_phase", k)})
            if isinstance(event.get("channels"), str):
                event["channels"] = [c for c in event["channels"].split(",") if c]
            out.append(event)
        out.sort(key=lambda e: (e.get("n", 0), e["t"]))
        return out

    def runs(self) -> list[str]:
        rows = self.query('SELECT first("n") FROM wb_phase GROUP BY "run"')
        rows.sort(key=lambda r: r["time"], reverse=True)
        return [r["run"] for r in rows]

    def result(self, run: str) -> dict[str, Any] | None:
        rows = self.query(f"SELECT * FROM wb_result WHERE run = {_q(run)}")
        if not rows:
            return None
        for r in reversed(rows):  # the newest scoring of the run
            if r.get("phase") == "overall":
                whole = loaded_doc(r, f"run {run}, result")
                if whole is not None:
                    return whole
        out: dict[str, Any] = {"v": 1, "run": run, "levels": [], "checks": []}
        for r in rows:
            if r.get("phase") == "overall":
                out["t"] = r["time"]
                out["overall"] = r.get("overall")
                out["valid"] = r.get("valid")
                if r.get("channels"):
                    out["channels"] = json.loads(r["channels"])
            else:
                level = {
                    k: v
                    for k, v in r.items()
                    if v is not None
                    and k not in ("time", "run", "valid", "overall")
                    and not is_doc_field("wb_result", k)
                }
                out["levels"].append(level)
        return out

    def meta_history(self, start_ms: int, end_ms: int) -> list[tuple[int, dict[str, Any]]]:
        rows = self.query(f'SELECT * FROM wb_meta WHERE time <= {int(end_ms)}ms GROUP BY "dev"')
        docs = []
        for r in rows:
            doc = loaded_doc(r, f"metadata of {r.get('dev')} at {r['time']} ms")
            if doc is not None:
                docs.append((int(r["time"]), doc))
        docs.sort(key=lambda x: x[0])
        return in_effect(docs, int(start_ms))

    def count_samples(self, dev: str | None = None) -> int:
        where = f" WHERE dev = {_q(dev)}" if dev else ""
        rows = self.query(f'SELECT count("s") FROM wb_sample{where}')
        return int(sum(r.get("count") or 0 for r in rows))

    def sequence_check(self, dev: str | None = None) -> list[SequenceCheck]:
        """Per device: samples stored, first and last sequence number, and how many numbers in
        between have no sample. Sequence numbers span all channels of a device, so this is the
        store's own answer to 'did everything arrive exactly once'."""
        where = f" WHERE dev = {_q(dev)}" if dev else ""
        rows = self.query(f'SELECT count("s"), min("s"), max("s") FROM wb_sample{where} GROUP BY "dev"')
        out = []
        for r in rows:
            count, first, last = int(r["count"] or 0), r["min"], r["max"]
            span = (last - first + 1) if count else 0
            out.append(SequenceCheck(dev=r["dev"], count=count, first=first, last=last, missing=span - count))
        return sorted(out, key=lambda d: d["dev"])

    def newest_samples(self, devices: Sequence[str]) -> dict[str, int]:
        if not devices:
            return {}
        which = " OR ".join(f"dev = {_q(d)}" for d in dict.fromkeys(devices))
        rows = self.query(f'SELECT last("s") FROM wb_sample WHERE {which} GROUP BY "dev"')
        return {str(r["dev"]): int(r["time"]) for r in rows if r.get("time") is not None}

    def health(self) -> list[dict[str, Any]]:
        """The latest wb_health point of every (device, collector)."""
        rows = self.query('SELECT * FROM wb_health GROUP BY "dev","collector" ORDER BY time DESC LIMIT 1')
        out = []
        for r in rows:
            # SELECT * gives every field of the measurement, null where this point has none; such a
            # field is left out, as the SQLite store leaves it out.
            row = {k: v for k, v in r.items() if v is not None and k != "time"}
            row["t"] = r["time"]
            out.append(row)
        # Series come back in tag-key order (collector before dev).
        out.sort(key=lambda r: (r["dev"], r["collector"]))
        return out

    def offset_history(self, devices: Sequence[str], start_ms: int, end_ms: int) -> list[OffsetPoint]:
        """Every wb_health clock offset of the given devices in the span, oldest first."""
        if not devices:
            return []
        which = " OR ".join(f"dev = {_q(d)}" for d in devices)
        rows = self.query(
            f'SELECT "offset_ms","clk_steps" FROM wb_health WHERE ({which}) '
            f'AND time >= {int(start_ms)}ms AND time <= {int(end_ms)}ms GROUP BY "dev","collector"'
        )
        out = [
            OffsetPoint(
                dev=r["dev"],
                collector=r["collector"],
                t=r["time"],
                offset_ms=r["offset_ms"],
                clk_steps=r.get("clk_steps"),
            )
            for r in rows
            if r.get("offset_ms") is not None
        ]
        out.sort(key=lambda r: (r["t"], r["dev"], r["collector"]))
        return out

    def rejects(self, limit: int = 50) -> list[StoredReject]:
        rows = self.query(f"SELECT * FROM wb_reject ORDER BY time DESC LIMIT {int(limit)}")
        return [
            StoredReject(
                reason=str(r.get("reason") or ""),
                collector=str(r.get("collector") or ""),
                t=r["time"],
                topic=r.get("topic"),
                dev=r.get("dev"),
                detail=r.get("detail"),
                size=r.get("size"),
            )
            for r in rows
        ]

    def close(self) -> None:
        with self._lock:
            pending = bool(self._pending)
        if pending:
            try:
                self.flush()
            except (StoreUnavailable, StoreRejected) as exc:
                log.warning("closing with unsent points: %s", exc)
        self.http.close()
