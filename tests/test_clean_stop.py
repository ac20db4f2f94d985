"""`wattbench appliance` and `wattbench collect` stop cleanly on SIGTERM and on SIGINT.

Each program runs as a child process started the way a non-interactive shell starts a background job
(`cmd &`): with SIGINT ignored, which the child inherits. systemd and container runtimes send SIGTERM.
"""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest

pytestmark = [pytest.mark.services, pytest.mark.timeout(240)]

LINE = re.compile(
    r"samples (\d+) acked (\d+) flagged (\d+) buffered ram (\d+) flash (\d+) dropped (\d+) link"
)


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "wattbench.cli", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=_ignore_sigint,
            start_new_session=True,
        )


def stop_with(proc: subprocess.Popen[bytes], sig: signal.Signals, log: Path) -> int:
    """Send sig and wait for the exit; a program that ignores it is killed and the test fails."""
    proc.send_signal(sig)
    try:
        return proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
        raise AssertionError(f"{sig.name} did not stop the program:\n{log.read_text()}") from None


def wait_for(cond: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def counter_lines(log: Path) -> list[tuple[int, ...]]:
    return [tuple(int(x) for x in m.groups()) for m in LINE.finditer(log.read_text())]


def truth_seqs(path: Path) -> set[int]:
    with open(path) as f:
        return {int(r["seq"]) for r in csv.DictReader(f)}


class Tap:
    """Every sequence number published on a device's samples topic."""

    def __init__(self, host: str, port: int, dev: str) -> None:
        self.seqs: set[int] = set()
        self._lock = threading.Lock()
        ready = threading.Event()
        self.c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"tap-{dev}", protocol=mqtt.MQTTv5)
        self.c.on_connect = lambda c, *a: c.subscribe(f"wattbench/v1/dev/{dev}/samples", qos=1)
        self.c.on_subscribe = lambda *a: ready.set()
        self.c.on_message = self._on_message
        self.c.connect(host, port)
        self.c.loop_start()
        assert ready.wait(10)

    def _on_message(self, client: Any, userdata: Any, msg: Any) -> None:
        with self._lock:
            self.seqs.update(r["s"] for r in json.loads(msg.payload)["samples"])

    def has(self, seqs: set[int]) -> bool:
        with self._lock:
            return seqs <= self.seqs

    def missing(self, seqs: set[int]) -> set[int]:
        with self._lock:
            return seqs - self.seqs

    def close(self) -> None:
        self.c.disconnect()
        self.c.loop_stop()


def retained_status(host: str, port: int, dev: str) -> dict[str, Any]:
    got: list[bytes] = []
    done = threading.Event()
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="status-reader", protocol=mqtt.MQTTv5)
    c.on_connect = lambda cl, *a: cl.subscribe(f"wattbench/v1/dev/{dev}/status", qos=1)

    def on_message(cl: Any, u: Any, msg: Any) -> None:
        got.append(bytes(msg.payload))
        done.set()

    c.on_message = on_message
    c.connect(host, port)
    c.loop_start()
    try:
        assert done.wait(10), "no retained status"
    finally:
        c.disconnect()
        c.loop_stop()
    return dict(json.loads(got[-1]))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_appliance_stops_cleanly_and_keeps_its_buffer(
    tmp_path: Path, mosquitto: Any, sig: signal.Signals
) -> None:
    import wattbench_schema

    dev = f"stop-{sig.name.lower()}"
    spool = tmp_path / "flash"
    nobody = f"127.0.0.1:{_unused_port()}"
    common = ["appliance", "--sim", "--dev", dev, "--hz", "20", "--model", "const", "--every", "0.5"]

    # No broker: what is sampled waits in the RAM buffer; the stop must move it to flash.
    log1 = tmp_path / "run1.log"
    first = start(
        [*common, "--broker", nobody, "--spool-dir", str(spool), "--truth", str(tmp_path / "t1.csv")], log1
    )
    wait_for(lambda: any(line[3] > 0 for line in counter_lines(log1)), 60, "samples in the RAM buffer")
    assert stop_with(first, sig, log1) == 0, log1.read_text()
    samples, acked, flagged, ram, flash, dropped = counter_lines(log1)[-1]
    taken = truth_seqs(tmp_path / "t1.csv")
    # The truth holds the rows with a power value; a slot the loaded host reached too late is
    # published as missed (flagged, no W).
    assert len(taken) == samples - flagged and samples > 0
    assert (acked, ram, dropped) == (0, 0, 0), "nothing acknowledged, nothing left in RAM, nothing dropped"
    assert flash == samples, "every sample kept in flash for the next start"

    # Next start with the broker there: the flash backlog is sent first, nothing is lost.
    tap = Tap(mosquitto.host, mosquitto.port, dev)
    try:
        log2 = tmp_path / "run2.log"
        broker = f"{mosquitto.host}:{mosquitto.port}"
        second = start(
            [*common, "--broker", broker, "--spool-dir", str(spool), "--truth", str(tmp_path / "t2.csv")],
            log2,
        )
        wait_for(lambda: tap.has(taken), 60, "the first run's samples replayed")
        wait_for(lambda: any(line[0] > 0 for line in counter_lines(log2)), 30, "the second run sampling")
        assert stop_with(second, sig, log2) == 0, log2.read_text()
        _, _, _, ram2, flash2, dropped2 = counter_lines(log2)[-1]
        assert (ram2, dropped2) == (0, 0)
        taken2 = truth_seqs(tmp_path / "t2.csv")
        assert not taken & taken2, "sequence numbers continue across the restart"
        # What the broker acknowledged reaches the tap a moment later; what it did not waits in flash.
        wait_for(
            lambda: len(tap.missing(taken | taken2)) == flash2,
            30,
            "every sample either delivered or kept in flash",
        )
    finally:
        tap.close()

    status = retained_status(mosquitto.host, mosquitto.port, dev)
    wattbench_schema.jsonschema_validator("status").validate(status)
    assert (status["state"], status.get("reason")) == ("offline", "shutdown"), status


