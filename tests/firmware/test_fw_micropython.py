"""The firmware's logic under the real MicroPython (the official WebAssembly build, run by Node),
with the `machine` mocks feeding recorded bytes: Modbus and CRC, SCPI parsing, INA register
decoding, SHT/DS18B20 CRCs, the sampler schedule, the store-and-forward buffer (spill and drop on
the emulated file system) and payload encoding checked against the contract's vectors."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import pytest

import wattbench_schema as schema
from wattbench_fw import mqtt as host_mqtt

pytestmark = pytest.mark.micropython
Run = Callable[..., list[Any]]


def test_every_module_imports_under_micropython(mpy: Run) -> None:
    (info,) = mpy("""
import sys
mods = ["port", "contract", "errors", "modbus", "serialio", "encode", "compact", "sampler", "buffer", "clock",
        "persist", "config", "mqtt", "link", "app", "board", "wifi", "device", "meters",
        "meters.pzem004t", "meters.ina226", "meters.ina228", "meters.wt300", "meters.sim",
        "sensors", "sensors.ds18b20", "sensors.sht3x"]
for m in mods:
    __import__("wattbench_fw." + m)
from wattbench_fw import port
report({"impl": sys.implementation.name, "mpy": port.MICROPYTHON, "n": len(mods)})
""")
    assert info == {"impl": "micropython", "mpy": True, "n": 27}


def test_modbus_crc_and_pzem_frames(mpy: Run) -> None:
    regs = [2298, 1012, 0, 2314, 0, 1234, 0, 500, 99, 0]
    (out,) = mpy(
        """
import machine
from wattbench_fw import modbus
from wattbench_fw.errors import CRCError, FrameError, NoReply, SensorError
from wattbench_fw.meters.pzem004t import PZEM004T
out = {}
out["req"] = modbus.read_request(1, 4, 0, 10).hex()
out["req_f8"] = modbus.read_request(0xF8, 4, 0, 10).hex()
out["reset"] = modbus.with_crc(b"\\x01\\x42").hex()
body = bytes([1, 4, 20]) + b"".join(bytes([r >> 8, r & 255]) for r in DATA["regs"])
reply = modbus.with_crc(body)
uart = machine.UART(2)
meter = PZEM004T(uart, addr=1, timeout_ms=20)
uart.expect(bytes.fromhex(out["req"]), reply)
out["good"] = meter.read()
kinds = []
for bad in (reply[:9] + bytes([reply[9] ^ 1]) + reply[10:], reply[:12], modbus.with_crc(b"\\x01\\x84\\x02"), b""):
    uart.expect(None, bad)
    try:
        meter.read()
        kinds.append("none")
    except CRCError:
        kinds.append("crc")
    except FrameError:
        kinds.append("frame")
    except SensorError as e:
        kinds.append("sensor:%d" % e.code)
    except NoReply:
        kinds.append("noreply")
out["bad"] = kinds
report(out)
""",
        data={"regs": regs},
    )
    assert (
        out["req"] == "01040000000a700d"
        and out["req_f8"] == "f8040000000a6464"
        and out["reset"] == "01428011"
    )
    vals, flags = out["good"]
    assert flags == 0
    assert vals == {"V": 229.8, "A": 1.012, "W": 231.4, "Wh": 1234, "Hz": 50.0, "PF": 0.99, "u": 0.005}
    assert out["bad"] == ["crc", "frame", "sensor:2", "noreply"]


def test_scpi_parsing(mpy: Run) -> None:
    lines = [
        "52.310E+00,104.75E+00,0.49941E+00,1.0000E+00,50.003E+00",
        "INF,230.10E+00,INF,NAN,50.000E+00",
        "NAN,230.10E+00,NAN,NAN,NAN",
        "9.9E+37,230.1E+00,9.91E+37,1.0E+00,5.0E+01",
        "52.3E+00,104.7E+00",
        "52.3X,1,1,1,1",
    ]
    (out,) = mpy(
        """
from wattbench_fw.meters.wt300 import parse_reply
from wattbench_fw.errors import FrameError
res = []
for line in DATA:
    try:
        res.append(parse_reply(line, ("W", "V", "A", "PF", "Hz")))
    except FrameError:
        res.append("frame")
