"""The shipped Mosquitto files installed exactly as deploy/mosquitto/README.md says, end to end.

The README's shell block is run line by line against a Debian-style /etc/mosquitto (the package's own
mosquitto.conf, which includes conf.d/). What a test has to change, and nothing else:
- every /etc/mosquitto, /var/lib/mosquitto, /var/log/mosquitto and /run/mosquitto path is moved under
  a temporary directory, and `sudo` is dropped;
- run as root with a `mosquitto` user present (as on Debian), the broker drops to that user as the
  service does, so the README's permission steps are tested too; the log, persistence and pid
  directories are given to `mosquitto` as the package does. Otherwise Mosquitto runs as the current
  user, and the `chgrp mosquitto` step is skipped (only root may give a file to another group);
- the listeners of the installed secure config get free loopback ports instead of 8883 and 1883;
- the main config gains `log_type all` (Mosquitto logs "Denied PUBLISH" at debug level only);
- the broker certificate comes from a throwaway CA (the README leaves certificates to the site);
- make-credentials.sh is run a second time, as the README allows, for a second device and a Home
  Assistant user that observes the flow.

Then a host-mode appliance (`wattbench appliance`, TLS, Home Assistant discovery on), the collector
(`wattbench collect`, TLS), Telegraf with the shipped deploy/telegraf.conf (TLS, its own account, into a
real InfluxDB) and a short `wattbench sweep` use the credentials the README produced.
Samples, status, meta, discovery, phase events and the result must all arrive (Telegraf writing samples,
status, phases and the result), with no "Denied" line
in the broker's log; a device publishing as another device must still be refused."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest

from wattbench_devkit import services

from .conftest import make_ca

pytestmark = [pytest.mark.services, pytest.mark.timeout(300)]

README = services.REPO / "deploy" / "mosquitto" / "README.md"

# /etc/mosquitto/mosquitto.conf as Debian's mosquitto package ships it (2.0.11, bookworm).
DEBIAN_MAIN_CONF = """\
# Place your local configuration in /etc/mosquitto/conf.d/
#
# A full description of the configuration file is at
# /usr/share/doc/mosquitto/examples/mosquitto.conf.example

pid_file /run/mosquitto/mosquitto.pid

persistence true
persistence_location /var/lib/mosquitto/

log_dest file /var/log/mosquitto/mosquitto.log

include_dir /etc/mosquitto/conf.d
"""

NOT_AUTHORIZED = 135


def _mosquitto_user() -> int | None:
    import pwd

    try:
        return pwd.getpwnam("mosquitto").pw_uid
    except KeyError:
        return None


def readme_commands() -> list[str]:
    text = README.read_text()
    block = re.search(r"```sh\n(.*?)```", text, re.S)
    assert block, "deploy/mosquitto/README.md has no sh block of install commands"
    return [line for line in block.group(1).splitlines() if line.strip() and not line.startswith("#")]


class Installed:
    """A Debian-style Mosquitto installation under `root`, made by the README's commands."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.as_debian = os.geteuid() == 0 and _mosquitto_user() is not None
        self.etc = root / "etc" / "mosquitto"
        self.log_path = root / "var" / "log" / "mosquitto" / "mosquitto.log"
        self.tls_port = services.free_port()
        self.plain_port = services.free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def moved(self, text: str) -> str:
        for path in ("/etc/mosquitto", "/var/lib/mosquitto", "/var/log/mosquitto", "/run/mosquitto"):
            text = text.replace(path, str(self.root) + path)
        return text

    def install(self) -> None:
        for d in ("etc/mosquitto/conf.d", "var/lib/mosquitto", "var/log/mosquitto", "run/mosquitto"):
            (self.root / d).mkdir(parents=True, exist_ok=True)
            if self.as_debian and d != "etc/mosquitto/conf.d":
                shutil.chown(self.root / d, "mosquitto", "mosquitto")
        main = self.moved(DEBIAN_MAIN_CONF) + "log_type all\n"
        (self.etc / "mosquitto.conf").write_text(main)
        for line in readme_commands():
            if "chgrp mosquitto" in line and not self.as_debian:
                continue
            cmd = self.moved(line).replace("sudo ", "")
            done = subprocess.run(["bash", "-c", cmd], cwd=services.REPO, capture_output=True, text=True)
            assert done.returncode == 0, f"README command failed: {line}\n{done.stderr}"
        for conf in (self.etc / "conf.d").glob("*.conf"):
            text = conf.read_text()
            text = re.sub(r"^listener 8883$", f"listener {self.tls_port} 127.0.0.1", text, flags=re.M)
            text = re.sub(
                r"^listener 1883 127\.0\.0\.1$", f"listener {self.plain_port} 127.0.0.1", text, flags=re.M
            )
            conf.write_text(self.moved(text))
        pki = make_ca(self.root / "pki")
        certs = self.etc / "certs"
        certs.mkdir()
        for src, name in ((pki["ca"], "ca.crt"), (pki["cert"], "broker.crt"), (pki["key"], "broker.key")):
            (certs / name).write_bytes(src.read_bytes())
        (certs / "broker.key").chmod(0o640)
        if self.as_debian:
            shutil.chown(certs / "broker.key", group="mosquitto")
        self.ca = certs / "ca.crt"

    def add_clients(self, *names: str) -> None:
        script = services.REPO / "deploy" / "mosquitto" / "make-credentials.sh"
        subprocess.run(["bash", str(script), str(self.etc / "wattbench.passwd"), *names], check=True)

    def secret(self, name: str) -> str:
        return (self.etc / f"{name}.secret").read_text().strip()

    def start(self) -> None:
        binary = services.find_binary("mosquitto")
        with open(self.root / "mosquitto.stderr", "wb") as err:
            self.proc = subprocess.Popen(
                [binary, "-c", str(self.etc / "mosquitto.conf")], stdout=subprocess.DEVNULL, stderr=err
            )
        try:
            services.wait_port(self.tls_port, 20, self.proc)
            services.wait_port(self.plain_port, 20, self.proc)
        except Exception as exc:
            raise AssertionError(f"mosquitto did not start: {exc}\n{self.log()}") from exc
        if self.as_debian:
            status = Path(f"/proc/{self.proc.pid}/status").read_text()
            uid = int(re.search(r"^Uid:\s+(\d+)", status, re.M).group(1))  # type: ignore[union-attr]
            assert uid == _mosquitto_user(), "the broker runs as the mosquitto user, as Debian's service"

    def log(self) -> str:
        parts = []
        for p in (self.log_path, self.root / "mosquitto.stderr"):
            if p.exists():
                parts.append(p.read_text(errors="replace"))
        return "\n".join(parts)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