def _unused_port() -> int:
    from wattbench_devkit import services

    return services.free_port()


def test_collector_stops_cleanly_and_loses_nothing(tmp_path: Path, mosquitto: Any) -> None:
    from wattbench.store import open_store
    from wattbench_fw.host import HostAppliance, sim_config

    store = tmp_path / "wb.sqlite"
    broker = f"{mosquitto.host}:{mosquitto.port}"
    args = ["-v", "collect", "--broker", broker, "--store", str(store), "--id", "c1"]
    args += ["--state-dir", str(tmp_path / "state"), "--spool", str(tmp_path / "spool")]
    log = tmp_path / "collect.log"

    def started() -> subprocess.Popen[bytes]:
        offset = log.stat().st_size if log.exists() else 0
        proc = start(args, log)
        wait_for(lambda: "subscribed" in log.read_text()[offset:], 60, "collector subscribed")
        return proc

    count = 600
    app = HostAppliance(sim_config(dev="stop-coll", broker=broker, hz=50, count=count, batch_ms=100))
    collector = started()
    reader = open_store(str(store))
    try:
        app.start()
        # SIGTERM while samples are still arriving: what it holds is committed and acknowledged.
        wait_for(lambda: reader.count_samples("stop-coll") > 0, 60, "first samples stored")
        assert stop_with(collector, signal.SIGTERM, log) == 0, log.read_text()
        assert "received SIGTERM: stopping" in log.read_text()
        assert app.wait_done(120), app.counters()

        # Its persistent session kept the rest at the broker: a new start stores all of it, once.
        collector = started()
        wait_for(lambda: reader.count_samples("stop-coll") >= count, 60, "every sample stored")
        assert stop_with(collector, signal.SIGINT, log) == 0, log.read_text()
        assert "received SIGINT: stopping" in log.read_text()
        check = reader.sequence_check("stop-coll")
        assert [(c["count"], c["first"], c["last"], c["missing"]) for c in check] == [
            (count, 0, count - 1, 0)
        ]
    finally:
        app.stop(timeout=5)
        if collector.poll() is None:
            collector.kill()
        reader.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_collector_stops_at_once_while_it_is_still_connecting(tmp_path: Path, sig: signal.Signals) -> None:
    """A stop asked while the broker does not answer yet is a stop: it used to be noted and then
    ignored until the 30 s connect timeout, which then ended the collector as "broker unreachable"."""
    args = ["collect", "--broker", f"127.0.0.1:{_unused_port()}", "--id", "c2"]
    args += ["--state-dir", str(tmp_path / "state"), "--store", str(tmp_path / "wb.sqlite")]
    log = tmp_path / "collect.log"
    proc = start(args, log)
    try:
        # It makes its state folder, then asks the broker (and says nothing until the broker answers).
        wait_for(lambda: (tmp_path / "state" / "spool").is_dir(), 60, "collector starting")
        time.sleep(1.0)  # into the wait for the broker
        t0 = time.monotonic()
        code = stop_with(proc, sig, log)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text()
    assert code == 0, text
    assert took < 10, text
    assert f"received {sig.name}: stopping" in text
    assert "cannot reach the MQTT broker" not in text and "Traceback" not in text, text


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_every_command_stops_on_sigterm_and_sigint_like_ctrl_c(tmp_path: Path, sig: signal.Signals) -> None:
    """Commands without a stop loop of their own (demo, report, status, score) end on SIGTERM, and on
    SIGINT inherited as ignored, as Ctrl-C ends them: exit 130, one line, their own clean-up run. The
    demo used to die at once on SIGTERM (its broker, collector and appliance never stopped) and to
    ignore SIGINT when started in the background."""
    log = tmp_path / "demo.log"
    proc = start(["demo", "--quiet", "--html", str(tmp_path / "demo.html")], log)
    try:
        wait_for(lambda: "sweep" in log.read_text(errors="replace"), 120, "the demo's sweep to start")
        code = stop_with(proc, sig, log)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text(errors="replace")
    assert code == 130, text
    assert "Traceback" not in text, text


