"""Every shell block in README.md and docs/ is a test: it runs here as written, or a marker says why it
cannot and which test runs the same thing instead.

A marker is an HTML comment on the line before the block's fence, invisible on the rendered page:

- `<!-- docs-test: run -->`: the block runs. The run blocks of one page run in page order, in one
  folder and one shell, so a block may use what an earlier one started or wrote. Options after `run`:
  - `short-timing`: every `wattbench sweep` gets `--pre 1 --measure 3 --post 1 --gap 0.5`, in place of
    the values the block gives them (an option given twice is refused), so a sweep takes a minute
    instead of an hour;
  - `with-appliance`: before the block, an embedded broker and a simulated appliance (`sim-01`) start,
    as the block's text assumes;
  - `before: COMMANDS`: shell commands run first, unseen by the reader (to make an input file).
- `<!-- docs-test: file NAME -->` on a non-shell block: its text is written to NAME at that point.
- `<!-- docs-test: skip REASON -->`: it cannot run here (a real board, a lab host); the reason shows as
  the test's skip message, so the suite's summary lists every block not run.
- `<!-- docs-test: covered-by PATH -->`: another test or script runs exactly this; PATH must exist and
  name this page.

The pages use MQTT's well-known port 1883; each page's run gets a free port in its place. Exit 1 of a
scoring command (`sweep`, `report`, `suite`, `compare`) is allowed: it means a complete but invalid
result (docs/guide.md), which a loaded test machine may honestly produce; every other failure ends the
run with the command's own message.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from wattbench_devkit import services

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
SHELL = {"sh", "bash", "shell", "console"}
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
MARKER = re.compile(r"^\s*<!--\s*docs-test:\s*(.*?)\s*-->\s*$")
VERBS = {"run", "file", "skip", "covered-by"}
SHORT_TIMING = {"--pre": "1", "--measure": "3", "--post": "1", "--gap": "0.5"}


def short_timing(command: str) -> str:
    """The command with the short timing in place of its own."""
    for option, value in SHORT_TIMING.items():
        mine = re.compile(rf"(?<=\s){re.escape(option)}(?:=|\s+)\S+")
        if mine.search(command):
            command = mine.sub(f"{option} {value}", command)
        else:
            command += f" {option} {value}"
    return command


SCORING = re.compile(r"^wattbench (sweep|report|suite|compare)\b")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    marker: str  # the marker's text after "docs-test:", or ""

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def verb(self) -> str:
        return self.marker.split(maxsplit=1)[0] if self.marker else ""

    @property
    def rest(self) -> str:
        parts = self.marker.split(maxsplit=1)
        return parts[1] if len(parts) > 1 else ""


def blocks(page: Path) -> list[Block]:
    lines = page.read_text().splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang = m.groups()
        end = i + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        body = "\n".join(
            line[len(indent) :] if line.startswith(indent) else line for line in lines[i + 1 : end]
        )
        prev = lines[i - 1] if i else ""
        mark = MARKER.match(prev)
        out.append(Block(page, i + 1, lang, body + "\n", mark.group(1) if mark else ""))
        i = end + 1
    return out


ALL = [b for page in PAGES for b in blocks(page)]
SHELL_BLOCKS = [b for b in ALL if b.lang in SHELL]


def test_every_fenced_block_says_its_language() -> None:
    """A block without a language cannot be told apart as a command to run or output to read."""
    unnamed = [b.where for b in ALL if not b.lang]
    assert not unnamed, f"fenced blocks without a language (```sh, ```text, ...): {unnamed}"


def test_every_shell_block_is_run_or_marked() -> None:
    bare = [b.where for b in SHELL_BLOCKS if b.verb not in VERBS - {"file"}]
    assert not bare, f"shell blocks neither run nor marked (see this test's docstring): {bare}"
    stray = [b.where for b in ALL if b.marker and b.verb not in VERBS]
    assert not stray, f"unknown docs-test markers: {stray}"
    files = [b.where for b in ALL if b.verb == "file" and (b.lang in SHELL or not b.rest)]
    assert not files, f"a file marker names a file and sits on a non-shell block: {files}"


@pytest.mark.parametrize("block", [b for b in SHELL_BLOCKS if b.verb == "skip"], ids=lambda b: b.where)
def test_blocks_that_cannot_run_here(block: Block) -> None:
    assert block.rest, f"{block.where}: a skip says why"
    pytest.skip(f"{block.where}: {block.rest}")


@pytest.mark.parametrize("block", [b for b in SHELL_BLOCKS if b.verb == "covered-by"], ids=lambda b: b.where)
def test_blocks_run_by_another_test(block: Block) -> None:
    target = ROOT / block.rest
    assert target.is_file(), f"{block.where}: covered-by {block.rest}, which does not exist"
    assert block.page.name in target.read_text(), (
        f"{block.where}: {block.rest} does not name {block.page.name}, so nothing says it runs this block"
    )


def logical_lines(text: str) -> list[str]:
    """Commands with their continuation lines joined, comments and blank lines left out."""
    out: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        line = pending + line.strip()
        pending = ""
        if line and not line.startswith("#"):
            out.append(line)
    return out


def script(page: Path, port: int) -> str:
    """The page's run blocks as one bash script, with the changes the markers ask for."""
    out = ["set -eu", "export PYTHONUNBUFFERED=1"]
    appliance_up = False
    for b in blocks(page):
        if b.verb == "file":
            out.append(f"cat > {b.rest} <<'DOCS_TEST_EOF'\n{b.text}DOCS_TEST_EOF")
            continue
        if b.verb != "run":
            continue
        opts = b.rest
        before = opts.split("before:", 1)[1].strip() if "before:" in opts else ""
        flags = set(opts.split("before:", 1)[0].split())
        assert flags <= {"short-timing", "with-appliance"}, f"{b.where}: unknown run options {flags}"
        out.append(f"echo '>>> {b.where}'")
        if "with-appliance" in flags and not appliance_up:
            out += [
                f"wattbench broker --port {port} > broker.log 2>&1 &",
                _wait_for_port(port),
                f"wattbench appliance --sim --broker 127.0.0.1:{port} --dev sim-01 > appliance.log 2>&1 &",
            ]
            appliance_up = True
        if before:
            out.append(before)
        for line in logical_lines(b.text.replace("1883", str(port))):
            background = line.endswith("&")
            command = line.rstrip("&").rstrip()
            if "short-timing" in flags and command.startswith("wattbench sweep"):
                command = short_timing(command)
            if background:
                # Its output to a file: the test reads the script's output until every writer closes it.
                log = f"background-{len(out)}.log"
                out.append(f"{command} > {log} 2>&1 &")
                # As a user starting it in another terminal would: the next command comes once it runs
                # (a collector once it says it is subscribed: under load its start took more than 2 s,
                # and the sweep after it found no store yet).
                if command.startswith("wattbench broker"):
                    out.append(_wait_for_port(port))
                elif command.startswith("wattbench collect"):
                    out.append(_wait_for_line(log, "subscribed"))
                else:
                    out.append("sleep 2")
            elif SCORING.match(command):
                out.append(f"{command} || [ $? -eq 1 ]")
            else:
                out.append(command)
    return "\n".join(out) + "\n"


