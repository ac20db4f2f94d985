"""Redfish end to end: a BMC on loopback shaped like DMTF's mockups (no emulator available here serves
power), read by the real host-mode appliance's redfish meter through a session, published through
real Mosquitto, stored by the collector in the embedded store and scored by a short sweep. Every level
is the BMC's reading within 0.1 %; the report states the BMC's accuracy class and update period and
the standard they allow; the BMC's session is closed when the appliance stops. The BMC runs in a
process of its own, as a real one does, so it answers on time however busy this process is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from wattbench_devkit.redfish_bmc import BMC, PASSWORD, USER

from .e2e import sweep_with

pytestmark = [pytest.mark.services, pytest.mark.timeout(300)]

DEV = "srv1-bmc"


def test_redfish_power_end_to_end(tmp_path: Path, mosquitto: Any) -> None:
    from wattbench.core import contract

    with BMC(watts=344.0) as bmc:
        channel = {
            "c": "bmc",
            "meter": "redfish",
            "hz": 2,
            "role": "power",
            "node": "srv1",
            "opts": {"url": bmc.url, "user": USER, "password": PASSWORD, "timeout_s": 1},
        }

        def outage() -> None:
            # Before the sweep: the BMC fails for a moment; those samples are flagged, not 0 W.
            bmc.fault = "500"
            time.sleep(1.6)
            bmc.fault = None

        run = sweep_with(tmp_path, mosquitto, DEV, [channel], before=outage)
        assert bmc.deleted == 1 and not bmc.tokens  # the appliance logged out when it stopped

    ev = run.outcome.evaluation
    assert [s.key for s in run.outcome.channels] == [f"{DEV}/bmc"]
    rows = {r["phase"]: r for r in ev.result["levels"]}
    assert set(rows) == {"l100", "l50", "idle"}
    for phase, row in rows.items():
        assert row["W"] == pytest.approx(344.0, rel=1e-3), phase
    # Every check of the measurement passes (the load checks are the machine's, and there is no probe).
    failed = {c.name for c in ev.checks if not c.ok} - {"load_within_2pct", "inlet_temp"}
    assert not failed, [c for c in ev.checks if not c.ok]
    ch = ev.result["channels"][0]
    assert (ch["meter"], ch["role"], ch["acc"], ch["upd"]) == ("redfish", "power", 0.05, 1.0)
    st = ev.result["standard"]
    assert st["eehpc_level"] == 0 and not st["spec"]
    assert "windows of 3" in st["statement"] and "measure fewer than two of V, A and PF" in st["statement"]

    p = run.report("--json")
    doc = json.loads(p.stdout)
    contract.validate("report", doc)
    assert doc["result"]["overall"] == pytest.approx(ev.result["overall"])
    text = run.report().stdout
    assert "every 1 s" in text and "5 %" in text  # the channel's update period and accuracy class


# Asks the BMC's service root over and over for a while after saying "go", and prints the slowest answer.
POLLER = textwrap.dedent(
    """
    import http.client, sys, time
    port = int(sys.argv[1])
    print("go", flush=True)
    worst, end = 0.0, time.monotonic() + 1.5
    while time.monotonic() < end:
        t = time.monotonic()
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        c.request("GET", "/redfish/v1")
        c.getresponse().read()
        c.close()
        worst = max(worst, time.monotonic() - t)
    print(worst)
    """
)


def test_the_bmc_answers_on_time_while_this_process_is_busy() -> None:
    # The appliance polls the BMC on its own clock. A BMC served from a thread of this process answered
    # only when this process let it; on a loaded machine the appliance then missed sample periods.
    with BMC() as bmc:
        port = urllib.parse.urlsplit(bmc.url).port
        poller = subprocess.Popen(
            [sys.executable, "-c", POLLER, str(port)], stdout=subprocess.PIPE, text=True
        )
        assert poller.stdout is not None and poller.stdout.readline() == "go\n"
        interval = sys.getswitchinterval()
        sys.setswitchinterval(100.0)  # this thread keeps the GIL for as long as it computes
        try:
            end = time.monotonic() + 2.5
            while time.monotonic() < end:
                pass
        finally:
            sys.setswitchinterval(interval)
        out, _ = poller.communicate(timeout=60)
    assert poller.returncode == 0
    assert float(out) < 1.0, f"the slowest answer took {float(out):.2f} s"


def test_the_bmc_is_stopped_when_the_test_fails() -> None:
    with pytest.raises(RuntimeError, match="the test failed"), BMC() as bmc:
        proc = bmc.proc
        raise RuntimeError("the test failed")
    assert proc is not None and proc.poll() is not None


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] in "ZX"
    except (FileNotFoundError, IndexError):
        return True


def test_the_bmc_exits_when_the_process_that_started_it_dies() -> None:
    # A test process killed outright (a timeout's SIGKILL, a crash) leaves no BMC behind.
    code = (
        "import os, signal\n"
        "from wattbench_devkit.redfish_bmc import BMC\n"
        "bmc = BMC().__enter__()\n"
        "print(bmc.proc.pid, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    starter = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert starter.returncode == -9, starter.stderr
    pid = int(starter.stdout)
    deadline = time.monotonic() + 30
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if not _gone(pid):
        os.kill(pid, 9)
        pytest.fail(f"the BMC (pid {pid}) outlived the process that started it")


def test_the_redfish_emulator_serves_no_power_and_the_meter_says_so(tmp_path: Path) -> None:
    # The one Redfish implementation available from a registry: its chassis links Thermal only.
    from wattbench_devkit.services import SushyEmulator, running
    from wattbench_fw.errors import SensorError
    from wattbench_fw.meters.redfish import Redfish

    with running(SushyEmulator(tmp_path)) as sushy:
        meter = Redfish(None, url=sushy.url, auth="none", timeout_s=5)
        with pytest.raises(SensorError, match="links no EnvironmentMetrics or Power resource"):
            meter.setup()
        meter = Redfish(None, url=sushy.url, auth="none", chassis="nonexistent", timeout_s=5)
        with pytest.raises(SensorError, match="HTTP 500"):  # what this emulator answers for it
            meter.setup()
