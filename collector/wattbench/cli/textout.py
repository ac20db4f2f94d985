"""Output on a terminal whose encoding is not UTF-8 (PYTHONIOENCODING=ascii, LANG=C on an old
system, a latin-1 console): the tables and lines use a few symbols (∑, ★, ≠, ±, °) that such a
stream cannot encode, and a report printed half its table, then ended with "internal error:
UnicodeEncodeError", exit 1. Those symbols are written in ASCII there instead; every number is the
same, and JSON is ASCII already."""

from __future__ import annotations

import codecs
import io
from typing import TextIO

HANDLER = "wattbench-ascii"

_ASCII = {
    "∑": "sum ",
    "★": "*",
    "≠": "!=",
    "±": "+/-",
    "°": " deg ",
    "µ": "u",
    "×": "x",
    "≤": "<=",
    "≥": ">=",
    "—": "-",
    "–": "-",
    "…": "...",
    "→": "->",
    "✓": "ok",
    "✗": "x",
    "\u2009": " ",
    "\u00a0": " ",
}


def _in_ascii(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    text = exc.object[exc.start : exc.end]
    return "".join(_ASCII.get(c, "?") for c in text), exc.end


def write_symbols_in_ascii_where_needed(*streams: TextIO | None) -> None:
    """Streams that cannot encode every character write what they cannot in ASCII (see above)."""
    try:
        codecs.lookup_error(HANDLER)
    except LookupError:
        codecs.register_error(HANDLER, _in_ascii)
    for stream in streams:
        if not isinstance(stream, io.TextIOWrapper):  # replaced by a caller (a test's capture): left be
            continue
        if not (stream.encoding or "").lower().replace("-", "").replace("_", "").startswith("utf"):
            stream.reconfigure(errors=HANDLER)


# A word longer than this (a value, a path) is shown cut in a one-line message: a 100,000-character
# run id came back whole, a line of 100 kB that no terminal shows as one.
LONGEST_WORD = 120


def shortened(message: str) -> str:
    """message with every word longer than LONGEST_WORD cut to its start and end around an ellipsis."""
    if len(message) <= LONGEST_WORD:
        return message
    words = message.split(" ")
    for i, word in enumerate(words):
        if len(word) > LONGEST_WORD:
            core = word.rstrip(":,;")  # the punctuation of the sentence stays after the count
            words[i] = f"{core[:60]}…{core[-30:]} ({len(core):,} characters){word[len(core) :]}"
    return " ".join(words)