def _wait_for_line(log: str, text: str) -> str:
    return f"for _ in $(seq 600); do grep -q '{text}' {log} 2>/dev/null && break; sleep 0.1; done"


def _wait_for_port(port: int) -> str:
    return (
        f"for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && break; sleep 0.1; done"
    )


RUN_PAGES = [p for p in PAGES if any(b.verb == "run" for b in blocks(p))]


@pytest.mark.timeout(900)
@pytest.mark.parametrize("page", RUN_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_documented_commands_run_as_written(page: Path, tmp_path: Path) -> None:
    pytest.importorskip("wattbench_fw.host")
    work = tmp_path / "work"
    work.mkdir()
    # Paths in the docs are from a clone's top folder.
    (work / "tests").mkdir()
    (work / "tests" / "data").symlink_to(ROOT / "tests" / "data")
    text = script(page, services.free_port())
    (tmp_path / "docs.sh").write_text(text)
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    # Its own session: the broker, appliance and collector the page starts are stopped with it.
    proc = subprocess.Popen(
        ["bash", str(tmp_path / "docs.sh")],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        text=True,
    )
    try:
        output, _ = proc.communicate(timeout=840)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        pytest.fail(f"{page.name}: the documented commands did not finish in 840 s:\n{output[-4000:]}")
    finally:
        _stop_group(proc.pid)
    if proc.returncode != 0:
        logs = "".join(f"\n--- {log.name}\n{log.read_text()[-1500:]}" for log in sorted(work.glob("*.log")))
        pytest.fail(
            f"{page.name}: a documented command failed (exit {proc.returncode}):\n{output[-6000:]}{logs}"
        )


def _stop_group(pgid: int) -> None:
    """SIGTERM to what the page left running (a script's background jobs ignore Ctrl-C), then SIGKILL
    to whatever is still there."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