report(res)
""",
        data=lines,
    )
    assert out[0] == [{"W": 52.31, "V": 104.75, "A": 0.49941, "PF": 1.0, "Hz": 50.003}, 0]
    assert out[1] == [{"V": 230.1, "Hz": 50.0}, 4]
    assert out[2] == [{}, 1]
    assert out[3][1] == 4 and set(out[3][0]) == {"V", "PF", "Hz"}
    assert out[4:] == ["frame", "frame"]


def test_ina_register_decoding(mpy: Run) -> None:
    (out,) = mpy("""
import machine
from wattbench_fw.meters.ina226 import INA226, config_word, calibration
from wattbench_fw.meters.ina228 import INA228, s20, s40, shunt_cal
bus = machine.I2C(0)
bus.add(0x40, {1: b"\\x1f\\x40", 2: b"\\x25\\x70", 3: b"\\x12\\xb8", 4: b"\\x27\\x10", 6: b"\\x00\\x08",
               0xFE: b"\\x54\\x49", 0xFF: b"\\x22\\x60"})
m = INA226(bus, shunt_ohm=0.002, current_lsb=0.001, avg=1)
m.setup()
v226 = m.read()
lsb = 16.384 / (1 << 19)
bus2 = machine.I2C(1)
def r24(v):
    v = (v & 0xFFFFF) << 4
    return bytes([v >> 16, (v >> 8) & 255, v & 255])
bus2.add(0x41, {5: r24(61440), 7: r24(256000), 8: bytes([0x0E, 0xA6, 0x00]),
                9: bytes([0x00, 0x02, 0x02, 0xFB, 0xF0]), 0x0B: b"\\x00\\x02", 0x3E: b"\\x54\\x49", 0x3F: b"\\x22\\x81"})
m2 = INA228(bus2, addr=0x41, shunt_ohm=0.002, max_a=16.384)
m2.setup()
v228 = m2.read()
report({"cfg": config_word(1, 1100, 1100), "cal": calibration(0.001, 0.002), "v226": v226, "v228": v228,
        "s20": [s20(0x800000), s20(0x7FFFF0)], "s40": s40((1 << 40) - 5), "shunt_cal": shunt_cal(lsb, 0.002),
        "writes": [[a, r, list(d)] for a, r, d in bus.writes]})
""")
    assert out["cfg"] == 0x4127 and out["cal"] == 0x0A00
    vals, flags = out["v226"]
    assert (
        flags == 0
        and math.isclose(vals["V"], 11.98)
        and math.isclose(vals["A"], 10.0)
        and math.isclose(vals["W"], 119.8)
    )
    vals, flags = out["v228"]
    assert flags == 0
    assert math.isclose(vals["V"], 12.0) and math.isclose(vals["A"], 8.0)
    assert math.isclose(vals["W"], 96.0) and math.isclose(vals["Wh"], 15.0)
    assert out["s20"] == [-(2**19), 2**19 - 1] and out["s40"] == -5 and out["shunt_cal"] == 819
    assert [0x40, 5, [0x0A, 0x00]] in out["writes"]


def test_sensor_crcs(mpy: Run) -> None:
    (out,) = mpy("""
from wattbench_fw.sensors.sht3x import crc8, decode
from wattbench_fw.sensors.ds18b20 import crc8_maxim, decode_scratchpad
from wattbench_fw.errors import CRCError
t = b"\\x66\\x66"; h = b"\\x80\\x00"
frame = t + bytes([crc8(t)]) + h + bytes([crc8(h)])
bad = frame[:4] + bytes([frame[4] ^ 1]) + frame[5:]
try:
    decode(bad)
    caught = False
except CRCError:
    caught = True
body = bytes([0x91, 0x01, 0x4B, 0x46, 0x7F, 0xFF, 0x0C, 0x10])
report({"sht": crc8(b"\\xbe\\xef"), "decode": decode(frame), "caught": caught,
        "maxim": crc8_maxim(bytes([2, 0x1C, 0xB8, 1, 0, 0, 0])),
        "ds": decode_scratchpad(body + bytes([crc8_maxim(body)]))})
