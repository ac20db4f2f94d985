"""A real Home Assistant core (from PyPI, provisioned by scripts/provision.sh into the services cache)
with its MQTT integration, against a real Mosquitto and host-mode appliances run as `wattbench
appliance` processes. Home Assistant is started once for the module (its start-up is slow), through
onboarding and the MQTT config flow exactly as a user's browser would drive the REST API; each test
then looks at what Home Assistant itself reports on /api/states.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import wattbench_schema as contract
from wattbench_devkit import services
from wattbench_fw import hass

pytestmark = pytest.mark.services

HASS_VERSION = "2025.4.4"
HASS_VENV = services.SERVICES / "hass-venv"
QUANTITIES = ("W", "Wh", "V", "A", "PF", "Hz")  # what a simulated meter measures


def _required(make: Callable[[], Any]) -> Any:
    """As tests/conftest.py: a missing service fails in CI and skips elsewhere."""
    try:
        return make()
    except services.ServiceUnavailable as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(exc))


def wait_for(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.25)


class HomeAssistant(services.Process):
    """Home Assistant core on a free loopback port with a minimal configuration: no default_config,
    so only the integrations it always sets up, plus onboarding and the Energy dashboard's backend. --skip-pip: everything it needs was
    installed by the provisioning step, and nothing is fetched while tests run."""

    def __init__(self, workdir: Path) -> None:
        super().__init__("hass", workdir)
        self.binary = HASS_VENV / "bin" / "hass"
        marker = HASS_VENV / f".wattbench-hass-{HASS_VERSION}"
        if not (self.binary.is_file() and marker.is_file()):
            raise services.ServiceUnavailable(
                f"Home Assistant {HASS_VERSION} not in {HASS_VENV}: run scripts/provision.sh (needs Python 3.13.0)"
            )
        self.port = services.free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config = workdir / "config"
        self.config.mkdir(parents=True, exist_ok=True)
        (self.config / "configuration.yaml").write_text(
            f"""homeassistant:
  name: wattbench test
  latitude: 0
  longitude: 0
  elevation: 0
  unit_system: metric
  time_zone: UTC
  currency: EUR
  country: DE
http:
  server_host: 127.0.0.1
  server_port: {self.port}
onboarding:
energy:
logger:
  default: warning
