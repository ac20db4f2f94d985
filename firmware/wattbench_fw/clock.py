"""UTC timestamps for samples: an SNTP-disciplined clock on a board, the OS clock on a host.

MicroPython's ntptime keeps only whole seconds; this module keeps the 32-bit NTP fraction, computes
offset and round-trip delay from the four timestamps (RFC 5905: offset = ((T2-T1) + (T3-T4)) / 2,
delay = (T4-T1) - (T3-T2)), slews small offsets, steps large ones (and flags the next sample), and
estimates the oscillator drift between syncs so it can be corrected until the next one.

All times are integer microseconds; the math is pure and unit-tested on both Pythons.
"""

from wattbench_fw.contract import FLAG_CLOCK_STEP, FLAG_UNSYNCED

NTP_UNIX_DELTA_S = 2208988800  # 1900-01-01 to 1970-01-01
NTP_PACKET_LEN = 48
MODE_CLIENT = 3
MODE_SERVER = 4
VERSION = 4
# Earliest plausible wall clock (2020-01-01); a board RTC before that was never set.
PLAUSIBLE_UTC_US = 1577836800 * 1000000


class NtpError(Exception):
    pass


def to_ntp(us):
    """Unix microseconds -> (NTP seconds, NTP 32-bit fraction)."""
    sec, rem = divmod(us, 1000000)
    return sec + NTP_UNIX_DELTA_S, (rem << 32) // 1000000


def from_ntp(sec, frac):
    """(NTP seconds, fraction) -> Unix microseconds, rounded to the nearest microsecond."""
    return (sec - NTP_UNIX_DELTA_S) * 1000000 + ((frac * 1000000 + (1 << 31)) >> 32)


def _u32(buf, i):
    return (buf[i] << 24) | (buf[i + 1] << 16) | (buf[i + 2] << 8) | buf[i + 3]


def _put_u32(buf, i, v):
    buf[i] = (v >> 24) & 0xFF
    buf[i + 1] = (v >> 16) & 0xFF
    buf[i + 2] = (v >> 8) & 0xFF
    buf[i + 3] = v & 0xFF


def build_request(t1_us):
    """Client packet carrying T1 in the transmit field; the server echoes it as 'originate'."""
    pkt = bytearray(NTP_PACKET_LEN)
    pkt[0] = (0 << 6) | (VERSION << 3) | MODE_CLIENT
    sec, frac = to_ntp(t1_us)
    _put_u32(pkt, 40, sec & 0xFFFFFFFF)
    _put_u32(pkt, 44, frac)
    return bytes(pkt)


def parse_reply(pkt, t1_us):
    """(T2, T3) in Unix microseconds from a server reply; NtpError if it is unusable."""
    if len(pkt) < NTP_PACKET_LEN:
        raise NtpError("short packet")
    li = pkt[0] >> 6
    mode = pkt[0] & 7
    stratum = pkt[1]
    if mode != MODE_SERVER:
        raise NtpError("mode %d is not a server reply" % mode)
    if li == 3 or stratum == 0 or stratum > 15:
        raise NtpError("server unsynchronised (LI %d, stratum %d)" % (li, stratum))
    sec1, frac1 = to_ntp(t1_us)
    if _u32(pkt, 24) != sec1 & 0xFFFFFFFF or _u32(pkt, 28) != frac1:
        raise NtpError("originate timestamp does not match our request")
    t3_sec = _u32(pkt, 40)
    if t3_sec == 0:
        raise NtpError("no transmit timestamp")
    t2 = from_ntp(_u32(pkt, 32), _u32(pkt, 36))
    t3 = from_ntp(t3_sec, _u32(pkt, 44))
    return t2, t3


def offset_delay(t1, t2, t3, t4):
    """Clock offset (server minus local) and round-trip delay, microseconds."""
    return ((t2 - t1) + (t3 - t4)) // 2, (t4 - t1) - (t3 - t2)


