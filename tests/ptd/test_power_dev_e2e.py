"""MLCommons' power-dev, unmodified, runs a full ranging and testing session on `wattbench ptd`.

Real parts: power-dev's server.py and client.py and its compliance/check.py (copied from
../shared/power-dev into the test's directory, byte for byte, so their source checksums still match),
Debian's chrony as the NTP server on 127.0.0.123:123 (power-dev asks port 123 only), Mosquitto, and the
host-mode appliance with a simulated meter at a known power. The server runs `wattbench-ptd` as its
`ptd` binary with device type 0 and the appliance's channel as the device port.

What must come out: the power in spl.txt (both runs) and in ptd_out.txt within 0.5 % of the simulated
power, and check.py failing exactly the checks that ask for a Yokogawa analyzer and a SPEC PTDaemon
version, every other check passing."""

from __future__ import annotations

import configparser
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from wattbench_devkit.services import free_port, wait_port

pytestmark = [pytest.mark.services, pytest.mark.slow, pytest.mark.timeout(400)]

ROOT = Path(__file__).resolve().parents[2]
POWER_DEV = Path(os.environ.get("WATTBENCH_POWER_DEV", ROOT.parent / "shared" / "power-dev"))
DEV = "sim-ptd"
POWER_W = 150.0
NTP_ADDRESS = "127.0.0.123"  # a loopback address of its own, since the port must be 123

# The checks of compliance/check.py, and the three that a daemon which is not SPEC PTDaemon on a
# Yokogawa analyzer fails, by design: the Identify reply's model and PTDaemon version, the device
# type number, and the PTDaemon log line about Yokogawa uncertainty checking.
CHECKS = [
    "Check client sources checksum",
    "Check server sources checksum",
    "Check PTD commands and replies",
    "Check UUID",
    "Check session name",
    "Check time difference",
    "Check client server messages",
    "Check results checksum",
    "Check errors and warnings from PTD logs",
    "Check PTD configuration",
    "Check debug is disabled on server-side",
]
FAIL_BY_DESIGN = {
    "Check PTD commands and replies": "PTD version '0.1.0' is not supported",
    "Check PTD configuration": "Device number 0 is not supported",
    "Check errors and warnings from PTD logs": "Line 'Uncertainty checking for Yokogawa... is activated' is not found",
}

WORKLOAD = """
import datetime, os, sys, time
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
with open(out + ".starts", "a") as f:  # the test acts on the testing run's start
    f.write("x")
def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%m-%d-%Y %H:%M:%S.%f")
time.sleep(0.5)
begin = now()
time.sleep(12)
end = now()
time.sleep(0.5)
with open(os.path.join(out, "mlperf_log_detail.txt"), "w") as f:
    f.write(f":::MLLOG power_begin {begin}\\n:::MLLOG power_end {end}\\n")
with open(os.path.join(out, "mlperf_log_summary.txt"), "w") as f:
    f.write("wattbench rehearsal workload: sleeps 12 s\\n")
"""