"""
        )
        self.token = ""
        self.client_id = self.url + "/"

    @property
    def ha_log(self) -> Path:
        return self.config / "home-assistant.log"

    def start(self) -> HomeAssistant:
        self._spawn([str(self.binary), "-c", str(self.config), "--skip-pip"])
        try:
            wait_for(lambda: self._answers("/api/onboarding"), 300, "Home Assistant's HTTP API")
        except AssertionError as exc:
            raise RuntimeError(f"Home Assistant did not start: {exc}\n{self.log_tail()}") from exc
        return self

    def _answers(self, path: str) -> bool:
        if not self.running:
            raise RuntimeError(f"Home Assistant exited with {self.proc.returncode}\n{self.log_tail()}")  # type: ignore[union-attr]
        with contextlib.suppress(OSError):
            status, _ = self.call("GET", path)
            return status == 200
        return False

    def call(self, method: str, path: str, body: Any = None, form: bool = False) -> tuple[int, Any]:
        headers = {}
        data = None
        if body is not None:
            if form:
                data = urllib.parse.urlencode(body).encode()
                headers["Content-Type"] = "application/x-www-form-urlencoded"
            else:
                data = json.dumps(body).encode()
                headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        req = urllib.request.Request(self.url + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                raw = r.read()
                return r.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(errors="replace")

    def onboard(self) -> None:
        """The owner account, a token for it, then the remaining onboarding steps."""
        status, user = self.call(
            "POST",
            "/api/onboarding/users",
            {
                "client_id": self.client_id,
                "name": "Bench",
                "username": "bench",
                "password": "bench-password-1",
                "language": "en",
            },
        )
        assert status == 200, user
        status, tokens = self.call(
            "POST",
            "/auth/token",
            {"grant_type": "authorization_code", "code": user["auth_code"], "client_id": self.client_id},
            form=True,
        )
        assert status == 200, tokens
        self.token = tokens["access_token"]
        for step, body in (
            ("core_config", {}),
            ("analytics", {}),
            (
                "integration",
                {"client_id": self.client_id, "redirect_uri": self.client_id + "?auth_callback=1"},
            ),
        ):
            status, out = self.call("POST", f"/api/onboarding/{step}", body)
            assert status == 200, (step, out)
        status, steps = self.call("GET", "/api/onboarding")
        assert status == 200 and all(s["done"] for s in steps), steps

    def add_mqtt(self, host: str, port: int) -> None:
        status, flow = self.call("POST", "/api/config/config_entries/flow", {"handler": "mqtt"})
        assert status == 200 and flow["type"] == "form", flow
        status, done = self.call(
            "POST", f"/api/config/config_entries/flow/{flow['flow_id']}", {"broker": host, "port": port}
        )
        assert status == 200 and done["type"] == "create_entry", done
        assert done["result"]["state"] == "loaded", done

    def websocket(self, commands: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Results of websocket API commands (some settings have no REST endpoint). Run by Home
        Assistant's own interpreter, which has aiohttp; this project needs no websocket client."""
        proc = subprocess.run(
            [str(HASS_VENV / "bin" / "python"), "-c", WS_CLIENT, self.url, self.token],
            input=json.dumps(commands),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        results: list[dict[str, Any]] = json.loads(proc.stdout)
        return results

    def states(self, prefix: str) -> dict[str, dict[str, Any]]:
        status, out = self.call("GET", "/api/states")
        assert status == 200, out
        return {s["entity_id"]: s for s in out if s["entity_id"].startswith(prefix)}

    def log_lines(self) -> list[str]:
        try:
            return self.ha_log.read_text(errors="replace").splitlines()
        except OSError:
            return []


WS_CLIENT = """
import asyncio, json, sys
import aiohttp

async def main(url, token, commands):
    async with aiohttp.ClientSession() as session, session.ws_connect(url + "/api/websocket") as ws:
        await ws.receive_json()
        await ws.send_json({"type": "auth", "access_token": token})
        assert (await ws.receive_json())["type"] == "auth_ok"
        out = []
        for i, command in enumerate(commands, 1):
            await ws.send_json({"id": i, **command})
            while (msg := await ws.receive_json()).get("id") != i or msg["type"] != "result":
                pass
            out.append(msg)
        print(json.dumps(out))

asyncio.run(main(sys.argv[1], sys.argv[2], json.load(sys.stdin)))
"""


class Recorder:
    """Every message on the appliance and discovery topics, in arrival order."""

    def __init__(self, host: str, port: int) -> None:
        import paho.mqtt.client as mqtt

        self.messages: list[tuple[str, bytes]] = []
        self.lock = threading.Lock()
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="ha-test-recorder")
        self.client.on_message = self._on_message
        self.client.connect(host, port)
        self.client.subscribe([("wattbench/v1/dev/#", 1), ("homeassistant/#", 1)])
        self.client.loop_start()

    def _on_message(self, _c: Any, _u: Any, msg: Any) -> None:
        with self.lock:
            self.messages.append((msg.topic, bytes(msg.payload)))

    def on(self, topic: str) -> list[bytes]:
        with self.lock:
            return [p for t, p in self.messages if t == topic]

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


@pytest.fixture(scope="module")
def ha(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HomeAssistant, services.Mosquitto]]:
    workdir = tmp_path_factory.mktemp("hass")
    broker = _required(lambda: services.Mosquitto(workdir / "mosquitto"))
    home = _required(lambda: HomeAssistant(workdir / "hass"))
    broker.start()
    try:
        home.start()
        home.onboard()
        home.add_mqtt(broker.host, broker.port)
        yield home, broker
    finally:
        home.stop(timeout=30)
        broker.stop()


