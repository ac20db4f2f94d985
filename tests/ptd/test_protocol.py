"""The PTDaemon protocol as pure functions: commands, replies, samples and log lines, with no socket.

The reply shapes are the ones MLCommons power-dev's server and its compliance/check.py read
(../shared/power-dev/ptd_client_server/lib/server.py and compliance/check.py)."""

from __future__ import annotations

import re

import pytest

from wattbench.ptd.protocol import (
    GO_REPLY,
    GREETING,
    INVALID_PARAMS,
    NO_MEASUREMENT,
    STOP_REPLY,
    UNKNOWN,
    PtdState,
    identity,
    parse_command,
)
from wattbench.ptd.ranges import MeterRanges, lookup
from wattbench.ptd.samples import Channel, Reading, aggregate, stamp
from wattbench.ptd.source import (
    SourceError,
    meter_from_meta,
    parse_device_port,
    readings_from_batch,
)

T0 = 1_764_115_200_000  # 2025-11-26 00:00:00 UTC
# power-dev's own pattern for a log line (server.py, RE_PTD_LOG).
RE_PTD_LOG = re.compile(
    r"^Time,[^,]*,Watts,[^,]*,Volts,(?P<v>[^,]*),Amps,(?P<a>[^,]*),PF,[^,]*,Mark,(?P<mark>[^,]*)"
)


LAG = 2000


def reading(t: int, w: float = 150.0, ch: int = 0) -> Reading:
    return Reading(t, w, 230.0, w / (230.0 * 0.95), 0.95, ch)


def second(s: PtdState, end: int, *readings: Reading) -> list[str]:
    """Feed the readings and close the second that ends at `end`; the log lines it gave."""
    s.add(list(readings))
    assert not s.due(end + LAG - 1)
    assert s.due(end + LAG)
    return s.tick(end + LAG).log


SIM = lookup("sim")
assert isinstance(SIM, MeterRanges)


def state(channels: int = 1) -> PtdState:
    assert isinstance(SIM, MeterRanges)
    chans = tuple(Channel(f"dev/ch{i}" if channels > 1 else "dev/ch", SIM) for i in range(channels))
    return PtdState(identity("0.1.0", "meter sim", "dev/ch"), "dev/ch", chans, silence_s=5.0, lag_ms=LAG)


def reply(s: PtdState, line: str, t: int = T0, silent: float | None = 0.1) -> list[str]:
    return s.handle(line, t, silent).reply


def test_stamp_is_ptdaemons_utc_format() -> None:
    assert stamp(T0 + 45_678) == "11-26-2025 00:00:45.678"


def test_the_session_power_dev_runs() -> None:
    s = state()
    assert reply(s, "Hello") == [GREETING]
    ident = reply(s, "Identify")[0]
    assert ident.split(",")[0] == "wattbench" and "version=0.1.0-" in ident
    assert reply(s, "RR") == ["Ranges,1,-1.000000,1,-1.000000"]
    assert reply(s, "SR,V,Auto") == ["Range V changed"]
    assert reply(s, "SR,A,Auto") == ["Range A changed"]
    out = s.handle("Go,1000,0,sess_ranging", T0, 0.1)
    assert out.reply == [GO_REPLY] and s.running
    assert out.console[0] == f"{stamp(T0)}: Go with mark 'sess_ranging'"
    logs = []
    for i in range(1, 4):
        end = T0 + 1000 * i
        logs += second(s, end, reading(end - 600, 149.0), reading(end - 100, 151.0))
    for line in logs:
        m = RE_PTD_LOG.match(line)
        assert m is not None and m["mark"] == "sess_ranging"
    assert logs[0] == (
        f"Time,{stamp(T0 + 1000)},Watts,150.000000,Volts,230.000000,Amps,0.686499,PF,0.950000,Mark,sess_ranging"
    )
    stop = s.handle("Stop", T0 + 5500, 0.1)
    assert stop.reply == [STOP_REPLY]
    assert f"{stamp(T0 + 5500)}: Completed test" in stop.console
    # Auto ranging: the highest readings of the run are reported as the ranges.
    assert reply(s, "RR") == ["Ranges,1,0.686499,1,230.000000"]
    assert reply(s, "RL,*,*") == [INVALID_PARAMS]
    rl = reply(s, "RL")
    assert rl[0] == "Last 3 samples" and len(rl) == 4
    assert all(line.startswith("Time,") and ",Mark," not in line for line in rl[1:])
    assert reply(s, "RL") == ["Last 0 samples"]  # RL gives the unread samples
    assert reply(s, "RL,2")[0] == "Last 2 samples"
    assert reply(s, "Watts") == ["Watts,150.000000,150.000000,150.000000,3,0"]
    # Auto ranging holds 230 V and 0.6865 A on the 300 V and 1 A ranges: 0.1 % + 0.05 % x 300 / 150.
    assert reply(s, "Uncertainty") == ["Uncertainty,0.200000,0.200000,0"]
    # Testing: fixed ranges from the ranging run.
    assert reply(s, "SR,V,230.000000") == ["Range V changed"]
    assert reply(s, "SR,A,0.7551489") == ["Range A changed"]
    # The ranges in force: the meter's next ranges up, as an analyzer reports them.
    assert reply(s, "RR") == ["Ranges,0,1.000000,0,300.000000"]
    assert reply(s, "Go,1000,0,sess_testing") == [GO_REPLY]
    assert reply(s, "Stop") == [STOP_REPLY]
    assert reply(s, "Stop") == [NO_MEASUREMENT]


