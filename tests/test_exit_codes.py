"""One exit-code table (wattbench.exits.Exit), and the docs held to it: docs/guide.md's table is the
table, every status another page documents (in a table of exit statuses or in a sentence) is in it,
and the code names its statuses from it rather than by number."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from wattbench.exits import MEANING, Exit, reference

REPO = Path(__file__).resolve().parent.parent
PKG = REPO / "collector" / "wattbench"
PAGES = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md")])
CODES = {int(code) for code in Exit}

# "exit 2", "exits with 3", "exit code 4", "exit status is 130", "exits with status 4"
SAID = re.compile(
    r"\bexit(?:s|ed)?(?: with)?(?: (?:status|code))?(?: is)?(?: status)?:? \(?(\d+)\b", re.IGNORECASE
)
# "Exit codes: 0 stopped ..., 1 the log file ..., 2 a bad ...": every clause of the list
LISTED = re.compile(r"\bexit (?:codes|status(?:es)?)(?: is that of [^:]*)?: ([^.]*)", re.IGNORECASE)


def _tables(text: str) -> list[tuple[str, list[str]]]:
    """(heading, first cells of the rows) of every Markdown table whose first column holds exit
    statuses: headed "exit status", or "code"/"status" under a heading about exit codes."""
    out = []
    heading = ""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("#"):
            heading = line.lower()
        if not line.startswith("|") or i + 1 >= len(lines) or not lines[i + 1].startswith("|---"):
            continue
        first = line.strip("|").split("|")[0].strip().lower()
        if first == "exit status" or (first in ("code", "status") and "exit" in heading):
            rows = []
            for row in lines[i + 2 :]:
                if not row.startswith("|"):
                    break
                rows.append(row.strip("|").split("|")[0].strip())
            out.append((heading, rows))
    return out


def test_every_status_has_its_meaning() -> None:
    assert set(MEANING) == set(Exit)


def test_the_guide_s_table_is_the_table() -> None:
    text = (REPO / "docs" / "guide.md").read_text()
    assert reference() in text, "docs/guide.md: paste wattbench.exits.reference()"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_documented_status_is_in_the_table(page: Path) -> None:
    text = page.read_text()
    wrong = []
    for heading, rows in _tables(text):
        wrong += [
            f"table under {heading!r}: {row}" for row in rows if not row.isdigit() or int(row) not in CODES
        ]
    for m in SAID.finditer(text):
        if int(m.group(1)) not in CODES:
            wrong.append(m.group(0))
    for m in LISTED.finditer(text):
        for clause in re.findall(r"(?:^|[,;]\s+)(\d+)\b", m.group(1)):
            if int(clause) not in CODES:
                wrong.append(f"{m.group(0)[:60]}: {clause}")
    assert not wrong, f"{page.name}: exit statuses not in wattbench.exits.Exit: {wrong}"


def test_the_pages_find_their_statuses() -> None:
    # the checks themselves: each form of the docs is read
    tables = _tables((REPO / "docs" / "collector.md").read_text())
    assert [rows for _, rows in tables] == [["0", "1", "2", "3", "4"]]
    assert [int(m.group(1)) for m in SAID.finditer("it exits with status 4; (exit 2), exit code 3")] == [
        4,
        2,
        3,
    ]
    listed = LISTED.search("Exit codes: 0 stopped, 1 the log, 2 a bad one. Then")
    assert listed and re.findall(r"(?:^|[,;]\s+)(\d+)\b", listed.group(1)) == ["0", "1", "2"]


def test_no_module_keeps_an_exit_table_of_its_own() -> None:
    own = [
        f"{path.relative_to(PKG)}:{node.lineno}"
        for path in sorted(PKG.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id.startswith("EXIT_") for t in node.targets)
    ]
    assert not own, f"use wattbench.exits.Exit: {own}"


# report.py and score.py still return numbers; they are to move onto Exit next.
NOT_YET = {"report.py", "score.py"}


def test_the_commands_return_statuses_by_name() -> None:
    bare = []
    for path in sorted((PKG / "cli").glob("*.py")):
        if path.name in NOT_YET:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            value = node.value if isinstance(node, ast.Return) else None
            if isinstance(value, ast.Constant) and isinstance(value.value, int) and value.value != 0:
                bare.append(f"{path.name}:{node.lineno} return {value.value}")
    assert not bare, f"return an Exit: {bare}"