class Appliance(services.Process):
    """`wattbench appliance --config FILE` as its own process, so it can be stopped every way."""

    def __init__(self, workdir: Path, cfg: dict[str, Any]) -> None:
        super().__init__("appliance-" + cfg["dev"], workdir)
        self.cfg_path = workdir / (cfg["dev"] + ".json")
        self.cfg_path.write_text(json.dumps(cfg))

    def start(self) -> Appliance:
        code = "import sys; from wattbench.cli import main; sys.exit(main(sys.argv[1:]))"
        self._spawn([sys.executable, "-c", code, "appliance", "--config", str(self.cfg_path), "--every", "1"])
        return self


def appliance_config(
    broker: services.Mosquitto, dev: str, spool: Path, hass_on: bool = True
) -> dict[str, Any]:
    from wattbench_fw.host import sim_config

    cfg: dict[str, Any] = sim_config(
        dev=dev, broker=broker.url, channels=2, hz=2, model="sine", watts=150.0, amp=40.0, period_s=20.0
    )
    cfg["flash_dir"] = str(spool)
    cfg["hass"] = hass_on
    cfg["energy_margin_wh"] = 1.0
    return cfg


SUFFIX = {
    "W": "power",
    "Wh": "energy",
    "V": "voltage",
    "A": "current",
    "PF": "power_factor",
    "Hz": "frequency",
}


def entity_ids(dev: str) -> dict[str, tuple[str, str]]:
    """entity id -> (channel, quantity) of every sensor a two-channel simulated appliance has, named
    as Home Assistant names them: device name, then sensor name, in its slug form."""
    slug = dev.replace("-", "_")
    return {f"sensor.wattbench_{slug}_{c}_{SUFFIX[q]}": (c, q) for c in ("sim1", "sim2") for q in QUANTITIES}


def published(rec: Recorder, dev: str, channel: str, quantity: str) -> set[float]:
    """Every value of (channel, quantity) a sensor can have taken from what the appliance published."""
    if quantity == "Wh":
        docs = [json.loads(p) for p in rec.on(hass.state_topic(dev))]
        return {d[channel]["e"] for d in docs if "e" in d.get(channel, {})}
    out: set[float] = set()
    for raw in rec.on(contract.topic_for("samples", dev=dev)):
        rows = [r for r in json.loads(raw)["samples"] if r["c"] == channel and quantity in r]
        if rows:
            out.add(rows[-1][quantity])
    return out


UNITS = {"W": "W", "Wh": "Wh", "V": "V", "A": "A", "PF": None, "Hz": "Hz"}
CLASSES = {
    "W": ("power", "measurement"),
    "Wh": ("energy", "total"),
    "V": ("voltage", "measurement"),
    "A": ("current", "measurement"),
    "PF": ("power_factor", "measurement"),
    "Hz": ("frequency", "measurement"),
}


def all_in(states: dict[str, dict[str, Any]], ids: Any, state: str) -> bool:
    return all(i in states and states[i]["state"] == state for i in ids)


