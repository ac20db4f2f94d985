"""Every plug format and component, from messages written after the vendors' public documentation
(tests/data/plugs/, each file naming its sources): each mapping row makes exactly the sample the file
expects of each message, with exactly the quantities the message gave (a field the device did not send
is absent, never 0; a device-wide energy is never one relay's), and nothing for a message that makes
none. The same files go through real Mosquitto in tests/sources/test_plug_formats_e2e.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from wattbench.bridge import (
    DEVICE_TIME,
    DEVICE_TIME_RES,
    BridgeError,
    Plug,
    PlugConfigError,
    format_for,
    load_plugs,
)
from wattbench.bridge.translate import Bridge

DATA = Path(__file__).resolve().parents[1] / "data" / "plugs"
FILES = sorted(DATA.glob("*.json"))


def payload(message: dict[str, Any]) -> bytes:
    body = message["payload"]
    return body.encode() if isinstance(body, str) else json.dumps(body).encode()


def mapping(tmp_path: Path, doc: dict[str, Any]) -> list[Plug]:
    path = tmp_path / "plugs.toml"
    path.write_text(doc["plugs"])
    return load_plugs(path)


def test_every_file_names_its_source() -> None:
    assert FILES
    for f in FILES:
        doc = json.loads(f.read_text())
        assert doc["source"] and all("https://" in s for s in doc["source"]), f.name


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_each_message_makes_the_documented_sample(tmp_path: Path, path: Path) -> None:
    doc = json.loads(path.read_text())
    plugs = mapping(tmp_path, doc)
    bridge = Bridge(plugs, boot=1)
    t = 1_764_064_800_000
    for i, message in enumerate(doc["messages"]):
        t += 1000
        got: dict[str, dict[str, float]] = {}
        for plug in bridge.plugs_for(message["topic"]):
            out = bridge.translate(plug, message["topic"], payload(message), t)
            assert out.reject_detail is None, (i, out.reject_detail)
            for topic, raw in out.messages:
                if topic.endswith("/samples"):
                    (sample,) = json.loads(raw)["samples"]
                    got[plug.dev] = {k: v for k, v in sample.items() if k not in ("s", "t", "c", "u")}
        want = message["expect"]
        assert set(got) == set(want), (i, message["topic"])
        for dev, values in want.items():
            assert set(got[dev]) == set(values), (i, dev, got[dev])
            assert got[dev] == pytest.approx(values, rel=1e-12), (i, dev)


def test_a_multi_relay_tasmota_never_gives_the_device_energy_to_a_relay() -> None:
    # SetOption129 0, the default: Total is one number, the whole device's (two relays' lists beside it)
    two = b'{"ENERGY":{"Total":12.345,"Power":[150,20],"Voltage":230,"Current":[0.68,0.1]}}'
    relay = Plug("tasmota", "t", "r0", 10.0, options={"index": 0})
    assert format_for("tasmota").read(relay, "tele/t/SENSOR", two) == {"W": 150.0, "V": 230.0, "A": 0.68}
    whole = Plug("tasmota", "t", "all", 10.0, options={"device_total": True})
    got = format_for("tasmota").read(whole, "tele/t/SENSOR", two)
    assert got == pytest.approx({"W": 170.0, "V": 230.0, "A": 0.78, "Wh": 12345.0})
    # a single-relay plug's Total is its own, as before
    one = b'{"ENERGY":{"Total":1.5,"Power":150}}'
    assert format_for("tasmota").read(relay, "tele/t/SENSOR", one) == {"W": 150.0, "Wh": 1500.0}


def test_two_rows_of_one_device_each_get_its_messages(tmp_path: Path) -> None:
    # Before, a message went to the first row reading its topic only: a second relay never had a sample.
    path = tmp_path / "plugs.toml"
    path.write_text(
        "[[plug]]\nformat='tasmota'\ntopic='strip'\nindex=0\ndev='r0'\nperiod_s=10\n"
        "[[plug]]\nformat='tasmota'\ntopic='strip'\nindex=1\ndev='r1'\nperiod_s=10\n"
    )
    bridge = Bridge(load_plugs(path), boot=1)
    assert [p.dev for p in bridge.plugs_for("tele/strip/SENSOR")] == ["r0", "r1"]


@pytest.mark.parametrize(
    ("rows", "why"),
    [
        (
            "[[plug]]\nformat='shelly_em'\ntopic='m'\nphase='total'\ndev='t'\nperiod_s=60\n"
            "[[plug]]\nformat='shelly_em'\ntopic='m'\nphase='a'\ndev='a'\nperiod_s=60\n",
            "t is the whole of m em:0 and a one of its parts, both role power",
        ),
        (
            "[[plug]]\nformat='tasmota'\ntopic='s'\ndevice_total=true\ndev='t'\nperiod_s=10\n"
            "[[plug]]\nformat='tasmota'\ntopic='s'\nindex=1\ndev='r'\nperiod_s=10\n",
            "t is the whole of tele/s and r one of its parts",
        ),
        ("[[plug]]\nformat='shelly_em'\ntopic='m'\ndev='t'\nperiod_s=60\n", "phase must be"),
        ("[[plug]]\nformat='shelly_em1'\ntopic='m'\nem1=20\ndev='t'\nperiod_s=60\n", "em1 must be"),
        ("[[plug]]\nformat='shelly_pm1'\ntopic='m'\nvia='http'\ndev='t'\nperiod_s=60\n", "via must be"),
        ("[[plug]]\nformat='shelly_pm1'\ntopic='m'\nswitch=0\ndev='t'\nperiod_s=60\n", "unknown key switch"),
        ("[[plug]]\nformat='shelly_gen1'\ntopic='m'\nrelay=0\nemeter=0\ndev='t'\nperiod_s=30\n", "not both"),
        ("[[plug]]\nformat='shelly_gen1'\ntopic='m'\nroller=0\nrelay=0\ndev='t'\nperiod_s=30\n", "one of"),
        ("[[plug]]\nformat='shelly_gen1'\ntopic='m'\nroller=1\ndev='t'\nperiod_s=30\n", "roller must be 0"),
        (
            "[[plug]]\nformat='tasmota'\ntopic='s'\ndevice_total=true\nindex=0\ndev='t'\nperiod_s=10\n",
            "not both",
        ),
    ],
)
def test_a_wrong_component_mapping_is_refused(tmp_path: Path, rows: str, why: str) -> None:
    path = tmp_path / "plugs.toml"
    path.write_text(rows)
    with pytest.raises(PlugConfigError, match=why):
        load_plugs(path)


def test_the_whole_and_its_parts_in_other_roles_load(tmp_path: Path) -> None:
    path = tmp_path / "plugs.toml"
    path.write_text(
        "[[plug]]\nformat='shelly_em'\ntopic='m'\nphase='total'\ndev='t'\nrole='other'\nperiod_s=60\n"
        "[[plug]]\nformat='shelly_em'\ntopic='m'\nphase='a'\ndev='a'\nperiod_s=60\n"
    )
    assert [p.dev for p in load_plugs(path)] == ["t", "a"]


@pytest.mark.parametrize(
    ("kind", "options", "topic", "body", "why"),
    [
        ("shelly_gen1", {"relay": 0}, "p/relay/0/power", b"on", "power: 'on' is not a number"),
        ("shelly_gen1", {"emeter": 1}, "p/emeter/1/voltage", b"nan", "voltage: 'nan' is not a number"),
        ("shelly_em1", {}, "p/status/em1:0", b'{"id":0,"voltage":230}', "act_power missing"),
        ("shelly_em", {"phase": "b"}, "p/status/em:0", b'{"id":0,"a_act_power":5}', "b_act_power missing"),
        ("shelly_pm1", {}, "p/status/pm1:0", b'{"apower":"1"}', 'apower is "1", not a number'),
        ("shelly", {"via": "rpc"}, "p/events/rpc", b'{"method":"NotifyStatus","params":[]}', "params is not"),
        (
            "shelly",
            {"via": "rpc"},
            "p/events/rpc",
            b'{"method":"NotifyFullStatus","params":{"switch:0":{"id":0,"output":true}}}',
            "apower missing",
        ),
    ],
)
def test_a_bad_component_message_is_refused(
    kind: str, options: dict[str, Any], topic: str, body: bytes, why: str
) -> None:
    with pytest.raises(BridgeError, match=why):
        format_for(kind).read(Plug(kind, "p", "d", 60.0, options=options), topic, body)


def test_a_partial_notification_is_laid_over_the_held_status_per_row() -> None:
    fmt = format_for("shelly_pm1")
    p = Plug("shelly_pm1", "p", "d", 60.0, options={"via": "rpc"})
    assert fmt.topics(p) == ["p/events/rpc"]
    full = {"method": "NotifyFullStatus", "params": {"pm1:0": {"apower": 10.0, "voltage": 230.0}}}
    assert fmt.read(p, "p/events/rpc", json.dumps(full).encode()) == {"W": 10.0, "V": 230.0}
    part = {"method": "NotifyStatus", "params": {"pm1:0": {"apower": 12.5}}}
    assert fmt.read(p, "p/events/rpc", json.dumps(part).encode()) == {"W": 12.5, "V": 230.0}
    # a field set to null by the device is unknown, not 0
    gone = {"method": "NotifyStatus", "params": {"pm1:0": {"voltage": None}}}
    assert fmt.read(p, "p/events/rpc", json.dumps(gone).encode()) == {"W": 12.5}
    # another reader (another row) holds its own status
    assert format_for("shelly_pm1").read(p, "p/events/rpc", json.dumps(part).encode()) == {"W": 12.5}


@pytest.mark.parametrize(
    "stamp",
    [
        {"Time": 1764064800},  # `Time 3`: the JSON timestamp as epoch seconds
        {"Time": "2025-11-25T11:00:00", "Epoch": 1764064800},  # `Time 2`: local ISO time and epoch
    ],
    ids=["time3", "time2"],
)
def test_a_tasmota_epoch_time_dates_the_reading_without_a_zone(stamp: dict[str, Any]) -> None:
    # https://tasmota.github.io/docs/Commands/#time: epoch seconds are UTC, so the plug's own time is
    # known without `zone`, and a message from minutes ago is stale as with a zoned ISO time.
    p = Plug("tasmota", "t", "d", 10.0)
    body = json.dumps({**stamp, "ENERGY": {"Total": 1.5, "Power": 150}}).encode()
    got = format_for("tasmota").read(p, "tele/t/SENSOR", body)
    assert got == {"W": 150.0, "Wh": 1500.0, DEVICE_TIME: 1_764_064_800_000, DEVICE_TIME_RES: 1000.0}
    bridge = Bridge([p], boot=1)
    assert bridge.translate(p, "tele/t/SENSOR", body, 1_764_064_800_000 + 2_000).messages
    later = json.dumps({**stamp, "ENERGY": {"Total": 1.5, "Power": 151}}).encode()
    assert bridge.translate(p, "tele/t/SENSOR", later, 1_764_064_800_000 + 600_000).dropped == "stale"
