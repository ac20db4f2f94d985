"""The documentation holds together: every relative link and image in README.md, docs/, hardware/ and
deploy/grafana/ points at a file (and heading) that exists, and every `wattbench <command> --flag` it
quotes is a command and flag the CLI really has."""

from __future__ import annotations

import re
import shlex
import unicodedata
from functools import cache
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = sorted(
    [
        REPO / "README.md",
        *(REPO / "docs").glob("*.md"),
        *(REPO / "hardware").glob("*.md"),
        REPO / "deploy" / "grafana" / "README.md",
    ]
)
LINK_RX = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE_RX = re.compile(r"^(```|~~~)")


def _rel(path: Path) -> str:
    return str(path.relative_to(REPO))


def _strip_code(text: str) -> str:
    """Markdown without fenced blocks and inline code, where brackets are not links."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE_RX.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            out.append(re.sub(r"`[^`]*`", "", line))
    return "\n".join(out)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading.strip()).lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    kept = []
    for ch in text:
        if ch in " -_" or unicodedata.category(ch)[0] in "LN":
            kept.append(ch)
    return "".join(kept).replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    seen: dict[str, int] = {}
    out = set()
    fenced = False
    for line in path.read_text().splitlines():
        if FENCE_RX.match(line.strip()):
            fenced = not fenced
        if fenced:
            continue
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return frozenset(out)


def links(path: Path) -> list[str]:
    return LINK_RX.findall(_strip_code(path.read_text()))


def test_pages_exist() -> None:
    names = {_rel(p) for p in PAGES}
    for required in ("docs/README.md", "docs/guide.md", "docs/accuracy.md", "docs/methodology.md"):
        assert required in names
    assert len(PAGES) >= 8


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
            continue
        if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {_rel(dest)}")
        if dest.is_relative_to(REPO) is False:
            broken.append(f"{target}: outside the repository")
    assert not broken, f"{_rel(page)}:\n" + "\n".join(broken)


def test_the_slug_rules() -> None:
    assert slug("4. Calibrate against a reference") == "4-calibrate-against-a-reference"
    assert (
        slug("8. Meter accuracy and the result's uncertainty")
        == "8-meter-accuracy-and-the-results-uncertainty"
    )
    assert slug("Lab-grade path: Yokogawa WT310") == "lab-grade-path-yokogawa-wt310"


# ------------------------------------------------------------------ commands quoted in the docs


def _code(text: str) -> list[str]:
    """Fenced blocks (continuation lines joined) and inline code spans."""
    out: list[str] = []
    block: list[str] | None = None
    for line in text.splitlines():
        if FENCE_RX.match(line.strip()):
            if block is None:
                block = []
            else:
                out.append("\n".join(block).replace("\\\n", " "))
                block = None
            continue
        if block is not None:
            block.append(line)
        else:
            out.extend(re.findall(r"`([^`]+)`", line))
    return out


def commands(text: str) -> list[list[str]]:
    """Every `wattbench ...` invocation: the words after 'wattbench' up to a shell separator."""
    found = []
    for snippet in _code(text):
        for line in snippet.splitlines():
            for m in re.finditer(r"(?:^|[\s;&|(])wattbench((?:\s+[^\s;&|)]+)*)", line):
                try:
                    words = shlex.split(m.group(1), comments=True)
                except ValueError:
                    words = m.group(1).split()
                if words:
                    found.append(words)
    return found


@cache
def cli() -> dict[str, Any]:
    from wattbench.cli.app import build_parser

    parser = build_parser()
    (sub,) = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    return dict(sub.choices)


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_quoted_commands_exist(page: Path) -> None:
    commands_seen = commands(page.read_text())
    problems = []
    for words in commands_seen:
        name = words[0]
        if name.startswith("-"):
            continue  # `wattbench --version`
        sub = cli().get(name)
        if sub is None:
            problems.append(f"wattbench {name}: no such command")
            continue
        known = set(sub._option_string_actions)
        for word in words[1:]:
            if word.startswith("--"):
                flag = word.split("=", 1)[0]
                if flag not in known:
                    problems.append(f"wattbench {name} {flag}: no such option")
    assert not problems, f"{_rel(page)}:\n" + "\n".join(problems)


def test_the_guide_quotes_the_main_commands() -> None:
    quoted = {words[0] for words in commands((REPO / "docs" / "guide.md").read_text())}
    assert {"flash", "sweep", "report", "collect", "status", "demo"} <= quoted


def test_command_finder() -> None:
    text = "Run `wattbench sweep --levels 1,0.5` and\n```sh\nwattbench flash --port /dev/x \\\n    --mpy && wattbench demo\n```\n"
    assert commands(text) == [
        ["sweep", "--levels", "1,0.5"],
        ["flash", "--port", "/dev/x", "--mpy"],
        ["demo"],
    ]
    assert commands("the `wattbench_fw` package and `wattbench/v1/dev/+/samples`") == []


def test_one_micropython_minimum_everywhere() -> None:
    """Every page that names the MicroPython version a board needs names the same one, and it is the one
    `wattbench flash` states (the guide said 1.23 while the firmware page said 1.22)."""
    from wattbench.cli import flash

    want = flash.MIN_MICROPYTHON
    found = {}
    for page in [*PAGES, REPO / "firmware" / "README.md"]:
        for m in re.finditer(
            # A release with its patch number (1.27.0, the unix port the tests build) is an
            # interpreter the figures come from, not the minimum a board needs.
            r"MicroPython[^.\n]{0,40}?\b(1\.\d+)\b(?!\.\d)|\b(1\.\d+) or (?:newer|later)",
            page.read_text(),
        ):
            found.setdefault(m.group(1) or m.group(2), []).append(_rel(page))
    assert found, "no page names the MicroPython version a board needs"
    assert set(found) == {want}, found
    assert want in flash.build_help()