def test_every_reply_is_shown_on_the_console() -> None:
    s = state()
    out = s.handle("Hello", T0, None)
    assert out.console == [f"{stamp(T0)}: Response to client sent: {GREETING}"]


def test_a_second_without_readings_is_a_missed_sample() -> None:
    s = state()
    s.handle("Go,1000,0,m", T0, 0.1)
    out = s.tick(T0 + 1000 + LAG)
    assert out.log == [
        f"Time,{stamp(T0 + 1000)},Watts,-2.000000,Volts,-2.000000,Amps,-2.000000,PF,-2.000000,Mark,m"
    ]
    # A second without a reading is a hole in the measured energy: an ERROR line, which check.py fails
    # outside the ranging run, and never a filled-in value.
    assert (
        f"{stamp(T0 + 1000)}: ERROR: No samples from dev/ch for 1.0 s: the meter is silent, sample invalid"
        in (out.console)
    )
    out = s.tick(T0 + 2000 + LAG)
    assert any("No samples from dev/ch for 2.0 s" in line for line in out.console)
    s.handle("Stop", T0 + 2100, 0.1)
    s.handle("Go,1000,0,m", T0 + 3000, 0.1)
    s.tick(T0 + 4000 + LAG)
    second(s, T0 + 5000, reading(T0 + 4500, 100.0))
    assert reply(s, "Watts", T0 + 7100) == ["Watts,100.000000,100.000000,100.000000,1,1"]


def test_a_late_wakeup_still_gives_one_sample_for_each_second() -> None:
    s = state()
    s.handle("Go,1000,0,m", T0, 0.1)
    s.add([reading(T0 + 500, 100.0), reading(T0 + 1500, 200.0), reading(T0 + 2500, 300.0)])
    out = s.tick(T0 + 3000 + LAG + 400)
    assert [line.split(",")[3] for line in out.log] == ["100.000000", "200.000000", "300.000000"]
    assert s.next_tick_ms == T0 + 4000


def test_readings_count_in_the_second_they_were_taken_whenever_they_arrive() -> None:
    s = state()
    s.add([reading(T0 - 10, 999.0)])  # no measurement yet: not kept
    s.handle("Go,1000,0,m", T0, 0.1)
    # One batch brings a reading from before Go, the end of the first second and the second's start.
    s.add(
        [
            reading(T0 - 5, 999.0),
            reading(T0 + 900, 100.0),
            reading(T0 + 1000, 110.0),
            reading(T0 + 1200, 50.0),
        ]
    )
    assert s.tick(T0 + 1000 + LAG - 1).log == []
    first = s.tick(T0 + 1000 + LAG).log
    assert first[0].split(",")[1:4] == [stamp(T0 + 1000), "Watts", "105.000000"]
    # A reading of the first second that arrives after it was closed does not change it.
    s.add([reading(T0 + 950, 999.0), reading(T0 + 1900, 70.0)])
    assert s.tick(T0 + 2000 + LAG).log[0].split(",")[3] == "60.000000"


def test_sr_picks_the_meters_next_range_up_and_refuses_one_above_its_largest() -> None:
    s = state()
    out = s.handle("SR,A,0.7551", T0, 0.1)
    # power-dev's check.py wants this reply word for word; the console says which range was taken.
    assert out.reply == ["Range A changed"]
    assert f"{stamp(T0)}: Range A set to 1.000000 (asked 0.755100: the next range up of sim)" in out.console
    assert reply(s, "RR") == ["Ranges,0,1.000000,1,-1.000000"]
    assert reply(s, "SR,V,230") == ["Range V changed"]
    assert reply(s, "RR") == ["Ranges,0,1.000000,0,300.000000"]
    assert reply(s, "SR,A,1000") == ["Error: A range 1000.000000 is above the largest range of dev/ch, 20 A"]
    assert reply(s, "SR,V,100000") == [
        "Error: V range 100000.000000 is above the largest range of dev/ch, 600 V"
    ]
    assert reply(s, "RR") == ["Ranges,0,1.000000,0,300.000000"]  # a refused SR changes nothing
    assert reply(s, "SR,A,Auto") == ["Range A changed"]
    assert reply(s, "RR") == ["Ranges,1,-1.000000,0,300.000000"]