class Observer:
    """An MQTT v5 client with a user's credentials, over TLS, recording (topic, payload, retain)."""

    def __init__(self, broker: Installed, user: str, topics: list[str]) -> None:
        self.got: list[tuple[str, bytes, bool]] = []
        self.acks: dict[int, Any] = {}
        self._lock = threading.Lock()
        ready = threading.Event()
        self.c = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2,
            client_id=f"obs-{user}-{time.monotonic_ns()}",
            protocol=mqtt.MQTTv5,
        )
        self.c.username_pw_set(user, broker.secret(user))
        self.c.tls_set(ca_certs=str(broker.ca))
        self.c.on_connect = lambda c, u, f, rc, p=None: (
            c.subscribe([(t, 1) for t in topics]) if topics else ready.set()
        )
        self.c.on_subscribe = lambda *a: ready.set()
        self.c.on_message = self._on_message
        self.c.on_publish = self._on_publish
        self.c.connect("127.0.0.1", broker.tls_port)
        self.c.loop_start()
        assert ready.wait(15), f"{user} could not connect and subscribe"

    def _on_message(self, client: Any, userdata: Any, msg: Any) -> None:
        with self._lock:
            self.got.append((msg.topic, bytes(msg.payload), bool(msg.retain)))

    def _on_publish(self, client: Any, userdata: Any, mid: int, rc: Any, props: Any = None) -> None:
        with self._lock:
            self.acks[mid] = rc

    def topics(self, pattern: str) -> list[tuple[str, bytes]]:
        rx = re.compile(pattern)
        with self._lock:
            return [(t, p) for t, p, _ in self.got if rx.fullmatch(t)]

    def publish(self, topic: str, payload: bytes) -> int:
        info = self.c.publish(topic, payload, qos=1)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with self._lock:
                if info.mid in self.acks:
                    return int(self.acks[info.mid].value)
            time.sleep(0.01)
        raise AssertionError(f"no PUBACK for {topic}")

    def close(self) -> None:
        self.c.disconnect()
        self.c.loop_stop()


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env


def wattbench(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "wattbench.cli", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=_env(),
            start_new_session=True,
        )


