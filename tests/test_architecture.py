"""The package layout of docs/architecture.md, checked from the source: what each package may import, no
import cycle between packages, and a measurement core free of I/O.

Every import counts, the ones written inside functions too, so a deferred import cannot hide a
dependency."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

PKG = Path(__file__).resolve().parents[1] / "collector" / "wattbench"

# Modules the core must never import, directly or inside a function: network, databases, processes.
IO_MODULES = {
    "paho",
    "influxdb_client",
    "sqlite3",
    "socket",
    "subprocess",
    "asyncio",
    "http",
    "urllib",
    "requests",
    "serial",
    "multiprocessing",
    "amqtt",
    "rich",
    "matplotlib",
}

# Each unit (a package, or a module at the top level) and the units it may import. cli is the one
# edge that may import everything; nothing imports it back.
ALLOWED: dict[str, set[str]] = {
    "core": set(),
    "settings": {"forms"},
    "forms": set(),
    "exits": set(),
    "config": {"mqttconn", "settings", "forms"},
    "signals": set(),
    "argtypes": {"core"},
    "spool": set(),
    "owner": set(),
    "store": {"core", "config"},
    "mqttconn": set(),
    "promql": set(),
    "bridge": set(),
    "broker": {"signals"},
    "ingest": {
        "core",
        "config",
        "settings",
        "forms",
        "exits",
        "signals",
        "spool",
        "owner",
        "store",
        "mqttconn",
        "bridge",
    },
    "workloads": {"core", "argtypes", "exits", "signals", "forms"},
    "report": {"core", "store"},
    "sweep": {"core", "store", "workloads", "mqttconn", "config", "meterinfo"},
    "ptd": {"mqttconn", "meterinfo"},
    "meterinfo": set(),
    "cli": {
        "core",
        "argtypes",
        "settings",
        "forms",
        "exits",
        "config",
        "signals",
        "spool",
        "owner",
        "store",
        "mqttconn",
        "broker",
        "ingest",
        "workloads",
        "report",
        "sweep",
        "promql",
        "bridge",
        "ptd",
        "meterinfo",
    },
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _imports(path: Path) -> Iterator[tuple[str, int]]:
    """Absolute names of everything the file imports, with the line."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            # "from wattbench import core" names a unit, "from .x import y" a module.
            if target == "wattbench":
                for alias in node.names:
                    yield f"wattbench.{alias.name}", node.lineno
            else:
                yield target, node.lineno


def _internal_edges() -> dict[tuple[str, str], list[str]]:
    edges: dict[tuple[str, str], list[str]] = {}
    for path in sorted(PKG.rglob("*.py")):
        src = _unit(_module_name(path))
        for target, line in _imports(path):
            if not target.startswith("wattbench."):
                continue
            dst = _unit(target)
            if dst in ("", "__version__") or dst == src or not src:
                continue
            edges.setdefault((src, dst), []).append(f"{path.relative_to(PKG)}:{line}")
    return edges


def test_every_unit_is_in_the_table() -> None:
    units = {_unit(_module_name(p)) for p in PKG.rglob("*.py")} - {""}
    assert units <= set(ALLOWED), f"add to ALLOWED and docs/architecture.md: {sorted(units - set(ALLOWED))}"


def test_each_unit_imports_only_what_it_may() -> None:
    wrong = [
        f"{src} imports {dst} at {', '.join(where[:3])}"
        for (src, dst), where in sorted(_internal_edges().items())
        if dst not in ALLOWED.get(src, set())
    ]
    assert not wrong, "\n".join(wrong)


def test_no_import_cycle_between_units() -> None:
    graph: dict[str, set[str]] = {}
    for src, dst in _internal_edges():
        graph.setdefault(src, set()).add(dst)
    cycles = _cycles(graph)
    assert not cycles, f"units on an import cycle: {cycles}"


@pytest.mark.parametrize("path", sorted((PKG / "core").rglob("*.py")), ids=lambda p: p.name)
def test_the_core_does_no_io(path: Path) -> None:
    bad = [
        f"{target} (line {line})"
        for target, line in _imports(path)
        if target.split(".")[0] in IO_MODULES or (target.startswith("wattbench.") and _unit(target) != "core")
    ]
    assert not bad, f"core/{path.name} imports {', '.join(bad)}"