""")
    assert out["sht"] == 0x92 and out["maxim"] == 0xA2 and out["caught"]
    assert out["decode"][0] == 25.0 and math.isclose(out["decode"][1], 100 * 0x8000 / 65535)
    assert out["ds"] == [25.0625, 0x0191]


def test_sampler_schedule_under_micropython(mpy: Run) -> None:
    (out,) = mpy("""
from wattbench_fw.sampler import Channel, Sampler
class T:
    now = 0
    def __call__(self):
        return self.now
class Seq:
    next = 0
    def take(self):
        self.next += 1
        return self.next - 1
class Clk:
    def utc_us(self, m):
        return 1763709600000000 + m
    def sample_flags(self):
        return 0
class Drv:
    QUANTITIES = ("W",)
    n = 0
    def setup(self):
        pass
    def read(self):
        self.n += 1
        return {"W": 100.0 + self.n % 7}, 0
t = T()
ch = Channel("c", Drv(), 7)
s = Sampler([ch], Seq(), Clk(), t)
s.start()
rows = []
import random
random.seed(3)
while len(rows) < 2000:
    t.now = ch.next_due + random.getrandbits(16)
    rows += s.poll()
t.now = ch.next_due + 3 * 142858
rows += s.poll()
flags = [r.get("f", 0) for r in rows]
report({"n": len(rows), "seq_ok": [r["s"] for r in rows] == list(range(len(rows))),
        "next_due": ch.next_due, "expected": ch.due(ch.k), "k": ch.k, "missed": flags.count(1),
        "last_missed_t": rows[-2]["t"]})
""")
    assert out["seq_ok"] and out["missed"] == 3
    assert out["next_due"] == out["k"] * 1_000_000_000 // 7_000  # exact, nothing accumulated


def test_buffer_spill_and_drop_on_the_micropython_fs(mpy: Run) -> None:
    (out,) = mpy("""
from wattbench_fw.buffer import Buffer
from wattbench_fw import port
port.makedirs("/flash/spool")
buf = Buffer(ram_bytes=300, flash_bytes=1500, segment_bytes=400, directory="/flash/spool")
for i in range(40):
    buf.push(b"%06d" % i + b"x" * 94, 2)
counts = buf.counts()
segs = port.listdir("/flash/spool")
order = []
while True:
    nxt = buf.next_unsent()
    if nxt is None:
        break
    eid, data = nxt
    order.append(int(data[:6]))
    buf.ack(eid)
report({"counts": counts, "segments": len(segs), "order": order, "left": port.listdir("/flash/spool"),
        "dropped": buf.dropped})
""")
    order = out["order"]
    assert order == sorted(order) and order[-1] == 39
    assert out["dropped"] == 2 * (40 - len(order)) and out["dropped"] > 0
    assert out["counts"]["dropped"] == out["dropped"]
    assert out["counts"]["ram"] + out["counts"]["flash"] == 2 * len(order)
    assert out["segments"] >= 2 and out["left"] == []


def test_payload_encoding_matches_vectors(mpy: Run) -> None:
    vecs = [v for v in schema.vectors("valid") if v.schema == "samples" and "mac" not in v.payload]
    (encoded,) = mpy(
        """
from wattbench_fw import encode
out = []
for p in DATA:
    rows = [encode.row(r) for r in p["samples"]]
    out.append(encode.batch(p["dev"], p["boot"], p["clk"], rows).decode())
report(out)
""",
        data=[v.payload for v in vecs],
    )
    validator = schema.jsonschema_validator("samples")
    for vec, text in zip(vecs, encoded, strict=True):
        doc = schema.strict_loads(text)
        validator.validate(doc)
        assert json.dumps(doc, sort_keys=True) == json.dumps(vec.payload, sort_keys=True) or _close(
            doc, vec.payload
        ), vec.name


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-12)
    return a == b


def test_status_meta_will_and_clean_rows_validate(mpy: Run) -> None:
    (out,) = mpy("""
from wattbench_fw import encode
from wattbench_fw.sampler import clean
clk = {"sync": "ntp", "age": 3.5, "off": -1.25, "err": 2.0, "ppm": 12.5, "steps": 0}
st = encode.status("bench-a", "online", t_ms=1763709600000, reason="boot", fw="0.1.0", boot=3, up=1.5,
                   seq=1000, buf={"ram": 1, "flash": 2, "dropped": 0}, clk=clk)
