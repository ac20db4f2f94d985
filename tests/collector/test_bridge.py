"""The smart-plug bridge without a broker: the mapping file refused with the plug and key for every
mistake; each format's messages (as the plugs print them) read into quantities, and each kind of bad
message a reason; what the bridge makes is valid contract messages, a plug's silence a gap."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import wattbench_schema as schema
from wattbench.bridge import BridgeError, Plug, PlugConfigError, format_for, load_plugs
from wattbench.bridge.translate import Bridge

TASMOTA = (
    b'{"Time":"2026-11-25T10:00:00","ENERGY":{"TotalStartTime":"2026-01-01T00:00:00","Total":12.345,'
    b'"Yesterday":1.2,"Today":0.4,"Period":3,"Power":150,"ApparentPower":158,"ReactivePower":49,'
    b'"Factor":0.95,"Voltage":231,"Current":0.684}}'
)
SHELLY = (
    b'{"id":0,"source":"init","output":true,"apower":148.6,"voltage":230.4,"freq":50.0,"current":0.672,'
    b'"pf":0.96,"aenergy":{"total":12345.678,"by_minute":[2475.9,2476.0,2475.8],"minute_ts":1764064800},'
    b'"temperature":{"tC":41.2,"tF":106.2}}'
)


def plug(kind: str = "tasmota", **options: object) -> Plug:
    return Plug(kind, "plug1", "plug-srv1", 1.0, node="srv1", acc=0.02, options=dict(options))


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "plugs.toml"
    path.write_text(text)
    return path


def test_each_shipped_sample_mapping_loads() -> None:
    root = Path(__file__).resolve().parents[2] / "collector" / "wattbench" / "bridge"
    kinds = schema.bridged_kinds()
    for kind in kinds:
        folder = root / kind
        assert (folder / "README.md").is_file() and (folder / "__init__.py").is_file(), kind
        plugs = load_plugs(folder / "sample.toml")
        assert {p.kind for p in plugs} == {kind}
    assert sorted(p.name for p in root.iterdir() if (p / "__init__.py").is_file()) == sorted(kinds)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "no \\[\\[plug\\]\\] table"),
        ("[[plug]]\ntopic='a'\ndev='d'\nperiod_s=1", "plug 1: format missing"),
        ("[[plug]]\nformat='zigbee'\ntopic='a'\ndev='d'\nperiod_s=1", "format 'zigbee': one of"),
        ("[[plug]]\nformat='tasmota'\ntopic='a/#'\ndev='d'\nperiod_s=1", "without wildcards"),
        ("[[plug]]\nformat='tasmota'\ntopic='a'\ndev='Bad Id'\nperiod_s=1", "dev must be a device id"),
        ("[[plug]]\nformat='tasmota'\ntopic='a'\ndev='d'", "period_s must be"),
        ("[[plug]]\nformat='tasmota'\ntopic='a'\ndev='d'\nperiod_s=1\nrole='wall'", "role must be one of"),
        # the contract's channel id is at most 24 characters: a longer one would be refused per message
        (
            "[[plug]]\nformat='tasmota'\ntopic='a'\ndev='d'\nperiod_s=1\nchannel='" + "c" * 30 + "'",
            "channel must be",
        ),
        ("[[plug]]\nformat='tasmota'\ntopic='a'\ndev='d'\nperiod_s=1\ncolour=1", "unknown key colour"),
        ("[[plug]]\nformat='shelly'\ntopic='a'\ndev='d'\nperiod_s=1\nswitch=99", "switch must be"),
        ("[[plug]]\nformat='esphome'\ntopic='a'\ndev='d'\nperiod_s=1", "sensors must map"),
        (
            "[[plug]]\nformat='tasmota'\ntopic='a'\ndev='d'\nperiod_s=1\n"
            "[[plug]]\nformat='tasmota'\ntopic='b'\ndev='d'\nperiod_s=1",
            "device d named by more than one plug",
        ),
        ("[[plug]\n", "plugs file"),
    ],
)
def test_a_wrong_mapping_is_refused_with_the_plug_and_key(tmp_path: Path, text: str, why: str) -> None:
    with pytest.raises(PlugConfigError, match=why):
        load_plugs(write(tmp_path, text))


def test_a_missing_mapping_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(PlugConfigError, match="No such file"):
        load_plugs(tmp_path / "nope.toml")


def test_tasmota_energy_telemetry() -> None:
    got = format_for("tasmota").read(plug(), "tele/plug1/SENSOR", TASMOTA)
    assert got == {"W": 150.0, "V": 231.0, "A": 0.684, "PF": 0.95, "Wh": 12345.0}
    # another sensor's telemetry on the same device makes no sample
    assert (
        format_for("tasmota").read(plug(), "tele/plug1/SENSOR", b'{"Time":"x","DS18B20":{"Temperature":21}}')
        is None
    )


def test_tasmota_with_several_relays_needs_its_index() -> None:
    two = b'{"ENERGY":{"Power":[150,20],"Voltage":230,"Total":[1.0,2.0]}}'
    with pytest.raises(BridgeError, match=r"2 values .* set index"):
        format_for("tasmota").read(plug(), "t", two)
    assert format_for("tasmota").read(plug(index=1), "t", two) == {"W": 20.0, "V": 230.0, "Wh": 2000.0}


def test_shelly_switch_status() -> None:
    got = format_for("shelly").read(plug("shelly"), "plug1/status/switch:0", SHELLY)
    assert got == {"W": 148.6, "V": 230.4, "A": 0.672, "PF": 0.96, "Hz": 50.0, "Wh": 12345.678} | {
        "t": 1_764_064_800_000,  # aenergy.minute_ts: the plug's own time, to two minutes
        "t_res": 120_000.0,
    }


def test_esphome_states_make_a_sample_on_each_power_state() -> None:
    fmt = format_for("esphome")
    p = plug("esphome", sensors={"W": "power", "V": "voltage", "Wh": "energy"})
    assert fmt.topics(p) == [
        "plug1/sensor/power/state",
        "plug1/sensor/voltage/state",
        "plug1/sensor/energy/state",
    ]
    assert fmt.read(p, "plug1/sensor/voltage/state", b"229.5") is None
    assert fmt.read(p, "plug1/sensor/energy/state", b"1.5") is None
    assert fmt.read(p, "plug1/sensor/power/state", b"151.25") == {"V": 229.5, "Wh": 1500.0, "W": 151.25}


@pytest.mark.parametrize(
    ("kind", "payload", "why"),
    [
        ("tasmota", b"{not json", "not JSON"),
        ("tasmota", b"[1,2]", "not a JSON object"),
        ("tasmota", b'{"ENERGY":{"Voltage":230}}', "ENERGY.Power missing"),
        ("tasmota", b'{"ENERGY":{"Power":"150"}}', 'Power is "150", not a number'),
        ("tasmota", b'{"ENERGY":"off"}', "ENERGY is not an object"),
        ("shelly", b'{"id":0,"output":false}', "apower missing"),
        ("shelly", b'{"apower":null,"voltage":230}', "apower missing"),
        ("shelly", b'{"apower":true}', "apower is true, not a number"),
        ("shelly", b"\xff\xfe", "not JSON"),
    ],
)
def test_a_bad_plug_message_is_refused_with_its_reason(kind: str, payload: bytes, why: str) -> None:
    with pytest.raises(BridgeError, match=why):
        format_for(kind).read(plug(kind), "t", payload)


@pytest.mark.parametrize("state", [b"nan", b"unavailable", b""])
def test_an_esphome_state_without_a_value_is_refused(state: bytes) -> None:
    p = plug("esphome", sensors={"W": "power"})
    with pytest.raises(BridgeError, match="sensor power"):
        format_for("esphome").read(p, "plug1/sensor/power/state", state)


def test_translated_messages_are_the_contract_and_a_silence_is_a_gap() -> None:
    p = plug()
    bridge = Bridge([p], boot=1764064800)
    assert bridge.filters() == ["tele/plug1/SENSOR"]
    assert bridge.plugs_for("tele/plug1/SENSOR") == [p] and bridge.plugs_for("tele/other/SENSOR") == []
    t0 = 1_764_064_800_000
    first = bridge.translate(p, "tele/plug1/SENSOR", TASMOTA, t0)
    (meta_topic, meta_raw), (samples_topic, samples_raw) = first.messages
    assert (
        meta_topic == "wattbench/v1/dev/plug-srv1/meta"
        and samples_topic == "wattbench/v1/dev/plug-srv1/samples"
    )
    meta, samples = json.loads(meta_raw), json.loads(samples_raw)
    schema.jsonschema_validator("meta").validate(meta)
    schema.jsonschema_validator("samples").validate(samples)
    ch = meta["channels"][0]
    assert (ch["meter"], ch["role"], ch["node"], ch["upd"], ch["hz"], ch["acc"]) == (
        "tasmota",
        "power",
        "srv1",
        1.0,
        1.0,
        0.02,
    )
    assert samples["clk"] == {"sync": "recv", "err": 1000.0}
    assert samples["samples"] == [
        {
            "s": 0,
            "t": t0,
            "c": "plug",
            "W": 150.0,
            "V": 231.0,
            "A": 0.684,
            "PF": 0.95,
            "Wh": 12345.0,
            "u": 0.02,
        }
    ]

    nxt = bridge.translate(p, "tele/plug1/SENSOR", TASMOTA, t0 + 1000)
    assert len(nxt.messages) == 1  # metadata once
    assert json.loads(nxt.messages[0][1])["samples"][0]["s"] == 1
    # four periods of silence: three messages never came, and their numbers are skipped. The plug is
    # timed on arrival, and the message after a silence may open a burst the broker had queued, so
    # they are skipped at the next message that comes at the plug's pace.
    late = bridge.translate(p, "tele/plug1/SENSOR", TASMOTA, t0 + 5000)
    assert json.loads(late.messages[0][1])["samples"][0]["s"] == 2
    back = bridge.translate(p, "tele/plug1/SENSOR", TASMOTA, t0 + 6000)
    assert json.loads(back.messages[0][1])["samples"][0]["s"] == 6

    other = bridge.translate(p, "tele/plug1/SENSOR", b"{}", t0 + 6000)  # another sensor's telemetry
    assert other.messages == [] and other.reject_detail is None
    neg = bridge.translate(p, "tele/plug1/SENSOR", b'{"ENERGY":{"Power":-5}}', t0 + 6000)
    assert neg.reject_detail == "tasmota plug plug1: negative power -5 W"
