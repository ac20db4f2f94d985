"""Start the real services that integration tests and benchmarks run against.

Each service runs on 127.0.0.1 on a free port with its own temporary directory, and can be stopped and
started again on the same port with the same data (outage tests). Binaries come from
scripts/provision.sh: Mosquitto from Debian, influxd and telegraf built with `go install` into the
machine's services cache (`services_cache()`).

Tests run in parallel (pytest-xdist): each worker takes its ports from a band of its own below the
kernel's ephemeral range, so no two workers, and no outgoing connection, can be handed the same port
between the moment it is found free and the moment a service binds it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from . import REPO


def services_cache() -> Path:
    """Where scripts/provision.sh keeps the services: per machine, not per checkout, so a fresh clone
    on a machine that has provisioned before finds them (the same rule as provision.sh's)."""
    given = os.environ.get("WATTBENCH_SERVICES")
    if given:
        return Path(given)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "wattbench" / "services"


SERVICES = services_cache()


class ServiceUnavailable(RuntimeError):
    """A binary is missing: run scripts/provision.sh."""


# Ports handed out by free_port() come from [BAND_BASE, ephemeral range start), cut into one band per
# xdist worker. The kernel never gives those ports to an outgoing connection (ephemeral range), and
# another worker never probes them, so a port found free stays free until its service binds it.
BAND_BASE = 10000
BAND_SIZE = 1000


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def worker_index() -> int | None:
    """This process's pytest-xdist worker number (gw3 -> 3), None outside a parallel run."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(name[2:]) if name.startswith("gw") and name[2:].isdigit() else None


def port_band(worker: int) -> range:
    bands = max(1, (_ephemeral_start() - BAND_BASE) // BAND_SIZE)
    start = BAND_BASE + (worker % bands) * BAND_SIZE
    return range(start, start + BAND_SIZE)


_next_in_band = 0


def _bindable(port: int, kind: int) -> bool:
    # Without SO_REUSEADDR: a port with connections of an earlier service still in TIME_WAIT is not
    # handed out, since a service that binds without it (ipmi_sim's console) cannot take it then.
    with socket.socket(socket.AF_INET, kind) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free(kind: int) -> int:
    worker = worker_index()
    if worker is None:
        with socket.socket(socket.AF_INET, kind) as s:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])
    global _next_in_band
    band = port_band(worker)
    for _ in range(len(band)):
        # Round the band rather than reuse the lowest free port: a port just released by a stopped
        # service is taken last, so a late packet to the old service never reaches a new one.
        port = band[_next_in_band % len(band)]
        _next_in_band += 1
        if _bindable(port, socket.SOCK_STREAM) and _bindable(port, socket.SOCK_DGRAM):
            return port
    raise RuntimeError(f"no free port in {band.start}-{band.stop - 1} (worker gw{worker})")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (in a parallel run, in this worker's band)."""
    return _free(socket.SOCK_STREAM)


def find_binary(name: str) -> str:
    for candidate in (SERVICES / "bin" / name, Path("/usr/sbin") / name, Path("/usr/bin") / name):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which(name)
    if found:
        return found
    raise ServiceUnavailable(f"{name} not found: run scripts/provision.sh")


def wait_port(port: int, timeout: float = 30.0, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before listening on {port}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout} s")


def stop_process(proc: subprocess.Popen[Any], sig: int = signal.SIGTERM, timeout: float = 15.0) -> None:
    """Send sig and wait; SIGKILL if it has not gone within timeout; nothing if it already exited."""
    if proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


class Process:
    """One long-running child process with its log file; start() again reuses the same arguments."""

    def __init__(self, name: str, workdir: Path) -> None:
        self.name = name
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = workdir / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def _spawn(self, argv: list[str], env: dict[str, str] | None = None, sigpipe: bool = True) -> None:
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.workdir,
            env=env,
            start_new_session=True,
            # sigpipe=False: the child inherits Python's ignored SIGPIPE, for a server that dies of a
            # client closing its socket (ipmi_sim's console).
            restore_signals=sigpipe,
        )
        log.close()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> None:
        if self.proc is not None:
            stop_process(self.proc, sig, timeout)

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


