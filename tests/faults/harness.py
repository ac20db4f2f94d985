"""Real processes for the fault scenarios, and the bookkeeping that turns a run into figures.

The appliance and the collector run as their own processes (`python -m wattbench.cli appliance` and
`... collect`), so a SIGKILL is a real one; Mosquitto and InfluxDB come from wattbench_devkit.services.

What was sent is the appliance's own record: its ground-truth CSV (seq, time, channel and W of every
published power sample) and its final counters. What was stored is read back from InfluxDB with
InfluxQL. Comparing the two by sequence number gives the figures of every scenario:

- sent: samples the appliance produced (its counters; the truth CSV lists the ones carrying W);
- stored: distinct sequence numbers of that device in wb_sample;
- lost: sent samples whose sequence number is not stored;
- duplicated: stored rows beyond one per sequence number;
- altered: stored samples whose time, channel or W differ from what was sent;
- gaps: runs of consecutive lost samples.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from wattbench_devkit import services

HERE = Path(__file__).resolve().parent
COUNTERS_LINE = re.compile(
    r"samples (?P<samples>\d+) acked (?P<acked>\d+) flagged (?P<flagged>\d+) "
    r"buffered ram (?P<ram>\d+) flash (?P<flash>\d+) dropped (?P<dropped>\d+) link (?P<link>\w+)"
)


def env() -> dict[str, str]:
    out = dict(os.environ, PYTHONUNBUFFERED="1")
    out.pop("WATTBENCH_BROKER", None)
    out.pop("WATTBENCH_INFLUX_URL", None)
    out.pop("WATTBENCH_STORE", None)
    return out


def _default_sigint() -> None:
    # A shell running pytest in the background ignores SIGINT, and ignored signals are inherited:
    # restore it, so that SIGINT stops an appliance cleanly (KeyboardInterrupt) wherever we run.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait_until(predicate: Callable[[], Any], timeout: float, interval: float = 0.2, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what or predicate}")
        time.sleep(interval)


# ---------------------------------------------------------------------------------------------------
# processes


class Proc:
    """One child process with its output in a log file; started again with the same arguments."""

    def __init__(self, name: str, workdir: Path, argv: list[str]) -> None:
        self.name = name
        self.workdir = workdir
        self.argv = argv
        self.log_path = workdir / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.exit_codes: list[int] = []

    def start(self, argv: list[str] | None = None) -> Proc:
        if self.running:
            raise RuntimeError(f"{self.name} is already running")
        self.workdir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            log.write(f"---- start {self.starts + 1}: {' '.join(argv or self.argv)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                argv or self.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env(),
                start_new_session=True,
                preexec_fn=_default_sigint,
            )
        self.starts += 1
        return self

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def signal(self, sig: int) -> None:
        if self.running:
            assert self.proc is not None
            self.proc.send_signal(sig)

    def kill(self) -> int:
        """SIGKILL to the process and every process it started (its session, like a service
        manager's kill of the unit): no handler runs, nothing is flushed."""
        if self.running:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)
        return self.wait(10)

    def terminate(self, timeout: float = 60.0) -> int:
        self.signal(signal.SIGTERM)
        return self.wait(timeout)

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"{self.name} still running after {timeout:g} s\n{self.tail()}") from None
        if len(self.exit_codes) < self.starts:
            self.exit_codes.append(rc)
        return rc

    def stop_quietly(self) -> None:
        if self.running:
            with contextlib.suppress(Exception):
                self.kill()
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)  # helpers left behind by an earlier kill

    def text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.text().splitlines()[-lines:])


