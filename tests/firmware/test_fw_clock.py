"""Clock discipline: NTP timestamp math with the fraction kept, offset/delay, step vs slew, drift
estimation between syncs, and the contract's clock object."""

from __future__ import annotations

import pytest

import wattbench_schema as schema
from wattbench_fw import clock as clk
from wattbench_fw.contract import FLAG_CLOCK_STEP, FLAG_UNSYNCED
from wattbench_fw.host import HostClock

T0 = 1_763_709_600_123_456  # 2025-11-21T07:20:00.123456Z in microseconds


def server_reply(t1: int, t2: int, t3: int, mode: int = 4, stratum: int = 2, li: int = 0) -> bytes:
    pkt = bytearray(48)
    pkt[0] = (li << 6) | (4 << 3) | mode
    pkt[1] = stratum
    s1, f1 = clk.to_ntp(t1)
    pkt[24:32] = s1.to_bytes(4, "big") + f1.to_bytes(4, "big")
    s2, f2 = clk.to_ntp(t2)
    pkt[32:40] = s2.to_bytes(4, "big") + f2.to_bytes(4, "big")
    s3, f3 = clk.to_ntp(t3)
    pkt[40:48] = s3.to_bytes(4, "big") + f3.to_bytes(4, "big")
    return bytes(pkt)


def test_ntp_timestamps_keep_the_fraction() -> None:
    sec, frac = clk.to_ntp(T0)
    assert sec == T0 // 1_000_000 + 2_208_988_800
    assert frac == (123_456 << 32) // 1_000_000
    for us in (T0, T0 + 1, T0 + 999_999, 0, 1_577_836_800_000_000):
        assert clk.from_ntp(*clk.to_ntp(us)) == us
    # half a second exactly is 0x80000000 in NTP's 32-bit fraction
    assert clk.from_ntp(3_000_000_000, 0x80000000) == (3_000_000_000 - 2_208_988_800) * 1_000_000 + 500_000


def test_request_and_reply() -> None:
    req = clk.build_request(T0)
    assert len(req) == 48 and req[0] == 0x23  # LI 0, version 4, mode 3 (client)
    assert clk.from_ntp(int.from_bytes(req[40:44], "big"), int.from_bytes(req[44:48], "big")) == T0
    t2, t3 = clk.parse_reply(server_reply(T0, T0 + 5_250, T0 + 5_300), T0)
    assert (t2, t3) == (T0 + 5_250, T0 + 5_300)


@pytest.mark.parametrize(
    ("kwargs", "why"),
    [
        ({"mode": 3}, "mode"),
        ({"stratum": 0}, "unsynchronised"),
        ({"li": 3}, "unsynchronised"),
        ({"stratum": 16}, "stratum"),
    ],
)
def test_unusable_replies_are_rejected(kwargs: dict[str, int], why: str) -> None:
    with pytest.raises(clk.NtpError, match=why):
        clk.parse_reply(server_reply(T0, T0, T0, **kwargs), T0)


def test_stale_or_spoofed_reply_is_rejected() -> None:
    with pytest.raises(clk.NtpError, match="originate"):
        clk.parse_reply(server_reply(T0 - 1_000_000, T0, T0), T0)
    with pytest.raises(clk.NtpError, match="short"):
        clk.parse_reply(b"\x24" * 20, T0)


def test_offset_and_delay() -> None:
    # client 100 ms behind, 40 ms round trip split evenly, 2 ms server processing
    t1 = 0
    t2 = 100_000 + 19_000
    t3 = t2 + 2_000
    t4 = 40_000
    assert clk.offset_delay(t1, t2, t3, t4) == (100_000, 38_000)


def sync(c: clk.Clock, mono: int, true_us: int, rtt: int = 2_000) -> str:
    """One exchange against a perfect server that reads `true_us` at the midpoint."""
    t1 = c.local_us(mono)
    t4 = c.local_us(mono + rtt)
    return c.apply(t1, true_us, true_us, t4, mono + rtt)