def test_a_reading_above_the_set_range_is_ptdaemons_error_and_an_invalid_sample() -> None:
    s = state()
    reply(s, "SR,A,0.3")  # the 0.5 A range
    s.handle("Go,1000,0,m", T0, 0.1)
    s.add([reading(T0 + 500, 150.0)])  # 0.69 A
    out = s.tick(T0 + 1000 + LAG)
    # PTDaemon's line (check.py, COMMON_ERROR_RANGING) and its invalid sample (power-dev issue #219).
    assert f"{stamp(T0 + 1000)}: ERROR: Current appears to be too high for set range" in out.console
    assert out.log == [
        f"Time,{stamp(T0 + 1000)},Watts,-1.000000,Volts,230.000000,Amps,-1.000000,PF,-1.000000,Mark,m"
    ]
    second(s, T0 + 2000, reading(T0 + 1500, 100.0))  # 0.46 A: within the range
    assert reply(s, "Watts", T0 + 4100) == ["Watts,100.000000,100.000000,100.000000,1,1"]


def test_uncertainty_from_reading_and_range_warns_above_one_percent_in_ptdaemons_words() -> None:
    s = state()
    reply(s, "SR,A,1")
    reply(s, "SR,V,300")
    s.handle("Go,1000,0,m", T0, 0.1)
    s.add([reading(T0 + 500, 20.0)])
    out = s.tick(T0 + 1000 + LAG)
    # 0.1 % of reading + 0.05 % of the 300 W range, at 20 W: 0.85 %.
    assert not any("Uncertainty" in line for line in out.console)
    s.add([reading(T0 + 1500, 10.0)])
    out = s.tick(T0 + 2000 + LAG)
    # At 10 W: 0.1 % + 0.05 % x 300 / 10 = 1.6 %.
    warning = (
        f"{stamp(T0 + 2000)}: WARNING: Uncertainty 1.60%, which is above 1.00% limit for the last sample!"
    )
    assert warning in out.console
    # check.py's own pattern (WARNING_NEEDS_TO_BE_ERROR_TESTING_RE) on what follows "WARNING:".
    assert re.search(r"Uncertainty \d+.\d+%, which is above 1.00% limit for the last sample!", warning)
    mean = (20 * 0.0085 + 10 * 0.016) / 30
    assert reply(s, "Uncertainty", T0 + 4100) == [f"Uncertainty,{100 * mean:.6f},1.600000,0"]


# Both channels on the 300 V x 0.5 A ranges (150 W): 100 W and 50 W.
SUM_U = 100 * (100 * (0.001 + 0.0005 * 150 / 100) + 50 * (0.001 + 0.0005 * 150 / 50)) / 150


def test_multichannel_rl_gives_the_sum_then_each_channel_as_power_dev_parses_it() -> None:
    s = state(2)
    s.handle("Go,1000,0,m", T0, 0.1)
    s.add([reading(T0 + 500, 100.0, ch=0), reading(T0 + 500, 50.0, ch=1)])
    out = s.tick(T0 + 1000 + LAG)
    # The -l log holds the sum line only, with the channels' highest volts and amps, which is what
    # power-dev's ranging parses for a one-channel device type.
    assert out.log == [
        f"Time,{stamp(T0 + 1000)},Watts,150.000000,Volts,230.000000,Amps,0.457666,PF,-1.000000,Mark,m"
    ]
    rl = reply(s, "RL,*,*", T0 + 3100)
    assert rl[0] == "Last 1 samples"
    assert rl[1] == (
        f"Time,{stamp(T0 + 1000)},Watts,150.000000,Volts,230.000000,Amps,0.457666,PF,-1.000000,"
        "Watts,100.000000,Volts,230.000000,Amps,0.457666,PF,0.950000,"
        "Watts,50.000000,Volts,230.000000,Amps,0.228833,PF,0.950000"
    )
    # The line power-dev's server makes of it (lib/server.py, Session.stop) is what its
    # max_volts_amps_avg_watts reads in its own test (tests/unit/test_server.py): Mark, then Ch1, Ch2.
    temp = rl[1].split("Watts")
    assert len(temp) == 4
    # A channel that misses a second makes the sum invalid, never a sum of the channels left.
    s.add([reading(T0 + 1500, 100.0, ch=0)])
    out = s.tick(T0 + 2000 + LAG)
    assert out.log[0].split(",")[3] == "-2.000000"
    assert any("No samples from dev/ch1" in line and "(channel 2, dev/ch1)" in line for line in out.console)
    # The sum's uncertainty: the channels' absolute errors added.
    assert reply(s, "Uncertainty", T0 + 4100) == [f"Uncertainty,{SUM_U:.6f},{SUM_U:.6f},0"]