class Appliance(Proc):
    """`wattbench appliance --config FILE` with a simulated meter; state and flash in flash_dir."""

    def __init__(self, workdir: Path, config: dict[str, Any], count: int | None = None, every: float = 1.0):
        self.config = config
        self.dev = config["dev"]
        self.flash_dir = Path(config["flash_dir"])
        self.count = count
        self.every = every
        self.truths: list[Path] = []
        self.config_path = workdir / f"{self.dev}.json"
        workdir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(json.dumps(config, indent=1))
        super().__init__(f"appliance-{self.dev}", workdir, [])

    def start(self, argv: list[str] | None = None) -> Appliance:
        truth = self.workdir / f"{self.dev}-truth{len(self.truths) + 1}.csv"
        self.truths.append(truth)
        cmd = [sys.executable, "-m", "wattbench.cli", "appliance", "--config", str(self.config_path)]
        cmd += ["--truth", str(truth), "--every", str(self.every)]
        if self.count is not None:
            cmd += ["--count", str(self.count)]
        super().start(argv or cmd)
        return self

    def counter_lines(self, boot: int | None = None) -> list[dict[str, Any]]:
        """Every counters line printed, optionally of one start only (1-based)."""
        text = self.text()
        if boot is not None:
            parts = text.split("---- start ")
            text = parts[boot] if boot < len(parts) else ""
        out = []
        for m in COUNTERS_LINE.finditer(text):
            d: dict[str, Any] = {k: int(v) for k, v in m.groupdict().items() if k != "link"}
            d["link"] = m.group("link")
            out.append(d)
        return out

    def final_counters(self, boot: int) -> dict[str, Any]:
        """The last counters line of a start that ended cleanly (printed after the drain)."""
        lines = self.counter_lines(boot)
        if not lines:
            raise AssertionError(f"{self.name} start {boot} printed no counters\n{self.tail()}")
        return lines[-1]

    def wait_done(self, timeout: float) -> dict[str, Any]:
        rc = self.wait(timeout)
        if rc != 0:
            raise AssertionError(f"{self.name} exited with {rc}\n{self.tail()}")
        return self.final_counters(self.starts)

    def flash_segments(self) -> int:
        spool = self.flash_dir / "spool"
        return len(list(spool.glob("seg*.bin"))) if spool.is_dir() else 0


class Collector(Proc):
    """`wattbench collect` into InfluxDB, with its spool and status file in state_dir."""

    def __init__(
        self,
        workdir: Path,
        broker: str,
        influx: services.InfluxDB,
        cid: str = "faults",
        spool_dir: Path | None = None,
        health_period: float = 1.0,
        settings: dict[str, int | str] | None = None,
    ) -> None:
        self.cid = cid
        self.state_dir = workdir / f"collector-{cid}"
        self.spool_dir = spool_dir or self.state_dir / "spool"
        argv = [sys.executable, "-m", "wattbench.cli", "collect", "--broker", broker, "--influx", influx.url]
        argv += ["--db", influx.db, "--id", cid, "--state-dir", str(self.state_dir)]
        argv += ["--spool", str(self.spool_dir), "--health-period", str(health_period)]
        if settings:
            toml = workdir / f"collector-{cid}.toml"
            toml.write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in settings.items()))
            argv += ["--config", str(toml)]
        super().__init__(f"collector-{cid}", workdir, argv)

    def state(self) -> dict[str, Any]:
        """The status file the collector writes with each health snapshot."""
        try:
            doc: dict[str, Any] = json.loads((self.state_dir / f"collector-{self.cid}.json").read_text())
            return doc
        except (OSError, ValueError):
            return {}

    def start_subscribed(self, timeout: float = 30.0) -> Collector:
        """Start and wait until it has subscribed, so nothing published from now on is missed."""
        self.start()
        self.wait_subscribed(timeout)
        return self

    def wait_subscribed(self, timeout: float = 30.0) -> None:
        wait_until(
            lambda: "subscribed" in self.text().split("---- start ")[-1] or not self.running,
            timeout,
            what="collector subscription",
        )
        if not self.running:
            raise AssertionError(f"collector exited at start\n{self.tail()}")


