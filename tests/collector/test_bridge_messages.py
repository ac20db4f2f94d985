"""The bridge's message rules without a broker: a retained or stale message is no sample and a counted
drop; a redelivered or repeated message is one sample whatever its timing; a burst within one
millisecond keeps each reading under its own stamp; a plug's numbering, gap clock and recent messages
go on across a restart of the collector (saved state), so a silence across it is counted missing; for a
plug timed on arrival, a burst the broker queued while the collector was down is not, and a silence
is counted at the plug's next regular message."""

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


# Plugs timed on arrival (no time of their own as fine as the period), reporting every 10 s.
ARRIVAL_TIMED = {
    "shelly": (Plug("shelly", "plug2", "plug-srv2", 10.0), "plug2/status/switch:0"),
    "esphome": (
        Plug("esphome", "athom", "plug-srv3", 10.0, options={"sensors": {"W": "power"}}),
        "athom/sensor/power/state",
    ),
}


def reading(kind: str, sent_ms: int, watts: float) -> bytes:
    if kind == "shelly":
        minute_s = sent_ms // 60_000 * 60
        return json.dumps(
            {"id": 0, "apower": watts, "aenergy": {"total": 5.0, "minute_ts": minute_s}}
        ).encode()
    return f"{watts:g}".encode()


def deliver(bridge: Bridge, kind: str, plan: list[tuple[float, float]]) -> list[dict[str, object]]:
    """plan: when each message was sent and when it arrived, in s after T0; its samples in order."""
    p, topic = ARRIVAL_TIMED[kind]
    got = []
    for sent, arrived in plan:
        msg = reading(kind, T0 + int(sent * 1000), 100.0 + sent / 10)
        out = bridge.translate(p, topic, msg, T0 + int(arrived * 1000))
        assert out.dropped is None and out.reject_detail is None
        got += samples(out)
    return got


def missing(got: list[dict[str, object]]) -> int:
    """What the collector's accounting counts missing in these numbers."""
    numbers = [int(str(s["s"])) for s in got]
    assert numbers == sorted(set(numbers)), numbers  # increasing in arrival order
    return numbers[-1] + 1 - len(numbers)


def live(*sent: float) -> list[tuple[float, float]]:
    return [(s, s + 0.05) for s in sent]


def queued(back: float, *sent: float) -> list[tuple[float, float]]:
    """Messages the broker kept while the collector was down, all delivered when it is back."""
    return [(s, back + k * 0.001) for k, s in enumerate(sent)]


@pytest.mark.parametrize("kind", sorted(ARRIVAL_TIMED))
@pytest.mark.parametrize("back", [31.0, 35.0, 39.99])
def test_a_burst_the_broker_queued_during_an_outage_is_not_missing(kind: str, back: float) -> None:
    """The collector is down from 10.5 s to `back`; the broker keeps the plug's QoS 1 messages of 20 s
    and 30 s and delivers them together when it is back. Nothing was lost, whatever the phase of the
    return against the plug's period (at 39.99 s the live message of 40 s joins the burst)."""
    p, _ = ARRIVAL_TIMED[kind]
    bridge = Bridge([p], boot=1)
    got = deliver(bridge, kind, live(0, 10) + queued(back, 20, 30) + live(40, 50, 60))
    assert [s["s"] for s in got] == list(range(7))
    assert [s["W"] for s in got] == [100.0 + k for k in range(7)]  # each queued message its own sample
    assert len({s["t"] for s in got}) == 7


@pytest.mark.parametrize("kind", sorted(ARRIVAL_TIMED))
def test_a_burst_counts_only_what_the_broker_did_not_have(kind: str) -> None:
    # the plug itself was silent at 20 s and 30 s (never sent); 40 s and 50 s were queued
    p, _ = ARRIVAL_TIMED[kind]
    bridge = Bridge([p], boot=1)
    got = deliver(bridge, kind, live(0, 10) + queued(54, 40, 50) + live(60, 70))
    assert missing(got) == 2
    assert [s["s"] for s in got] == [0, 1, 2, 3, 6, 7]


@pytest.mark.parametrize("kind", sorted(ARRIVAL_TIMED))
def test_a_silence_without_a_queue_is_counted_at_the_next_regular_message(kind: str) -> None:
    # QoS 0, or a plug that was off: 30, 40 and 50 s never came, and nothing was queued
    p, _ = ARRIVAL_TIMED[kind]
    bridge = Bridge([p], boot=1)
    got = deliver(bridge, kind, live(0, 10, 20, 60))
    assert missing(got) == 0  # the message after the silence may be the first of a queued burst
    got += deliver(bridge, kind, live(70))
    assert missing(got) == 3 and [s["s"] for s in got] == [0, 1, 2, 3, 7]