def test_first_sync_sets_the_clock_and_clears_unsynced() -> None:
    c = clk.Clock()
    assert c.utc_us(5_000_000) is None
    assert c.sample_flags() == FLAG_UNSYNCED
    assert c.status(0) == {"sync": "free"}
    assert sync(c, 5_000_000, T0) == "set"
    assert abs(c.utc_us(5_002_000) - (T0 + 1_000)) <= 1
    assert c.sample_flags() == 0
    assert c.utc_us(6_002_000) - c.utc_us(5_002_000) == 1_000_000


def test_rtc_time_is_used_unsynced_and_then_stepped() -> None:
    c = clk.Clock(rtc_us=T0 - 3_000_000, mono_now=0)
    assert c.utc_us(0) == T0 - 3_000_000
    assert c.sample_flags() == FLAG_UNSYNCED
    assert sync(c, 1_000_000, T0 + 1_000_000) == "step"
    assert c.sample_flags() == FLAG_CLOCK_STEP  # exactly once
    assert c.sample_flags() == 0
    assert c.steps == 1


def test_small_offsets_are_slewed_not_stepped() -> None:
    c = clk.Clock(step_ms=128, slew_ppm=500)
    sync(c, 0, T0)
    m = 10_000_000
    assert sync(c, m, T0 + m + 1_000 + 50_000, rtt=0) == "slew"  # 50 ms behind
    before = c.utc_us(m)
    # at 500 ppm, 50 ms takes 100 s to absorb; after 20 s about 10 ms are in
    after = c.utc_us(m + 20_000_000)
    assert 20_000_000 + 9_000 <= after - before <= 20_000_000 + 11_000
    later = c.utc_us(m + 200_000_000)
    assert abs(later - (T0 + 1_000 + 50_000 + m + 200_000_000)) <= 10
    assert c.sample_flags() == 0 and c.steps == 0


def test_large_offset_steps_and_flags_the_next_sample() -> None:
    c = clk.Clock(step_ms=128)
    sync(c, 0, T0)
    assert sync(c, 60_000_000, T0 + 1_000 + 60_000_000 + 2_004_000, rtt=0) == "step"
    assert abs(c.utc_us(60_000_000) - (T0 + 1_000 + 60_000_000 + 2_004_000)) <= 2
    assert c.sample_flags() == FLAG_CLOCK_STEP
    status = c.status(60_000_000)
    assert status["steps"] == 1 and status["off"] == 2006.0  # the first sync set the clock 1 ms early


def test_drift_is_estimated_and_corrected() -> None:
    """An oscillator 40 ppm fast: after a few syncs the clock tracks true time between syncs."""
    rate = 1 - 40e-6  # true seconds per local second
    c = clk.Clock()
    true_at = lambda m: T0 + int(m * rate)  # noqa: E731
    m = 0
    sync(c, m, true_at(m + 1_000))
    errors = []
    for _ in range(12):
        m += 64_000_000
        # just before syncing: how far off did the clock get over 64 s?
        errors.append(c.utc_us(m) - true_at(m))
        sync(c, m, true_at(m + 1_000))
    assert abs(c.ppm + 40) < 4
    assert abs(errors[0]) > 2_000  # ~2.5 ms off before drift was known
    assert max(abs(e) for e in errors[-4:]) < 300  # under 0.3 ms between syncs once corrected


def test_high_delay_exchange_is_rejected() -> None:
    c = clk.Clock(max_delay_ms=100)
    assert sync(c, 0, T0, rtt=250_000) == "rejected"
    assert c.utc_us(0) is None and c.rejected == 1


def test_status_object_validates() -> None:
    c = clk.Clock()
    sync(c, 0, T0)
    sync(c, 64_000_000, T0 + 64_000_000)
    status = c.status(90_000_000)
    assert status["sync"] == "ntp" and status["age"] == 26.0
    validator = schema.jsonschema_validator("status")
    validator.validate({"v": 1, "dev": "a", "state": "online", "clk": status})


def test_host_clock_and_injected_step() -> None:
    fake = [T0]
    c = HostClock(now_us=lambda: fake[0])
    assert c.utc_us() == T0 and c.status() == {"sync": "host"} and c.sample_flags() == 0
    c.inject_step(1500)
    assert c.utc_us() == T0 + 1_500_000
    assert c.sample_flags() == FLAG_CLOCK_STEP and c.sample_flags() == 0
    assert c.status() == {"sync": "host", "steps": 1, "off": 1500.0}