def process_group(pgid: int) -> list[int]:
    """Live processes in a process group (from /proc)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            out.append(int(stat.parent.name))
    return out


def appliance_config(
    dev: str,
    broker_port: int,
    flash_dir: Path,
    hz: float = 20.0,
    channels: int = 2,
    model: str = "sine",
    ram_bytes: int | None = None,
    flash_bytes: int | None = None,
    **sim: Any,
) -> dict[str, Any]:
    """A host-mode firmware config with simulated meters, built by the firmware's own sim_config."""
    from wattbench_fw.host import sim_config

    cfg: dict[str, Any] = sim_config(
        dev=dev,
        broker=f"127.0.0.1:{broker_port}",
        channels=channels,
        hz=hz,
        model=model,
        spool_dir=flash_dir,
        status_s=5,
        **sim,
    )
    if ram_bytes is not None or flash_bytes is not None:
        cfg["buffer"] = {"ram_bytes": 262144, "flash_bytes": 4194304, "segment_bytes": 32768}
        if ram_bytes is not None:
            cfg["buffer"]["ram_bytes"] = ram_bytes
            cfg["buffer"]["segment_bytes"] = max(4096, min(32768, ram_bytes))
        if flash_bytes is not None:
            cfg["buffer"]["flash_bytes"] = flash_bytes
        # One batch must fit in RAM, so a small RAM buffer means small batches.
        cfg["batch"]["max_bytes"] = min(cfg["batch"]["max_bytes"], cfg["buffer"]["ram_bytes"])
    return cfg


# ---------------------------------------------------------------------------------------------------
# what was sent, what was stored


@dataclass(frozen=True)
class Row:
    s: int
    t: int
    ch: str
    W: float | None
    Wh: float | None = None
    f: int = 0


def read_truth(paths: Iterable[Path]) -> dict[int, Row]:
    """The appliance's ground truth: one row per published power sample. A file cut short by a
    SIGKILL ends in a partial line, which is left out."""
    out: dict[int, Row] = {}
    for path in paths:
        if not path.exists():
            continue
        with open(path, newline="") as f:
            for rec in csv.DictReader(f):
                try:
                    row = Row(int(rec["seq"]), int(rec["t_ms"]), rec["ch"], float(rec["W"]))
                except (TypeError, ValueError, KeyError):
                    continue
                if row.s in out:
                    raise AssertionError(f"{path}: the appliance issued sequence number {row.s} twice")
                out[row.s] = row
    return out


def stored_rows(influx: services.InfluxDB, dev: str) -> list[Row]:
    """Every wb_sample point of one device, read back with InfluxQL."""
    rows = influx.query(f"SELECT s, W, Wh, f FROM wb_sample WHERE dev = '{dev}' GROUP BY ch")
    out = []
    for r in rows:
        out.append(
            Row(
                int(r["s"]),
                int(r["time"]),
                str(r["ch"]),
                None if r.get("W") is None else float(r["W"]),
                None if r.get("Wh") is None else float(r["Wh"]),
                int(r.get("f") or 0),
            )
        )
    return out


def stored_count(influx: services.InfluxDB, dev: str) -> int:
    rows = influx.query(f"SELECT count(s) FROM wb_sample WHERE dev = '{dev}'")
    return int(rows[0]["count"]) if rows else 0


def wait_stored(influx: services.InfluxDB, dev: str, n: int, timeout: float, settle: float = 2.0) -> int:
    """Wait until at least n points of dev are stored and the count stops moving for `settle` s."""
    deadline = time.monotonic() + timeout
    last, since = -1, time.monotonic()
    while True:
        try:
            count = stored_count(influx, dev)
        except Exception:  # the database may be restarting
            count = last
        now = time.monotonic()
        if count != last:
            last, since = count, now
        if count >= n and now - since >= settle:
            return count
        if now >= deadline:
            return count
        time.sleep(0.25)


