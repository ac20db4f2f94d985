"""Every rendering of a result, as one registry, and `write_outputs`, which sends a result to the
renderings a command's options chose.

A result is a scored run (`RunResult`), a suite (`SuiteResult`), a comparison of candidates
(`Comparison`) or a scored per-level table (`ScoredTable`, report/score.py). A renderer is one row of `RENDERERS`: the kind of result it renders, its name (which is
also its command-line option), where its text goes, and the function that makes it. Where is one of

- "terminal": the tables a person reads, shown when nothing else goes to stdout;
- "stdout": printed on stdout instead of the tables (`--json`), so a script can read it;
- "file": written to the FILE its option names (`--json-out FILE`, `--html FILE`).

The commands declare their output options from this table (cli/options.py), so a new rendering is one
row here: every command whose result it renders offers it, checks its file can be written before the
work starts, and writes it."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, Generic, Literal, TypeVar

from ..core.compare import Prices, Row
from ..core.evaluate import Evaluation
from .compare import (
    compare_document,
    compare_renderables,
    render_compare_html,
    render_suite_html,
    suite_renderables,
)
from .html import render_html
from .jsonreport import to_json
from .score import ScoredTable, render_score_html, score_json, score_renderables
from .table import evaluation_renderables

if TYPE_CHECKING:
    from rich.console import Console

R = TypeVar("R")
Where = Literal["terminal", "stdout", "file"]
# What a renderer makes: text for stdout or a file (whole, or in pieces for a document too large to
# hold twice: a scored table of a million rows), rich renderables for the terminal.
Rendering = str | Iterator[str] | Sequence[Any]

TERMINAL = "terminal"


@dataclass(frozen=True)
class RunResult:
    """A scored run, and where its power traces can be read back (Store.series) for the HTML page;
    None when the store cannot be read."""

    evaluation: Evaluation
    fetch: Callable[..., Any] | None = None


@dataclass(frozen=True)
class SuiteResult:
    """A suite's result document (schema/v1/suite.schema.json)."""

    document: Mapping[str, Any]


@dataclass(frozen=True)
class Comparison:
    """Candidates side by side (core/compare.py), with the prices they were compared at."""

    rows: Sequence[Row]
    prices: Prices | None


@dataclass(frozen=True)
class Renderer(Generic[R]):
    kind: type[R]
    name: str  # also the option: --NAME (a flag for stdout, --NAME FILE for a file)
    where: Where
    render: Callable[[R, int], Rendering]  # the result and the terminal's width
    help: str = ""
    note: str = ""  # a file's line after it is written: the note, then the path


@dataclass(frozen=True)
class Outputs:
    """Which renderings of a result go where: `stdout` names the one printed on stdout (the terminal
    tables, or a "stdout" renderer such as json), `files` maps a file renderer's name to its path.
    `console` shows the tables and the notes; None is a plain console on stdout."""

    stdout: str = TERMINAL
    files: Mapping[str, str] = field(default_factory=dict)
    console: Console | None = None

    @property
    def machine_readable(self) -> bool:
        """stdout carries text for a program: every other line goes to stderr."""
        return self.stdout != TERMINAL


def _json(doc: Any) -> str:
    return json.dumps(doc, indent=2)