class Clock:
    """Maps the monotonic microsecond counter to UTC and disciplines the mapping with SNTP results.

    Until the first sync the board RTC is used if plausible (samples flagged unsynced); otherwise
    utc_us() returns None and the appliance holds samples until a time is known.
    """

    SYNC = "ntp"

    def __init__(self, step_ms=128, slew_ppm=500, max_delay_ms=500, rtc_us=None, mono_now=0):
        self.step_us = step_ms * 1000
        self.slew_ppm = slew_ppm
        self.max_delay_us = max_delay_ms * 1000
        self.base_mono = mono_now
        self.base_utc = rtc_us if rtc_us is not None and rtc_us >= PLAUSIBLE_UTC_US else None
        self.ppm = 0.0  # estimated frequency error of the local oscillator, corrected continuously
        self._frac = 0.0  # sub-microsecond remainder of the rate correction
        self.slew_left = 0  # offset still to be applied gradually, us
        self.synced = False
        self.syncs = 0
        self.steps = 0
        self.last_sync_mono = None
        self.last_offset_us = 0
        self.last_delay_us = 0
        self.ppm_err = 50.0  # uncertainty of self.ppm until two syncs have measured it
        self._step_pending = False
        self.rejected = 0

    # ---- reading the clock ----------------------------------------------------------------

    def _advance(self, mono):
        dt = mono - self.base_mono
        if dt <= 0:
            return
        self._frac += dt * self.ppm * 1e-6
        adj = int(self._frac)
        self._frac -= adj
        slew = 0
        if self.slew_left:
            limit = dt * self.slew_ppm // 1000000 + 1
            slew = max(-limit, min(limit, self.slew_left))
            self.slew_left -= slew
        self.base_utc += dt + adj + slew
        self.base_mono = mono

    def utc_us(self, mono):
        """UTC microseconds at monotonic time `mono`, or None if no time is known yet."""
        if self.base_utc is None:
            return None
        if mono >= self.base_mono:
            self._advance(mono)
            return self.base_utc
        # A past instant (a sample held while the clock was unknown): extrapolate backwards.
        back = self.base_mono - mono
        return self.base_utc - back - int(back * self.ppm * 1e-6)

    def local_us(self, mono):
        """This clock's reading for NTP's T1/T4: UTC if known, else the monotonic counter."""
        u = self.utc_us(mono)
        return mono if u is None else u

    def sample_flags(self):
        """Flags for the next sample: unsynced while free-running, clock_step once after a step."""
        f = 0
        if not self.synced:
            f |= FLAG_UNSYNCED
        if self._step_pending:
            f |= FLAG_CLOCK_STEP
            self._step_pending = False
        return f

    # ---- disciplining -----------------------------------------------------------------------

    def apply(self, t1, t2, t3, t4, mono4):
        """Use one SNTP exchange. t1/t4 are local_us() readings at send/receive, mono4 = mono at t4.

        Returns "set", "step", "slew" or "rejected".
        """
        offset, delay = offset_delay(t1, t2, t3, t4)
        if delay < 0 or delay > self.max_delay_us:
            self.rejected += 1
            return "rejected"
        self.last_delay_us = delay
        self.last_offset_us = offset
        if self.base_utc is None:
            # First time ever: t1/t4 were monotonic readings, so mono4 + offset is UTC at mono4.
            self.base_mono = mono4
            self.base_utc = t4 + offset
            self._frac = 0.0
            result = "set"
        elif abs(offset) > self.step_us:
            # Includes the first sync after running on the RTC: earlier samples used its timeline.
            self._step(offset, mono4)
            result = "step"
        else:
            if self.synced and self.last_sync_mono is not None:
                interval = mono4 - self.last_sync_mono
                if interval >= 30 * 1000000:
                    # What is left after slewing the previous offset is frequency error.
                    correction = offset / interval * 1e6
                    self.ppm = max(-500.0, min(500.0, self.ppm + 0.7 * correction))
                    self.ppm_err = max(2.0, abs(correction))
            self.utc_us(mono4)
            self.slew_left = offset
            result = "slew"
        self.synced = True
        self.syncs += 1
        self.last_sync_mono = mono4
        return result

    def _step(self, offset, mono4):
        self.utc_us(mono4)
        self.base_utc += offset
        self.slew_left = 0
        self.steps += 1
        self._step_pending = True

    def status(self, mono):
        """The contract's clock object."""
        if not self.synced:
            out = {"sync": "free"}
            if self.steps:
                out["steps"] = self.steps
            return out
        age_s = (mono - self.last_sync_mono) / 1e6
        err_ms = self.last_delay_us / 2000 + age_s * self.ppm_err * 1e-3 + abs(self.slew_left) / 1000
        return {
            "sync": "ntp",
            "age": round(age_s, 1),
            "off": round(self.last_offset_us / 1000, 3),
            "err": round(err_ms, 3),
            "ppm": round(self.ppm, 2),
            "steps": self.steps,
        }


class SntpClient:
    """Blocking SNTP query with a short timeout (the caller feeds the watchdog around it)."""

    def __init__(self, host, port_no=123, timeout_ms=1000):
        self.host = host
        self.port_no = port_no
        self.timeout_ms = timeout_ms
        self._addr = None

    def sync(self, clock, mono):
        import socket

        if self._addr is None:
            self._addr = socket.getaddrinfo(self.host, self.port_no)[0][-1]
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.settimeout(self.timeout_ms / 1000)
            t1 = clock.local_us(mono.now())
            s.sendto(build_request(t1), self._addr)
            pkt = s.recv(NTP_PACKET_LEN)
            m4 = mono.now()
            t4 = clock.local_us(m4)
        finally:
            s.close()
        t2, t3 = parse_reply(pkt, t1)
        return clock.apply(t1, t2, t3, t4, m4)
