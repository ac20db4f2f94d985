"""The wattbench v1 message contract: schemas, topics, InfluxDB layout and shared test vectors.

This package is the one loader of schema/. The collector validates with it; the firmware tests and
the collector tests both read their vectors through it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
VERSION = 1
SCHEMA_DIR = ROOT / f"v{VERSION}"
VECTOR_DIR = ROOT / "vectors"
SCHEMA_NAMES = ("samples", "status", "meta", "phase", "result", "reject")

FLAG_MISSED = 1
FLAG_CRC = 2
FLAG_OVER_RANGE = 4
FLAG_CLOCK_STEP = 8
FLAG_UNSYNCED = 16
FLAG_REVERSE = 32
FLAG_RANGE_CHANGE = 64
FLAG_PARTIAL = 128
FLAG_SENSOR_ERROR = 256
FLAG_NAMES = {
    FLAG_MISSED: "missed",
    FLAG_CRC: "crc",
    FLAG_OVER_RANGE: "over_range",
    FLAG_CLOCK_STEP: "clock_step",
    FLAG_UNSYNCED: "unsynced",
    FLAG_REVERSE: "reverse",
    FLAG_RANGE_CHANGE: "range_change",
    FLAG_PARTIAL: "partial",
    FLAG_SENSOR_ERROR: "sensor_error",
}
QUANTITIES = ("W", "V", "A", "PF", "Hz", "Wh", "T", "RH")


class DecodeError(ValueError):
    """The payload is not strict JSON (RFC 8259): bad bytes, NaN/Infinity, duplicate keys."""


def _no_constants(token: str) -> Any:
    raise DecodeError(f"{token} is not a JSON number")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DecodeError(f"duplicate key {key!r}")
        out[key] = value
    return out


def strict_loads(raw: bytes | str) -> Any:
    """Decode JSON the way the contract defines it: UTF-8, no NaN/Infinity, no duplicate keys."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes | bytearray) else raw
        return json.loads(text, parse_constant=_no_constants, object_pairs_hook=_no_duplicates)
    except DecodeError:
        raise
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise DecodeError(str(exc)) from None
    except ValueError as exc:
        # e.g. an integer literal longer than Python's int/str conversion limit
        raise DecodeError(str(exc)) from None


def dumps(payload: Any) -> bytes:
    """Compact encoding used on the wire."""
    return json.dumps(payload, separators=(",", ":"), allow_nan=False).encode()


def meter_kinds() -> tuple[str, ...]:
    """The meter kinds a meta message may name: the firmware's meter table, the one list of them, so a
    new meter is its driver folder plus one table row and never a schema edit; and the smart-plug
    formats the collector bridges (bridged.json)."""
    from wattbench_fw.meters import KINDS

    return KINDS + bridged_kinds()


@cache
def bridged_kinds() -> tuple[str, ...]:
    """The smart-plug formats of the collector's bridge, one row each in bridged.json."""
    doc = json.loads((Path(__file__).parent / "bridged.json").read_text())
    return tuple(str(row["kind"]) for row in doc["formats"])


@cache
def load_schema(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text())
    if name == "meta":
        doc["properties"]["channels"]["items"]["properties"]["meter"]["enum"] = list(meter_kinds())
    return doc


@cache
def topics() -> dict[str, Any]:
    return json.loads((SCHEMA_DIR / "topics.json").read_text())


@cache
def influx_layout() -> dict[str, Any]:
    return json.loads((SCHEMA_DIR / "influx.json").read_text())


def topic_for(name: str, **params: str) -> str:
    return topics()["topics"][name]["pattern"].format(**params)


@cache
def _topic_regexes() -> list[tuple[str, re.Pattern[str]]]:
    out = []
    for name, spec in topics()["topics"].items():
        rx = re.escape(spec["pattern"])
        rx = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/+#]{1,64})", rx)
        out.append((name, re.compile(f"^{rx}$")))
    return out


def match_topic(topic: str) -> tuple[str, dict[str, str]] | None:
    """Which contract topic this is, and its parameters; None for a topic outside the contract."""
    for name, rx in _topic_regexes():
        m = rx.match(topic)
        if m:
            return name, m.groupdict()
    return None