RENDERERS: list[Renderer[Any]] = [
    Renderer(RunResult, TERMINAL, "terminal", lambda r, _w: evaluation_renderables(r.evaluation)),
    Renderer(
        RunResult,
        "json",
        "stdout",
        lambda r, _w: to_json(r.evaluation),
        help="print the JSON report (schema/v1/report.schema.json) instead of tables",
    ),
    Renderer(
        RunResult,
        "json-out",
        "file",
        lambda r, _w: _json(r.evaluation.result),
        help="write the result JSON (schema/v1/result.schema.json) here",
        note="result JSON",
    ),
    Renderer(
        RunResult,
        "html",
        "file",
        lambda r, _w: render_html(r.evaluation, r.fetch),
        help="HTML report",
        note="HTML report",
    ),
    Renderer(SuiteResult, TERMINAL, "terminal", lambda r, _w: suite_renderables(r.document)),
    Renderer(
        SuiteResult,
        "json",
        "stdout",
        lambda r, _w: _json(r.document),
        help="print the suite result (schema/v1/suite.schema.json) instead of tables",
    ),
    Renderer(
        SuiteResult,
        "json-out",
        "file",
        lambda r, _w: _json(r.document),
        help="write the suite result (schema/v1/suite.schema.json) here",
        note="suite result JSON",
    ),
    Renderer(
        SuiteResult,
        "html",
        "file",
        lambda r, _w: render_suite_html(r.document),
        help="HTML page of the suite",
        note="suite HTML",
    ),
    Renderer(Comparison, TERMINAL, "terminal", lambda r, w: compare_renderables(r.rows, r.prices, w)),
    Renderer(
        Comparison,
        "json",
        "stdout",
        lambda r, _w: _json(compare_document(r.rows, r.prices)),
        help="print the comparison (schema/v1/compare.schema.json) instead of tables",
    ),
    Renderer(
        Comparison,
        "json-out",
        "file",
        lambda r, _w: _json(compare_document(r.rows, r.prices)),
        help="write the comparison JSON (schema/v1/compare.schema.json) here",
        note="comparison JSON",
    ),
    Renderer(
        Comparison,
        "html",
        "file",
        lambda r, _w: render_compare_html(r.rows, r.prices),
        help="HTML comparison with the candidates' curves",
        note="HTML comparison",
    ),
    Renderer(ScoredTable, TERMINAL, "terminal", lambda r, _w: score_renderables(r)),
    Renderer(
        ScoredTable,
        "json",
        "stdout",
        lambda r, _w: score_json(r),
        help="print the scored table (schema/v1/score.schema.json) instead of tables",
    ),
    Renderer(
        ScoredTable,
        "json-out",
        "file",
        lambda r, _w: score_json(r),
        help="write the scored table (schema/v1/score.schema.json) here",
        note="score JSON",
    ),
    Renderer(
        ScoredTable,
        "html",
        "file",
        lambda r, _w: render_score_html(r),
        help="HTML page of the scored table",
        note="score HTML",
    ),
]


def renderers(kinds: Iterable[type]) -> list[Renderer[Any]]:
    """The renderers every one of kinds has, one per name in the table's order, each as the first kind
    renders it: the options of a command whose result may be any of kinds."""
    wanted = list(kinds)
    out = []
    for r in RENDERERS:
        if r.kind is wanted[0] and all(
            any(o.kind is k and o.name == r.name for o in RENDERERS) for k in wanted
        ):
            out.append(r)
    return out


def renderer(kind: type, name: str) -> Renderer[Any]:
    for r in RENDERERS:
        if r.kind is kind and r.name == name:
            return r
    raise KeyError(f"no renderer {name!r} for a {kind.__name__}")


def _write(out: IO[str], text: Rendering) -> None:
    if isinstance(text, str):
        out.write(text)
    else:
        for piece in text:
            out.write(piece)


class OutputError(Exception):
    """An output file could not be written (exit 4). What was measured is stored; only the file is
    missing, so the command says which and why, not "internal error"."""


def write_outputs(result: RunResult | SuiteResult | Comparison | ScoredTable, outputs: Outputs) -> None:
    """Show the result on stdout as outputs.stdout says, then write each file, in the table's order,
    and say where each went: on the console with the tables, on stderr when stdout is for a program."""
    from rich.console import Console  # late: start-up (rich is slow to load)

    console = outputs.console or Console()
    kind = type(result)
    shown = renderer(kind, outputs.stdout)
    if shown.where == "terminal":
        for item in shown.render(result, console.width):
            console.print(item)
    else:
        text = shown.render(result, console.width)
        # a whole text gets its line end from print; a document in pieces ends its own last line
        if isinstance(text, str):
            print(text)
        else:
            _write(sys.stdout, text)
    for r in RENDERERS:
        path = outputs.files.get(r.name) if r.kind is kind and r.where == "file" else None
        if path is None:
            continue
        try:
            with open(path, "w", encoding="utf-8") as f:
                _write(f, r.render(result, console.width))
        except OSError as exc:
            raise OutputError(f"cannot write the output: {path}: {exc.strerror or exc}") from None
        line = f"{r.note or r.name}: {path}"
        if outputs.machine_readable:
            print(line, file=sys.stderr)
        else:
            # never wrapped: a path cut in two cannot be copied, nor read by a script
            console.print(line, markup=False, highlight=False, soft_wrap=True)
