"""`wattbench-ptd` as a process on a real TCP port, reading a host-mode appliance through real Mosquitto:
malformed commands, a client that disconnects in the middle of a measurement and a source that goes
silent each get a PTD-style error reply, and the daemon keeps serving. A bad command line is one line
and a documented exit code."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from wattbench.ptd.protocol import GO_REPLY, GREETING, NO_MEASUREMENT, STOP_REPLY
from wattbench_devkit.services import free_port, wait_port

pytestmark = [pytest.mark.services, pytest.mark.timeout(180)]

DEV = "sim-ptdd"
POWER_W = 220.0


def ptd_bin() -> str:
    path = Path(sys.executable).parent / "wattbench-ptd"
    assert path.exists(), "the wattbench-ptd console script is not installed in this environment"
    return str(path)


class Client:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.reader = self.sock.makefile("rb")

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def line(self) -> str:
        raw = self.reader.readline()
        assert raw.endswith(b"\r\n"), raw
        return raw[:-2].decode()

    def cmd(self, text: str) -> str:
        self.send_raw(text.encode() + b"\r\n")
        return self.line()

    def close(self) -> None:
        self.reader.close()
        self.sock.close()


def wait_watts(c: Client, timeout: float = 20.0) -> str:
    """The Watts reply once the measurement has a closed second (on a busy host that takes longer)."""
    deadline = time.monotonic() + timeout
    watts = c.cmd("Watts")
    while watts.startswith("Watts,-1.000000") and time.monotonic() < deadline:
        time.sleep(0.2)
        watts = c.cmd("Watts")
    return watts


def go(c: Client, mark: str, timeout: float = 20.0) -> str:
    """Go, once the source has sent its first readings (the daemon refuses Go before that)."""
    deadline = time.monotonic() + timeout
    reply = c.cmd(f"Go,1000,0,{mark}")
    while reply.startswith("Error: no samples from") and time.monotonic() < deadline:
        time.sleep(0.2)
        reply = c.cmd(f"Go,1000,0,{mark}")
    return reply


class Daemon:
    def __init__(self, tmp: Path, device_port: str, *extra: str) -> None:
        self.port = free_port()
        self.logfile = tmp / "ptd.log"
        self.console = tmp / "console.txt"
        out = open(self.console, "w")
        self.proc = subprocess.Popen(
            # A short lag keeps the test quick; the appliance sends a batch every 250 ms.
            [
                ptd_bin(),
                "-l",
                str(self.logfile),
                "-p",
                str(self.port),
                "--lag",
                "0.5",
                *extra,
                "0",
                device_port,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        out.close()
        wait_port(self.port, 30, self.proc)

    def stop(self) -> int:
        self.proc.terminate()
        return self.proc.wait(15)

    def text(self) -> str:
        return self.console.read_text()


@pytest.fixture
def appliance(mosquitto: Any) -> Iterator[Any]:
    fw_host = pytest.importorskip("wattbench_fw.host")
    broker = f"{mosquitto.host}:{mosquitto.port}"
    cfg = fw_host.sim_config(dev=DEV, broker=broker, channels=1, hz=10, model="const", batch_ms=250)
    cfg["channels"][0]["opts"]["watts"] = POWER_W
    app = fw_host.HostAppliance(cfg).start()
    assert app.wait_connected(20)
    app.broker = broker
    yield app
    app.stop(timeout=5, drain=False)


def test_malformed_commands_and_a_client_gone_mid_go(tmp_path: Path, appliance: Any) -> None:
    daemon = Daemon(tmp_path, f"{DEV}/sim@{appliance.broker}")
    try:
        c = Client(daemon.port)
        assert c.cmd("Hello") == GREETING
        assert c.cmd("Identify").startswith("wattbench,meter sim model sim-const")
        assert c.cmd("Frobnicate") == "Error: Unknown command"
        assert c.cmd("Go,1000,0") == "Error: Invalid number of parameters"
        assert c.cmd("SR,V,lots") == "Error: range 'lots' is not Auto or a positive number"
        assert c.cmd("") == "Error: empty command"
        c.send_raw(b"Wa\xfftts\r\n")
        assert c.line() == "Error: Unknown command"
        c.send_raw(b"x" * 5000)  # no end of line: refused without waiting for one
        assert c.line() == "Error: command longer than 1024 characters"
        c.send_raw(b"y" * 100 + b"\r\n")  # the end of the refused line: dropped, no second reply
        assert c.cmd("Hello") == GREETING

        assert go(c, "gone") == GO_REPLY
        assert wait_watts(c).startswith(f"Watts,{POWER_W:.6f},")
        c.close()  # in the middle of the measurement

        c = Client(daemon.port)
        assert c.cmd("Hello") == GREETING
        assert c.cmd("Stop") == NO_MEASUREMENT
        rl = c.cmd("RL")
        n = int(rl.split(" ")[1])
        rows = [c.line() for _ in range(n)]
        assert n >= 1 and all(f"Watts,{POWER_W:.6f}" in row for row in rows), rows
        assert c.cmd("Go,1000,0,again") == GO_REPLY
        assert wait_watts(c).startswith(f"Watts,{POWER_W:.6f},")
        assert c.cmd("Stop") == STOP_REPLY
        c.close()
        assert daemon.proc.poll() is None
    finally:
        code = daemon.stop()
    assert code == 0
    text = daemon.text()
    assert "Client disconnected during measurement 'gone': measurement stopped" in text
    assert "Traceback" not in text
    log = daemon.logfile.read_text().splitlines()
    assert {line.rsplit(",", 1)[1] for line in log} == {"gone", "again"}


def refused_count(console: str) -> int:
    return sum(int(n) for n in re.findall(rf"WARNING: (\d+) readings from {DEV}/sim refused", console))


def test_malformed_and_flagged_samples_on_the_broker_are_refused_and_logged(
    tmp_path: Path, appliance: Any, mosquitto: Any
) -> None:
    import paho.mqtt.client as mqtt

    daemon = Daemon(tmp_path, f"{DEV}/sim@{appliance.broker}")
    pub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="ptd-junk")
    pub.connect(mosquitto.host, mosquitto.port)
    pub.loop_start()
    try:
        c = Client(daemon.port)
        assert go(c, "junk") == GO_REPLY
        topic = f"wattbench/v1/dev/{DEV}/samples"
        now = int(time.time() * 1000)
        for payload in (
            b"not json",
            b"\xff\xfe",
            b'{"dev":"'
            + DEV.encode()
            + b'","samples":[{"c":"sim","t":'
            + str(now).encode()
            + b',"W":9999,"f":["ovr"]}]}',
        ):
            pub.publish(topic, payload, qos=1).wait_for_publish(5)
        deadline = time.monotonic() + 20
        while refused_count(daemon.text()) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        watts = wait_watts(c)
        # The flagged 9999 W row never became part of a sample.
        assert watts.startswith(f"Watts,{POWER_W:.6f},{POWER_W:.6f},{POWER_W:.6f},"), watts
        assert c.cmd("Stop") == STOP_REPLY
        c.close()
        assert daemon.proc.poll() is None
    finally:
        pub.loop_stop()
        pub.disconnect()
        assert daemon.stop() == 0
    text = daemon.text()
    assert refused_count(text) == 3, text  # two messages that are not JSON, one flagged row
    assert "Traceback" not in text


def test_a_silent_source_gets_error_replies(tmp_path: Path, appliance: Any) -> None:
    daemon = Daemon(tmp_path, f"{DEV}/sim@{appliance.broker}", "--silence", "1.5")
    try:
        c = Client(daemon.port)
        assert go(c, "quiet") == GO_REPLY
        assert wait_watts(c).startswith(f"Watts,{POWER_W:.6f},")
        appliance.stop(timeout=5, drain=False)  # the source goes silent mid-measurement
        time.sleep(3.0)
        watts = c.cmd("Watts")
        assert watts.startswith(f"Error: no samples from {DEV}/sim for "), watts
        assert c.cmd("Uncertainty").startswith("Error: no samples from")
        assert c.cmd("Stop") == STOP_REPLY
        assert c.cmd("Go,1000,0,next").startswith("Error: no samples from")
        rl = c.cmd("RL")
        rows = [c.line() for _ in range(int(rl.split(" ")[1]))]
        # The missed seconds, as PTDaemon logs them.
        assert any("Watts,-2.000000" in row for row in rows), rows
        assert c.cmd("Hello") == GREETING
        c.close()
        assert daemon.proc.poll() is None
    finally:
        assert daemon.stop() == 0
    # Each silent second is an ERROR line naming the silence, which check.py fails outside ranging.
    assert re.search(
        rf"^[0-9: .-]+: ERROR: No samples from {DEV}/sim for [0-9.]+ s: the meter is silent",
        daemon.text(),
        re.M,
    )


def test_the_simulated_meter_needs_no_broker(tmp_path: Path) -> None:
    # As power-dev starts a DC analyzer on channel 1: -c 1 -D, and it reads samples with DC-RL.
    daemon = Daemon(tmp_path, "simdc:75", "-c", "1", "-D")
    try:
        c = Client(daemon.port)
        assert "meter simdc (simulated const 75 W) DC" in c.cmd("Identify")
        assert go(c, "s") == GO_REPLY
        assert wait_watts(c).startswith("Watts,75.000000,75.000000,75.000000,")
        assert c.cmd("Stop") == STOP_REPLY
        header = c.cmd("DC-RL")
        rows = [c.line() for _ in range(int(header.split(" ")[1]))]
        assert rows and all(",Watts,75.000000," in row for row in rows), rows
        c.close()
    finally:
        assert daemon.stop() == 0


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["0", "COM1"], 2, "give DEVICE/CHANNEL@BROKER"),
        (["49", "sim:10"], 2, "device type '49': wattbench ptd reads a wattbench source"),
        (["-c", "1,2", "0", "sim:10"], 2, "-c names 2 channels, the port 1"),
        (["-D", "0", "sim:10"], 2, "meter sim measures AC; -D takes a DC meter"),
        (["0", "simdc:10"], 2, "meter simdc measures DC; give -D"),
        (["0", "dev/ch@127.0.0.1:1"], 3, "MQTT broker 127.0.0.1:1 unreachable"),
    ],
)
def test_a_bad_command_line_is_one_line(tmp_path: Path, args: list[str], code: int, message: str) -> None:
    p = subprocess.run(
        [ptd_bin(), "-l", str(tmp_path / "x.log"), "-p", str(free_port()), *args],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert p.returncode == code, p.stderr
    errors = p.stderr.strip().splitlines()
    assert len(errors) == 1 and message in errors[0], p.stderr
    # the refusal is all there is: no banner before it, and no log file left behind
    assert p.stdout == "", p.stdout
    assert not (tmp_path / "x.log").exists()


def test_a_log_file_that_cannot_be_written_is_a_usage_error(tmp_path: Path) -> None:
    """-l in a folder that is not there was found only after the banner, as exit 1 (a bug's status)
    without naming -l."""
    log = tmp_path / "nodir" / "x.log"
    p = subprocess.run(
        [ptd_bin(), "-l", str(log), "-p", str(free_port()), "0", "sim:10"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert p.returncode == 2, p.stderr
    assert p.stdout == ""
    assert p.stderr.splitlines() == [
        f"wattbench ptd: argument -l: folder '{log.parent}' does not exist (see wattbench ptd --help)"
    ]


def test_a_taken_port_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        p = subprocess.run(
            [ptd_bin(), "-l", str(tmp_path / "x.log"), "-p", str(port), "0", "sim:10"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert p.returncode == 3
    assert p.stderr.strip().splitlines() == [f"wattbench ptd: port {port}: Address already in use"]
    assert not (tmp_path / "x.log").exists()  # it was left behind, empty


def _publish_meta(broker: Any, dev: str, channels: list[dict[str, Any]]) -> None:
    import paho.mqtt.publish as publish

    doc = {"v": 1, "dev": dev, "channels": channels}
    publish.single(
        f"wattbench/v1/dev/{dev}/meta",
        json.dumps(doc),
        qos=1,
        retain=True,
        hostname=broker.host,
        port=broker.port,
    )


def _refused(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    port = free_port()
    t0 = time.monotonic()
    p = subprocess.run(
        [ptd_bin(), "-l", str(tmp_path / "x.log"), "-p", str(port), *args],
        capture_output=True,
        text=True,
        timeout=30,
    )
    elapsed = time.monotonic() - t0
    # Nothing listened on the port: the refusal came before it opened, and was all it printed.
    assert p.stdout == "", p.stdout
    assert not (tmp_path / "x.log").exists()
    return p, elapsed


def test_a_source_that_cannot_be_read_is_refused_before_the_port_opens(
    tmp_path: Path, mosquitto: Any
) -> None:
    broker = f"{mosquitto.host}:{mosquitto.port}"
    # A wrong device name: nothing retained for it on the broker.
    p, elapsed = _refused(tmp_path, "0", f"trial-99/sim@{broker}")
    assert p.returncode == 2 and elapsed < 10, (p.returncode, elapsed)
    assert p.stderr.strip().splitlines() == [
        f"wattbench ptd: device trial-99: no retained meta message on {broker} within 3 s: no such device on "
        "this broker, or it has never connected"
    ]
    _publish_meta(
        mosquitto,
        "ptd-meta",
        [
            {"c": "mains", "meter": "sim", "q": ["W", "V", "A", "PF"], "hz": 10, "role": "power"},
            {"c": "inlet", "meter": "ds18b20", "q": ["T"], "hz": 1, "role": "inlet"},
            {"c": "bmc", "meter": "ipmi", "q": ["W"], "hz": 1, "role": "power"},
            {"c": "rail", "meter": "ina226", "q": ["W", "V", "A"], "hz": 10, "role": "power"},
        ],
    )
    cases = [
        (
            ["0", f"ptd-meta/nope@{broker}"],
            "device ptd-meta has no channel 'nope' (it has mains, inlet, bmc, rail)",
        ),
        (["0", f"ptd-meta/inlet@{broker}"], "ptd-meta/inlet is not a power channel"),
        (["0", f"ptd-meta/bmc@{broker}"], "a BMC reports watts only"),
        (["-D", "0", f"ptd-meta/rail@{broker}"], "its meta message states no current range"),
        (["-D", "0", f"ptd-meta/mains@{broker}"], "meter sim measures AC; -D takes a DC meter"),
        (["-c", "1,4", "0", f"ptd-meta@{broker}"], "-c 4: device ptd-meta has 3 power channels"),
    ]
    for args, message in cases:
        p, elapsed = _refused(tmp_path, *args)
        errors = p.stderr.strip().splitlines()
        assert p.returncode == 2 and len(errors) == 1 and message in errors[0], (args, p.stderr)
    # A device whose appliance has stopped: its meta is still retained, and so is its offline status.
    import paho.mqtt.publish as publish

    publish.single(
        "wattbench/v1/dev/ptd-meta/status",
        json.dumps({"v": 1, "dev": "ptd-meta", "state": "offline"}),
        qos=1,
        retain=True,
        hostname=mosquitto.host,
        port=mosquitto.port,
    )
    p, elapsed = _refused(tmp_path, "0", f"ptd-meta/mains@{broker}")
    assert p.returncode == 2 and elapsed < 10, (p.returncode, elapsed)
    assert p.stderr.strip().splitlines() == [
        f"wattbench ptd: device ptd-meta: offline (retained status on {broker}): its appliance is not "
        "running, so nothing would be read"
    ]


def test_two_channels_every_sum_is_the_channels_added(tmp_path: Path, mosquitto: Any) -> None:
    fw_host = pytest.importorskip("wattbench_fw.host")
    broker = f"{mosquitto.host}:{mosquitto.port}"
    cfg = fw_host.sim_config(dev="sim-ptd2", broker=broker, channels=2, hz=10, model="const", batch_ms=250)
    cfg["channels"][0]["opts"]["watts"] = 120.0
    cfg["channels"][1]["opts"]["watts"] = 45.0
    app = fw_host.HostAppliance(cfg).start()
    try:
        assert app.wait_connected(20)
        daemon = Daemon(tmp_path, f"sim-ptd2@{broker}", "-c", "1,2")
        try:
            c = Client(daemon.port)
            assert go(c, "two") == GO_REPLY
            time.sleep(4)
            assert c.cmd("Stop") == STOP_REPLY
            header = c.cmd("RL,*,*")
            rows = [c.line() for _ in range(int(header.split(" ")[1]))]
            c.close()
        finally:
            assert daemon.stop() == 0
    finally:
        app.stop(timeout=5, drain=False)
    assert len(rows) >= 3, rows
    for row in rows:
        f = row.split(",")
        assert [f[i] for i in (2, 10, 18)] == ["Watts", "Watts", "Watts"], row
        total, ch1, ch2 = float(f[3]), float(f[11]), float(f[19])
        assert (ch1, ch2) == (120.0, 45.0), row
        assert total == pytest.approx(ch1 + ch2, abs=1e-6), row
    log = daemon.logfile.read_text().splitlines()
    assert log and all(line.split(",")[3] == "165.000000" for line in log), log