class Mosquitto(Process):
    """Mosquitto built from the shipped deploy/mosquitto.conf with the listener and storage moved to a
    temporary directory. Persistence stays on, so a restart keeps sessions and queued messages."""

    def __init__(self, workdir: Path, port: int | None = None, extra_conf: str = "") -> None:
        super().__init__("mosquitto", workdir)
        self.binary = find_binary("mosquitto")
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self.extra_conf = extra_conf
        self.conf_path = workdir / "mosquitto.conf"
        self._write_conf()

    def _write_conf(self) -> None:
        dropped = (
            "listener",
            "port",
            "persistence_location",
            "log_dest",
            "pid_file",
            "user",
            "include_dir",
            "password_file",
            "acl_file",
            "allow_anonymous",
            "log_type",
            "cafile",
            "certfile",
            "keyfile",
            "require_certificate",
            "bind_address",
        )
        lines = []
        shipped = REPO / "deploy" / "mosquitto.conf"
        if shipped.exists():
            for line in shipped.read_text().splitlines():
                word = line.strip().split(" ", 1)[0]
                if word and not word.startswith("#") and word not in dropped:
                    lines.append(line.strip())
        lines += [
            f"persistence_location {self.workdir}/",
            f"log_dest file {self.log_path}",
            "log_type error",
            "log_type warning",
            "log_type notice",
        ]
        if os.geteuid() == 0:
            lines.append("user root")  # otherwise it drops to 'mosquitto' and cannot write the temp dir
        if "listener" not in self.extra_conf:
            lines += [f"listener {self.port} {self.host}", "allow_anonymous true"]
        self.conf_path.write_text("\n".join(lines) + "\n" + self.extra_conf + "\n")

    def start(self) -> Mosquitto:
        self._spawn([self.binary, "-c", str(self.conf_path)])
        try:
            wait_port(self.port, 20, self.proc)
        except Exception as exc:
            raise RuntimeError(f"mosquitto did not start: {exc}\n{self.log_tail()}") from exc
        return self

    @property
    def url(self) -> str:
        return f"{self.host}:{self.port}"


class InfluxDB(Process):
    """InfluxDB 1.8 with HTTP (InfluxQL, Flux and the v2 write API) on a free port."""

    def __init__(self, workdir: Path, db: str = "wattbench") -> None:
        super().__init__("influxd", workdir)
        self.binary = find_binary("influxd")
        self.port = free_port()
        self.rpc_port = free_port()
        self.db = db
        self.host = "127.0.0.1"
        self.conf_path = workdir / "influxdb.conf"
        data = workdir / "data"
        self.conf_path.write_text(
            f"""reporting-disabled = true
bind-address = "127.0.0.1:{self.rpc_port}"
[meta]
  dir = "{data}/meta"
[data]
  dir = "{data}/data"
  wal-dir = "{data}/wal"
  query-log-enabled = false
  trace-logging-enabled = false
[http]
  bind-address = "127.0.0.1:{self.port}"
  log-enabled = false
  flux-enabled = true
  auth-enabled = false
  max-body-size = 0
[monitor]
  store-enabled = false
[subscriber]
  enabled = false
[continuous_queries]
  enabled = false
"""
        )

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> InfluxDB:
        env = dict(os.environ, INFLUXDB_DATA_QUERY_LOG_ENABLED="false")
        self._spawn([self.binary, "run", "-config", str(self.conf_path)], env=env)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"influxd exited with {self.proc.returncode}\n{self.log_tail()}")
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(f"{self.url}/ping", timeout=1) as r:
                    if r.status == 204:
                        break
            time.sleep(0.1)
        else:
            raise TimeoutError(f"influxd did not answer /ping\n{self.log_tail()}")
        self.create_database(self.db)
        return self

    def create_database(self, name: str) -> None:
        self._post_query(f'CREATE DATABASE "{name}"')

    def drop_database(self, name: str) -> None:
        self._post_query(f'DROP DATABASE "{name}"')

    def _post_query(self, q: str, db: str | None = None) -> dict[str, Any]:
        params = {"q": q, "epoch": "ms"}
        if db:
            params["db"] = db
        body = urllib.parse.urlencode(params).encode()
        with urllib.request.urlopen(urllib.request.Request(f"{self.url}/query", data=body), timeout=60) as r:
            out: dict[str, Any] = json.loads(r.read())
        for result in out.get("results", []):
            if "error" in result:
                raise RuntimeError(f"InfluxQL error for {q!r}: {result['error']}")
        return out

    def points_written(self, db: str) -> int:
        """Points the database has taken into its shards so far (overwrites included), from the
        server's own counters (/debug/vars). A progress figure that costs the server next to nothing,
        where counting with a query scans every point written and, polled during a benchmark, takes
        CPU from what is being measured."""
        with urllib.request.urlopen(f"{self.url}/debug/vars", timeout=60) as r:
            stats: dict[str, Any] = json.loads(r.read())
        return sum(
            int(v.get("values", {}).get("writePointsOk", 0))
            for v in stats.values()
            if isinstance(v, dict) and v.get("name") == "shard" and v.get("tags", {}).get("database") == db
        )

    def query(self, q: str, db: str | None = None) -> list[dict[str, Any]]:
        """Rows of an InfluxQL query as dicts, tags included, time in epoch ms."""
        rows: list[dict[str, Any]] = []
        for result in self._post_query(q, db or self.db).get("results", []):
            for series in result.get("series", []):
                tags = series.get("tags", {})
                for values in series.get("values", []):
                    row = dict(zip(series["columns"], values, strict=True))
                    row.update(tags)
                    row["_measurement"] = series.get("name")
                    rows.append(row)
        return rows


