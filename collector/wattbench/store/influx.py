"""InfluxDB store: writes to the v2 write API, reads with InfluxQL, both over urllib3.

One code path serves InfluxDB 1.8 (bucket "db/rp", token "user:password" or empty), 2.x (bucket, org,
token; reads need a DBRP mapping) and 3.x (bucket = database). Writes are buffered by the caller's
write_* calls and sent by flush() in requests of `batch_lines` lines, synchronously, so that flush()
returning means InfluxDB has the points: the collector acknowledges MQTT messages only then.

Credentials come from the options or the environment (WATTBENCH_INFLUX_TOKEN, _USER, _PASSWORD, _ORG,
_DB) and are never logged or shown in repr().
"""

from __future__ import annotations

import base64
import gzip
import json
import logging
import os
import threading
import urllib.parse
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..config import redact_url
from . import lineproto
from .base import OffsetPoint, SequenceCheck, Series, StoredReject, StoreError, in_effect

log = logging.getLogger(__name__)

SAMPLE_FLOATS = tuple(sorted(lineproto.SAMPLE_FLOATS))


class StoreUnavailable(StoreError):
    """InfluxDB cannot take the write now (down, timeout, 5xx, auth): keep the data and retry."""

    permanent = False


class StoreRejected(StoreError):
    """InfluxDB refused the data itself (HTTP 400: bad line, field type conflict): retrying cannot help."""

    permanent = True