def test_entities_values_availability_and_removal(
    ha: tuple[HomeAssistant, services.Mosquitto], tmp_path: Path
) -> None:
    home, broker = ha
    dev = "ha-a"
    expected = entity_ids(dev)
    assert len(expected) == 12
    prefix = "sensor.wattbench_ha_a_"
    cfg = appliance_config(broker, dev, tmp_path / "spool")
    # the meter of sim2 stops answering 12 s after start, for 8 s
    cfg["channels"][1]["opts"].update({"fail_from_s": 12.0, "fail_for_s": 8.0})
    rec = Recorder(broker.host, broker.port)
    app = Appliance(tmp_path, cfg).start()
    try:
        states = wait_for(
            lambda: (
                (s := home.states(prefix))
                and set(s) == set(expected)
                and all(v["state"] not in ("unavailable", "unknown") for v in s.values())
                and s
            ),
            60,
            "all twelve entities with values",
        )
        for entity, (_channel, q) in expected.items():
            attrs = states[entity]["attributes"]
            assert attrs.get("unit_of_measurement") == UNITS[q], (entity, attrs)
            assert (attrs.get("device_class"), attrs.get("state_class")) == CLASSES[q], (entity, attrs)
        # values: every state Home Assistant shows is one the appliance published for that sensor
        checked = 0
        seen_w: set[float] = set()
        for _ in range(6):
            states = home.states(prefix)
            for entity, (channel, q) in expected.items():
                value = states[entity]["state"]
                if channel == "sim2" and value == "unavailable":
                    continue  # the outage may have begun
                # Home Assistant may get a batch a moment before this test's own subscriber does
                wait_for(
                    lambda v=float(value), c=channel, q=q: v in published(rec, dev, c, q),
                    5,
                    f"{entity} = {value} among the values published for {channel} {q}",
                )
                checked += 1
                if q == "W" and channel == "sim1":
                    seen_w.add(float(value))
            time.sleep(1.0)
        assert checked >= 60 and len(seen_w) >= 3, (checked, seen_w)
        energy = states["sensor.wattbench_ha_a_sim1_energy"]["attributes"]
        assert energy.get("last_reset"), "energy counts from this boot's first reading"
        # the Energy dashboard takes both energy sensors as device consumption
        energy_ids = [e for e, (_, q) in expected.items() if q == "Wh"]
        saved, validated = home.websocket(
            [
                {
                    "type": "energy/save_prefs",
                    "device_consumption": [{"stat_consumption": e} for e in energy_ids],
                },
                {"type": "energy/validate"},
            ]
        )
        assert saved["success"], saved
        assert validated["success"], validated
        issues = [i for per_device in validated["result"]["device_consumption"] for i in per_device]
        # Long-term statistics are compiled every 5 minutes, so they do not exist yet; anything else
        # (unit, device or state class, negative or unrecorded values) would be a real objection.
        assert [i for i in issues if i["type"] != "statistics_not_defined"] == [], issues
        assert len(validated["result"]["device_consumption"]) == len(energy_ids)

        # the failing meter: its channel's sensors go unavailable, the other channel's stay
        sim1 = [e for e, (c, _) in expected.items() if c == "sim1"]
        sim2 = [e for e, (c, _) in expected.items() if c == "sim2"]
        states = wait_for(
            lambda: (s := home.states(prefix)) and all_in(s, sim2, "unavailable") and s,
            40,
            "sim2 unavailable while its reads fail",
        )
        assert not [e for e in sim1 if states[e]["state"] == "unavailable"]
        wait_for(
            lambda: not [v for v in home.states(prefix).values() if v["state"] == "unavailable"],
            40,
            "sim2 back with its next good read",
        )

        # a clean stop: offline status, every sensor unavailable
        app.stop(signal.SIGINT, timeout=20)
        assert app.proc is not None and app.proc.returncode == 0, app.log_tail()
        wait_for(
            lambda: all_in(home.states(prefix), expected, "unavailable"), 20, "unavailable after a clean stop"
        )
        status = json.loads(rec.on(contract.topic_for("status", dev=dev))[-1])
        assert (status["state"], status.get("reason")) == ("offline", "shutdown")

        # discovery switched off: the next boot removes every sensor
        off = Appliance(tmp_path, appliance_config(broker, dev, tmp_path / "spool", hass_on=False)).start()
        try:
            wait_for(lambda: not home.states(prefix), 30, "the sensors removed")
        finally:
            off.stop(signal.SIGINT, timeout=20)
    finally:
        app.stop(signal.SIGKILL)
        rec.close()


def _energy(home: HomeAssistant, entity: str) -> tuple[float, str]:
    s = home.states(entity)[entity]
    return float(s["state"]), s["attributes"]["last_reset"]