def wait_for(cond: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def stop(proc: subprocess.Popen[bytes]) -> int:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    return int(proc.returncode)


def test_shipped_mosquitto_files_carry_everything_and_refuse_spoofing(tmp_path: Path, influxdb) -> None:  # type: ignore[no-untyped-def]
    if not shutil.which("mosquitto_passwd"):
        pytest.skip("mosquitto_passwd not installed: run scripts/provision.sh")
    from wattbench.store import open_store
    from wattbench_fw import hass

    # The scratch root must be reachable by the mosquitto user, which pytest's own temporary
    # directories (mode 700) are not.
    scratch = Path(tempfile.mkdtemp(prefix="wattbench-mosquitto-"))
    scratch.chmod(0o755)
    broker = Installed(scratch)
    procs: list[subprocess.Popen[bytes]] = []
    observers: list[Observer] = []
    telegraf: services.Telegraf | None = None
    try:
        broker.install()
        broker.add_clients("bench-b", "homeassistant", "wattbench-telegraf", "tasmota_5a3f2c")
        broker.start()
        # The shipped Telegraf route, with its own account, over TLS, as deploy/telegraf.conf documents.
        telegraf = services.Telegraf(
            tmp_path / "telegraf",
            services.REPO / "deploy" / "telegraf.conf",
            {
                "WATTBENCH_MQTT_URL": f"ssl://127.0.0.1:{broker.tls_port}",
                "WATTBENCH_MQTT_USER": "wattbench-telegraf",
                "WATTBENCH_MQTT_PASSWORD": broker.secret("wattbench-telegraf"),
                "WATTBENCH_MQTT_CA": str(broker.ca),
                "WATTBENCH_INFLUX_URL": influxdb.url,
                "WATTBENCH_INFLUX_DB": influxdb.db,
                "WATTBENCH_TELEGRAF_FLUSH": "200ms",
            },
        ).start()
        ha = Observer(broker, "homeassistant", ["homeassistant/#", "wattbench/v1/dev/#"])
        runs = Observer(broker, "wattbench-collector", ["wattbench/v1/run/#"])
        observers += [ha, runs]

        store = tmp_path / "wattbench.sqlite"
        collector_log = tmp_path / "collect.log"
        # A Tasmota plug with its own account, bridged by the collector (docs/sources/plugs.md).
        plugs = tmp_path / "plugs.toml"
        plugs.write_text(
            '[[plug]]\nformat = "tasmota"\ntopic = "tasmota_5a3f2c"\ndev = "plug-srv1"\nperiod_s = 1\n'
        )
        collector = wattbench(
            [
                "-v",
                "collect",
                "--broker",
                f"127.0.0.1:{broker.tls_port}",
                "--mqtt-user",
                "wattbench-collector",
                "--mqtt-password-file",
                str(broker.etc / "wattbench-collector.secret"),
                "--mqtt-ca",
                str(broker.ca),
                "--store",
                str(store),
                "--state-dir",
                str(tmp_path / "collector-state"),
                "--plugs",
                str(plugs),
            ],
            collector_log,
        )
        procs.append(collector)
        wait_for(
            lambda: "subscribed" in collector_log.read_text(errors="replace"), 60, "collector subscribed"
        )

        config = {
            "dev": "bench-a",
            "board": "host",
            "broker": {
                "host": "127.0.0.1",
                "port": broker.tls_port,
                "user": "bench-a",
                "password": broker.secret("bench-a"),
                "tls": True,
                "ca": str(broker.ca),
            },
            "channels": [
                {
                    "c": "sim",
                    "meter": "sim",
                    "hz": 10,
                    "role": "power",
                    "node": "node1",
                    "opts": {"model": "const"},
                }
            ],
            "batch": {"interval_ms": 250},
            "hass": True,
        }
        cfg_path = tmp_path / "bench-a.json"
        cfg_path.write_text(json.dumps(config))
        appliance_log = tmp_path / "appliance.log"
        appliance = wattbench(
            ["appliance", "--config", str(cfg_path), "--spool-dir", str(tmp_path / "flash"), "--every", "1"],
            appliance_log,
        )
        procs.append(appliance)

        wait_for(lambda: ha.topics(r"wattbench/v1/dev/bench-a/meta"), 60, "the appliance's meta")
        meta = json.loads(ha.topics(r"wattbench/v1/dev/bench-a/meta")[0][1])
        expected_discovery = {t for t, _ in hass.messages(meta)}
        assert expected_discovery, "the appliance offers sensors"

        run = "deploy-e2e"
        sweep = subprocess.run(
            [
                sys.executable,
                "-m",
                "wattbench.cli",
                "sweep",
                "--run",
                run,
                "--quiet",
                "--levels",
                "50",
                "--no-idle",
                "--pre",
                "0.5",
                "--measure",
                "2",
                "--post",
                "0.3",
                "--gap",
                "0.2",
                "--workers",
                "1",
                "--wait-data",
                "10",
                "--broker",
                f"127.0.0.1:{broker.tls_port}",
                "--mqtt-user",
                "wattbench-sweep",
                "--mqtt-password-file",
                str(broker.etc / "wattbench-sweep.secret"),
                "--mqtt-ca",
                str(broker.ca),
                "--store",
                str(store),
            ],
            capture_output=True,
            text=True,
            env=_env(),
            timeout=240,
        )
        assert sweep.returncode in (0, 1), f"sweep did not complete: {sweep.returncode}\n{sweep.stderr}"

        def discovered() -> set[str]:
            return {t for t, _ in ha.topics(r"homeassistant/.*/config")}

        wait_for(lambda: discovered() >= expected_discovery, 30, "discovery configs")
        wait_for(lambda: runs.topics(rf"wattbench/v1/run/{run}/result"), 30, "the run's result")
        assert ha.topics(r"wattbench/v1/dev/bench-a/samples"), "samples reach Home Assistant's user"
        statuses = [json.loads(p) for _, p in ha.topics(r"wattbench/v1/dev/bench-a/status")]
        assert any(s["state"] == "online" for s in statuses)
        assert runs.topics(rf"wattbench/v1/run/{run}/phase"), "phase events flow"
        assert discovered() == expected_discovery, "only the appliance's own discovery configs"

        plug = Observer(broker, "tasmota_5a3f2c", [])
        observers.append(plug)
        for watts in (120, 121, 122):
            telemetry = {
                "Time": "2026-11-25T10:00:00",
                "ENERGY": {"Power": watts, "Voltage": 230, "Total": 1.5},
            }
            assert plug.publish("tele/tasmota_5a3f2c/SENSOR", json.dumps(telemetry).encode()) == 0

        reader = open_store(str(store))
        wait_for(lambda: reader.count_samples("plug-srv1") == 3, 30, "the plug's samples bridged and stored")
        wait_for(lambda: reader.result(run) is not None, 30, "the result stored by the collector")
        assert reader.count_samples("bench-a") > 0, "the collector stored samples"
        assert reader.phases(run), "the collector stored the phase events"
        reader.close()

        def telegraf_wrote() -> dict[str, int]:
            out = {}
            for m, where in (
                ("wb_sample", "\"dev\" = 'bench-a'"),
                ("wb_status", "\"dev\" = 'bench-a'"),
                ("wb_phase", f"\"run\" = '{run}'"),
                ("wb_result", f"\"run\" = '{run}'"),
            ):
                rows = influxdb.query(f'SELECT count(*) FROM "{m}" WHERE {where}')
                out[m] = max(
                    (int(v) for r in rows for k, v in r.items() if k.startswith("count_")), default=0
                )
            return out

        wait_for(lambda: all(telegraf_wrote().values()), 60, "Telegraf writing all four measurements")

        assert "Denied" not in broker.log(), "the broker refused something:\n" + "\n".join(
            line for line in broker.log().splitlines() if "Denied" in line
        )

        # Device A's credentials publishing as device B: refused, and nothing reaches a subscriber.
        spoof = Observer(broker, "bench-a", [])
        observers.append(spoof)
        before = len(ha.got)
        assert spoof.publish("wattbench/v1/dev/bench-b/samples", b"{}") == NOT_AUTHORIZED
        assert spoof.publish("wattbench/v1/dev/bench-b/status", b"{}") == NOT_AUTHORIZED
        assert spoof.publish("homeassistant/sensor/bench-b/sim_power/config", b"{}") == NOT_AUTHORIZED
        # A plug's account reaches its own telemetry only, never the contract's topics.
        assert plug.publish("wattbench/v1/dev/plug-srv1/samples", b"{}") == NOT_AUTHORIZED
        assert plug.publish("tele/other_plug/SENSOR", b"{}") == NOT_AUTHORIZED
        time.sleep(0.5)
        assert not [t for t, _, _ in ha.got[before:] if "bench-b" in t]
        assert "Denied PUBLISH" in broker.log(), (
            "the log shows refusals, so the clean log above means something"
        )

        # A refusal the appliance can see: its connection with a wrong password is named, not "up".
        config["dev"] = "bench-b"
        config["broker"]["user"] = "bench-b"
        config["broker"]["password"] = "not the secret"
        wrong_path = tmp_path / "bench-b.json"
        wrong_path.write_text(json.dumps(config))
        wrong_log = tmp_path / "wrong.log"
        wrong = wattbench(
            [
                "appliance",
                "--config",
                str(wrong_path),
                "--spool-dir",
                str(tmp_path / "flash-b"),
                "--every",
                "1",
            ],
            wrong_log,
        )
        procs.append(wrong)
        # Mosquitto answers a wrong password with "not authorised" (MQTT 3.1.1 return code 5).
        refused = re.compile(r"link down \(.*connection refused: not authorised")
        wait_for(lambda: refused.search(wrong_log.read_text()), 30, "the refusal reported")
        assert "link up" not in wrong_log.read_text()

        assert stop(appliance) == 0, appliance_log.read_text()
        assert stop(collector) == 0, collector_log.read_text()
    finally:
        for proc in procs:
            stop(proc)
        for obs in observers:
            obs.close()
        if telegraf is not None:
            telegraf.stop()
        broker.stop()
        shutil.rmtree(scratch, ignore_errors=True)