def test_dc_mode_reads_with_dc_rl() -> None:
    row = lookup("simdc")
    assert isinstance(row, MeterRanges) and row.dc
    s = PtdState("id", "simdc:24", (Channel("simdc:24", row),), lag_ms=LAG, dc=True)
    s.handle("Go,1000,0,m", T0, 0.1)
    s.add([Reading(T0 + 500, 24.0, 12.0, 2.0)])
    s.tick(T0 + 1000 + LAG)
    # power-dev asks RL,*,* and, on "Unknown command", DC-RL (lib/server.py, grab_power_data).
    assert reply(s, "RL,*,*") == [UNKNOWN]
    assert reply(s, "RL") == [UNKNOWN]
    assert reply(s, "DC-RL") == [
        "Last 1 samples",
        f"Time,{stamp(T0 + 1000)},Watts,24.000000,Volts,12.000000,Amps,2.000000,PF,-1.000000",
    ]
    # 0.1 % + 0.2 % of the 15 V x 2 A range at 24 W.
    assert reply(s, "Uncertainty") == [
        f"Uncertainty,{100 * (0.001 + 0.002 * 30 / 24):.6f},{100 * (0.001 + 0.002 * 30 / 24):.6f},0"
    ]


def test_a_silent_source_gets_error_replies() -> None:
    s = state()
    assert reply(s, "Go,1000,0,m", silent=None) == ["Error: no samples from dev/ch yet"]
    assert reply(s, "Go,1000,0,m", silent=7.25) == ["Error: no samples from dev/ch for 7.2 s"]
    assert reply(s, "Go,1000,0,m", silent=0.2) == [GO_REPLY]
    second(s, T0 + 1000, reading(T0 + 500))
    assert reply(s, "Watts", silent=6.0) == ["Error: no samples from dev/ch for 6.0 s"]
    assert reply(s, "Uncertainty", silent=6.0) == ["Error: no samples from dev/ch for 6.0 s"]
    # RL still answers, so power-dev can read what was measured.
    assert reply(s, "RL", silent=6.0)[0] == "Last 1 samples"


def test_a_client_that_goes_away_ends_the_measurement() -> None:
    s = state()
    s.handle("Go,1000,0,m", T0, 0.1)
    lines = s.disconnected(T0 + 1500)
    assert any("Completed test" in line for line in lines)
    assert any("Client disconnected during measurement 'm'" in line for line in lines)
    assert not s.due(T0 + 5000)
    assert reply(s, "Stop") == [NO_MEASUREMENT]
    assert s.disconnected(T0 + 6000) == []


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ("", "Error: empty command"),
        ("   ", "Error: empty command"),
        ("Bogus", UNKNOWN),
        ("hello", UNKNOWN),
        ("Hello,1", INVALID_PARAMS),
        ("SR,V", INVALID_PARAMS),
        ("SR,X,1", "Error: SR sets V or A, not 'X'"),
        ("SR,V,-3", "Error: range '-3' is not Auto or a positive number"),
        ("SR,A,nan", "Error: range 'nan' is not Auto or a positive number"),
        ("SR,A,inf", "Error: range 'inf' is not Auto or a positive number"),
        ("Go,1000,0", INVALID_PARAMS),
        ("Go,abc,0,m", "Error: Go takes an interval in ms and a number of rampup samples"),
        ("Go,500,0,m", "Error: only 1000 ms samples are supported"),
        ("Go,1000,3,m", "Error: only 0 rampup samples are supported"),
        ("Go,1000,0,", "Error: Go needs a mark"),
        ("RL,0", "Error: RL takes a number of samples of at least 1"),
        ("RL,x", "Error: RL takes a number of samples of at least 1"),
        ("Watts\x00", "Error: command holds control characters"),
        ("Go" + "," * 2000, "Error: command longer than 1024 characters"),
    ],
)
def test_malformed_commands_get_an_error_reply(line: str, error: str) -> None:
    assert parse_command(line).error == error
    s = state()
    assert reply(s, line) == [error]
    assert s.measurement is None