def test_the_checks_see_a_violation() -> None:
    # The checker itself: an I/O import inside a function is found, and so is a relative one.
    sample = PKG / "core" / "align.py"
    names = {t for t, _ in _imports(sample)}
    assert "wattbench.core.clocktrack" in names and "numpy" in names


# The two places that import a sibling late on purpose: `import wattbench.ingest` stays free of paho
# (ingest/__init__.py), and a store's backend is imported only when a store of that kind is opened, so
# reading a SQLite file never loads influxdb_client (store/__init__.py).
LATE_ON_PURPOSE = {"ingest/__init__.py", "store/__init__.py"}


def test_outside_the_commands_wattbench_imports_are_at_the_top() -> None:
    # A subcommand in cli/ may defer what its run() needs; anywhere else an import of wattbench's own
    # modules inside a function would hide a dependency from a reader of the module's head.
    late = []
    for path in sorted(PKG.rglob("*.py")):
        rel = str(path.relative_to(PKG))
        if rel.startswith("cli/") or rel in LATE_ON_PURPOSE:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and (
                    node.level or (node.module or "").startswith("wattbench")
                ):
                    late.append(f"{rel}:{node.lineno} in {fn.name}()")
    assert not late, "move to the top of the module: " + ", ".join(late)


# A late import (one inside a function) says why on its line, in this form, so that the module's head
# shows everything else it depends on: `start-up` when loading it at the top would slow a command's
# start (`wattbench --help` loads every subcommand's module) or a module others import for less, for a
# slow third-party library or an own module that pulls one in; `optional` for a dependency that may
# be missing; `cycle` for an import cycle that cannot be removed.
LATE_REASON = re.compile(r"#\s*late:\s*(start-up|optional|cycle)\b")


def _unexplained_late_imports(source: str) -> list[int]:
    """Lines of the imports inside functions that carry no `# late: <reason>` comment."""
    lines = source.splitlines()
    found = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(fn):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            # A formatter may wrap a long import and carry the comment to one of its inner lines.
            text = "\n".join(lines[node.lineno - 1 : node.end_lineno])
            if not LATE_REASON.search(text):
                found.append(node.lineno)
    return sorted(set(found))


def test_every_late_import_says_why() -> None:
    bare = [
        f"{path.relative_to(PKG)}:{line}"
        for path in sorted(PKG.rglob("*.py"))
        for line in _unexplained_late_imports(path.read_text(encoding="utf-8"))
    ]
    assert not bare, "move to the top of the module, or say `# late: start-up|optional|cycle`: " + ", ".join(
        bare
    )


def test_the_late_import_check_sees_one() -> None:
    source = (
        "import os\n\n"
        "def f():\n"
        "    import json\n"
        "    from rich.table import Table  # late: start-up\n"
        "    from .x import (  # late: cycle\n        y,\n    )\n"
        "    def g():\n"
        "        import re  # late: because\n"
    )
    assert _unexplained_late_imports(source) == [4, 10]


MAX_LINES = 500
# Modules written by a program rather than by hand, which may be as long as their table is: none today.
# A generated table goes here by its path under collector/wattbench, with the command that makes it.
GENERATED_TABLES: set[str] = set()