class Telegraf(Process):
    """Telegraf running a given config; the shipped deploy/telegraf.conf reads its endpoints from the
    environment, so a test points it at its own broker and database."""

    def __init__(self, workdir: Path, config: Path, env: dict[str, str]) -> None:
        super().__init__("telegraf", workdir)
        self.binary = find_binary("telegraf")
        self.config = config
        self.env = dict(os.environ, **env)

    def start(self) -> Telegraf:
        self._spawn([self.binary, "--config", str(self.config)], env=self.env)
        time.sleep(0.5)
        if not self.running:
            raise RuntimeError(f"telegraf exited at start\n{self.log_tail()}")
        return self


class SushyEmulator(Process):
    """OpenStack's Redfish emulator (sushy-tools, from the test extras) with its fake systems driver and
    one static chassis, on a free loopback port, no authentication. It serves chassis, systems and
    managers; no power resource."""

    CHASSIS_UUID = "48295861-2522-3561-6729-621118518810"

    def __init__(self, workdir: Path) -> None:
        super().__init__("sushy-emulator", workdir)
        found = shutil.which("sushy-emulator") or str(Path(sys.executable).parent / "sushy-emulator")
        if not os.access(found, os.X_OK):
            raise ServiceUnavailable("sushy-emulator not found: install the test extras")
        self.binary = found
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self) -> SushyEmulator:
        conf = self.workdir / "sushy.conf"
        conf.write_text(
            "SUSHY_EMULATOR_FAKE_DRIVER = True\n"
            'SUSHY_EMULATOR_FAKE_SYSTEMS = [{"uuid": "27946b59-9e44-4fa7-8e91-f3527a1ef094", "name": "sut",'
            ' "power_state": "On", "nics": []}]\n'
            f'SUSHY_EMULATOR_CHASSIS = [{{"Id": "1U", "Name": "Chassis", "UUID": "{self.CHASSIS_UUID}",'
            ' "contains": [], "links": []}]\n'
        )
        self._spawn(
            [self.binary, "--interface", "127.0.0.1", "--port", str(self.port), "--config", str(conf)]
        )
        wait_port(self.port, 30, self.proc)  # type: ignore[arg-type]
        return self


