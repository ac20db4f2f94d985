"""Input mutation shared by the hypothesis tests and the scheduled fuzz run.

Every choice goes through a Source: in a hypothesis test it is a draw (so failures shrink), in
bench/fuzz_all.py it is a seeded random.Random (so a run of 100 000 inputs is fast and any one input
can be regenerated from its seed and index).
"""

from __future__ import annotations

import json
import math
import random
import re
from typing import Any, Protocol


class Source(Protocol):
    def below(self, n: int) -> int: ...

    def blob(self, max_len: int) -> bytes: ...


class RandomSource:
    """Choices from a seeded random.Random."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def below(self, n: int) -> int:
        return self.rng.randrange(n) if n > 1 else 0

    def blob(self, max_len: int) -> bytes:
        return self.rng.randbytes(self.rng.randrange(max_len + 1))


class DrawSource:
    """Choices drawn from hypothesis data, so that a failing input shrinks."""

    def __init__(self, data: Any) -> None:
        from hypothesis import strategies as st

        self.data = data
        self._st = st

    def below(self, n: int) -> int:
        return self.data.draw(self._st.integers(0, n - 1)) if n > 1 else 0

    def blob(self, max_len: int) -> bytes:
        return self.data.draw(self._st.binary(max_size=max_len))


def pick(src: Source, items: Any) -> Any:
    return items[src.below(len(items))]


def chance(src: Source, percent: int) -> bool:
    return src.below(100) < percent


# ------------------------------------------------------------------ awkward values

HUGE_DIGITS = 5000  # past CPython's 4300-digit int/str conversion limit
LONG_TEXT = 70_000


class RawJSON:
    """JSON text placed verbatim by dump_loose: nesting and numbers that json.dumps cannot produce."""

    __slots__ = ("text",)

    def __init__(self, text: bytes) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"RawJSON({self.text[:40]!r}{'...' if len(self.text) > 40 else ''}, {len(self.text)} bytes)"


def deep_list(depth: int) -> RawJSON:
    return RawJSON(b"[" * depth + b"0" + b"]" * depth)


def deep_dict(depth: int) -> RawJSON:
    return RawJSON(b'{"a":' * depth + b"0" + b"}" * depth)


def awkward_value(src: Source) -> Any:
    """A JSON value chosen to hurt a parser or validator."""
    k = src.below(34)
    if k < 10:
        return (
            None,
            True,
            False,
            0,
            -1,
            1,
            2**31,
            2**53 + 1,
            2**64,
            -(2**63) - 1,
        )[k]
    if k < 20:
        return (
            0.5,
            -0.0,
            5e-324,
            1.7976931348623157e308,
            -1e308,
            math.nan,
            math.inf,
            -math.inf,
            1e21,
            123456789.123456789,
        )[k - 10]
    if k == 20:
        return RawJSON(b"9" * HUGE_DIGITS)
    if k == 21:
        return 10 ** (1 + src.below(400))
    if k == 22:
        return ""
    if k == 23:
        return "x" * (1 + src.below(LONG_TEXT))
    if k == 24:
        return pick(src, ("\u0000", "\ud800", "a\udfffb", "\ufeff", "\u202e", "é", "😀", "\\", '"', "\n"))
    if k == 25:
        return [] if chance(src, 50) else {}
    if k == 26:
        return deep_list(1 + src.below(5000))
    if k == 27:
        return deep_dict(1 + src.below(5000))
    if k == 28:
        return src.blob(40).decode("utf-8", errors="surrogateescape")
    if k == 29:
        return src.blob(40).decode("latin-1")
    if k == 30:
        return [awkward_value(src) for _ in range(src.below(4))]
    if k == 31:
        return {str(src.below(10)): awkward_value(src) for _ in range(src.below(4))}
    if k == 32:
        return -(src.below(2**40)) / (1 + src.below(1000))
    return src.below(2**62) * pick(src, (1, -1))


# ------------------------------------------------------------------ JSON document mutations


def _paths(
    doc: Any, prefix: tuple[Any, ...] = (), out: list[tuple[Any, ...]] | None = None
) -> list[tuple[Any, ...]]:
    """Every node of a JSON tree, the root included, as key/index paths (bounded for big batches)."""
    out = [] if out is None else out
    out.append(prefix)
    if len(out) > 400:
        return out
    if isinstance(doc, dict):
        for k, v in doc.items():
            _paths(v, (*prefix, k), out)
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:8]):
            _paths(v, (*prefix, i), out)
    return out


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for k in path:
        doc = doc[k]
    return doc


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    _get(doc, path[:-1])[path[-1]] = value
    return doc


def _number_edge(src: Source, v: float) -> Any:
    k = src.below(13)
    if k < 8:
        return (0, -1, 2**53, 9007199254740993, 1577836799999, 4102444800001, 0.1, -0.0)[k]
    try:
        return (v + 1, v - 1, -v, v * 1000, v / 1000)[k - 8]
    except OverflowError:
        return v


def mutate_doc(src: Source, doc: Any) -> Any:
    """One structural change to a decoded JSON document (the document is modified and returned)."""
    paths = _paths(doc)
    path = pick(src, paths)
    node = _get(doc, path)
    op = src.below(9)
    if op == 0 and path:  # drop the node
        parent = _get(doc, path[:-1])
        del parent[path[-1]]
        return doc
    if op == 1 and isinstance(node, dict):  # add a key, sometimes one that the schema knows elsewhere
        name = pick(
            src, ("x", "v", "dev", "t", "s", "c", "W", "samples", "mac", "", "é", "\u0000", "n" * 300)
        )
        node[name] = awkward_value(src)
        return doc
    if op == 2 and isinstance(node, int | float) and not isinstance(node, bool):
        return _set(doc, path, _number_edge(src, node))
    if op == 3 and isinstance(node, list) and node:  # grow or shrink an array
        if chance(src, 50):
            node.extend(node[-1:] * (1 + src.below(600)))
        else:
            del node[src.below(len(node)) :]
        return doc
    if op == 4 and isinstance(node, str):
        return _set(
            doc, path, pick(src, (node.upper(), node * 40, node[:1], node + "\u00e9", "", node + "\ud800"))
        )
    if op == 5:  # wrap the node
        return _set(doc, path, [node] if chance(src, 50) else {"v": node})
    return _set(doc, path, awkward_value(src))


def nudge_numbers(src: Source, doc: Any) -> Any:
    """Scale every float by up to 0.1 %: the document usually stays valid and reaches the later stages."""
    if isinstance(doc, float):
        return doc * (1 + (src.below(2001) - 1000) / 1e6)
    if isinstance(doc, dict):
        return {k: nudge_numbers(src, v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [nudge_numbers(src, v) for v in doc[:50]] + doc[50:]
    return doc


_PLACEHOLDER = re.compile(rb'"\\u0001RAW(\d+)\\u0001"')


def dump_loose(doc: Any, src: Source) -> bytes:
    """Serialise a mutated document the way a sloppy device might: NaN tokens, spacing, raw non-ASCII."""
    raws: list[bytes] = []

    def swap(node: Any) -> Any:
        if isinstance(node, RawJSON):
            raws.append(node.text)
            return f"\x01RAW{len(raws) - 1}\x01"
        if isinstance(node, dict):
            return {k: swap(v) for k, v in node.items()}
        if isinstance(node, list):
            return [swap(v) for v in node]
        return node

    text = json.dumps(
        swap(doc),
        allow_nan=True,
        ensure_ascii=chance(src, 70),
        separators=(",", ":") if chance(src, 80) else (", ", ": "),
    )
    out = text.encode("utf-8", errors="surrogatepass")
    if not raws:
        return out
    return _PLACEHOLDER.sub(lambda m: raws[int(m.group(1))], out)


# ------------------------------------------------------------------ byte mutations

TOKENS = (
    b"NaN",
    b"Infinity",
    b"-Infinity",
    b"null",
    b"true",
    b"-0",
    b"1e999",
    b"-1e999",
    b"0.0000000000000000000000001",
    b"\\ud800",
    b"\\u0000",
    b'"\\"',
    b"\xc3\x28",
    b"\xed\xa0\x80",
    b"\xf0\x9f\x98\x80",
    b"\xef\xbb\xbf",
    b"[" * 64,
    b"{" * 64,
    b"]" * 8,
    b"}" * 8,
    b'"mac":"' + b"0" * 64 + b'"',
    b'"v":1,',
    b'"v":1,"v":1,',
    b"9" * 40,
    b"9" * HUGE_DIGITS,
    b"," * 5,
    b":",
    b"\x00",
    b"\xff\xfe",
    b" \t\r\n",
)

INTERESTING_BYTES = bytes(
    (0x00, 0x01, 0x7F, 0x80, 0xFF, 0x22, 0x5C, 0x7B, 0x7D, 0x5B, 0x5D, 0x2C, 0x3A, 0x30, 0x39, 0x2D)
)


def mutate_bytes(src: Source, raw: bytes, corpus: list[bytes] | None = None, rounds: int = 0) -> bytes:
    """One to a few byte-level edits: bit flips, byte sets, token inserts, deletes, duplicates, splices."""
    buf = bytearray(raw)
    for _ in range(rounds or 1 + src.below(4)):
        n = len(buf)
        op = src.below(9)
        if op == 0 and n:
            i = src.below(n)
            buf[i] ^= 1 << src.below(8)
        elif op == 1 and n:
            buf[src.below(n)] = pick(src, INTERESTING_BYTES)
        elif op == 2:
            i = src.below(n + 1)
            buf[i:i] = pick(src, TOKENS)
        elif op == 3 and n:
            i = src.below(n)
            del buf[i : i + 1 + src.below(16)]
        elif op == 4 and n:
            i = src.below(n)
            j = min(n, i + 1 + src.below(64))
            buf[j:j] = buf[i:j] * (1 + src.below(8))
        elif op == 5 and n:
            del buf[src.below(n) :]
        elif op == 6 and corpus:
            other = pick(src, corpus)
            i, j = src.below(n + 1), src.below(len(other) + 1)
            buf = buf[:i] + other[j:]
        elif op == 7:
            i = src.below(n + 1)
            buf[i:i] = src.blob(8)
        else:
            if n:
                i = src.below(n)
                buf[i] = (buf[i] + pick(src, (1, -1, 16, -16, 128))) & 0xFF
    return bytes(buf)
