"""Decide whether one MQTT message is acceptable, and say in plain words why not.

Pure: no sockets, no clock. The only source of the message format is wattbench_schema; this module
compiles its schemas with fastjsonschema and adds the checks a schema cannot express (the topic must
name the same device as the payload, timestamps may not be ahead of the receive time).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import fastjsonschema
import orjson  # several times faster than json for the sample batches

import wattbench_schema as contract

from ..core.fastcheck import SURROGATE_ESCAPE, compile_fast, compile_fast_decode, count_keys
from ..store.base import SampleEncoder
from .auth import AuthError
from .plainbatch import PlainBatch, plain_batch

CONSUMED = ("samples", "status", "meta", "phase", "result")
EXCERPT_CHARS = 120
DETAIL_CHARS = 480


@dataclass(slots=True)
class Accepted:
    """A message that passed every stateless check."""

    kind: str
    topic: str
    params: dict[str, str]
    payload: dict[str, Any]
    size: int


@dataclass(slots=True)
class Rejected:
    """A refused message and the reason a person can act on."""

    reason: str
    detail: str
    topic: str
    size: int
    dev: str | None = None
    excerpt: str = ""

    def notice(self, t_ms: int) -> dict[str, Any]:
        """The reject payload of the contract (reject.schema.json)."""
        out: dict[str, Any] = {
            "v": contract.VERSION,
            "t": t_ms,
            "topic": self.topic[:256],
            "reason": self.reason,
            "detail": self.detail[:DETAIL_CHARS] or self.reason,
            "size": self.size,
        }
        if self.dev:
            out["dev"] = self.dev
        if self.excerpt:
            out["excerpt"] = self.excerpt[:EXCERPT_CHARS]
        return out


# A message's stateless check: its rejection (None: it passed) and, for an accepted sample batch of a
# store with an encoder, its rows as the encoder made them and, when they are plain, what accounting
# needs of them (plainbatch.plain_batch).
Verdict = tuple[Rejected | None, bytes | None, PlainBatch | None]


def excerpt(raw: bytes) -> str:
    """The start of a payload as printable text, for a person to recognise the message."""
    head = raw[:EXCERPT_CHARS].decode("utf-8", errors="replace")
    return "".join(ch if ch.isprintable() else "\N{REPLACEMENT CHARACTER}" for ch in head)


def decode(raw: bytes) -> Any:
    """Strict JSON as the contract defines it (contract.strict_loads), with a fast path.

    orjson already refuses invalid UTF-8, NaN and Infinity, but keeps the last of duplicate keys. In
    text that a parser accepted, every ':' outside strings separates one key from its value, so when
    the number of keys it returned equals the number of ':' bytes there was no duplicate and no ':'
    inside a string. Anything else goes through the reference decoder, which decides.
    """
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        doc = None
    if type(doc) is dict and count_keys(doc) == raw.count(b":"):
        return doc
    return contract.strict_loads(raw)


def load(kind: str, raw: bytes) -> Any:
    """Decode a payload of one contract kind; every failure is a contract.DecodeError.

    Beyond strict_loads: integers too long for Python (ValueError), nesting too deep for it
    (RecursionError) and escaped lone surrogates, which are JSON but not Unicode text and could be
    neither stored nor re-encoded.
    """
    try:
        doc = decode(raw) if kind == "samples" else contract.strict_loads(raw)
    except contract.DecodeError:
        raise
    except (ValueError, RecursionError) as exc:
        raise contract.DecodeError(str(exc)[:200] or exc.__class__.__name__) from None
    if SURROGATE_ESCAPE.search(raw):
        try:
            json.dumps(doc, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise contract.DecodeError(
                "a string holds a lone UTF-16 surrogate escape, which is not text"
            ) from None
        except (ValueError, RecursionError) as exc:
            raise contract.DecodeError(str(exc)[:200]) from None
    return doc


def _short(value: Any) -> str:
    """A bounded description of a value of any shape, for details a person reads."""
    if isinstance(value, bool | int | float) or value is None:
        text = repr(value)
    elif isinstance(value, str):
        text = repr(value[:40])
    else:
        text = f"a JSON {'object' if isinstance(value, dict) else 'array'}"
    return text if len(text) <= 60 else text[:57] + "..."


def _schema_reason(path: str, rule: str) -> str:
    # A timestamp outside 2020..2100 is a clock problem, not a format problem: say which one.
    if path.endswith(".t") or path == "data.t":
        if rule == "maximum":
            return "future"
        if rule == "minimum":
            return "stale"
    return "schema"


def _describe(path: str, message: str) -> str:
    text = message
    if text.startswith("data."):
        text = text[5:]
    elif text.startswith("data "):
        text = "payload " + text[5:]
    if path.endswith(".t") and "smaller than" in message:
        text += " (after 2100: the timestamp is garbage)"
    elif path.endswith(".t") and "bigger than" in message:
        text += " (before 2020: the device clock was never set, or the unit is not ms)"
    return text


class Validator:
    """Checks topic, size, JSON, version and schema, then the cross-field rules and, where a device
    has a key, its HMAC signature.

    future_tolerance_ms: how far a timestamp may be ahead of the receive time (topics.json limits).
    encoder: the store's, when it has one: accepted sample batches are then also encoded for it, in
    one pass with the check where its one pass can vouch for them (encoded()).
    """

    def __init__(
        self,
        future_tolerance_ms: int | None = None,
        max_payload_bytes: int | None = None,
        verifier: Any = None,
        encoder: SampleEncoder | None = None,
    ) -> None:
        self.verifier = verifier  # ingest.auth.Verifier for HMAC-signed batches, or None

        limits = contract.topics()["limits"]
        self.future_tolerance_ms = int(
            limits["future_tolerance_ms"] if future_tolerance_ms is None else future_tolerance_ms
        )
        self.max_payload_bytes = int(
            limits["max_payload_bytes"] if max_payload_bytes is None else max_payload_bytes
        )
        self._schema_error = fastjsonschema.JsonSchemaValueException
        schemas = {name: contract.inline_refs(name) for name in contract.SCHEMA_NAMES}
        self._compiled = {name: fastjsonschema.compile(schema) for name, schema in schemas.items()}
        self._fast = {}
        for name, schema in schemas.items():
            fast = compile_fast(schema)
            if fast is not None:
                self._fast[name] = fast
        # Sample batches are read and checked in one pass when they can be. Only they: elsewhere an
        # integer in a number field would come out as a float, and the other kinds are rare.
        self._fast_decode = compile_fast_decode(schemas["samples"])
        self.encoder = encoder
        self._one_pass = encoder.one_pass(schemas["samples"]) if encoder is not None else None
        self._topic_cache: dict[str, tuple[str, dict[str, str]] | None] = {}

    def match(self, topic: str) -> tuple[str, dict[str, str]] | None:
        try:
            return self._topic_cache[topic]
        except KeyError:
            pass
        found = contract.match_topic(topic)
        if len(self._topic_cache) < 100_000:  # bounded by the fleet, but never trust the network
            self._topic_cache[topic] = found
        return found

    def encoded(self, topic: str, raw: bytes, recv_ms: int) -> tuple[bytes, PlainBatch | None] | None:
        """A sample batch's rows as the store's encoder writes them, and their digest for accounting
        when they are plain, when the message passes every check that check() makes, read in one pass
        (the encoder's one_pass); None when this way cannot vouch for it, and check() then decides.
        Batches of devices that must sign go the complete way."""
        if self._one_pass is None or self.verifier is not None or len(raw) > self.max_payload_bytes:
            return None
        found = self.match(topic)
        if found is None or found[0] != "samples":
            return None
        dev = found[1].get("dev")
        if dev is None:
            return None
        try:
            one = self._one_pass(raw, dev, recv_ms + self.future_tolerance_ms)
        except Exception:  # this way only ever says "valid": even a fault in it leaves it to check()
            return None
        if one is None:
            return None
        return one.data, plain_batch(*one.columns)

    def check(self, topic: str, raw: bytes, recv_ms: int) -> Accepted | Rejected:
        size = len(raw)
        found = self.match(topic)
        if found is None:
            return Rejected(
                "topic",
                f"topic {topic[:200]!r} is not part of the wattbench v1 contract",
                topic,
                size,
                excerpt=excerpt(raw),
            )
        kind, params = found
        dev = params.get("dev")
        if size > self.max_payload_bytes:
            return Rejected(
                "size",
                f"payload of {size} bytes is over the {self.max_payload_bytes}-byte limit",
                topic,
                size,
                dev,
                excerpt(raw),
            )
        if kind == "samples" and self._fast_decode is not None:
            doc = self._fast_decode(raw)
            if doc is not None:
                return self._semantics(kind, topic, params, doc, size, recv_ms, raw)
        try:
            doc = load(kind, raw)
        except contract.DecodeError as exc:
            return Rejected("decode", f"not strict JSON: {exc}", topic, size, dev, excerpt(raw))
        if isinstance(doc, dict) and "v" in doc:
            v = doc["v"]
            if isinstance(v, bool) or not isinstance(v, int | float) or v != contract.VERSION:
                return Rejected(
                    "version",
                    f"schema version {_short(v)} is not supported (this collector reads v1)",
                    topic,
                    size,
                    dev,
                    excerpt(raw),
                )
        fast = self._fast.get(kind)
        try:
            if fast is None or not fast(raw, doc):
                self._compiled[kind](doc)
        except self._schema_error as exc:
            path = str(exc.name or "data")
            return Rejected(
                _schema_reason(path, str(exc.rule)),
                _describe(path, str(exc.message)),
                topic,
                size,
                dev,
                excerpt(raw),
            )
        except (RecursionError, TypeError, ValueError) as exc:
            return Rejected("schema", f"cannot be checked: {exc}", topic, size, dev, excerpt(raw))
        return self._semantics(kind, topic, params, doc, size, recv_ms, raw)

    def accept_checked(self, topic: str, raw: bytes, recv_ms: int) -> Accepted | Rejected:
        """The Accepted form of a message another process has already checked: only topic and JSON
        are needed again. Anything surprising falls back to the full check."""
        found = self.match(topic)
        if found is not None:
            kind, params = found
            # The strict decode passed in the other process: what orjson reads is the same document
            # (no duplicate key, no lone surrogate), so its checks need not run again.
            try:
                doc = orjson.loads(raw)
            except orjson.JSONDecodeError:
                doc = None
            if type(doc) is dict:
                return Accepted(kind, topic, params, doc, len(raw))
        return self.check(topic, raw, recv_ms)

    def _semantics(
        self,
        kind: str,
        topic: str,
        params: dict[str, str],
        doc: dict[str, Any],
        size: int,
        recv_ms: int,
        raw: bytes,
    ) -> Accepted | Rejected:
        dev = params.get("dev")
        if dev is not None and doc.get("dev") != dev:
            return Rejected(
                "mismatch",
                f"payload dev {doc.get('dev')!r} differs from topic dev {dev!r}",
                topic,
                size,
                dev,
                excerpt(raw),
            )
        run = params.get("run")
        if run is not None and doc.get("run") != run:
            return Rejected(
                "mismatch",
                f"payload run {doc.get('run')!r} differs from topic run {run!r}",
                topic,
                size,
                None,
                excerpt(raw),
            )
        if kind == "samples" and self.verifier is not None:
            try:
                self.verifier.check(dev, raw)
            except AuthError as exc:
                return Rejected("auth", str(exc), topic, size, dev, excerpt(raw))
        limit = recv_ms + self.future_tolerance_ms
        if kind == "samples":
            newest = max(row["t"] for row in doc["samples"])
            if newest > limit:
                return Rejected(
                    "future",
                    f"sample time {int(newest)} is {(newest - recv_ms) / 1000:.1f} s ahead of the collector clock "
                    f"(tolerance {self.future_tolerance_ms / 1000:.0f} s): the device clock is wrong",
                    topic,
                    size,
                    dev,
                    excerpt(raw),
                )
        elif "t" in doc and doc["t"] > limit:
            return Rejected(
                "future",
                f"time {int(doc['t'])} is {(doc['t'] - recv_ms) / 1000:.1f} s ahead of the collector clock",
                topic,
                size,
                dev or doc.get("dev"),
                excerpt(raw),
            )
        return Accepted(kind, topic, params, doc, size)


def dumps(doc: Any) -> bytes:
    """Compact JSON."""
    return orjson.dumps(doc)


def loads(raw: bytes) -> Any:
    """Decode JSON this process wrote itself (spool, status file): no contract checks needed."""
    return orjson.loads(raw)