def _q(value: str) -> str:
    """An InfluxQL string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _ident(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


class InfluxStore:
    line_protocol = True

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
        env = os.environ
        self.url = url.rstrip("/")
        self.db = db or env.get("WATTBENCH_INFLUX_DB") or "wattbench"
        self.rp = rp or env.get("WATTBENCH_INFLUX_RP") or ""
        self._bucket = bucket or env.get("WATTBENCH_INFLUX_BUCKET") or ""
        self.org = org or env.get("WATTBENCH_INFLUX_ORG") or ""
        self._token = token if token is not None else env.get("WATTBENCH_INFLUX_TOKEN", "")
        self._user = user if user is not None else env.get("WATTBENCH_INFLUX_USER", "")
        self._password = password if password is not None else env.get("WATTBENCH_INFLUX_PASSWORD", "")
        self.batch_lines = max(1, int(batch_lines))
        self.timeout_s = float(timeout_s)
        self.create_db = create_db
        self.verify_ssl = verify_ssl
        self.gzip = gzip
        self.version: str | None = None
        # (UTF-8 line protocol, lines in it): one line, or one sample batch's block of lines
        self._pending: list[tuple[bytes, int]] = []
        self._lock = threading.RLock()
        self._write_to: tuple[str, dict[str, str]] | None = None
        self._http: Any = None
        self._db_created = False
        self._pool_exec: Any = None
        self.parallel_writes = max(1, int(parallel_writes))
        self.written_lines = 0

    def __repr__(self) -> str:  # never show credentials

        return f"InfluxStore({redact_url(self.url)!r}, db={self.db!r}, version={self.version!r})"

    # ------------------------------------------------------------------ connection

    @property
    def major(self) -> int:
        """1, 2 or 3. A server that does not say (builds from source report "unknown") is taken for
        1.x, the only line without a version prefix; give bucket/org explicitly to override."""
        v = (self.version or "").lstrip("v")
        return int(v.split(".", 1)[0]) if v[:1] in ("1", "2", "3") else 1

    @property
    def bucket(self) -> str:
        if self._bucket:
            return self._bucket
        if self.major == 1:
            return f"{self.db}/{self.rp}" if self.rp else self.db
        return self.db

    def _token_value(self) -> str:
        if self._token:
            return self._token
        if self._user:
            return f"{self._user}:{self._password}"  # the InfluxDB 1.8 form of a v2 API token
        return ""

    def _auth_headers(self) -> dict[str, str]:
        if self.major == 1 and self._user:
            raw = f"{self._user}:{self._password}".encode()
            return {"Authorization": "Basic " + base64.b64encode(raw).decode()}
        token = self._token_value()
        return {"Authorization": f"Token {token}"} if token else {}

    def _pool(self) -> Any:
        if self._http is None:
            import urllib3

            kw: dict[str, Any] = {
                "timeout": urllib3.Timeout(connect=5.0, read=self.timeout_s),
                "retries": False,
                # the parallel writes and a read at the same time, each on a connection kept open
                "maxsize": self.parallel_writes + 1,
            }
            if self.url.startswith("https") and not self.verify_ssl:
                kw["cert_reqs"] = "CERT_NONE"
            self._http = urllib3.PoolManager(**kw)
        return self._http

    def _ping(self) -> None:
        import urllib3

        try:
            resp = self._pool().request("GET", f"{self.url}/ping", headers=self._auth_headers())
        except urllib3.exceptions.HTTPError as exc:
            raise StoreUnavailable(
                f"InfluxDB at {self.url} does not answer: {exc.__class__.__name__}"
            ) from None
        if resp.status >= 500:
            raise StoreUnavailable(f"InfluxDB at {self.url} answered /ping with HTTP {resp.status}")
        self.version = resp.headers.get("X-Influxdb-Version") or "unknown"

    def _executor(self) -> Any:
        if self._pool_exec is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool_exec = ThreadPoolExecutor(self.parallel_writes, thread_name_prefix="wb-influx")
        return self._pool_exec

    def _ensure(self) -> None:
        if self.version is None:
            self._ping()
        if self.major == 1 and self.create_db and not self._db_created:
            self._query_raw(f"CREATE DATABASE {_ident(self.db)}", post=True)
            self._db_created = True

    def _write_target(self) -> tuple[str, dict[str, str]]:
        """URL and headers of a write: the v2 write API, which 1.8 (bucket "db/rp", org "-", token
        "user:password"), 2.x and 3.x all serve. Known once the server's version is."""
        if self._write_to is None:
            params = {"bucket": self.bucket, "precision": "us"}
            org = self.org or ("-" if self.major == 1 else "")
            if org:
                params["org"] = org
            headers = {"Content-Type": "text/plain; charset=utf-8"}
            token = self._token_value()
            if token:
                headers["Authorization"] = f"Token {token}"
            if self.gzip:
                headers["Content-Encoding"] = "gzip"
            self._write_to = (f"{self.url}/api/v2/write?" + urllib.parse.urlencode(params), headers)
        return self._write_to

    def _post(self, body: bytes) -> None:
        """One write request. urllib3 directly, as the reads are: influxdb-client's write API makes the
        same request with 1.1 to 1.3 times the CPU (bench/bench_influx_write.py)."""
        url, headers = self._write_target()
        data = gzip.compress(body, compresslevel=1) if self.gzip else body
        resp = self._pool().request("POST", url, body=data, headers=headers)
        status = int(resp.status)
        if status < 300:
            return
        message = _response_message(resp.data, resp.reason)
        if status == 404 and self.major == 1 and self.create_db:
            self._db_created = False  # dropped underneath us: create again on the next try
        if status in (400, 413, 422):
            raise StoreRejected(f"InfluxDB refused the write (HTTP {status}): {message}")
        raise StoreUnavailable(f"InfluxDB write failed (HTTP {status}): {message}")

    # ------------------------------------------------------------------ writes

    def write_samples(self, dev: str, samples: Sequence[dict[str, Any]], lines: bytes | None = None) -> None:
        with self._lock:
            if lines is None:
                lines = lineproto.sample_block(dev, samples).encode()
            if lines:
                self._pending.append((lines, len(samples)))

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
        self._send(items)

    def _bodies(self, items: list[tuple[bytes, int]]) -> list[bytes]:
        """Request bodies of about batch_lines lines each; an item of the buffer is one line or one
        sample batch's block of lines, and a block is never cut."""
        bodies: list[bytes] = []
        body: list[bytes] = []
        taken = 0
        for text, n in items:
            body.append(text)
            taken += n
            if taken >= self.batch_lines:
                bodies.append(b"\n".join(body))
                body, taken = [], 0
        if body:
            bodies.append(b"\n".join(body))
        return bodies

    def _send(self, items: list[tuple[bytes, int]]) -> None:
        import urllib3

        try:
            self._ensure()
            bodies = self._bodies(items)
            if len(bodies) == 1 or self.parallel_writes <= 1:
                for body in bodies:
                    self._post(body)
            else:
                # InfluxDB syncs its WAL once per request; requests in parallel overlap those waits.
                # Points are keyed by tags and time, so their order across requests does not matter.
                for fut in [self._executor().submit(self._post, body) for body in bodies]:
                    fut.result()
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise StoreUnavailable(f"InfluxDB at {self.url} unreachable: {exc.__class__.__name__}") from None
        self.written_lines += sum(n for _, n in items)

    def ping(self) -> bool:
        try:
            self._ping()
            return True
        except StoreUnavailable:
            return False

    # ------------------------------------------------------------------ reads (InfluxQL over /query)

    def _query_raw(self, q: str, post: bool = False, chunked: bool = False) -> list[dict[str, Any]]:
        import urllib3

        params = {"q": q, "epoch": "ms"}
        if not q.upper().startswith(("CREATE", "DROP", "SHOW DATABASES")):
            params["db"] = self.db
            if self.rp:
                params["rp"] = self.rp
        if chunked:
            params["chunked"] = "true"
            params["chunk_size"] = "20000"
        headers = self._auth_headers()
        try:
            if post:
                headers["Content-Type"] = "application/x-www-form-urlencoded"
                resp = self._pool().request(
                    "POST",
                    f"{self.url}/query",
                    body=urllib.parse.urlencode(params),
                    headers=headers,
                    preload_content=not chunked,
                )
            else:
                resp = self._pool().request(
                    "GET",
                    f"{self.url}/query?" + urllib.parse.urlencode(params),
                    headers=headers,
                    preload_content=not chunked,
                )
        except urllib3.exceptions.HTTPError as exc:
            raise StoreUnavailable(f"InfluxDB at {self.url} unreachable: {exc.__class__.__name__}") from None
        if resp.status >= 400:
            text = (
                resp.data.decode(errors="replace")[:300]
                if not chunked
                else resp.read().decode(errors="replace")[:300]
            )
            raise StoreUnavailable(f"InfluxQL query failed (HTTP {resp.status}): {text}")
        docs: list[dict[str, Any]] = []
        if chunked:
            buf = b""
            for chunk in resp.stream(1 << 16):
                buf += chunk
                *complete, buf = buf.split(b"\n")
                docs.extend(json.loads(part) for part in complete if part.strip())
            if buf.strip():
                docs.append(json.loads(buf))
            resp.release_conn()
        else:
            docs.append(json.loads(resp.data))
        results: list[dict[str, Any]] = []
        for doc in docs:
            for result in doc.get("results", []):
                if "error" in result:
                    raise StoreUnavailable(f"InfluxQL error: {result['error']}")
                results.append(result)
        return results

    def query(self, q: str, chunked: bool = False) -> list[dict[str, Any]]:
        """Rows of an InfluxQL query as dicts (tags included, time in epoch ms)."""
        rows: list[dict[str, Any]] = []
        for result in self._query_raw(q, chunked=chunked):
            for series in result.get("series", []):
                tags = series.get("tags") or {}
                cols = series["columns"]
                for values in series.get("values", []):
                    row = dict(zip(cols, values, strict=False))
                    row.update(tags)
                    rows.append(row)
        return rows

    def series(
        self, dev: str, ch: str, start_ms: int, end_ms: int, fields: tuple[str, ...] = ("W",)
    ) -> Series:
        for f in fields:
            if f not in lineproto.SAMPLE_FLOATS:
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
            doc = lineproto.loaded_doc(r, what)
            if doc is not None:
                out.append(doc)
                continue
            # written without the whole event (e.g. by Telegraf): what the fields hold
            event: dict[str, Any] = {"v": 1, "t": r.pop("time")}
            event.update(
                {k: v for k, v in r.items() if v is not None and not lineproto.is_doc_field("wb_phase", k)}
            )
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
                whole = lineproto.loaded_doc(r, f"run {run}, result")
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
                    and not lineproto.is_doc_field("wb_result", k)
                }
                out["levels"].append(level)
        return out

    def meta_history(self, start_ms: int, end_ms: int) -> list[tuple[int, dict[str, Any]]]:
        rows = self.query(f'SELECT * FROM wb_meta WHERE time <= {int(end_ms)}ms GROUP BY "dev"')
        docs = []
        for r in rows:
            doc = lineproto.loaded_doc(r, f"metadata of {r.get('dev')} at {r['time']} ms")
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
        if self._http is not None:
            self._http.clear()
            self._http = None
        if self._pool_exec is not None:
            self._pool_exec.shutdown(wait=True)
            self._pool_exec = None


def _response_message(body: bytes, reason: str | None) -> str:
    """What InfluxDB said about a failed request: the error or message of its JSON answer (1.x and 2.x
    word it differently), else the start of the body, else the HTTP reason."""
    text = body.decode(errors="replace").strip()
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    if isinstance(doc, dict) and (doc.get("error") or doc.get("message")):
        return str(doc.get("error") or doc.get("message"))[:300]
    return (text or reason or "no detail")[:300]