def subscription(name: str) -> str:
    """MQTT filter matching every topic of one kind."""
    return re.sub(r"\{\w+\}", "+", topics()["topics"][name]["pattern"])


def registry() -> Any:
    """A referencing.Registry holding every schema, so $ref to common.schema.json resolves offline."""
    from referencing import Registry, Resource

    resources = []
    for path in SCHEMA_DIR.glob("*.schema.json"):
        doc = load_schema(path.name.removesuffix(".schema.json"))
        res = Resource.from_contents(doc)
        resources.append((path.name, res))
        resources.append((doc["$id"], res))
    return Registry().with_resources(resources)


def jsonschema_validator(name: str) -> Any:
    """A plain jsonschema Draft 2020-12 validator for one schema file."""
    import jsonschema

    schema = load_schema(name)
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, registry=registry(), format_checker=cls.FORMAT_CHECKER)


def inline_refs(name: str) -> dict[str, Any]:
    """The schema with references to the other schema files inlined, for compilers that resolve no
    files. A reference within the named schema itself ("#/...") is left for the compiler."""

    def resolve(doc: dict[str, Any], pointer: str) -> Any:
        node: Any = doc
        for part in filter(None, pointer.split("/")):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node

    def walk(node: Any, doc: dict[str, Any], root: bool) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str):
                target, _, pointer = ref.partition("#")
                if target.endswith(".schema.json"):
                    other = load_schema(target.removesuffix(".schema.json"))
                    found = walk(resolve(other, pointer), other, False)
                    rest = {k: walk(v, doc, root) for k, v in node.items() if k != "$ref"}
                    return {**found, **rest} if rest and isinstance(found, dict) else found
                if not target and not root:
                    return walk(resolve(doc, pointer), doc, False)
            return {k: walk(v, doc, root) for k, v in node.items() if not (k == "$id" and not root)}
        if isinstance(node, list):
            return [walk(v, doc, root) for v in node]
        return node

    top = load_schema(name)
    out = walk(top, top, True)
    out.pop("$id", None)
    return out


def is_finite_tree(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(is_finite_tree(v) for v in value.values())
    if isinstance(value, list):
        return all(is_finite_tree(v) for v in value)
    return True


@dataclass(frozen=True)
class Vector:
    """One shared test vector.

    valid vectors decode and validate; invalid ones fail at `stage` ("decode": not strict JSON,
    "schema": fails the JSON Schema). `raw` is the exact payload bytes.
    """

    name: str
    valid: bool
    topic: str
    schema: str
    raw: bytes
    stage: str
    why: str
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def payload(self) -> Any:
        return strict_loads(self.raw)


_VECTOR_KEYS = {"topic", "schema", "why", "stage", "raw", "payload"}


def _load_vector(path: Path, valid: bool) -> Vector:
    doc = json.loads(path.read_text())
    if "raw" in doc:
        raw = doc["raw"].encode()
    else:
        raw = json.dumps(doc["payload"], separators=(",", ":")).encode()
    return Vector(
        name=path.stem,
        valid=valid,
        topic=doc["topic"],
        schema=doc["schema"],
        raw=raw,
        stage="ok" if valid else doc.get("stage", "schema"),
        why=doc["why"],
        extra={k: v for k, v in doc.items() if k not in _VECTOR_KEYS},
    )


def vectors(kind: str = "all") -> list[Vector]:
    """The shared vectors: kind is "valid", "invalid" or "all", sorted by name."""
    kinds = ("valid", "invalid") if kind == "all" else (kind,)
    out: list[Vector] = []
    for k in kinds:
        for path in sorted((VECTOR_DIR / k).glob("*.json")):
            out.append(_load_vector(path, k == "valid"))
    return out


def iter_vectors(schema: str) -> Iterator[Vector]:
    return (v for v in vectors() if v.schema == schema)


def broker_address_vectors() -> list[dict[str, Any]]:
    """The broker-address vectors: each has `input` and `why`, and either `host`, `port` and `tls`
    or `error`, a phrase the refusal must contain. The host tools and the firmware's host mode
    parse addresses with separate code (the firmware never imports the host tools); both must
    read every vector the same way."""
    doc = json.loads((VECTOR_DIR / "broker-address.json").read_text(encoding="utf-8"))
    return list(doc["vectors"])