def test_no_module_is_over_500_lines() -> None:
    # A module past this has grown a second job; split it along its seams.
    long = {
        rel: n
        for path in sorted(PKG.rglob("*.py"))
        if (rel := str(path.relative_to(PKG))) not in GENERATED_TABLES
        and (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"over {MAX_LINES} lines: {long}"
    assert all((PKG / rel).is_file() for rel in GENERATED_TABLES), "an exception names no module"


REPO = PKG.parents[1]
HOW_TO_ADD = "## How to add a meter, a workload, a store, a renderer, a setting"
# The names of a registry's rows, by the registry's name in docs/architecture.md. The meter table also
# has rows for sensors, whose folders are under wattbench_fw/sensors/.
ROW_NAMES: dict[str, Callable[[Any], set[str]]] = {
    "TABLE": lambda table: {row[0] for row in table if row[1] == "meters"},
    "REGISTRY": lambda registry: set(registry),
    "BACKENDS": lambda backends: {b.name for b in backends},
    "RENDERERS": lambda renderers: {r.name for r in renderers},
    "CollectorConfig": lambda cls: {f.name for f in dataclasses.fields(cls)},
}
REGISTRY_LINE = re.compile(r"^Registry: `(\w+)` in `([^`]+)`(?:, a row per folder of `([^`]+)`)?\.$", re.M)


def _how_to_add() -> dict[str, str]:
    doc = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert HOW_TO_ADD in doc, f"docs/architecture.md has no section {HOW_TO_ADD!r}"
    section = doc.split(HOW_TO_ADD, 1)[1].split("\n## ", 1)[0]
    parts = section.split("\n### ")[1:]
    return {part.split("\n", 1)[0]: part for part in parts}


def _files_to_touch(part: str) -> list[str]:
    files = part.split("Files to touch:\n", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^- `([^`]+)`", files, re.M)


def _module_of(path: str) -> str:
    rel = Path(path).with_suffix("")
    parts = rel.parts[1:] if rel.parts[0] in ("collector", "firmware") else rel.parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _exists(path: Path) -> bool:
    # A module may be a package: store/<name>.py is store/influx/ for the InfluxDB backend.
    return path.exists() or (path.suffix == ".py" and (path.with_suffix("") / "__init__.py").is_file())


def test_the_how_to_add_section_names_what_is_there() -> None:
    # A list of files to touch that has drifted sends the next contributor to files that are not there,
    # or leaves out the row that makes the new part known.
    parts = _how_to_add()
    assert list(parts) == ["A meter", "A workload", "A store", "A renderer", "A setting"]
    wrong = []
    for title, part in parts.items():
        files = _files_to_touch(part)
        registry = REGISTRY_LINE.search(part)
        assert files and registry, f"{title}: no files to touch or no registry line"
        name, where, folder = registry.groups()
        assert where in files, f"{title}: the registry's file {where} is not among the files to touch"
        rows = ROW_NAMES[name](vars(importlib.import_module(_module_of(where)))[name])
        assert rows, f"{title}: {name} has no rows"
        for path in files:
            for each in sorted(rows) if "<name>" in path else [None]:
                full = path.replace("<name>", each) if each else path
                if not _exists(REPO / full):
                    wrong.append(f"{title}: {full} is not there")
        if folder:
            folders = {p.name for p in (REPO / folder).iterdir() if p.is_dir() and p.name != "__pycache__"}
            if folders != rows:
                wrong.append(
                    f"{title}: folders without a row {sorted(folders - rows)}, rows without a folder {sorted(rows - folders)}"
                )
    assert not wrong, "\n".join(wrong)


# ---- the firmware --------------------------------------------------------------------------------

FIRMWARE = Path(__file__).resolve().parents[1] / "firmware" / "wattbench_fw"


def _firmware_module(path: Path) -> str:
    parts = list(path.relative_to(FIRMWARE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _firmware_graph() -> dict[str, set[str]]:
    """Module -> the firmware modules it imports (inside functions too: a board loads those late for
    its RAM, and a late import still closes a cycle). Importing a module imports its packages first."""
    modules = {_firmware_module(p): p for p in FIRMWARE.rglob("*.py") if "boards" not in p.parts}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        out = graph.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join([*parts[: len(parts) - (node.level - 1)], *([base] if base else [])])
                # "from wattbench_fw import port" names a module, "from wattbench_fw.port import x" a name.
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for target in targets:
                parts = target.split(".")
                for i in range(2, len(parts) + 1):  # the packages on the way, then the module
                    mod = ".".join(parts[:i])
                    if mod in modules and mod != name and not name.startswith(mod + "."):
                        out.add(mod)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[str]:
    def reach(start: str) -> set[str]:
        seen: set[str] = set()
        todo = list(graph.get(start, ()))
        while todo:
            node = todo.pop()
            if node not in seen:
                seen.add(node)
                todo.extend(graph.get(node, ()))
        return seen

    return sorted(m for m in graph if m in reach(m))


def test_no_import_cycle_in_the_firmware() -> None:
    # A cycle works on CPython only by the order modules happen to load in; on a board it also keeps
    # modules resident that a driver-less configuration never needed.
    cycles = _cycles(_firmware_graph())
    assert not cycles, f"firmware modules on an import cycle: {cycles}"


def test_the_firmware_cycle_check_sees_a_cycle() -> None:
    graph = _firmware_graph()
    assert "wattbench_fw.contract" in graph["wattbench_fw.errors"]
    assert "wattbench_fw.meters" in graph["wattbench_fw.board"]  # "from wattbench_fw import meters"
    graph["wattbench_fw.contract"] = {*graph["wattbench_fw.contract"], "wattbench_fw.errors"}
    assert "wattbench_fw.contract" in _cycles(graph)
