"""Run code under the official MicroPython WebAssembly build from the test suite.

    from wattbench_devkit.mpy import micropython_available, run_micropython
    results = run_micropython("report(1 + 1)")          # -> [2]

The firmware package is mounted at /lib/wattbench_fw and the test mocks (machine, onewire) at /lib,
so `import machine` gives the mock. `DATA` holds the JSON-able `data` argument; `report(x)` sends a
JSON-able value back. A Python exception fails with its MicroPython traceback.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from . import REPO
from .services import SERVICES

# The same cache scripts/provision.sh fills (WATTBENCH_SERVICES moves it, as for the other services).
MODULE = (
    SERVICES
    / "npm"
    / "node_modules"
    / "@micropython"
    / "micropython-webassembly-pyscript"
    / "micropython.mjs"
)
RUNNER = Path(__file__).resolve().parent / "mpy_runner.mjs"
FIRMWARE = REPO / "firmware" / "wattbench_fw"
MOCKS = Path(__file__).resolve().parent / "mocks"
MARK = "\x1e"  # record separator: never appears in ordinary output

PRELUDE = f"""
import sys, json
sys.path.insert(0, "/lib")
DATA = json.load(open("/data.json"))
def report(value):
    print("{MARK}" + json.dumps(value))
"""


class MicroPythonError(AssertionError):
    """The code raised under MicroPython; the message holds its traceback and output."""


def micropython_available() -> str | None:
    """None if the WebAssembly build can run here, else the reason it cannot."""
    if shutil.which("node") is None:
        return "node is not installed"
    if not MODULE.is_file():
        return f"{MODULE} is missing (run scripts/provision.sh)"
    return None


def run_micropython(
    code: str,
    data: Any = None,
    heapsize: int = 16 * 1024 * 1024,
    timeout: float = 120.0,
    files: dict[str, str] | None = None,
    firmware: Path = FIRMWARE,
    stdout_lines: list[str] | None = None,
    repeat: str | None = None,
) -> list[Any]:
    """`firmware` may be a tree of .mpy files compiled from the package (with its .json files);
    `stdout_lines` receives the program's other output lines; `repeat` runs again and again as its
    own top-level call (the only place this build frees garbage) while the global AGAIN is true."""
    job = {
        "module": MODULE.as_uri(),
        "mounts": [[str(firmware), "/lib/wattbench_fw"], [str(MOCKS), "/lib"]],
        "files": files or {},
        "data": data,
        "code": PRELUDE + code,
        "heapsize": heapsize,
        "repeat": repeat,
    }
    proc = subprocess.run(
        ["node", str(RUNNER)], input=json.dumps(job), capture_output=True, text=True, timeout=timeout
    )
    results = []
    other = []
    for line in proc.stdout.split("\n"):
        if line.startswith(MARK):
            results.append(json.loads(line[1:]))
        else:
            other.append(line)
    if stdout_lines is not None:
        stdout_lines.extend(other)
    if proc.returncode != 0:
        raise MicroPythonError(
            f"MicroPython failed (exit {proc.returncode}):\n{proc.stderr}\n{chr(10).join(other)}"
        )
    return results
