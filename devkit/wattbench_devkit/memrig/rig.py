# The whole appliance under MicroPython with simulated time, fake buses and a fake broker, measuring
# the GC heap. Runs as the program of mpy.py; DATA holds the job (see memory_rig.py).
#
# Time: port's ticks/sleep functions are replaced by a counter that only moves when the firmware
# sleeps or waits (and by a fixed cost per bus transaction and loop turn), so 10 minutes of sampling
# take seconds. The broker is a socket stand-in that answers CONNACK, PUBACK and PINGRESP, and SNTP.
import gc
import sys

import micropython

JOB = DATA
DATA = None
FIXED_HEAP = JOB.get("fixed_heap", False)
MB = 1 << 20
T = [1000000]  # simulated monotonic microseconds
UTC0 = 1767225600000000  # 2026-01-01T00:00:00Z
DOWN = [False]  # the network outage switch
STATS = {
    "live_peak": 0,
    "live_peak_at": "",
    "probes": 0,
    "peak": 0,
    "peak_where": "",
    "turns": 0,
    "turn_max": 0,
    "turn_max_at": "",
}


def probe(where):
    """Heap in use here. Garbage is only freed between loop turns (see mpy_runner.mjs), so this
    is an upper bound of the live heap: what lived at the turn's start plus all the turn allocated."""
    a = gc.mem_alloc()
    STATS["probes"] += 1
    if a > STATS["peak"]:
        STATS["peak"] = a
        STATS["peak_where"] = "%s at %ds (phase %d)" % (where, (T[0] - RIG["start"]) // S, RIG["phase"])
    return a


# ---- simulated time ------------------------------------------------------------------------------


def ticks_us():
    return T[0]


def ticks_ms():
    return T[0] // 1000


def ticks_diff(a, b):
    return a - b


def ticks_add(a, b):
    return a + b


def sleep_us(us):
    if us > 0:
        T[0] += us


def sleep_ms(ms):
    if ms > 0:
        T[0] += ms * 1000


def utc_us():
    return UTC0 + T[0]


# ---- the network ---------------------------------------------------------------------------------


class Mod:
    pass


def install(name, mod):
    sys.modules[name] = mod


POLLIN = 1
POLLOUT = 4
POLLERR = 8
POLLHUP = 16
CONNACK = b"\x20\x02\x00\x00"
# lwIP's default TCP send buffer on the ESP32 port: a write takes at most this much until the network
# has carried it away (between loop turns), so a backlog waits in the firmware's own queue as on a board.
SND_BUF = 5744
PINGRESP = b"\xd0\x00"


class Tcp:
    """Parses the client's byte stream just enough to answer CONNECT, PUBLISH QoS 1 and PINGREQ."""

    def __init__(self):
        self.rx = bytearray()
        self.state = 0  # 0 first byte, 1 remaining length, 2 PUBLISH variable header, 3 body
        self.first = 0
        self.rem = 0
        self.mult = 1
        self.vi = 0  # variable header bytes seen
        self.tlen = 0
        self.pid = 0
        self.published = 0
        self.discovery = 0
        self.room = SND_BUF
        self.scan = False  # this PUBLISH carries samples and JOB["seq_log"] is on
        self.m = 0  # bytes of ROW_START matched so far
        self.v = 0  # the sequence number being read

    def setblocking(self, flag):
        pass

    def connect(self, addr):
        if DOWN[0]:
            raise OSError(113)  # EHOSTUNREACH

    def close(self):
        pass

    def _done(self):
        kind = self.first & 0xF0
        if kind == 0x10:
            self.rx.extend(CONNACK)
        elif kind == 0xC0:
            self.rx.extend(PINGRESP)
        elif kind == 0x30 and self.first & 6 == 2:
            self.rx.extend(bytes((0x40, 2, self.pid >> 8, self.pid & 255)))
            self.published += 1
        self.state = 0
        self.scan = False
        self.m = 0
        self.v = 0

    def _rows(self, chunk, i, k):
        """The sample sequence numbers in chunk[i:i + k], a piece of a samples payload, byte by byte:
        a row cut at the end of a piece goes on in the next. It allocates nothing, so on the unix
        port's fixed heap the stand-in takes no room from the firmware (a copy of each piece did)."""
        m = self.m
        v = self.v
        for j in range(i, i + k):
            b = chunk[j]
            if m < 5:
                m = m + 1 if b == ROW_START[m] else (1 if b == 123 else 0)
            elif 48 <= b <= 57:
                v = v * 10 + b - 48
            else:
                seq_seen(v)
                m = 0
                v = 0
        self.m = m
        self.v = v

    def write(self, chunk):
        if DOWN[0]:
            raise OSError(104)  # ECONNRESET
        n = min(len(chunk), self.room)
        if not n:
            return None  # would block
        self.room -= n
        i = 0
        while i < n:
            st = self.state
            if st == 3:
                k = min(self.rem, n - i)
                if self.scan:
                    self._rows(chunk, i, k)
                self.rem -= k
                i += k
                if not self.rem:
                    self._done()
                continue
            b = chunk[i]
            i += 1
            if st == 0:
                self.first = b
                self.rem = 0
                self.mult = 1
                self.state = 1
            elif st == 1:
                self.rem += (b & 127) * self.mult
                self.mult *= 128
                if not b & 128:
                    if self.first & 0xF6 == 0x32:
                        self.state = 2
                        self.vi = 0
                    elif self.rem:
                        self.state = 3
                    else:
                        self._done()
            else:
                self.rem -= 1
                vi = self.vi
                if vi == 0:
                    self.tlen = b << 8
                elif vi == 1:
                    self.tlen |= b
                elif vi == 2:
                    self.discovery += b == 104  # "h": homeassistant/... (ours start with "w")
                    self.scan = SEQ_LOG and b == 119  # "w"
                elif vi == self.tlen:
                    self.scan = self.scan and b == 101  # ".../samples": "e" then "s"
                elif vi == self.tlen + 1:
                    self.scan = self.scan and b == 115
                elif vi == self.tlen + 2:
                    self.pid = b << 8
                elif vi == self.tlen + 3:
                    self.pid |= b
                    if self.rem:
                        self.state = 3
                    else:
                        self._done()
                self.vi = vi + 1
        T[0] += 20 + n // 100  # radio time
        probe("net")
        return n

    def read(self, n):
        if DOWN[0]:
            raise OSError(104)
        if not self.rx:
            return None
        out = bytes(self.rx)
        self.rx = bytearray()
        return out


class Udp:
    def __init__(self):
        self.req = None

    def settimeout(self, t):
        pass

    def sendto(self, data, addr):
        if DOWN[0]:
            raise OSError(113)
        self.req = bytes(data)

    def recv(self, n):
        from wattbench_fw.clock import to_ntp

        T[0] += 3000
        if DOWN[0] or self.req is None:
            raise OSError(110)
        sec, frac = to_ntp(utc_us())
        ts = bytes(((sec >> 24) & 255, (sec >> 16) & 255, (sec >> 8) & 255, sec & 255)) + bytes(
            ((frac >> 24) & 255, (frac >> 16) & 255, (frac >> 8) & 255, frac & 255)
        )
        return b"\x24\x01\x00\xe9" + bytes(20) + self.req[40:48] + ts + ts

    def close(self):
        pass


SOCKS = []
ALL_SOCKS = []
SEQ_LOG = JOB.get("seq_log", False)
ROW_START = b'{"s":'
SEQ = [None, None, 0]  # first and last of the current unbroken run of sequence numbers, rows seen


def seq_seen(s):
    """Printed, not kept: a run of consecutive sequence numbers ends here (the host merges them)."""
    SEQ[2] += 1
    if SEQ[1] is not None and s == SEQ[1] + 1:
        SEQ[1] = s
        return
    if SEQ[0] is not None:
        print("SEQRUN %d %d" % (SEQ[0], SEQ[1]))
    SEQ[0] = s
    SEQ[1] = s


def socket_(af=2, kind=1, proto=0):
    s = Tcp() if kind == 1 else Udp()
    if kind == 1:
        SOCKS.append(s)
        ALL_SOCKS.append(s)
        if len(SOCKS) > 1:
            SOCKS.pop(0)
    return s


class Poll:
    def __init__(self):
        self.sock = None

    def register(self, sock, mask=POLLIN | POLLOUT):
        self.sock = sock

    def modify(self, sock, mask):
        self.sock = sock

    def unregister(self, sock):
        self.sock = None

    def poll(self, timeout=-1):
        s = self.sock
        if DOWN[0]:
            return [(s, POLLERR | POLLHUP)]
        if s is not None and getattr(s, "rx", None):
            return [(s, POLLIN | POLLOUT)]
        if timeout and timeout > 0:
            T[0] += timeout * 1000
        return [(s, POLLOUT)]


sock_mod = Mod()
sock_mod.AF_INET = 2
sock_mod.SOCK_STREAM = 1
sock_mod.SOCK_DGRAM = 2
sock_mod.SOL_SOCKET = 1
sock_mod.SO_ERROR = 4
sock_mod.getaddrinfo = lambda host, port_no, *a: [(2, 1, 0, "", ("127.0.0.1", port_no))]
sock_mod.socket = socket_
install("socket", sock_mod)
sel_mod = Mod()
sel_mod.POLLIN = POLLIN
sel_mod.POLLOUT = POLLOUT
sel_mod.POLLERR = POLLERR
sel_mod.POLLHUP = POLLHUP
sel_mod.poll = Poll
install("select", sel_mod)


class WLAN:
    def __init__(self, which=0):
        pass

    def active(self, on=None):
        return True

    def isconnected(self):
        return not DOWN[0]

    def connect(self, ssid, password=None):
        pass

    def status(self, what=None):
        return -61


net_mod = Mod()
net_mod.STA_IF = 0
net_mod.WLAN = WLAN
net_mod.hostname = lambda name: None
install("network", net_mod)

# ---- the buses -----------------------------------------------------------------------------------

import machine  # noqa: E402 - the test mock, with lean bus stand-ins below that keep no history


def crc16(data):
    crc = 0xFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return bytes((crc & 255, crc >> 8))


def crc8(data, poly=0x31, init=0xFF):
    crc = init
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = ((crc << 1) ^ poly) & 255 if crc & 128 else (crc << 1) & 255
    return crc


def crc8_maxim(data):
    crc = 0
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x8C if crc & 1 else crc >> 1
    return crc


PZEM_REGS = (2298, 1012, 0, 2314, 0, 1234, 0, 500, 99, 0)
_body = bytes((1, 4, 20)) + b"".join(bytes((r >> 8, r & 255)) for r in PZEM_REGS)
PZEM_REPLY = _body + crc16(_body)


class Uart:
    def __init__(self, uart_id=1, **kw):
        self.pending = None

    def write(self, data):
        T[0] += 9000  # 8 bytes out at 9600 baud
        self.pending = PZEM_REPLY
        return len(data)

    def any(self):
        return len(self.pending) if self.pending else 0

    def read(self, n=-1):
        out = self.pending
        self.pending = None
        if out is not None:
            T[0] += 26000  # 25 bytes back at 9600 baud
            probe("uart")
        return out


def _r24(v):
    v = (v & 0xFFFFF) << 4
    return bytes((v >> 16, (v >> 8) & 255, v & 255))


INA228_REGS = {
    5: _r24(61440),
    7: _r24(256000),
    8: bytes((0x0E, 0xA6, 0x00)),
    9: bytes((0x00, 0x02, 0x02, 0xFB, 0xF0)),
    0x0B: b"\x00\x02",
    0x3E: b"\x54\x49",
    0x3F: b"\x22\x81",
}
_t = b"\x66\x66"
_h = b"\x80\x00"
SHT_REPLY = _t + bytes((crc8(_t),)) + _h + bytes((crc8(_h),))


class I2c:
    def __init__(self, i2c_id=0, **kw):
        self.n = 0

    def readfrom_mem_into(self, addr, reg, buf):
        T[0] += 100
        data = INA228_REGS[reg]
        for i in range(len(buf)):
            buf[i] = data[i]
        self.n += 1
        if self.n % 5 == 0:
            probe("i2c")

    def readfrom_mem(self, addr, reg, n):
        return INA228_REGS[reg][:n]

    def writeto_mem(self, addr, reg, data):
        T[0] += 100

    def writeto(self, addr, data, stop=True):
        T[0] += 100
        return 1

    def readfrom_into(self, addr, buf):
        T[0] += 150
        for i in range(len(buf)):
            buf[i] = SHT_REPLY[i]
        probe("sht")


_sp = bytes((0x91, 0x01, 0x4B, 0x46, 0x7F, 0xFF, 0x0F, 0x10))
DS_SCRATCH = _sp + bytes((crc8_maxim(_sp),))


class OneWire:
    def __init__(self, pin=None):
        pass

    def reset(self, required=False):
        T[0] += 1000
        return True

    def writebyte(self, b):
        T[0] += 600

    def write(self, buf):
        T[0] += 600 * len(buf)

    def select_rom(self, rom):
        T[0] += 5400

    def readinto(self, buf):
        T[0] += 5400
        for i in range(len(buf)):
            buf[i] = DS_SCRATCH[i]
        probe("onewire")


machine.UART = Uart
machine.I2C = I2c
ow_mod = Mod()
ow_mod.OneWire = OneWire
install("onewire", ow_mod)

# ---- the run -------------------------------------------------------------------------------------

import json  # noqa: E402

from wattbench_fw import port  # noqa: E402

port.ticks_us = ticks_us
port.ticks_ms = ticks_ms
port.ticks_diff = ticks_diff
port.ticks_add = ticks_add
port.sleep_us = sleep_us
port.sleep_ms = sleep_ms
port.utc_us = utc_us

ROOT = JOB.get("root", "")  # "" in the WebAssembly build's own file system; a directory on the unix port
CONFIG_PATH = ROOT + "/config.json"
BOARD_PATH = ROOT + "/board.json"
with open(CONFIG_PATH, "w") as f:
    f.write(json.dumps(JOB["config"]))
with open(BOARD_PATH, "w") as f:
    f.write(json.dumps(JOB["board"]))

S = 1000000
RUN_US = JOB["minutes"] * 60 * S
OUTAGES = [(a * S, b * S) for a, b in JOB["outages"]]
STEADY_US = JOB.get("steady_every_s", 60) * S
seen = {"max_flash": 0, "outage_seen": False, "backfill_done": None, "backlog": False}
RIG = {"phase": 0, "device": None, "start": 0, "next_steady": 0, "base": 0, "turn_start": 0}
AGAIN = True


def rig_boot():
    from wattbench_fw import device

    RIG["start"] = T[0]
    RIG["next_steady"] = T[0] + STEADY_US
    dev = device.boot(CONFIG_PATH, BOARD_PATH)
    if dev is None:
        raise RuntimeError("the appliance did not boot")
    RIG["device"] = dev


def rig_turn():
    dev = RIG["device"]
    app = dev.app
    dev.turn()
    for sock in SOCKS:
        sock.room = SND_BUF  # the network carried the queued bytes away during the idle time
    STATS["turns"] += 1
    T[0] += JOB["turn_us"]  # what one loop turn costs the CPU
    now = T[0] - RIG["start"]
    down = False
    for a, b in OUTAGES:
        down = down or a <= now < b
    DOWN[0] = down
    c = app.buffer.counts()
    if c["flash"] > seen["max_flash"]:
        seen["max_flash"] = c["flash"]
    if DOWN[0]:
        seen["outage_seen"] = True
        seen["backlog"] = True
    elif seen["backlog"] and settled(app):
        seen["backlog"] = False
        seen["backfill_done"] = now // S  # the last outage's
        print("BACKFILL %d" % (now // S))
    return now >= RUN_US


def settled(app):
    """Everything pushed is acknowledged and the open batch holds at most two rows: the same state
    at every steady-heap reading. app.drained() also wants no open row, which at 40 samples a second
    never happens (a full batch closes as the next row arrives, and that row opens the next batch), so
    the four-channel long run had no steady reading at all."""
    return app.buffer.empty() and len(app._rows) <= 2 and not app._pending


def rig_step():
    """One top-level call: measure the heap left live by the previous call, then do the next part."""
    global AGAIN
    live = gc.mem_alloc()  # garbage was collected on the way back to the top level
    if RIG["phase"] != 0:
        free = gc.mem_free()
        if STATS.get("free_min") is None or free < STATS["free_min"]:
            STATS["free_min"] = free
            STATS["free_min_at"] = "%ds (phase %d)" % ((T[0] - RIG["start"]) // S, RIG["phase"])
            if FIXED_HEAP:
                # The largest free run at the worst moment: the runner reads the last "max free sz".
                print("WORST")
                micropython.mem_info()
    if RIG["phase"] != 0 and live - RIG["base"] > STATS["live_peak"]:
        STATS["live_peak"] = live - RIG["base"]
        STATS["live_peak_at"] = "%ds (phase %d)" % ((T[0] - RIG["start"]) // S, RIG["phase"])
    phase = RIG["phase"]
    if phase == 0:
        RIG["base"] = live  # the interpreter, this rig and its stand-ins: not the firmware's
        RIG["phase"] = -1
        import wattbench_fw.device  # noqa: F401 - loading the code is one step, booting the next
    elif phase == -1:
        RIG["phase"] = 1
        rig_boot()
    elif phase == 1:
        dev = RIG["device"]
        if STATS.get("boot_live") is None:
            STATS["boot_live"] = live - RIG["base"]
        if T[0] >= RIG["next_steady"] and dev.app.link.up and settled(dev.app) and not DOWN[0]:
            RIG["next_steady"] = T[0] + STEADY_US
            # Printed, not kept: a growing list here would be counted as the firmware's creep.
            print("STEADY %d %d" % ((T[0] - RIG["start"]) // S, live - RIG["base"]))
        if rig_turn():
            RIG["phase"] = 2
    elif phase == 2:
        RIG["device"].app.shutdown()
        RIG["phase"] = 3
    else:
        finish(live)
        AGAIN = False
        return
    used = probe("turn end") - live
    if used > STATS["turn_max"]:
        STATS["turn_max"] = used
        STATS["turn_max_at"] = "%ds (phase %d)" % ((T[0] - RIG["start"]) // S, phase)
    if used >= JOB["block_watch"]:
        # Something of this size may be one block: the runner reads "max blk sz" from this.
        micropython.mem_info()
    gc.collect()  # only marks a collection as due; it runs when this call returns


def finish(live):
    app = RIG["device"].app
    base = RIG["base"]
    if SEQ[0] is not None:
        print("SEQRUN %d %d" % (SEQ[0], SEQ[1]))
    doc = {
        "base": base,
        "live_peak": STATS["live_peak"],
        "live_peak_at": STATS["live_peak_at"],
        "turn_bound": STATS["peak"] - base,
        "free_min": STATS.get("free_min"),
        "free_min_at": STATS.get("free_min_at"),
        "alloc_peak": STATS["live_peak"] + base,
        "turn_bound_at": STATS["peak_where"],
        "end_live": live - base,
        "turns": STATS["turns"],
        "boot_live": STATS.get("boot_live"),
        "turn_max": STATS["turn_max"],
        "turn_max_at": STATS["turn_max_at"],
        "probes": STATS["probes"],
        "sim_s": (T[0] - RIG["start"]) // S,
        "counters": {
            k: app.counters()[k]
            for k in (
                "samples",
                "batches",
                "acked_samples",
                "dropped",
                "connects",
                "errors",
                "last_error",
            )
        },
        "seq_next": app.seq.next,
        # Every sample the sampler handed out must be acknowledged, dropped (counted) or still
        # buffered at the stop: what is none of these was lost without being counted.
        "rows_out": app.sampler.rows_out,
        "unsent": app.buffer.ram_samples() + app.buffer.flash_samples(),
        "seq_rows": SEQ[2],
        "published": SOCKS[-1].published if SOCKS else 0,
        "max_flash_rows": seen["max_flash"],
        "outage_seen": seen["outage_seen"],
        "backfill_done_s": seen["backfill_done"],
        "hass_loaded": "wattbench_fw.hass" in sys.modules,
        "discovery": sum(s.discovery for s in ALL_SOCKS),
        "sign_loaded": "wattbench_fw.sign" in sys.modules,
        "modules": sorted(k for k in sys.modules if k.startswith("wattbench_fw")),
    }
    # Measured: the appliance goes before the report is written, so that a heap the firmware filled
    # leaves room for the report's text (a fixed heap on the unix port).
    RIG["device"] = None
    app = None
    gc.collect()
    report(doc)