meta = encode.meta("bench-a", "0.1.0", "picow", [{"c": "psu1", "meter": "pzem004t", "q": ["W"], "hz": 1}], batch_ms=1000)
rows = []
for i, (vals, flags) in enumerate([({"W": float("nan"), "V": 230.0}, 0), ({"W": -1.0, "V": 12.0}, 0),
                                   ({"W": 1.0}, 2), ({"W": 12.3456789, "PF": 0.951234}, 0)]):
    v, f = clean(vals, flags, 1.0, 0.0)
    v["s"] = i
    v["t"] = 1763709600000 + i
    v["c"] = "psu1"
    if f:
        v["f"] = f
    rows.append(encode.row(v))
report([st.decode(), meta.decode(), encode.will("bench-a").decode(),
        encode.batch("bench-a", 1, {"sync": "free"}, rows).decode()])
""")
    st, meta, will, batch = (schema.strict_loads(x) for x in out)
    schema.jsonschema_validator("status").validate(st)
    schema.jsonschema_validator("status").validate(will)
    schema.jsonschema_validator("meta").validate(meta)
    schema.jsonschema_validator("samples").validate(batch)
    assert [r.get("f") for r in batch["samples"]] == [4, 32, 2, None]
    assert batch["samples"][3]["W"] == 12.346 and batch["samples"][3]["PF"] == 0.9512


def test_mqtt_packets_are_identical_to_cpython(mpy: Run) -> None:
    (out,) = mpy("""
from wattbench_fw import mqtt
report([mqtt.connect_packet("c1", 30, True, ("t/s", b"bye", 1, True), "u", "p").hex(),
        mqtt.publish_header("wattbench/v1/dev/a/samples", 70000, 1, False, 513).hex(),
        mqtt.remaining_length(268435455).hex()])
""")
    assert out == [
        host_mqtt.connect_packet("c1", 30, True, ("t/s", b"bye", 1, True), "u", "p").hex(),
        host_mqtt.publish_header("wattbench/v1/dev/a/samples", 70000, 1, False, 513).hex(),
        "ffffff7f",
    ]


def test_ntp_math_and_persistence(mpy: Run) -> None:
    (out,) = mpy("""
from wattbench_fw import clock
from wattbench_fw.persist import State, Sequence
t = 1763709600123456
req = clock.build_request(t)
sec, frac = clock.to_ntp(t)
pkt = bytearray(48)
pkt[0] = 0x24
pkt[1] = 2
pkt[24:32] = req[40:48]
pkt[32:40] = req[40:48]
pkt[40:48] = req[40:48]
t2, t3 = clock.parse_reply(bytes(pkt), t)
c = clock.Clock()
c.apply(0, t + 1000, t + 1000, 2000, 2000)
seen = []
for boot in range(3):
    st = State("/flash/state")
    st.next_boot()
    seq = Sequence(st, block=7)
    seen += [seq.take() for _ in range(10)]
report({"roundtrip": clock.from_ntp(sec, frac) == t, "t2": t2 == t and t3 == t,
        "utc": c.utc_us(2000), "seen": seen, "boot": State("/flash/state").boot})
""")
    assert out["roundtrip"] and out["t2"]
    assert out["utc"] == 1763709600123456 + 2000
    assert len(set(out["seen"])) == 30 and out["seen"] == sorted(out["seen"]) and out["boot"] == 2


def test_watchdog_fed_by_the_device_loop_shape(mpy: Run) -> None:
    """device.main arms machine.WDT from the config and feeds it after every step; run its loop
    against the mocks for a few iterations with a simulated meter."""
    (out,) = mpy("""
import json, machine
from wattbench_fw import port
cfg = {"dev": "pico-1", "board": "picow", "wifi": {"ssid": "x"}, "broker": {"host": "127.0.0.1"},
       "flash_dir": "/flash/wb", "wdt_ms": 5000,
       "channels": [{"c": "sim", "meter": "sim", "hz": 1000, "opts": {"model": "const", "watts": 42}}]}
open("/config.json", "w").write(json.dumps(cfg))
import wattbench_fw.device as dev
class FakeWifi:
    def __init__(self, *a):
        pass
    def up(self):
        return False
    def service(self):
        return False
    def rssi(self):
        return None