class IpmiSim(Process):
    """OpenIPMI's BMC simulator (Debian openipmi) on loopback: RMCP+ on a free UDP port, one full SDR
    sensor "Pwr Consumption" in Watts (2 W a step, 0-510 W), no DCMI (ipmi_sim does not implement
    it), and its command console on a free TCP port, through which the test changes the reading."""

    USER = "wbuser"
    PASSWORD = "wbpass"
    SENSOR = "Pwr Consumption"
    STEP_W = 2

    def __init__(self, workdir: Path, watts: float = 300.0) -> None:
        super().__init__("ipmi_sim", workdir)
        self.binary = find_binary("ipmi_sim")
        self.port = free_udp_port()
        self.console = free_port()
        self.watts = watts

    def _raw(self, watts: float) -> int:
        raw = round(watts / self.STEP_W)
        if not 0 <= raw <= 255:
            raise ValueError(f"{watts} W is outside the simulated sensor's 0-510 W")
        return raw

    def start(self) -> IpmiSim:
        name = self.SENSOR.encode()
        # A full sensor record (IPMI 2.0, 43.1): owner 0x20, sensor 2, system board, threshold type,
        # sensor type "other units", unit Watts (6), linear, M = STEP_W, B = 0, no thresholds.
        sdr = [0, 0, 0x51, 0x01, 43 + len(name), 0x20, 0, 2, 0x07, 1, 0x67, 0x40, 0x0B, 0x01]
        sdr += [0] * 7 + [6, 0, 0, self.STEP_W] + [0] * 9 + [0xFF, 0] + [0] * 11 + [0xC0 | len(name)]
        sdr += list(name)
        (self.workdir / "lan.conf").write_text(
            'name "wattbench"\n'
            "set_working_mc 0x20\n"
            "  startlan 1\n"
            f"    addr 127.0.0.1 {self.port}\n"
            "    priv_limit admin\n"
            + "".join(
                f"    allowed_auths_{r} none md5 straight\n"
                for r in ("callback", "user", "operator", "admin")
            )
            + "    guid a123456789abcdefa123456789abcdef\n"
            "  endlan\n"
            f'  user 2 true "{self.USER}" "{self.PASSWORD}" admin 10 none md5 straight\n'
            f"  console 127.0.0.1 {self.console}\n"
        )
        (self.workdir / "bmc.emu").write_text(
            "mc_setbmc 0x20\n"
            "mc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02\n"
            "sensor_add 0x20 0 2 0x0b 0x01\n"
            f"sensor_set_value 0x20 0 2 {self._raw(self.watts)} 0\n"
            "main_sdr_add 0x20 "
            + " ".join(f"0x{b:02x}" for b in sdr)
            + "\n"
            + self._scanning_cmd(True)
            + "mc_enable 0x20\n"
        )
        state = self.workdir / "state"
        state.mkdir(exist_ok=True)
        self._spawn(
            [self.binary, "-c", "lan.conf", "-f", "bmc.emu", "-s", str(state), "-n", "-p"], sigpipe=False
        )
        # Ready once a session opens (a connect-and-close probe of the console would kill it with
        # SIGPIPE, were it not ignored).
        argv = [find_binary("ipmitool"), "-I", "lanplus", "-C", "3", "-H", "127.0.0.1", "-p", str(self.port)]
        argv += ["-U", self.USER, "-P", self.PASSWORD, "-N", "1", "-R", "1", "mc", "info"]
        deadline = time.monotonic() + 20
        while subprocess.run(argv, capture_output=True, timeout=10).returncode != 0:
            if time.monotonic() > deadline or not self.running:
                raise RuntimeError(f"ipmi_sim answers no session on {self.port}: {self.log_tail()}")
            time.sleep(0.2)
        return self

    @staticmethod
    def _scanning_cmd(on: bool) -> str:
        return (
            f"sensor_set_event_support 0x20 0 2 enable {'scanning' if on else 'no-scanning'} none "
            + " ".join(["0" * 15] * 4)
            + "\n"
        )

    def command(self, line: str) -> None:
        """One command on the simulator's console (ipmi_sim_cmd(5)); returns once it has been echoed."""
        with socket.create_connection(("127.0.0.1", self.console), timeout=5) as s:
            seen = b""
            while not seen.endswith(b"> "):  # the prompt
                seen += s.recv(4096) or b"> "
            s.sendall(line.rstrip("\n").encode() + b"\n")
            seen = b""
            while not seen.endswith(b"> "):  # the echo, then the next prompt: the command has run
                seen += s.recv(4096) or b"> "

    def set_watts(self, watts: float) -> None:
        self.command(f"sensor_set_value 0x20 0 2 {self._raw(watts)} 0")
        self.watts = watts

    def set_scanning(self, on: bool) -> None:
        """Off: the sensor stays listed but has no reading (ipmitool shows "ns")."""
        self.command(self._scanning_cmd(on))