def test_sigterm_kill_and_no_phantom_energy(
    ha: tuple[HomeAssistant, services.Mosquitto], tmp_path: Path
) -> None:
    home, broker = ha
    dev = "ha-b"
    prefix = "sensor.wattbench_ha_b_"
    expected = entity_ids(dev)
    energy_id = "sensor.wattbench_ha_b_sim1_energy"
    cfg = appliance_config(broker, dev, tmp_path / "spool")
    rec = Recorder(broker.host, broker.port)
    samples_topic = contract.topic_for("samples", dev=dev)

    def available() -> bool:
        s = home.states(prefix)
        return set(s) == set(expected) and not [
            v for v in s.values() if v["state"] in ("unavailable", "unknown")
        ]

    def wh_by_boot() -> dict[int, list[float]]:
        out: dict[int, list[float]] = {}
        for raw in rec.on(samples_topic):
            batch = json.loads(raw)
            out.setdefault(batch["boot"], []).extend(
                r["Wh"] for r in batch["samples"] if r["c"] == "sim1" and "Wh" in r
            )
        return out

    procs: list[Appliance] = []
    try:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            app = Appliance(tmp_path, cfg).start()
            procs.append(app)
            wait_for(available, 60, "the appliance's sensors available")
            time.sleep(3.0)
            app.stop(sig, timeout=20)
            wait_for(
                lambda: all_in(home.states(prefix), expected, "unavailable"),
                30,
                f"every sensor unavailable after {signal.Signals(sig).name}",
            )
        before = wh_by_boot()
        last_boot = max(before)

        # the killed boot left its reservation: the next one resumes the contract counter above it
        app = Appliance(tmp_path, cfg).start()
        procs.append(app)
        wait_for(available, 60, "available again after the restart")
        wait_for(lambda: len(wh_by_boot().get(last_boot + 1, [])) >= 4, 30, "samples of the new boot")
        state, last_reset = _energy(home, energy_id)
        time.sleep(2.0)  # the samples behind that state have arrived here too
        boots = wh_by_boot()
        new = boots[last_boot + 1]
        jump = new[0] - before[last_boot][-1]
        assert jump > 0.5, f"the contract counter resumed from its reservation (+{jump:.3f} Wh)"
        measured_now = new[-1] - new[0]
        # Home Assistant holds energy measured in this boot, not the counter with its reservation
        assert 0 <= state <= measured_now + 1e-6, (state, measured_now, jump)
        assert state in published(rec, dev, "sim1", "Wh")
        resets = {json.loads(p)["sim1"].get("r") for p in rec.on(hass.state_topic(dev))}
        assert len(resets - {None}) == 3, "each boot starts a new cycle"
        assert last_reset, "a cycle marked by last_reset"
        app.stop(signal.SIGINT, timeout=20)
    finally:
        for p in procs:
            p.stop(signal.SIGKILL)
        rec.close()


# Loggers whose warnings would be about what the appliance publishes: discovery and MQTT entities,
# template rendering, sensor and statistics checks, entity registration.
OURS = (
    "homeassistant.components.mqtt",
    "homeassistant.helpers.template",
    "homeassistant.components.sensor",
    "homeassistant.components.recorder",
    "homeassistant.helpers.entity",
)


def test_no_warning_about_wattbench_in_home_assistants_log(
    ha: tuple[HomeAssistant, services.Mosquitto],
) -> None:
    """Runs after the appliance tests. The log has warnings and errors of its own (pip skipped,
    integrations onboarding adds whose libraries are not installed); none may concern wattbench."""
    home, _ = ha
    lines = home.log_lines()
    assert lines, "Home Assistant writes its log"
    bad = [
        ln
        for ln in lines
        if (" WARNING " in ln or " ERROR " in ln)
        and ("wattbench" in ln.lower() or any(f"[{name}" in ln for name in OURS))
    ]
    assert not bad, "\n".join(bad)