import wattbench_fw.wifi as wifi_mod
wifi_mod.Wifi = FakeWifi
calls = {"n": 0}
from wattbench_fw.app import Appliance
orig = Appliance.idle
def idle(self, wait):
    calls["n"] += 1
    if calls["n"] >= 50:
        raise KeyboardInterrupt
    orig(self, wait)
Appliance.idle = idle
try:
    dev.main("/config.json", "/nonexistent.json")
except KeyboardInterrupt:
    pass
wdt = machine.WDT.instances[-1]
report({"timeout": wdt.timeout, "feeds": wdt.feeds, "steps": calls["n"]})
""")
    assert out["timeout"] == 5000 and out["feeds"] == out["steps"] == 50


def test_damaged_state_and_bad_options_under_micropython(mpy: Run) -> None:
    """MicroPython's json, ints and exceptions differ from CPython's: a damaged state file still
    boots with counters that go forward, and bad options or nesting are ConfigErrors."""
    (out,) = mpy(
        """
import os
from wattbench_fw import config, meters
from wattbench_fw.errors import ConfigError
from wattbench_fw.meters import wt300
from wattbench_fw.persist import SLOTS, EnergyTracker, Sequence, State
os.mkdir("/st")
runs = []
for i, doc in enumerate(DATA["slots"]):
    d = "/st/%d" % i
    os.mkdir(d)
    open(d + "/" + SLOTS[0], "w").write(doc)
    st = State(d)
    boot = st.next_boot()
    s = Sequence(st, 1000).take()
    wh = EnergyTracker(st, "psu1").update(1.0)
    st2 = State(d)
    runs.append([boot >= 0, s >= 0, wh >= 0 and wh == wh and wh - wh == 0, st.repairs > 0,
                 st2.boot == boot and st2.seq_mark > s])
errs = []
for kind, opts in DATA["opts"]:
    try:
        meters.create(kind, None, opts)
        errs.append(None)
    except ConfigError as e:
        errs.append(str(e))
for kind, opts in (("ina226", {"max_a": 10**400}), ("ina228", {"shunt_ohm": float("inf")})):
    try:
        meters.create(kind, None, opts)
        errs.append(None)
    except ConfigError as e:
        errs.append(str(e))
open("/deep.json", "w").write("[" * 100000)
try:
    config.load("/deep.json")
    deep = None
except ConfigError as e:
    deep = str(e)
report({"runs": runs, "errs": errs, "deep": deep, "nan": wt300.parse_value("-NAN")})
""",
        data={
            "slots": [
                '{"gen": 1, "boot": "x"}',
                '{"gen": 1e999}',
                '{"gen": "1", "boot": 3}',
                '{"gen": 1, "energy": [1]}',
                '{"gen": 1, "energy": {"psu1": [1]}}',
                '{"gen": 1, "seq": -5}',
                '{"gen": 1, "energy": {"psu1": [-5, 1, -1]}}',
                "[" * 3000,
            ],
            "opts": [
                ["ina226", {"shunt_ohm": 0}],
                ["ina226", {"max_a": 0}],
                ["sim", {"watts": "x"}],
                ["wt300", {"items": [["W"]]}],
                ["pzem004t", {"variant": []}],
                ["ina226", {"shunt_ohm": 0.1, "max_a": 0.8}],
            ],
        },
    )
    assert out["runs"] and all(all(r) for r in out["runs"]), out["runs"]
    assert out["errs"][:5] == [
        "ina226: shunt_ohm must be a number in [1e-06, 100.0], got 0",
        "ina226: max_a must be a number in [1e-06, 10000.0], got 0",
        "sim: watts must be a number in [0, 10000000.0], got 'x'",
        "wt300: item a list not one of A, Hz, PF, V, W",
        "pzem004t: variant must be one of '10A', '100A', got a list",
    ]
    assert out["errs"][5] is None
    assert "max_a" in out["errs"][6] and "shunt_ohm" in out["errs"][7]
    assert out["deep"].startswith("config file /deep.json")
    assert out["nan"] == "nan"


def test_flash_index_ram_is_small_per_spilled_batch(mpy: Run) -> None:
    """Batches spilled during a long outage live in flash; the RAM that indexes them must stay a few
    bytes per batch, or an hour offline (3600 one-second batches) would exhaust an ESP32's heap."""
    (per_batch,) = mpy(
        """
import gc, os
from wattbench_fw.buffer import Buffer
# The flash codec is loaded for each spilled record and released after it, but what loading it
# interns (names and strings, compiled here from source) stays: a fixed cost, which the memory rig
# (test_fw_memory.py, with .mpy files as deployed) counts. Here only what grows per batch counts.
from wattbench_fw import compact
compact = None
os.mkdir("/fl")
ST = {}
AGAIN = True
def step():
    global AGAIN
    if not ST:
        ST["before"] = gc.mem_alloc()
        ST["buf"] = Buffer(ram_bytes=256, flash_bytes=1 << 20, segment_bytes=8192, directory="/fl")
        payload = b"x" * 200
        for i in range(400):
            ST["buf"].push(payload, 2)
    elif "after" not in ST:
        ST["after"] = gc.mem_alloc()
    else:
        assert ST["buf"].flash_samples() >= 790
        report((ST["after"] - ST["before"]) / 400)
        AGAIN = False
    gc.collect()
""",
        repeat="step()",
        heapsize=256 * 1024,
    )
    assert per_batch <= 24


