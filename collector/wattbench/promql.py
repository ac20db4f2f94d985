"""Instant queries against a Prometheus server's HTTP API (/api/v1/query), for reading a software
estimator's power beside a sweep. Errors are one-line PromError messages, never tracebacks."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any


class PromError(RuntimeError):
    """Prometheus could not be reached or refused the query; the message says which."""


def instant(url: str, query: str, at_s: float, timeout_s: float = 10.0) -> list[dict[str, Any]]:
    """The query's result vector at time at_s: [{"metric": {...}, "value": [t, "text"]}, ...]."""
    params = urllib.parse.urlencode({"query": query, "time": f"{at_s:.3f}"})
    target = url.rstrip("/") + "/api/v1/query?" + params
    try:
        with urllib.request.urlopen(target, timeout=timeout_s) as resp:
            doc = json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        detail = ""
        try:
            detail = json.loads(exc.read()).get("error", "")
        except (ValueError, AttributeError, OSError):
            pass
        raise PromError(f"Prometheus at {url} refused the query: HTTP {exc.code} {detail}".rstrip()) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise PromError(f"cannot reach Prometheus at {url}: {reason}") from None
    except ValueError:
        raise PromError(f"Prometheus at {url} answered something that is not JSON") from None
    if not isinstance(doc, dict) or doc.get("status") != "success":
        raise PromError(f"Prometheus at {url}: {doc.get('error') if isinstance(doc, dict) else doc}")
    data = doc.get("data") or {}
    if data.get("resultType") != "vector":
        raise PromError(f"the query gives a {data.get('resultType')}, not an instant vector")
    return list(data.get("result") or [])