class Prometheus(Process):
    """Prometheus (Debian) on a free loopback port, from a configuration directory copied as it is
    (deploy/prometheus/), with a targets file written beside it as a user would."""

    def __init__(self, workdir: Path, config_dir: Path, targets: list[str]) -> None:
        super().__init__("prometheus", workdir)
        self.binary = find_binary("prometheus")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.etc = workdir / "etc"
        shutil.copytree(config_dir, self.etc, dirs_exist_ok=True)
        (self.etc / "wattbench-targets.json").write_text(json.dumps([{"targets": targets}]))

    def start(self) -> Prometheus:
        self._spawn(
            [
                self.binary,
                f"--config.file={self.etc / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ]
        )
        wait_port(self.port, 30, self.proc)  # type: ignore[arg-type]
        # The port opens before the storage is: the API answers 503 until /-/ready says 200.
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=5) as resp:
                    if resp.status == 200:
                        return self
            except OSError:  # urllib's HTTPError (503 while starting) is an OSError too
                pass
            if time.monotonic() > deadline or not self.running:
                raise RuntimeError(f"prometheus not ready after 60 s: {self.log_tail()}")
            time.sleep(0.2)

    def query(self, promql: str) -> list[dict[str, Any]]:
        """The instant query's result vector now, through the client `compare-estimate` uses."""
        from wattbench.promql import instant

        return instant(self.url, promql, time.time())

    def wait_query(self, promql: str, timeout: float = 60.0) -> list[dict[str, Any]]:
        """The first non-empty result of the query within timeout; [] when none came."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.query(promql)
            if found:
                return found
            time.sleep(0.5)
        return []


class Chrony(Process):
    """chrony's NTP server from Debian, serving this host's clock (`local stratum 8`) on one loopback
    address and UDP port, with no control of the system clock (-x) and no command socket.

    MLCommons' power-dev asks its NTP server on the standard port 123 only (its ntplib call takes a
    host, not a port), so its tests run chrony on 127.0.0.123:123: an address of the loopback net that
    nothing else uses, on a port that needs root. Without root, or with the port taken, start() fails
    and the fixture skips."""

    def __init__(self, workdir: Path, address: str = "127.0.0.1", port: int | None = None) -> None:
        super().__init__("chronyd", workdir)
        self.binary = find_binary("chronyd")
        self.address = address
        self.port = port or free_udp_port()
        if self.port < 1024 and os.geteuid() != 0:
            raise ServiceUnavailable(f"chronyd on UDP port {self.port} needs root")
        self.conf_path = workdir / "chrony.conf"
        self.conf_path.write_text(
            "\n".join(
                [
                    f"port {self.port}",
                    f"bindaddress {address}",
                    "allow 127.0.0.0/8",  # the clients, which send from 127.0.0.1
                    "local stratum 8",
                    "cmdport 0",
                    f"pidfile {workdir}/chronyd.pid",
                    f"driftfile {workdir}/chrony.drift",
                ]
            )
            + "\n"
        )

    def start(self) -> Chrony:
        argv = [self.binary, "-d", "-x", "-f", str(self.conf_path)]
        if os.geteuid() == 0:
            argv[1:1] = ["-u", "root"]  # otherwise it drops to _chrony and cannot read the temp dir
        self._spawn(argv)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if not self.running:
                raise ServiceUnavailable(f"chronyd exited: {self.log_tail(5)}")
            if self.answers():
                return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"chronyd does not answer on {self.address}:{self.port}\n{self.log_tail()}")

    def answers(self) -> bool:
        """An NTP client request (version 4, mode 3) gets a server reply."""
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.settimeout(0.5)
            try:
                s.sendto(b"\x23" + bytes(47), (self.address, self.port))
                data, _ = s.recvfrom(512)
            except OSError:
                return False
        return len(data) >= 48 and data[0] & 7 == 4


def free_udp_port() -> int:
    """A UDP port on 127.0.0.1 that nothing is bound to (in a parallel run, in this worker's band)."""
    return _free(socket.SOCK_DGRAM)


def telegraf_env(
    mosquitto: Mosquitto, influx: InfluxDB, db: str | None = None, client_id: str = "telegraf-test"
) -> dict[str, str]:
    """Environment for deploy/telegraf.conf pointing at test services."""
    return {
        "WATTBENCH_MQTT_URL": f"tcp://{mosquitto.host}:{mosquitto.port}",
        "WATTBENCH_INFLUX_URL": influx.url,
        "WATTBENCH_INFLUX_DB": db or influx.db,
        "WATTBENCH_TELEGRAF_CLIENT_ID": client_id,
        "WATTBENCH_TELEGRAF_FLUSH": "200ms",
    }


@contextlib.contextmanager
def running(service: Process) -> Iterator[Any]:
    service.start()  # type: ignore[attr-defined]
    try:
        yield service
    finally:
        service.stop()


def node_binary() -> str:
    found = shutil.which("node")
    if not found:
        raise ServiceUnavailable("node not found")
    return found


def micropython_module() -> Path:
    path = (
        SERVICES
        / "npm"
        / "node_modules"
        / "@micropython"
        / "micropython-webassembly-pyscript"
        / "micropython.mjs"
    )
    if not path.exists():
        raise ServiceUnavailable("MicroPython WebAssembly build missing: run scripts/provision.sh")
    return path


def tree_cpu_s(pid: int) -> float:
    """CPU seconds of a process and its live children (the collector checks in worker processes); 0
    for a process that is gone. For the benchmarks' CPU figures."""
    own, children = tree_cpu_split(pid)
    return own + children


def tree_cpu_split(pid: int) -> tuple[float, float]:
    """CPU seconds of a process itself and of its live children, apart; (0, 0) for a process that is
    gone."""
    import psutil

    try:
        proc = psutil.Process(pid)
        kids = proc.children(recursive=True)
    except psutil.Error:
        return 0.0, 0.0
    out = [0.0, 0.0]
    for k, p in enumerate([proc, *kids]):
        try:
            t = p.cpu_times()
        except psutil.Error:  # a child that exited between listing and asking
            continue
        out[min(k, 1)] += t.user + t.system
    return out[0], out[1]
