"""How the test suite is shared out among pytest-xdist's workers.

Every test is a unit of its own, handed to whichever worker is free, except where a module has to stay
together on one worker:
- it defines a module-scoped fixture (a built wheel, a started Home Assistant, a firmware run of every
  board profile): made once per worker that runs the module, so the whole module goes to one;
- it names a group with `pytest.mark.xdist_group("name")` (tests that need one fixed resource, such as
  UDP port 123): every module naming that group goes to one worker, one test after another.

xdist's own `--dist loadgroup` reads the marker from a renamed node id, which pytest 9.2 no longer
allows (its node ids cannot be set), so the groups are found here from the test files' source, before
any worker has collected. tests/conftest.py installs this as the scheduler; scopes with more tests are
handed out first, so long modules start early instead of trailing the run.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import Any


def _is_module_fixture(decorator: ast.expr) -> bool:
    """@pytest.fixture(scope="module", ...) or @fixture(scope="module")."""
    if not isinstance(decorator, ast.Call):
        return False
    func = decorator.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if name != "fixture":
        return False
    return any(
        k.arg == "scope" and isinstance(k.value, ast.Constant) and k.value.value == "module"
        for k in decorator.keywords
    )


def _named_group(node: ast.AST) -> str | None:
    """The name in a pytest.mark.xdist_group("name") call, if node is one."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "xdist_group"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return node.args[0].value
    return None


@functools.cache
def group_of(path: Path, rel: str) -> str | None:
    """The scope a test module's tests share, or None where each test may go anywhere. `rel` is the
    module's path as node ids spell it, which names the module's own group."""
    try:
        tree = ast.parse(path.read_text(), str(path))
    except (OSError, SyntaxError, ValueError):
        return None
    named = None
    for node in ast.walk(tree):
        named = named or _named_group(node)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and any(
            _is_module_fixture(d) for d in node.decorator_list
        ):
            return rel
    return f"group:{named}" if named else None


def split_scope(root: Path, nodeid: str) -> str:
    rel = nodeid.split("::", 1)[0]
    return group_of(root / rel, rel) or nodeid


def make_scheduler(config: Any, log: Any) -> Any:
    """For tests/conftest.py's pytest_xdist_make_scheduler: None (xdist's own) for any --dist but
    load and loadgroup."""
    if config.getvalue("dist") not in ("load", "loadgroup"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    root = Path(config.rootpath)

    class ModuleGroups(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return split_scope(root, nodeid)

    return ModuleGroups(config, log)