def test_importing_the_command_loads_nothing_but_itself() -> None:
    """The entry point's module imported numpy, the store and the report renderers before main() ran,
    so a Ctrl-C in the first 0.7 s printed a 15-line KeyboardInterrupt traceback. What loads before
    main() is the window no handler covers: it holds only the package, the command's own module and
    the exit codes."""
    code = "import sys, wattbench.cli; print(sorted(m for m in sys.modules if m.startswith('wattbench')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.replace("'", '"')) == ["wattbench", "wattbench.cli", "wattbench.exits"]


# A signal that arrives while main() loads the commands (here as wattbench.signals, which loads
# logging, begins to load): a finder sends it at that moment, as a Ctrl-C 40 ms after the start did.
_SIGNAL_DURING_IMPORT = """
import os, signal, sys

class Finder:
    def find_spec(self, name, path=None, target=None):
        if name == "wattbench.signals":
            os.kill(os.getpid(), getattr(signal, sys.argv[1]))
        return None

sys.meta_path.insert(0, Finder())
from wattbench.cli import main
sys.exit(main(["report", "latest", "--store", "nosuch.sqlite"]))
"""


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_in_the_first_milliseconds_of_main_is_one_line(tmp_path: Path, sig: str) -> None:
    """main() imported wattbench.signals (and logging with it) before any handler was set: a Ctrl-C
    then printed a KeyboardInterrupt traceback through signals.py, and SIGTERM ended the process by
    the signal (143, nothing said). main() sets its handlers with the bare signal module first."""
    out = subprocess.run(
        [sys.executable, "-c", _SIGNAL_DURING_IMPORT, sig],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert (out.returncode, out.stderr.splitlines()) == (130, ["wattbench: interrupted"]), out.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
@pytest.mark.parametrize("delay", [0.35, 0.5, 0.65])
def test_ctrl_c_while_the_command_loads_is_one_line(
    tmp_path: Path, delay: float, sig: signal.Signals
) -> None:
    """SIGTERM in that time ended the process by the signal (143, silent): the table has 130 for it."""
    # After the interpreter's own start (tens of ms; a signal there is Python's, before any code of
    # ours) and within the commands' loading, which took 0.7 s.
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("wattbench")),
            "report",
            "latest",
            "--store",
            str(tmp_path / "x"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(delay)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert "Traceback" not in err, err
    # Interrupted (130); or it had ended (2, 3: no such store), and a signal in the interpreter's own
    # last milliseconds, after our handlers are gone, ends it by the signal once its line is said.
    ended = "no store at" in err
    assert proc.returncode == 130 or (ended and proc.returncode in (2, 3, -sig)), (proc.returncode, err)
    if proc.returncode == 130:  # not when the command had already ended
        assert len(err.splitlines()) == 1, err


def test_the_guide_says_which_commands_end_with_0_and_which_with_130() -> None:
    """The services (collect, broker, appliance, ptd) run until told to stop, so Ctrl-C and SIGTERM are
    their normal end: exit 0, as the tests above and docs/collector.md have it. The guide's table, for
    every command, must not promise them 130."""
    guide = (Path(__file__).resolve().parents[1] / "docs" / "guide.md").read_text()
    rows = dict(re.findall(r"^\| (0|130) \| (.+) \|$", guide, re.M))
    for service in ("collect", "broker", "appliance", "ptd"):
        assert f"`{service}`" in rows["0"], rows["0"]
        assert f"`{service}`" not in rows["130"], rows["130"]
    assert "Ctrl-C" in rows["0"] and "Ctrl-C" in rows["130"]
