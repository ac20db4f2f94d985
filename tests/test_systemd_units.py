"""The systemd units in deploy/systemd/: accepted by systemd-analyze verify, and their command lines
run and stop cleanly on their KillSignal. What this does and does not prove is in
deploy/systemd/README.md."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
UNITS = REPO / "deploy" / "systemd"
NAMES = ("wattbench-appliance.service", "wattbench-collect.service")
SYSTEM_UNITS = next(
    (p for p in (Path("/usr/lib/systemd/system"), Path("/lib/systemd/system")) if p.is_dir()), None
)


def unit_settings(name: str) -> dict[str, list[str]]:
    """key -> values of every setting, in order (systemd allows keys to repeat)."""
    out: dict[str, list[str]] = {}
    for line in (UNITS / name).read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";", "[")):
            continue
        key, _, value = line.partition("=")
        out.setdefault(key, []).append(value)
    return out


def scratch_root(tmp: Path) -> Path:
    """A root for `systemd-analyze verify --root`: the host's systemd units, ours, and a stand-in
    for the program that ExecStart names (verify refuses a unit whose program is missing)."""
    assert SYSTEM_UNITS is not None
    root = tmp / "root"
    shutil.copytree(SYSTEM_UNITS, root / "usr" / "lib" / "systemd" / "system", symlinks=True)
    etc = root / "etc" / "systemd" / "system"
    etc.mkdir(parents=True)
    for name in NAMES:
        shutil.copy(UNITS / name, etc / name)
        program = unit_settings(name)["ExecStart"][0].split()[0]
        stub = root / program.lstrip("/")
        stub.parent.mkdir(parents=True, exist_ok=True)
        stub.write_text("#!/bin/sh\n")
        stub.chmod(0o755)
    return root


def verify(root: Path, *units: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["systemd-analyze", "verify", "--man=no", f"--root={root}", *units],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def analyze() -> None:
    if not shutil.which("systemd-analyze") or SYSTEM_UNITS is None:
        if os.environ.get("CI"):
            raise AssertionError("systemd-analyze missing: run scripts/provision.sh")
        pytest.skip("systemd-analyze missing: run scripts/provision.sh")


def test_units_pass_systemd_analyze_verify(tmp_path: Path, analyze: None) -> None:
    root = scratch_root(tmp_path)
    done = verify(root, *NAMES)
    assert done.returncode == 0 and not (done.stdout + done.stderr).strip(), done.stdout + done.stderr

    # verify only warns about a bad value or an unknown key: an empty output is what passes.
    bad = root / "etc" / "systemd" / "system" / "wattbench-bad.service"
    text = (UNITS / NAMES[1]).read_text().replace("Restart=on-failure", "Restart=sometimes\nRestartEvery=5")
    bad.write_text(text)
    done = verify(root, bad.name)
    assert "sometimes" in done.stderr and "RestartEvery" in done.stderr, done.stderr


def test_units_document_their_restart_policy() -> None:
    for name in NAMES:
        s = unit_settings(name)
        assert s["Restart"] == ["on-failure"] and s["RestartPreventExitStatus"] == ["2"], name
        assert s["KillSignal"] == ["SIGTERM"], name
    readme = (UNITS / "README.md").read_text()
    assert "Restart=on-failure" in readme and "RestartPreventExitStatus=2" in readme


def expand(value: str, env: dict[str, str], state: Path) -> str:
    value = value.replace("%S", str(state))
    return re.sub(r"\$\{(\w+)\}", lambda m: env[m.group(1)], value)


def command(
    name: str, env_file: dict[str, str], state: Path
) -> tuple[list[str], dict[str, str], int, signal.Signals]:
    """The unit's ExecStart and environment as systemd would give them: Environment=, then the
    EnvironmentFile (which overrides), the program replaced by this interpreter's wattbench."""
    s = unit_settings(name)
    env: dict[str, str] = {}
    for item in s.get("Environment", []):
        key, _, value = item.partition("=")
        env[key] = expand(value, env, state)
    env.update(env_file)
    argv = [expand(a, env, state) for a in s["ExecStart"][0].split()]
    assert argv[0].endswith("/bin/wattbench"), argv
    argv = [sys.executable, "-m", "wattbench.cli", *argv[1:]]
    for sub in s.get("StateDirectory", []):
        (state / sub).mkdir(parents=True, exist_ok=True)
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("WATTBENCH_")}
    full_env.update(env)
    full_env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    timeout = int(s["TimeoutStopSec"][0])
    return argv, full_env, timeout, signal.Signals[s["KillSignal"][0]]


def run_and_stop(name: str, env_file: dict[str, str], tmp: Path, ready: str) -> tuple[int, str]:
    argv, env, timeout, kill = command(name, env_file, tmp / "var-lib")
    log = tmp / f"{name}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while ready not in log.read_text(errors="replace"):
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"{name} not ready:\n{log.read_text()}"
            time.sleep(0.1)
        proc.send_signal(kill)
        # systemd would SIGKILL after TimeoutStopSec: the clean stop must come before.
        return proc.wait(timeout), log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


@pytest.mark.services
def test_collect_unit_command_runs_and_stops_cleanly(tmp_path: Path, mosquitto: Any) -> None:
    env_file = {"WATTBENCH_BROKER": f"{mosquitto.host}:{mosquitto.port}", "WATTBENCH_COLLECTOR_ID": "unit"}
    rc, log = run_and_stop("wattbench-collect.service", env_file, tmp_path, "subscribed")
    assert rc == 0, log
    state = tmp_path / "var-lib" / "wattbench" / "collect"
    # No store given: the default SQLite store is made in the state directory, the one writable place.
    assert [p.name for p in state.iterdir() if p.suffix in (".sqlite", ".db")], list(state.iterdir())


@pytest.mark.services
def test_appliance_unit_command_runs_and_stops_cleanly(tmp_path: Path, mosquitto: Any) -> None:
    from wattbench_fw.host import sim_config

    config = tmp_path / "appliance.json"
    config.write_text(json.dumps(sim_config(dev="unit-a", broker=f"{mosquitto.host}:{mosquitto.port}")))
    env_file = {"WATTBENCH_APPLIANCE_CONFIG": str(config)}
    rc, log = run_and_stop("wattbench-appliance.service", env_file, tmp_path, "link up")
    assert rc == 0, log
    spool = tmp_path / "var-lib" / "wattbench" / "appliance"
    assert f"state in {spool}" in log, "the spool is the unit's state directory"
    assert any(spool.iterdir()), "state saved there"