@dataclass
class Figures:
    scenario: str
    variant: str
    title: str
    sent: int
    stored: int
    lost: int
    duplicated: int
    gaps: int
    duration_s: float
    altered: int = 0
    invented: int = 0
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def clean(self) -> bool:
        return self.lost == 0 and self.duplicated == 0 and self.altered == 0 and self.invented == 0

    def assert_clean(self) -> None:
        """What every scenario must end with: nothing lost, doubled, altered or invented."""
        assert self.lost == 0, self.summary()
        assert self.duplicated == 0, self.summary()
        assert self.altered == 0 and self.invented == 0, self.summary()

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        return (
            f"{self.scenario}[{self.variant}]: sent {self.sent} stored {self.stored} lost {self.lost} "
            f"duplicated {self.duplicated} altered {self.altered} invented {self.invented} gaps {self.gaps} "
            f"in {self.duration_s:.1f} s; {json.dumps(self.details, default=str)}"
        )


def runs(numbers: Iterable[int]) -> list[tuple[int, int]]:
    """Maximal runs of consecutive integers, as inclusive (first, last) pairs."""
    out: list[tuple[int, int]] = []
    for n in sorted(numbers):
        if out and n == out[-1][1] + 1:
            out[-1] = (out[-1][0], n)
        else:
            out.append((n, n))
    return out


def tally(
    scenario: str,
    variant: str,
    title: str,
    truth: dict[int, Row],
    stored: list[Row],
    duration_s: float,
    issued: int | None = None,
    **details: Any,
) -> Figures:
    """Compare what the appliance sent with what InfluxDB holds.

    truth: the published power samples by sequence number; issued: every sample the appliance produced
    (its counters), including flagged ones that carry no W and so are not in the truth file.
    """
    by_s: dict[int, list[Row]] = {}
    for r in stored:
        by_s.setdefault(r.s, []).append(r)
    duplicated = len(stored) - len(by_s)
    sent = issued if issued is not None else len(truth)
    missing = [s for s in truth if s not in by_s]
    without_w_sent = max(0, sent - len(truth))
    without_w_stored = [s for s in by_s if s not in truth]
    lost = len(missing) + max(0, without_w_sent - len(without_w_stored))
    invented = max(0, len(without_w_stored) - without_w_sent)
    altered = []
    for s, sent_row in truth.items():
        for r in by_s.get(s, ()):
            if r.t != sent_row.t or r.ch != sent_row.ch or r.W is None or abs(r.W - sent_row.W) > 1e-9:
                altered.append((sent_row, r))
    # A gap is a run of lost samples, counted in the order the appliance numbered them.
    order = sorted(truth)
    gap_count = 0
    previous_lost = False
    for s in order:
        is_lost = s not in by_s
        if is_lost and not previous_lost:
            gap_count += 1
        previous_lost = is_lost
    numbering = runs(by_s)
    details.setdefault("sequence_ranges", [list(r) for r in numbering[:8]])
    if missing:
        details["lost_ranges"] = [list(r) for r in runs(missing)[:8]]
    if altered:
        details["altered_examples"] = [[asdict(a), asdict(b)] for a, b in altered[:3]]
    return Figures(
        scenario,
        variant,
        title,
        sent=sent,
        stored=len(by_s),
        lost=lost,
        duplicated=duplicated,
        gaps=gap_count,
        duration_s=round(duration_s, 1),
        altered=len(altered),
        invented=invented,
        details=details,
    )


# ---------------------------------------------------------------------------------------------------
# an independent witness on the broker


