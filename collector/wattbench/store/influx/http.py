"""The InfluxDB store's HTTP transport: the v2 write API for writes and InfluxQL over /query for reads,
both over urllib3. It knows the server's versions, credentials and requests, and nothing of the layout
(store/influx/mapping.py).

One code path serves InfluxDB 1.8 (bucket "db/rp", token "user:password" or empty), 2.x (bucket, org,
token; reads need a DBRP mapping) and 3.x (bucket = database). Credentials are never logged or shown
in repr().
"""

from __future__ import annotations

import base64
import gzip
import json
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ...config import redact_url
from ..base import StoreError


class StoreUnavailable(StoreError):
    """InfluxDB cannot take the write now (down, timeout, 5xx, auth): keep the data and retry."""

    permanent = False


class StoreRejected(StoreError):
    """InfluxDB refused the data itself (HTTP 400: bad line, field type conflict): retrying cannot help."""

    permanent = True


def _ident(value: str) -> str:
    """An InfluxQL identifier."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


class InfluxHttp:
    """Requests to one InfluxDB server. send() writes request bodies of line protocol; query() reads
    rows with InfluxQL."""

    def __init__(
        self,
        url: str,
        db: str,
        rp: str = "",
        bucket: str = "",
        org: str = "",
        token: str = "",
        user: str = "",
        password: str = "",
        batch_lines: int = 10_000,
        timeout_s: float = 15.0,
        create_db: bool = True,
        verify_ssl: bool = True,
        gzip: bool = False,
        parallel_writes: int = 4,
    ) -> None:
        self.url = url.rstrip("/")
        self.db = db
        self.rp = rp
        self._bucket = bucket
        self.org = org
        self._token = token
        self._user = user
        self._password = password
        self.batch_lines = max(1, int(batch_lines))
        self.timeout_s = float(timeout_s)
        self.create_db = create_db
        self.verify_ssl = verify_ssl
        self.gzip = gzip
        self.version: str | None = None
        self._write_to: tuple[str, dict[str, str]] | None = None
        self._http: Any = None
        self._db_created = False
        self._pool_exec: Any = None
        self.parallel_writes = max(1, int(parallel_writes))

    def __repr__(self) -> str:  # never show credentials
        return f"InfluxHttp({redact_url(self.url)!r}, db={self.db!r}, version={self.version!r})"

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
            import urllib3  # late: start-up

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
        import urllib3  # late: start-up

        try:
            # Short: a server that does not answer /ping in a few seconds is not one to run against,
            # and a port of another service must be a one-line refusal before a run, not after 15 s.
            resp = self._pool().request(
                "GET",
                f"{self.url}/ping",
                headers=self._auth_headers(),
                timeout=urllib3.Timeout(connect=PING_TIMEOUT_S, read=PING_TIMEOUT_S),
            )
        except urllib3.exceptions.HTTPError as exc:
            raise StoreUnavailable(
                f"InfluxDB at {redact_url(self.url)} does not answer: {_why(exc)}"
            ) from None
        if resp.status >= 500:
            raise StoreUnavailable(
                f"InfluxDB at {redact_url(self.url)} answered /ping with HTTP {resp.status}"
            )
        self.version = resp.headers.get("X-Influxdb-Version") or "unknown"

    def _executor(self) -> Any:
        if self._pool_exec is None:
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

    def send(self, items: list[tuple[bytes, int]]) -> None:
        """Write the items (line protocol, lines in it) in requests of about batch_lines lines, in
        parallel when there are several; raises StoreUnavailable or StoreRejected."""
        import urllib3  # late: start-up

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
            raise StoreUnavailable(
                f"InfluxDB at {redact_url(self.url)} unreachable: {exc.__class__.__name__}"
            ) from None

    def ping(self) -> bool:
        try:
            self._ping()
            return True
        except StoreUnavailable:
            return False

    def _query_raw(self, q: str, post: bool = False, chunked: bool = False) -> list[dict[str, Any]]:
        import urllib3  # late: start-up

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
            raise StoreUnavailable(
                f"InfluxDB at {redact_url(self.url)} unreachable: {exc.__class__.__name__}"
            ) from None
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

    def close(self) -> None:
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


PING_TIMEOUT_S = 4.0


def _why(exc: Exception) -> str:
    """A failed request in words: urllib3's class names mean nothing to the user."""
    import urllib3  # late: start-up

    e = urllib3.exceptions
    if isinstance(exc, e.MaxRetryError) and exc.reason is not None:
        return _why(exc.reason) if isinstance(exc.reason, Exception) else str(exc.reason)
    if isinstance(exc, e.ConnectTimeoutError):
        return f"no connection within {PING_TIMEOUT_S:g} s"
    if isinstance(exc, e.ReadTimeoutError):
        return f"no HTTP answer within {PING_TIMEOUT_S:g} s (is this InfluxDB's port?)"
    if isinstance(exc, e.NewConnectionError):
        text = str(exc)
        return "connection refused" if "refused" in text.lower() else "cannot connect"
    if isinstance(exc, e.SSLError):
        return "TLS failed (does this port speak HTTPS?)"
    if isinstance(exc, e.ProtocolError):
        return "the answer was not HTTP (is this InfluxDB's port?)"
    return "the request failed"
