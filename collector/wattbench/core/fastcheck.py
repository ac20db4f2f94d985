"""A fast acceptance check derived from a contract schema, for the collector's hot path.

The reference check is the schema compiled by fastjsonschema, which costs a few microseconds per sample
row in Python. msgspec validates typed JSON in C, about ten times faster, so each schema that uses only
the keywords below is translated, when the collector starts, into msgspec types. The schema stays the
one source of truth: nothing here names a field.

Two forms: compile_fast checks a document the strict decoder has already read (msgspec Structs), and
compile_fast_decode reads and checks in one pass (msgspec TypedDicts, which decode to plain dicts), so a
valid sample batch is parsed once instead of twice.

The fast check may only say "valid". Whenever it refuses a message, or a schema uses anything it does
not translate, the reference check decides and words the reason. Where the two could differ, the
translation is stricter than the schema: msgspec reads 1.0 as no integer and a const 1 as the integer
1 only, and a pattern's closing `$` (which in Python's re also matches before a final newline) becomes
`\\Z`, as fastjsonschema does. tests/collector/test_fastcheck.py holds the two to that over the
contract's vectors and a generated corpus.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any, Literal, NotRequired, Required, TypedDict

import msgspec

# Keywords whose meaning is either translated or only describes (no effect on validity).
_DESCRIPTIVE = frozenset(
    {"description", "title", "$schema", "$id", "$comment", "$defs", "examples", "default"}
)
_OBJECT = frozenset({"type", "properties", "required", "additionalProperties", "minProperties"})

PostCheck = tuple[tuple[str, ...], int]  # path to objects (a "*" step walks an array), min properties


class Untranslatable(Exception):
    """The schema uses something this module does not translate; the reference check alone is used."""


def translate_pattern(p: str) -> str:
    """A schema pattern as Python's re must read it to mean the same (see the module's docstring)."""
    if "$" in p[:-1] or not p.endswith("$") or p.endswith("\\$"):
        raise Untranslatable(f"pattern {p!r}")
    return p[:-1] + r"\Z"


class Translator:
    """A schema's types as msgspec types: Structs, or TypedDicts with as_dicts. post collects the
    minProperties checks msgspec cannot express, by path. overrides: a type to use as it is at a path
    (a "*" step is an array's items), for a caller that builds that part itself."""

    def __init__(
        self,
        root: dict[str, Any],
        as_dicts: bool = False,
        overrides: dict[tuple[str, ...], Any] | None = None,
    ) -> None:
        self.root = root
        self.as_dicts = as_dicts
        self.overrides = overrides or {}
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
        if path in self.overrides:
            return self.overrides[path]
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
                list[item],  # type: ignore[valid-type]
                msgspec.Meta(min_length=node.get("minItems"), max_length=node.get("maxItems")),
            ]
        if kind == "string":
            if not keys <= {"type", "pattern", "minLength", "maxLength"}:
                raise Untranslatable("string")
            pattern = translate_pattern(node["pattern"]) if "pattern" in node else None
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
        if self.as_dicts:
            # msgspec decodes a TypedDict to a plain dict but skips keys it does not name, even with
            # additionalProperties false: compile_fast_decode counts the keys to catch those.
            return TypedDict(  # type: ignore[operator]
                f"Fast{self.structs}",
                {name: Required[t] if name in required else NotRequired[t] for name, t, *_ in fields},
            )
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


def _compile(
    schema: dict[str, Any], as_dicts: bool
) -> tuple[Callable[[bytes], Any], Callable[[Any], bool]] | None:
    """The schema's msgspec decoder and the check of what msgspec cannot express (minProperties)."""
    translator = Translator(schema, as_dicts)
    try:
        decoder = msgspec.json.Decoder(translator.type_of(schema, ()))
    except (Untranslatable, KeyError, TypeError, ValueError):
        return None
    post = tuple(translator.post)

    def post_ok(doc: Any) -> bool:
        for path, least in post:
            for node in _walk(doc, path):
                if len(node) < least:
                    return False
        return True

    return decoder.decode, post_ok


# What msgspec raises for text it refuses: a ValidationError is a DecodeError, and invalid UTF-8 inside a
# string comes out as UnicodeDecodeError (a ValueError).
REFUSED = (msgspec.DecodeError, ValueError, RecursionError)


def compile_fast(schema: dict[str, Any]) -> Callable[[bytes, Any], bool] | None:
    """A check(raw, doc) that returns True only for messages the schema accepts, or None when the
    schema cannot be translated. doc is raw already decoded by the strict decoder."""
    compiled = _compile(schema, as_dicts=False)
    if compiled is None:
        return None
    decode, post_ok = compiled

    def check(raw: bytes, doc: Any) -> bool:
        try:
            decode(raw)
        except REFUSED:
            return False
        return post_ok(doc)

    return check


def count_keys(doc: dict[str, Any]) -> int:
    """Keys of the object, its object members and the objects inside its arrays: the shape of every
    contract message except the nested result levels (those never match a ':' count below, and go the
    slow way)."""
    n = len(doc)
    for value in doc.values():
        if type(value) is dict:
            n += len(value)
        elif type(value) is list:
            for item in value:
                if type(item) is dict:
                    n += len(item)
    return n


# A \uD800-\uDFFF escape: JSON, but a lone one is not Unicode text. Any of them sends a message the
# strict way, which tells a pair from a lone half.
SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def compile_fast_decode(schema: dict[str, Any]) -> Callable[[bytes], Any] | None:
    """A decode(raw) that returns the document when raw is strict JSON the schema accepts, and None
    when it cannot say so (the caller then decodes strictly and asks the reference check); None
    instead of a function when the schema cannot be translated.

    The document is the one the strict decoder reads, except that a JSON integer in a "number" field
    arrives as the equal float. In parsed text every ':' outside strings separates a key from its
    value, so a key count equal to the number of ':' bytes proves there was no duplicate key, no key
    msgspec skipped (not in the schema) and no ':' inside a string."""
    compiled = _compile(schema, as_dicts=True)
    if compiled is None:
        return None
    typed, post_ok = compiled
    surrogate = SURROGATE_ESCAPE.search

    def decode(raw: bytes) -> Any:
        if surrogate(raw):
            return None
        try:
            doc = typed(raw)
        except REFUSED:
            return None
        if type(doc) is not dict or count_keys(doc) != raw.count(b":") or not post_ok(doc):
            return None
        return doc

    return decode