def _copy_power_dev(dest: Path) -> Path:
    if not (POWER_DEV / "ptd_client_server" / "server.py").exists():
        pytest.skip(f"power-dev not found at {POWER_DEV} (set WATTBENCH_POWER_DEV)")
    for part in ("ptd_client_server", "compliance"):
        shutil.copytree(POWER_DEV / part, dest / part, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def _spl_watts(path: Path) -> list[float]:
    return [float(line.split(",")[3]) for line in path.read_text().splitlines() if line.startswith("Time,")]


def _check_results(out: str) -> dict[str, bool]:
    """check name -> passed, from check.py's "[x] name" / "[ ] name" lines."""
    found: dict[str, bool] = {}
    for mark, name in re.findall(r"\[( |x)\] (Check [^\n]+)", out):
        found[name.strip()] = mark == "x"
    return found


def _load_check_module(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location("powerdev_check", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run_power_dev(
    tmp_path: Path, device_port: str, chrony: Any, on_testing: Callable[[], None] | None = None
) -> tuple[subprocess.CompletedProcess[str], Path, Path, dict[str, str]]:
    """power-dev's server with wattbench-ptd on device_port, and its client through a whole session;
    on_testing runs 3 s into the testing run's workload. The client's result, power-dev's copy, the
    output directory and the environment."""
    ptd_bin = Path(sys.executable).parent / "wattbench-ptd"
    assert ptd_bin.exists(), "the wattbench-ptd console script is not installed in this environment"
    chrony(NTP_ADDRESS, 123)
    pd = _copy_power_dev(tmp_path / "power-dev")
    server: subprocess.Popen[str] | None = None
    loadgen = tmp_path / "loadgen"
    stop_watch = threading.Event()

    def watch() -> None:
        starts = Path(str(loadgen) + ".starts")
        while not stop_watch.wait(0.1):
            if starts.exists() and len(starts.read_text()) >= 2:
                time.sleep(3)
                assert on_testing is not None
                on_testing()
                return

    if on_testing is not None:
        threading.Thread(target=watch, daemon=True).start()
    try:
        server_port, ptd_port = free_port(), free_port()
        conf = configparser.ConfigParser()
        conf["server"] = {"ntpServer": NTP_ADDRESS, "listen": f"127.0.0.1 {server_port}"}
        conf["ptd"] = {"ptd": str(ptd_bin), "analyzerCount": "1"}
        conf["analyzer1"] = {
            "interfaceFlag": "",
            "deviceType": "0",
            "devicePort": device_port,
            "networkPort": str(ptd_port),
        }
        conf_path = tmp_path / "server.conf"
        with open(conf_path, "w") as f:
            conf.write(f)
        env = dict(os.environ, TZ="UTC", PYTHONDONTWRITEBYTECODE="1")
        env.pop("MLPP_DEBUG", None)
        server_log = open(tmp_path / "server.out", "w")
        server = subprocess.Popen(
            [sys.executable, str(pd / "ptd_client_server" / "server.py"), "-c", str(conf_path)],
            cwd=tmp_path,
            env=env,
            stdout=server_log,
            stderr=subprocess.STDOUT,
            text=True,
        )
        wait_port(server_port, 60, server)  # type: ignore[arg-type]

        workload = tmp_path / "workload.py"
        workload.write_text(WORKLOAD)
        out = tmp_path / "out"
        client = subprocess.run(
            [
                sys.executable,
                str(pd / "ptd_client_server" / "client.py"),
                "-a",
                "127.0.0.1",
                "-p",
                str(server_port),
                "-w",
                f"{sys.executable} {workload} {loadgen}",
                "-L",
                str(loadgen),
                "-o",
                str(out),
                "-n",
                NTP_ADDRESS,
                "-l",
                "wattbench",
                "-T",
                "-S",
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        server.wait(60)
    finally:
        stop_watch.set()
        if server is not None and server.poll() is None:
            server.kill()
            server.wait(10)
    server_out = (tmp_path / "server.out").read_text()
    assert client.returncode == 0, client.stderr[-4000:] + "\n--- server\n" + server_out[-4000:]
    assert "Successful exit" in client.stderr
    return client, pd, out, env


def _errors_and_warnings_on_twin(mod: Any, out: Path, tmp_path: Path) -> str | None:
    """check.py's errors-and-warnings check on a copy of the result with the Yokogawa line it asks
    for put before the first Go: None when it passes, else what it failed or warned on."""
    twin = tmp_path / "twin"
    shutil.copytree(out, twin)
    logs = twin / "power" / "ptd_logs.txt"
    text = logs.read_text()
    first_go = re.search(r"^\d\d-\d\d-\d{4} [0-9:.]+: Go with mark", text, re.M)
    assert first_go is not None, text
    stamp_line = "01-01-2000 00:00:00.000: Uncertainty checking for YokogawaWT310 is activated\n"
    logs.write_text(text[: first_go.start()] + stamp_line + text[first_go.start() :])
    client_sd = mod.SessionDescriptor(str(twin / "power" / "client.json"))
    try:
        mod.check_ptd_logs(mod.SessionDescriptor(str(twin / "power" / "server.json")), client_sd, str(twin))
    except AssertionError as exc:
        return f"failed: {exc}"
    except mod.CheckerWarning as exc:
        return f"warning: {exc}"
    return None


# chrony must listen on 127.0.0.123:123 (above): tests that need it run one after another, on one worker.
@pytest.mark.xdist_group("ntp-port-123")
def test_power_dev_runs_a_full_session_on_wattbench_ptd(tmp_path: Path, mosquitto: Any, chrony: Any) -> None:
    fw_host = pytest.importorskip("wattbench_fw.host")
    broker = f"{mosquitto.host}:{mosquitto.port}"
    # A batch a second, the firmware's default: each sample still holds the readings of its own second.
    cfg = fw_host.sim_config(dev=DEV, broker=broker, channels=1, hz=10, model="const", batch_ms=1000)
    cfg["channels"][0]["opts"]["watts"] = POWER_W
    appliance = fw_host.HostAppliance(cfg).start()
    try:
        assert appliance.wait_connected(20)
        _, pd, out, env = _run_power_dev(tmp_path, f"{DEV}/sim@{broker}", chrony)
    finally:
        appliance.stop(timeout=10)

    # The power power-dev recorded: every sample of both runs, and the testing run's Watts reply.
    for run in ("ranging", "run_1"):
        watts = _spl_watts(out / run / "spl.txt")
        assert len(watts) >= 10, f"{run}: {len(watts)} samples"
        assert all(abs(w / POWER_W - 1) <= 0.005 for w in watts), (run, watts)
    ptd_out = (out / "run_1" / "ptd_out.txt").read_text()
    power = re.search(r"Power: Watts,([0-9.]+),([0-9.]+),([0-9.]+),(\d+),(\d+)", ptd_out)
    assert power is not None, ptd_out
    assert abs(float(power.group(1)) / POWER_W - 1) <= 0.005, ptd_out
    assert int(power.group(5)) == 0, "missed samples: " + ptd_out
    unc = re.search(r"Uncertainty: Uncertainty,([0-9.]+),([0-9.]+),(\d+)", ptd_out)
    # 0.1 % of reading + 0.05 % of the 300 V x 1 A range at 150 W: the simulated meter errs as a WT310E.
    assert unc is not None and float(unc.group(1)) == pytest.approx(0.2), ptd_out

    # The ranges: the testing run was set to the ranging run's highest volts and 1.1 x its amps.
    server_json = json.loads((out / "power" / "server.json").read_text())
    cmds = [m["cmd"] for m in server_json["ptd_messages"]]
    volts = 230.0
    amps = POWER_W / (volts * 0.95)
    sr_v = [c for c in cmds if c.startswith("SR,V,") and c != "SR,V,Auto"]
    sr_a = [c for c in cmds if c.startswith("SR,A,") and c != "SR,A,Auto"]
    assert [float(c.split(",")[2]) for c in sr_v] == [pytest.approx(volts)]
    assert [float(c.split(",")[2]) for c in sr_a] == [pytest.approx(1.1 * amps, rel=1e-4)]

    # Identify tells the truth.
    identify = next(m["reply"] for m in server_json["ptd_messages"] if m["cmd"] == "Identify")
    assert identify.startswith("wattbench,meter sim"), identify
    assert "Yokogawa" not in identify and "not SPEC PTDaemon" in identify

    # The checker: exactly the identity and version checks fail.
    check = subprocess.run(
        [sys.executable, str(pd / "compliance" / "check.py"), str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    report = check.stdout + check.stderr
    results = _check_results(report)
    assert list(results) == CHECKS, report
    failed = {name for name, ok in results.items() if not ok}
    assert failed == set(FAIL_BY_DESIGN), report
    for name, why in FAIL_BY_DESIGN.items():
        assert why in report, (name, report)
    assert check.returncode == 1
    assert "Unhandled" not in report and "Traceback" not in report, report

    # Inside the checks that fail by design, every other assertion holds: with the identity swapped
    # for a Yokogawa's (in memory only, never in the result), the reply shapes, the initial ranges
    # restored at the end, and the PTD log's marks and warnings all pass.
    mod = _load_check_module(pd / "compliance" / "check.py")
    sd = mod.SessionDescriptor(str(out / "power" / "server.json"))
    for msg in sd.json_object["ptd_messages"]:
        if msg["cmd"] == "Identify":
            msg["reply"] = "YokogawaWT310,version=1.11.1-counterfactual"
    mod.ptd_messages_check(sd)
    for analyzer in sd.json_object["ptd_config"]:
        analyzer["device_type"] = 49
    mod.check_ptd_config(sd)
    assert _errors_and_warnings_on_twin(mod, out, tmp_path) is None


def _appliance(fw_host: Any, broker: str, watts: float) -> Any:
    cfg = fw_host.sim_config(dev=DEV, broker=broker, channels=1, hz=10, model="const", batch_ms=1000)
    cfg["channels"][0]["opts"]["watts"] = watts
    appliance = fw_host.HostAppliance(cfg).start()
    assert appliance.wait_connected(20)
    return appliance


@pytest.mark.xdist_group("ntp-port-123")
def test_a_meter_that_goes_silent_in_testing_fails_the_errors_check(
    tmp_path: Path, mosquitto: Any, chrony: Any
) -> None:
    fw_host = pytest.importorskip("wattbench_fw.host")
    broker = f"{mosquitto.host}:{mosquitto.port}"
    appliance = _appliance(fw_host, broker, POWER_W)
    try:
        _, pd, out, _ = _run_power_dev(
            tmp_path, f"{DEV}/sim@{broker}", chrony, lambda: appliance.stop(timeout=10, drain=False)
        )
    finally:
        appliance.stop(timeout=10, drain=False)
    # The silent seconds are invalid samples, never filled in.
    assert any(
        line.split(",")[3] == "-2.000000" for line in (out / "run_1" / "spl.txt").read_text().splitlines()
    )
    mod = _load_check_module(pd / "compliance" / "check.py")
    verdict = _errors_and_warnings_on_twin(mod, out, tmp_path)
    assert verdict is not None and verdict.startswith("failed: ")
    assert re.search(rf"ERROR: No samples from {DEV}/sim for [0-9.]+ s: the meter is silent", verdict), (
        verdict
    )


@pytest.mark.xdist_group("ntp-port-123")
def test_a_range_too_low_for_the_testing_load_fails_the_errors_check(
    tmp_path: Path, mosquitto: Any, chrony: Any
) -> None:
    fw_host = pytest.importorskip("wattbench_fw.host")
    broker = f"{mosquitto.host}:{mosquitto.port}"
    # Ranging at 0.27 A sets the testing range to 1.1 x that, 0.3 A, and the meter takes its 0.5 A range;
    # then the load steps up to 0.69 A while testing runs, as a workload that ranged on a light load.
    appliance = _appliance(fw_host, broker, 60.0)

    def step_up() -> None:
        appliance.app.sampler.channels[0].driver.watts = POWER_W

    try:
        _, pd, out, _ = _run_power_dev(tmp_path, f"{DEV}/sim@{broker}", chrony, step_up)
    finally:
        appliance.stop(timeout=10, drain=False)
    server_json = json.loads((out / "power" / "server.json").read_text())
    sr_a = [
        m["cmd"]
        for m in server_json["ptd_messages"]
        if m["cmd"].startswith("SR,A,") and m["cmd"] != "SR,A,Auto"
    ]
    assert [float(c.split(",")[2]) for c in sr_a] == [pytest.approx(0.3, rel=0.02)]
    # PTDaemon's invalid over-range sample: W, A and PF -1.
    spl = (out / "run_1" / "spl.txt").read_text()
    assert ",Watts,-1.000000,Volts,230.000000,Amps,-1.000000,PF,-1.000000," in spl, spl
    mod = _load_check_module(pd / "compliance" / "check.py")
    verdict = _errors_and_warnings_on_twin(mod, out, tmp_path)
    assert verdict is not None and verdict.startswith("failed: ")
    assert "ERROR: Current appears to be too high for set range" in verdict, verdict


@pytest.mark.xdist_group("ntp-port-123")
def test_a_low_load_on_its_range_logs_ptdaemons_uncertainty_warning(tmp_path: Path, chrony: Any) -> None:
    # 5 W at 230 V is 0.023 A: on the 0.5 A range, 0.1 % + 0.05 % x 150 W / 5 W = 1.6 %.
    _, pd, out, _ = _run_power_dev(tmp_path, "sim:5", chrony)
    mod = _load_check_module(pd / "compliance" / "check.py")
    client_sd = mod.SessionDescriptor(str(out / "power" / "client.json"))
    begin, end = mod._get_begin_end_time_from_mlperf_log_detail(str(out / "run_1"), client_sd)
    matched = []
    for line in (out / "power" / "ptd_logs.txt").read_text().splitlines():
        warning = re.search("(?<=WARNING:).+", line)
        if warning is None:
            continue
        t = mod.get_time_from_line(line, r"(^\d\d-\d\d-\d\d\d\d \d\d:\d\d:\d\d.\d\d\d)", "ptd_logs.txt", 0)
        if begin < t < end and any(
            p.search(warning.group(0).strip()) for p in mod.WARNING_NEEDS_TO_BE_ERROR_TESTING_RE
        ):
            matched.append(line)
    assert (
        matched
        and "WARNING: Uncertainty 1.60%, which is above 1.00% limit for the last sample!" in matched[0]
    )


@pytest.mark.xdist_group("ntp-port-123")
def test_power_dev_runs_a_two_channel_session_whose_sums_are_the_channels_added(
    tmp_path: Path, chrony: Any
) -> None:
    # Two simulated channels in the device port: power-dev takes one `channel` number for device type 0.
    _, pd, out, _ = _run_power_dev(tmp_path, "sim:100,50", chrony)
    for run in ("ranging", "run_1"):
        lines = [x for x in (out / run / "spl.txt").read_text().splitlines() if x.startswith("Time,")]
        assert len(lines) >= 10, (run, lines)
        for line in lines:
            f = line.split(",")
            # power-dev's own shape (tests/unit/test_server.py): the sum, Mark, then Ch1 and Ch2.
            assert (f[10], f[12], f[13], f[21], f[22]) == ("Mark", "Ch1", "Watts", "Ch2", "Watts"), line
            total, ch1, ch2 = float(f[3]), float(f[14]), float(f[23])
            assert (ch1, ch2) == (100.0, 50.0), line
            assert total == pytest.approx(ch1 + ch2, abs=1e-6), line
    mod = _load_check_module(pd / "compliance" / "check.py")
    assert _errors_and_warnings_on_twin(mod, out, tmp_path) is None