class Observer:
    """A plain MQTT subscriber that records every sample row the broker passes on, with the boot it
    came from. It sees what the broker accepted, whatever the appliance remembers afterwards."""

    def __init__(self, host: str, port: int, client_id: str = "faults-observer") -> None:
        import paho.mqtt.client as mqtt

        import wattbench_schema as contract

        self.rows: dict[int, tuple[int, Row]] = {}
        self.copies = 0
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self.client = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv311
        )
        topic = contract.subscription("samples")

        def on_connect(client: Any, userdata: Any, flags: Any, reason: Any, props: Any = None) -> None:
            client.subscribe(topic, qos=1)

        def on_subscribe(*_: Any) -> None:
            self._ready.set()

        self.client.on_connect = on_connect
        self.client.on_subscribe = on_subscribe
        self.client.on_message = self._on_message
        self.client.connect(host, port)
        self.client.loop_start()
        if not self._ready.wait(10):
            raise TimeoutError("observer did not subscribe")

    def _on_message(self, client: Any, userdata: Any, msg: Any) -> None:
        doc = json.loads(msg.payload)
        boot = int(doc["boot"])
        with self._lock:
            for r in doc["samples"]:
                s = int(r["s"])
                if s in self.rows:
                    self.copies += 1
                    continue
                row = Row(s, int(r["t"]), str(r["c"]), r.get("W"), r.get("Wh"), int(r.get("f", 0)))
                self.rows[s] = (boot, row)

    def snapshot(self) -> dict[int, tuple[int, Row]]:
        with self._lock:
            return dict(self.rows)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


# ---------------------------------------------------------------------------------------------------
# the rig


class Rig:
    """Broker and database for one scenario, and every process it starts (all stopped at the end)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.mosquitto = services.Mosquitto(workdir / "mosquitto")
        self.influx = services.InfluxDB(workdir / "influxdb")
        self.procs: list[Proc] = []
        self.closers: list[Callable[[], None]] = []
        self.t0 = time.monotonic()

    def start(self) -> Rig:
        self.mosquitto.start()
        self.influx.start()
        self.t0 = time.monotonic()
        return self

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def appliance(self, dev: str, count: int | None = None, port: int | None = None, **cfg: Any) -> Appliance:
        config = appliance_config(dev, port or self.mosquitto.port, self.workdir / f"{dev}-flash", **cfg)
        app = Appliance(self.workdir, config, count=count)
        self.procs.append(app)
        return app

    def collector(self, cid: str = "faults", **kw: Any) -> Collector:
        col = Collector(self.workdir, self.mosquitto.url, self.influx, cid, **kw)
        self.procs.append(col)
        return col

    def stored(self, dev: str) -> list[Row]:
        return stored_rows(self.influx, dev)

    def wait_stored(self, dev: str, n: int, timeout: float = 120.0, settle: float = 2.0) -> int:
        return wait_stored(self.influx, dev, n, timeout, settle)

    def wait_flowing(self, dev: str, timeout: float = 60.0) -> None:
        """Until the first samples of dev are in InfluxDB; fails early if a process died."""

        def flowing() -> bool:
            for proc in self.procs:
                if proc.starts and not proc.running and proc.proc is not None and proc.proc.returncode:
                    raise AssertionError(f"{proc.name} exited with {proc.proc.returncode}\n{proc.tail()}")
            return stored_count(self.influx, dev) > 0

        try:
            wait_until(flowing, timeout, what=f"samples of {dev} in InfluxDB")
        except TimeoutError as exc:
            logs = "\n".join(f"--- {p.name}:\n{p.tail(15)}" for p in self.procs if p.starts)
            raise TimeoutError(f"{exc}\n{logs}") from None

    @classmethod
    def open(cls, workdir: Path) -> Rig:
        """A started rig; a missing service binary skips the test (fails it under CI)."""
        import pytest

        try:
            rig = cls(workdir)
        except services.ServiceUnavailable as exc:
            if os.environ.get("CI"):
                raise
            pytest.skip(str(exc))
        return rig.start()

    def close(self) -> None:
        for proc in self.procs:
            proc.stop_quietly()
        for closer in reversed(self.closers):
            with contextlib.suppress(Exception):
                closer()
        self.mosquitto.stop()
        self.influx.stop()