def test_compact_flash_form_is_the_same_under_micropython(mpy: Run) -> None:
    """MicroPython packs a batch into the same bytes as CPython (a spool moves between the two in
    host mode and on a board) and rebuilds the exact payload, for the contract's vectors, signed
    batches and the rows it keeps as text."""
    from wattbench_fw import compact, encode

    payloads = []
    for vec in schema.vectors("valid"):
        if vec.schema == "samples":
            p = vec.payload
            payloads.append(
                encode.batch(p["dev"], p["boot"], p["clk"], [encode.row(r) for r in p["samples"]])
            )
    payloads.append(payloads[0][:-1] + b',"mac":"' + b"0a" * 32 + b'"}')
    payloads.append(payloads[0].replace(b'"samples":[', b'"samples":[{"s":1,"t":2,"c":"x","u":1e-05},', 1))
    (out,) = mpy(
        """
from binascii import hexlify, unhexlify
from wattbench_fw import compact
out = []
for h in DATA:
    p = unhexlify(h)
    c = compact.pack(p)
    out.append([hexlify(c).decode(), compact.unpack(c) == p])
report(out)
""",
        data=[p.hex() for p in payloads],
    )
    for p, (packed, same) in zip(payloads, out, strict=True):
        assert same and bytes.fromhex(packed) == compact.pack(p)


def test_previous_spool_format_is_sent_under_micropython(mpy: Run) -> None:
    from pathlib import Path

    fixture = Path(__file__).resolve().parents[1] / "data" / "firmware" / "spool-v1"
    segs = {p.name: p.read_bytes().hex() for p in sorted(fixture.glob("seg*.bin"))}
    expected = json.loads((fixture / "expected.json").read_text())
    (out,) = mpy(
        """
from binascii import unhexlify
from wattbench_fw.buffer import Buffer
from wattbench_fw import port
port.makedirs("/flash/spool")
for name in DATA:
    with open("/flash/spool/" + name, "wb") as f:
        f.write(unhexlify(DATA[name]))
buf = Buffer(ram_bytes=1, flash_bytes=1 << 20, segment_bytes=8192, directory="/flash/spool")
flash = buf.counts()["flash"]
buf.push(b'{"v":1,"dev":"a","boot":0,"clk":{},"samples":[{"s":1,"t":2,"c":"x","W":1.5}]}', 1)
sent = []
while True:
    nxt = buf.next_unsent()
    if nxt is None:
        break
    payload = nxt[1]
    if isinstance(payload, list):  # a compact record comes in pieces, sent as one payload
        payload = b"".join(payload)
    sent.append(payload.decode())
    buf.ack(nxt[0])
report({"flash": flash, "sent": sent, "left": port.listdir("/flash/spool")})
""",
        data=segs,
    )
    assert out["flash"] == sum(e["n"] for e in expected)
    assert out["sent"][:-1] == [e["payload"] for e in expected]
    assert out["sent"][-1].endswith('"W":1.5}]}') and out["left"] == []