@pytest.mark.parametrize("kind", sorted(ARRIVAL_TIMED))
def test_a_burst_longer_than_the_silence_counts_nothing_missing(kind: str) -> None:
    # the plug reported every 5 s while the collector was down: more messages than the silence held
    p, _ = ARRIVAL_TIMED[kind]
    bridge = Bridge([p], boot=1)
    got = deliver(bridge, kind, live(0, 10) + queued(38, 15, 20, 25, 30, 35) + live(40, 50, 60))
    assert [s["s"] for s in got] == list(range(10))


@pytest.mark.parametrize("kind", sorted(ARRIVAL_TIMED))
def test_a_second_silence_before_the_first_is_settled_is_counted_too(kind: str) -> None:
    # 20 s and 30 s queued, then the plug silent at 40-60 s (lost), then regular again from 70 s
    p, _ = ARRIVAL_TIMED[kind]
    bridge = Bridge([p], boot=1)
    got = deliver(bridge, kind, live(0, 10) + queued(33, 20, 30) + live(70, 80, 90))
    assert missing(got) == 3


def test_a_copy_of_the_latest_status_in_a_burst_is_not_a_message_of_its_own() -> None:
    # each status arrives twice (the plug's QoS 0 and QoS 1 copies), after a silence of three periods
    p, topic = ARRIVAL_TIMED["shelly"]
    bridge = Bridge([p], boot=1)
    got = []
    for k, sent in enumerate((0, 10, 40, 50, 60)):
        msg = reading("shelly", T0 + sent * 1000, 100.0 + k)
        got += samples(bridge.translate(p, topic, msg, T0 + sent * 1000 + 50))
        assert bridge.translate(p, topic, msg, T0 + sent * 1000 + 52).dropped == "repeat"
    assert missing(got) == 2


@pytest.mark.parametrize("kind", sorted(ARRIVAL_TIMED))
@pytest.mark.parametrize("restart_after", [2, 4])
def test_a_burst_is_settled_across_a_restart(kind: str, restart_after: int) -> None:
    """The collector restarts before the queued burst comes (its messages are the restarted one's
    first) or between the burst and the next regular message (the burst's count is saved state)."""
    p, _ = ARRIVAL_TIMED[kind]
    plan = live(0, 10) + queued(45, 20, 30, 40) + live(50, 60)
    before = Bridge([p], boot=1000)
    got = deliver(before, kind, plan[:restart_after])
    after = Bridge([p], boot=2000)
    after.restore(json.loads(json.dumps(before.state())))
    got += deliver(after, kind, plan[restart_after:])
    assert [s["s"] for s in got] == list(range(7))


def test_saved_state_from_before_the_burst_count_still_loads() -> None:
    p, _ = ARRIVAL_TIMED["esphome"]
    before = Bridge([p], boot=1000)
    deliver(before, "esphome", live(0, 10))
    saved = json.loads(json.dumps(before.state()))
    old = {
        k: saved["plug-srv3"][k]
        for k in ("boot", "seq", "last_recv", "last_dev", "last_t", "recent", "drops")
    }
    after = Bridge([p], boot=2000)
    after.restore({"plug-srv3": old})
    got = deliver(after, "esphome", live(20, 50, 60))
    assert [s["s"] for s in got] == [2, 3, 6]


def test_a_plug_on_its_own_clock_counts_a_silence_at_once() -> None:
    p = tas_plug()
    bridge = Bridge([p], boot=1)
    got = []
    for k in (0, 1, 5):
        got += samples(bridge.translate(p, TOPIC, tasmota(iso(T0 + k * 1000)), T0 + k * 1000 + 50))
    assert [s["s"] for s in got] == [0, 1, 5]


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
    # The plug is timed on arrival: this message may open a burst the broker had queued during the
    # restart, so the silence is counted at the next message that comes at the plug's pace.
    assert s["s"] == 3
    (s,) = samples(after.translate(p, TOPIC, tasmota(iso(T0 + 14_000)), T0 + 14_000))
    assert s["s"] == 3 + 11  # ten numbers skipped: ten missing
    # a redelivery after the restart of a message stored before it is still a repeat
    dup = after.translate(p, TOPIC, tasmota(iso(T0 + 2000), 152), T0 + 14_010, redelivered=True)
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
