"""The bridge's message rules without a broker: a retained or stale message is no sample and a counted
drop; a redelivered or repeated message is one sample whatever its timing; a burst within one
millisecond keeps each reading under its own stamp; a plug's numbering, gap clock and recent messages
go on across a restart of the collector (saved state), so a silence across it is counted missing."""

from __future__ import annotations

import json

import pytest

import wattbench_schema as schema
from wattbench.bridge import Plug, PlugConfigError, load_plugs, plug_time_ms
from wattbench.bridge.translate import Bridge

T0 = 1_764_064_800_000  # 2025-11-25T10:00:00Z
TOPIC = "tele/plug1/SENSOR"


def tasmota(when: str, watts: float = 150.0) -> bytes:
    return json.dumps({"Time": when, "ENERGY": {"Power": watts, "Total": 12.345}}).encode()


def iso(ms: int) -> str:
    """UTC ms as Tasmota prints it in Europe/Berlin (CET in November), whole seconds, no zone."""
    from datetime import UTC, datetime, timedelta

    return (datetime.fromtimestamp(ms / 1000, UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S")


def tas_plug(zone: str | None = "Europe/Berlin", period_s: float = 1.0) -> Plug:
    return Plug("tasmota", "plug1", "plug-srv1", period_s, zone=zone)


def samples(out: object) -> list[dict[str, object]]:
    got = []
    for topic, raw in out.messages:  # type: ignore[attr-defined]
        if topic.endswith("/samples"):
            doc = json.loads(raw)
            schema.jsonschema_validator("samples").validate(doc)
            got += doc["samples"]
    return got


def test_plug_time_is_read_with_its_zone_or_offset_and_never_guessed() -> None:
    assert plug_time_ms("2025-11-25T11:00:00", "Europe/Berlin") == T0
    assert plug_time_ms("2025-11-25T10:00:00", "UTC") == T0
    assert plug_time_ms("2025-11-25T11:00:00+01:00", None) == T0  # SetOption52
    assert plug_time_ms("2025-11-25T11:00:00", None) is None  # local time of an unknown zone
    assert plug_time_ms("1970-01-01T00:05:00", "UTC") is None  # a clock NTP has not set yet
    assert plug_time_ms("x", "UTC") is None and plug_time_ms(None, "UTC") is None


def test_a_wrong_zone_is_refused(tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "plugs.toml"
    path.write_text("[[plug]]\nformat='tasmota'\ntopic='a'\ndev='d'\nperiod_s=1\nzone='Mars/Olympus'\n")
    with pytest.raises(PlugConfigError, match="plug 1: zone must be a time zone name"):
        load_plugs(path)
    path.write_text("[[plug]]\nformat='tasmota'\ntopic='a'\ndev='d'\nperiod_s=1\nzone='UTC'\n")
    assert load_plugs(path)[0].zone == "UTC"


def test_a_retained_message_is_no_sample_but_a_counted_drop() -> None:
    p = tas_plug(zone=None)
    bridge = Bridge([p], boot=1)
    out = bridge.translate(p, TOPIC, tasmota(iso(T0)), T0, retained=True)
    assert (out.messages, out.dropped, out.reject_detail) == ([], "retained", None)
    # the live copy of the same message is a reading
    assert [s["s"] for s in samples(bridge.translate(p, TOPIC, tasmota(iso(T0)), T0))] == [0]
    assert bridge.drops() == {"plug-srv1": {"retained": 1, "stale": 0, "repeat": 0}}


@pytest.mark.parametrize(
    ("age_ms", "stale"),
    [(0, False), (3000, False), (4500, True), (3_600_000, True)],
)
def test_the_plugs_own_time_marks_a_stale_message(age_ms: int, stale: bool) -> None:
    # period 1 s, Time in whole seconds: older than 2 periods + 1 s resolution + 1 s slack is stale
    p = tas_plug()
    bridge = Bridge([p], boot=1)
    out = bridge.translate(p, TOPIC, tasmota(iso(T0 - age_ms)), T0)
    assert (out.dropped == "stale") is stale
    assert bool(samples(out)) is not stale


def test_a_shelly_status_from_minutes_ago_is_stale() -> None:
    p = Plug("shelly", "plug2", "plug-srv2", 5.0)
    bridge = Bridge([p], boot=1)

    def status(minute_s: int) -> bytes:
        return json.dumps(
            {"id": 0, "apower": 90.5, "aenergy": {"total": 5.0, "minute_ts": minute_s}}
        ).encode()

    fresh = bridge.translate(p, "plug2/status/switch:0", status(T0 // 1000 - 60), T0)
    assert fresh.dropped is None and len(samples(fresh)) == 1
    old = bridge.translate(p, "plug2/status/switch:0", status(T0 // 1000 - 600), T0 + 5000)
    assert old.dropped == "stale" and old.messages == []


def test_a_redelivered_message_is_one_sample_whatever_its_timing() -> None:
    p = Plug("esphome", "athom", "plug-srv3", 1.0, options={"sensors": {"W": "power"}})
    bridge = Bridge([p], boot=1)
    topic = "athom/sensor/power/state"
    first = bridge.translate(p, topic, b"40.25", T0)
    again = bridge.translate(p, topic, b"40.25", T0 + 5, redelivered=True)  # QoS 1 DUP
    late = bridge.translate(p, topic, b"40.25", T0 + 90_000, redelivered=True)
    assert len(samples(first)) == 1 and again.dropped == late.dropped == "repeat"
    # a plug without a time of its own saying the same value again (not a redelivery) is a reading
    steady = bridge.translate(p, topic, b"40.25", T0 + 1000)
    assert [s["s"] for s in samples(steady)] == [1]


def test_the_same_timed_message_again_is_a_repeat_even_at_qos_0() -> None:
    p = tas_plug()
    bridge = Bridge([p], boot=1)
    msg = tasmota(iso(T0))
    assert len(samples(bridge.translate(p, TOPIC, msg, T0 + 200))) == 1
    for recv in (T0 + 200, T0 + 201, T0 + 900):  # same ms, next ms, later
        assert bridge.translate(p, TOPIC, msg, recv).dropped == "repeat"
    assert bridge.drops()["plug-srv1"]["repeat"] == 3


def test_a_shelly_status_said_again_is_one_reading_and_no_silence() -> None:
    p = Plug("shelly", "plug2", "plug-srv2", 1.0)
    bridge = Bridge([p], boot=1)
    topic = "plug2/status/switch:0"
    msg = json.dumps({"id": 0, "apower": 0.0, "aenergy": {"total": 5.0, "minute_ts": T0 // 1000}}).encode()
    assert [s["s"] for s in samples(bridge.translate(p, topic, msg, T0 + 1000))] == [0]
    # the same status at QoS 0, a period later each time: the plug is steady, and still reporting
    for k in range(2, 6):
        assert bridge.translate(p, topic, msg, T0 + k * 1000).dropped == "repeat"
    changed = msg.replace(b'"total": 5.0', b'"total": 5.001')
    assert [s["s"] for s in samples(bridge.translate(p, topic, changed, T0 + 6000))] == [1]


def test_a_burst_in_one_millisecond_keeps_every_reading() -> None:
    p = tas_plug()
    bridge = Bridge([p], boot=1)
    # five readings a period apart, queued by the broker, all delivered within the same ms
    got = []
    for k in range(5):
        got += samples(bridge.translate(p, TOPIC, tasmota(iso(T0 + k * 1000), 100.0 + k), T0 + 3500))
    assert [s["s"] for s in got] == [0, 1, 2, 3, 4]  # numbered on the plug's clock: nothing missing
    assert [s["t"] for s in got] == [T0 + 3500 + k for k in range(5)]
    assert [s["W"] for s in got] == [100.0, 101.0, 102.0, 103.0, 104.0]


def test_a_burst_without_plug_time_gets_distinct_stamps_too() -> None:
    p = Plug("esphome", "athom", "plug-srv3", 1.0, options={"sensors": {"W": "power"}})
    bridge = Bridge([p], boot=1)
    got = []
    for k in range(4):
        got += samples(bridge.translate(p, "athom/sensor/power/state", f"{40 + k}".encode(), T0))
    assert len({s["t"] for s in got}) == 4 and [s["W"] for s in got] == [40.0, 41.0, 42.0, 43.0]


def test_stale_messages_are_heard_not_missing() -> None:
    p = tas_plug()
    bridge = Bridge([p], boot=1)
    assert samples(bridge.translate(p, TOPIC, tasmota(iso(T0)), T0))[0]["s"] == 0
    # the collector was held up: ten messages arrive 20 s late, the next is fresh
    for k in range(1, 11):
        assert bridge.translate(p, TOPIC, tasmota(iso(T0 + k * 1000)), T0 + 30_000).dropped == "stale"
    (nxt,) = samples(bridge.translate(p, TOPIC, tasmota(iso(T0 + 11_000)), T0 + 11_100))
    assert nxt["s"] == 1


def test_numbering_goes_on_across_a_restart_and_a_silence_across_it_is_missing() -> None:
    p = tas_plug(zone=None)
    before = Bridge([p], boot=1000)
    for k in range(3):
        samples(before.translate(p, TOPIC, tasmota(iso(T0 + k * 1000), 150 + k), T0 + k * 1000))
    saved = json.loads(json.dumps(before.state()))  # as the status file keeps it
    after = Bridge([p], boot=2000)
    after.restore(saved)
    # the plug was silent for 10 periods across the restart
    first = after.translate(p, TOPIC, tasmota(iso(T0 + 13_000)), T0 + 13_000)
    (s,) = samples(first)
    assert json.loads(first.messages[-1][1])["boot"] == 1000
    assert s["s"] == 2 + 11  # ten numbers skipped: ten missing
    # a redelivery after the restart of a message stored before it is still a repeat
    dup = after.translate(p, TOPIC, tasmota(iso(T0 + 2000), 152), T0 + 13_010, redelivered=True)
    assert dup.dropped == "repeat"


def test_a_damaged_saved_entry_starts_that_plug_afresh() -> None:
    p = tas_plug(zone=None)
    bridge = Bridge([p], boot=7)
    bridge.restore({"plug-srv1": {"boot": "x", "seq": 4}, "gone": {"boot": 1, "seq": 1}})
    out = bridge.translate(p, TOPIC, tasmota(iso(T0)), T0)
    assert samples(out)[0]["s"] == 0 and json.loads(out.messages[-1][1])["boot"] == 7


def test_a_shelly_notification_is_timed_by_its_own_ts_not_a_status_held_from_before(tmp_path: object) -> None:
    """A partial NotifyStatus is laid over the status held from an earlier NotifyFullStatus, whose
    aenergy.minute_ts may be an hour old by then; the reading is the notification's, made at its ts,
    so it is fresh, and a notification whose own ts is old is stale."""
    from pathlib import Path

    path = Path(str(tmp_path)) / "plugs.toml"
    path.write_text(
        "[[plug]]\nformat='shelly'\ntopic='shellyplus1pm-a'\ndev='s1'\nchannel='plug'\nperiod_s=60\nvia='rpc'\n"
    )
    plug = load_plugs(path)[0]
    bridge = Bridge([plug], boot=1)
    topic = "shellyplus1pm-a/events/rpc"

    def note(method: str, ts: float, status: dict[str, object]) -> bytes:
        return json.dumps({"method": method, "params": {"ts": ts, "switch:0": status}}).encode()

    full = {"id": 0, "apower": 150.0, "voltage": 230.0, "aenergy": {"total": 10.0, "minute_ts": T0 // 1000}}
    out = bridge.translate(plug, topic, note("NotifyFullStatus", T0 / 1000, full), T0 + 500)
    assert [s["W"] for s in samples(out)] == [150.0]
    hour = 3_600_000
    later = bridge.translate(
        plug, topic, note("NotifyStatus", (T0 + hour) / 1000, {"apower": 90.0}), T0 + hour
    )
    assert [s["W"] for s in samples(later)] == [90.0] and later.dropped is None
    old = bridge.translate(plug, topic, note("NotifyStatus", T0 / 1000 + 1, {"apower": 80.0}), T0 + 2 * hour)
    assert samples(old) == [] and old.dropped == "stale"