def test_go_while_running_is_refused() -> None:
    s = state()
    reply(s, "Go,1000,0,a")
    assert reply(s, "Go,1000,0,b") == ["Error: measurement 'a' is running; Stop it first"]


def test_watts_and_uncertainty_before_any_measurement() -> None:
    s = state()
    assert reply(s, "Watts") == ["Error: no measurement yet"]
    assert reply(s, "Uncertainty") == ["Error: no measurement yet"]
    assert reply(s, "RL") == ["Last 0 samples"]


def test_aggregate_means() -> None:
    s = aggregate([Reading(T0, 100.0, 230.0, 0.5, 0.9), Reading(T0, 300.0, 232.0, 1.5, 1.0)])
    assert (s.watts, s.volts, s.amps, s.pf) == (200.0, 231.0, 1.0, 0.95)
    # A quantity the meter does not give is -1.
    s = aggregate([Reading(T0, 50.0), Reading(T0, float("nan"))])
    assert (s.watts, s.volts, s.amps, s.pf, s.readings) == (50.0, -1.0, -1.0, -1.0, 1)


def test_identity_never_claims_a_yokogawa_or_a_ptdaemon_version() -> None:
    ident = identity("0.1.0", "meter wt300, model WT310E", "bench/mains")
    fields = ident.split(",")
    assert fields[0] == "wattbench"
    assert "meter wt300  model WT310E" in fields  # a comma in a value cannot add a field
    assert re.search(r"(?<=version=)(.+?)-", ident).group(1) == "0.1.0"  # type: ignore[union-attr]
    assert ident.endswith("not SPEC PTDaemon")


def test_device_ports() -> None:
    spec = parse_device_port("bench-01/mains@127.0.0.1:1884")
    assert (spec.kind, spec.dev, spec.channel, spec.broker) == ("mqtt", "bench-01", "mains", "127.0.0.1:1884")
    assert parse_device_port("sim:150").watts == (150.0,)
    assert parse_device_port("sim:150,80").label == "sim:150,80"
    assert parse_device_port("simdc:24").kind == "simulated-dc"
    assert parse_device_port("a/x,y,b/z@host").targets == (("a", "x"), ("a", "y"), ("b", "z"))
    assert parse_device_port("a@host", (1, 2)).targets == (("a", ""), ("a", ""))
    for bad in (
        "COM1",
        "dev@host",
        "/ch@host",
        "dev/ch@",
        "dev/c h@host",
        "dev/ch@host:99999",
        "sim:x",
        "sim:-1",
        "a/x,x@host",
    ):
        with pytest.raises(SourceError):
            parse_device_port(bad)


def test_readings_from_a_samples_message() -> None:
    batch = (
        b'{"v":1,"dev":"d","boot":1,"clk":"ntp","samples":['
        b'{"s":1,"t":1,"c":"ch","W":150.5,"V":230,"A":0.69,"PF":0.95,"u":0.005},'
        b'{"s":2,"t":1,"c":"other","W":10},'
        b'{"s":3,"t":1,"c":"ch","W":-1},'
        b'{"s":4,"t":1,"c":"ch","W":true},'
        b'{"s":5,"t":1,"c":"ch","W":120,"f":["ovr"]},'
        b'{"s":6,"t":1,"c":"ch","W":100,"u":7},'
        b'{"s":7,"t":"1","c":"ch","W":100}]}'
    )
    readings, refused = readings_from_batch(batch, "d", {"ch": 0, "other": 1})
    assert readings == [
        Reading(1, 150.5, 230.0, 0.69, 0.95, 0),
        Reading(1, 10.0, None, None, None, 1),
        Reading(1, 100.0, None, None, None, 0),
    ]
    assert refused == 4
    for junk in (
        b"",
        b"not json",
        b"[]",
        b'{"dev":"other","samples":[]}',
        b'{"dev":"d","samples":3}',
        b"\xff",
    ):
        assert readings_from_batch(junk, "d", {"ch": 0}) == ([], 1)


def test_meter_from_meta() -> None:
    meta = (
        b'{"channels":[{"c":"x","meter":"pzem004t"},{"c":"ch","meter":"wt300","model":"WT310E","acc":0.001}]}'
    )
    assert meter_from_meta(meta, "ch") == "meter wt300 model WT310E accuracy 0.1%"
    assert meter_from_meta(meta, "none") is None
    assert meter_from_meta(b"{", "ch") is None
