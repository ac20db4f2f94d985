"""A fast acceptance check derived from a contract schema, for the collector's hot path.

The reference check is the schema compiled by fastjsonschema, which costs a few microseconds per sample
row in Python. msgspec validates typed JSON in C, about ten times faster, so each schema that uses only
the keywords below is translated, when the collector starts, into msgspec types. The schema stays the
one source of truth: nothing here names a field.

The fast check may only say "valid". Whenever it refuses a message, or a schema uses anything it does
not translate, the reference check decides and words the reason. Where the two could differ, the
translation is stricter than the schema: msgspec reads 1.0 as no integer and a const 1 as the integer
1 only, and a pattern's closing `$` (which in Python's re also matches before a final newline) becomes
`\\Z`, as fastjsonschema does. tests/collector/test_fastcheck.py holds the two to that over the
contract's vectors and a generated corpus.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

import msgspec

# Keywords whose meaning is either translated or only describes (no effect on validity).
_DESCRIPTIVE = frozenset(
    {"description", "title", "$schema", "$id", "$comment", "$defs", "examples", "default"}
)
_OBJECT = frozenset({"type", "properties", "required", "additionalProperties", "minProperties"})

PostCheck = tuple[tuple[str, ...], int]  # path to objects (a "*" step walks an array), min properties


class Untranslatable(Exception):
    """The schema uses something this module does not translate; the reference check alone is used."""


def _pattern(p: str) -> str:
    if "$" in p[:-1] or not p.endswith("$") or p.endswith("\\$"):
        raise Untranslatable(f"pattern {p!r}")
    return p[:-1] + r"\Z"


class _Translator:
    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.post: list[PostCheck] = []
        self.structs = 0

    def resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        ref = node.get("$ref")
        if ref is None:
            return node
        if len(node) > 1 or not ref.startswith("#/$defs/"):
            raise Untranslatable(f"$ref {ref!r}")
        return self.root["$defs"][ref[len("#/$defs/") :]]

    def type_of(self, node: dict[str, Any], path: tuple[str, ...]) -> Any:
        node = self.resolve(node)
        keys = set(node) - _DESCRIPTIVE
        if "const" in node:
            value = node["const"]
            if keys != {"const"} or type(value) not in (int, str):
                raise Untranslatable("const")
            return Literal[value]
        if "enum" in node:
            values = node["enum"]
            if keys != {"enum"} or not all(type(v) in (int, str) for v in values):
                raise Untranslatable("enum")
            return Literal[tuple(values)]
        kind = node.get("type")
        if kind == "object":
            return self.object(node, keys, path)
        if kind == "array":
            if not keys <= {"type", "items", "minItems", "maxItems"} or "items" not in node:
                raise Untranslatable("array")
            item = self.type_of(node["items"], (*path, "*"))
            return Annotated[
                list[item], msgspec.Meta(min_length=node.get("minItems"), max_length=node.get("maxItems"))
            ]  # type: ignore[valid-type]
        if kind == "string":
            if not keys <= {"type", "pattern", "minLength", "maxLength"}:
                raise Untranslatable("string")
            pattern = _pattern(node["pattern"]) if "pattern" in node else None
            return Annotated[
                str,
                msgspec.Meta(
                    pattern=pattern, min_length=node.get("minLength"), max_length=node.get("maxLength")
                ),
            ]
        if kind in ("integer", "number"):
            if not keys <= {"type", "minimum", "maximum"}:
                raise Untranslatable(kind)
            base = int if kind == "integer" else float
            return Annotated[base, msgspec.Meta(ge=node.get("minimum"), le=node.get("maximum"))]
        raise Untranslatable(f"type {kind!r}")

    def object(self, node: dict[str, Any], keys: set[str], path: tuple[str, ...]) -> Any:
        if not keys <= _OBJECT or node.get("additionalProperties", True) not in (True, False):
            raise Untranslatable("object")
        required = set(node.get("required", ()))
        props = node.get("properties", {})
        if not required <= set(props):
            raise Untranslatable("a required key without a property")
        fields: list[Any] = []
        for name, sub in props.items():
            if not name.isidentifier() or name.startswith("_"):
                raise Untranslatable(f"property {name!r}")
            t = self.type_of(sub, (*path, name))
            fields.append((name, t) if name in required else (name, t, msgspec.UNSET))
        if "minProperties" in node:
            self.post.append((path, int(node["minProperties"])))
        self.structs += 1
        return msgspec.defstruct(
            f"Fast{self.structs}",
            fields,
            kw_only=True,
            forbid_unknown_fields=node.get("additionalProperties", True) is False,
        )


def _walk(doc: Any, path: tuple[str, ...]) -> list[Any]:
    nodes = [doc]
    for step in path:
        if step == "*":
            nodes = [item for node in nodes for item in node]
        else:
            nodes = [node[step] for node in nodes if step in node]
    return nodes


def compile_fast(schema: dict[str, Any]) -> Callable[[bytes, Any], bool] | None:
    """A check(raw, doc) that returns True only for messages the schema accepts, or None when the
    schema cannot be translated. doc is raw already decoded by the strict decoder."""
    translator = _Translator(schema)
    try:
        decoder = msgspec.json.Decoder(translator.type_of(schema, ()))
    except (Untranslatable, KeyError, TypeError, ValueError):
        return None
    post = tuple(translator.post)
    decode = decoder.decode

    def check(raw: bytes, doc: Any) -> bool:
        try:
            decode(raw)
        except msgspec.DecodeError:  # a ValidationError is one too
            return False
        for path, least in post:
            for node in _walk(doc, path):
                if len(node) < least:
                    return False
        return True

    return check
