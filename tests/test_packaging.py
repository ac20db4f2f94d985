"""What a user gets from a plain (not editable) `pip install .`: the built wheel, installed into a fresh
venv, carries everything its commands read at run time, and `wattbench flash` works from it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from wattbench.workloads.worklet import WORKLETS

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "firmware" / "config.example.json"


def _run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)  # type: ignore[call-overload]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # setuptools writes build/ into the source folder: build from a copy so the checkout stays as it was.
    src = tmp_path_factory.mktemp("src") / "wattbench"
    shutil.copytree(
        REPO,
        src,
        ignore=shutil.ignore_patterns(".git", ".services", "build", "*.egg-info", "__pycache__", ".*_cache"),
    )
    res = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(src)])
    assert res.returncode == 0, res.stderr
    (whl,) = out.glob("wattbench-*.whl")
    return whl


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    """A fresh venv with the wheel and its firmware extra, as `pip install .[firmware]` gives."""
    env_dir = tmp_path_factory.mktemp("venv")
    res = _run([sys.executable, "-m", "venv", str(env_dir)])
    assert res.returncode == 0, res.stderr
    pip = [str(env_dir / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    res = _run([*pip, f"{wheel}[firmware]"])
    assert res.returncode == 0, res.stderr
    return env_dir


def test_wheel_carries_the_board_files(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in (
        "wattbench_fw/boards/esp32.json",
        "wattbench_fw/boards/picow.json",
        "wattbench_fw/boards/esp32-psram.json",
        "wattbench_fw/boards/main.py",
        "wattbench_schema/v1/result.schema.json",
        "wattbench_schema/v1/suite.schema.json",
        "wattbench_schema/v1/compare.schema.json",
        # the sample suite the docs point at, and every worklet's sample
        "wattbench/workloads/worklet/suite.toml",
        *(f"wattbench/workloads/worklet/{w}/sample.toml" for w in WORKLETS),
    ):
        assert needed in names, f"{needed} is not in the wheel"


def test_wheel_holds_the_three_packages_and_nothing_else(wheel: Path) -> None:
    # The development kit (devkit/) and the tests are for the checkout; users never install them.
    tops = {name.split("/", 1)[0] for name in zipfile.ZipFile(wheel).namelist()}
    meta = {t for t in tops if t.endswith(".dist-info")}
    assert len(meta) == 1
    assert tops - meta == {"wattbench", "wattbench_fw", "wattbench_schema"}


@pytest.fixture(scope="module")
def devkit_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("devkit-wheel")
    src = tmp_path_factory.mktemp("devkit-src") / "devkit"
    shutil.copytree(REPO / "devkit", src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    res = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(src)])
    assert res.returncode == 0, res.stderr
    (whl,) = out.glob("wattbench_devkit-*.whl")
    return whl


def test_devkit_wheel_carries_the_files_its_runners_read(devkit_wheel: Path) -> None:
    # `pip install ./devkit` (not editable) must work for bench/: the MicroPython runner, the memory
    # rig's program and the `machine` stand-ins are read as files, not imported.
    names = set(zipfile.ZipFile(devkit_wheel).namelist())
    for needed in (
        "wattbench_devkit/mpy_runner.mjs",
        "wattbench_devkit/memrig/rig.py",
        "wattbench_devkit/mocks/machine.py",
        "wattbench_devkit/mocks/onewire.py",
        "wattbench_devkit/fuzz/targets.py",
        "wattbench_devkit/services.py",
    ):
        assert needed in names, f"{needed} is not in the devkit wheel"
    assert {name.split("/", 1)[0] for name in names if not name.startswith("wattbench_devkit-")} == {
        "wattbench_devkit"
    }


@pytest.mark.parametrize("board", ["esp32", "esp32-psram", "picow"])
def test_flash_dry_run_from_an_installed_wheel(venv: Path, tmp_path: Path, board: str) -> None:
    config = json.loads(EXAMPLE.read_text())
    config["board"] = board
    if board == "picow":
        config["channels"] = [c for c in config["channels"] if c["bus"] in ("i2c0", "ow")]
    if board == "esp32-psram":
        # GPIO16/17 hold the PSRAM on these modules: the user picks other pins (hardware/pinmap.md).
        config["buses"] = {"uart2": {"tx": 25, "rx": 26}}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    # Run from another folder, so nothing can come from the source tree by accident.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    res = _run(
        [
            str(venv / "bin" / "wattbench"),
            "flash",
            "--port",
            "/dev/ttyUSB0",
            "--board",
            board,
            "--config",
            str(path),
            "--mpy",
            "--dry-run",
        ],
        cwd=tmp_path,
        env=env,
    )
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    assert "/main.py" in res.stdout and "/board.json" in res.stdout
    assert "/lib/wattbench_fw/app.mpy" in res.stdout
    # The board files and the entry point are not part of the package on the board.
    assert "/lib/wattbench_fw/boards" not in res.stdout


def test_the_ptd_executable_from_an_installed_wheel(venv: Path, tmp_path: Path) -> None:
    # power-dev's server launches `wattbench-ptd` by path (docs/mlperf-power.md): the wheel installs it,
    # and it serves the firmware's simulated meter from the installed packages alone.
    import socket
    import time

    exe = venv / "bin" / "wattbench-ptd"
    assert exe.exists(), "the wheel does not install wattbench-ptd"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.Popen(
        [str(exe), "-l", str(tmp_path / "ptd.log"), "-p", str(port), "0", "sim:42"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                conn = socket.create_connection(("127.0.0.1", port), timeout=5)
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "wattbench-ptd did not listen"
                time.sleep(0.1)
        with conn, conn.makefile("rb") as reader:
            conn.sendall(b"Hello\r\nIdentify\r\n")
            assert reader.readline() == b"Hello, PTDaemon here!\r\n"
            assert reader.readline().startswith(b"wattbench,meter sim (simulated const 42 W)")
    finally:
        proc.terminate()
        assert proc.wait(15) == 0
    assert "Traceback" not in (proc.stderr.read() if proc.stderr else "")
