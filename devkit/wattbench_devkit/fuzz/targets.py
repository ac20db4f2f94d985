"""Fuzz targets: one per parser, shared by the hypothesis tests and bench/fuzz_all.py.

A target has `run(input) -> outcome label` and `generate(source) -> input`. run() returns a label such
as "accept:samples", "reject:decode" or "error:CRCError" and raises AssertionError when a property of
the parser does not hold; any other exception is a crash (see crashes.py). generate() builds one
input from a Source: valid inputs made by the project's own encoders, mutations of them, and
arbitrary bytes.
"""

from __future__ import annotations

import atexit
import copy
import functools
import hashlib
import hmac
import json
import math
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import wattbench_schema as contract

from . import reference as ref
from .mutate import (
    RawJSON,
    Source,
    awkward_value,
    chance,
    deep_dict,
    deep_list,
    dump_loose,
    mutate_bytes,
    mutate_doc,
    nudge_numbers,
    pick,
)


@dataclass(frozen=True)
class Target:
    name: str
    parser: str
    run: Callable[[Any], str]
    generate: Callable[[Source], Any]


TARGETS: dict[str, Target] = {}


def target(
    name: str, parser: str, generate: Callable[[Source], Any]
) -> Callable[[Callable[[Any], str]], Callable[[Any], str]]:
    def register(fn: Callable[[Any], str]) -> Callable[[Any], str]:
        TARGETS[name] = Target(name, parser, fn, generate)
        return fn

    return register


def error_label(exc: BaseException) -> str:
    return f"error:{type(exc).__name__}"


@functools.cache
def scratch_dir() -> str:
    # Config and state targets write a file per input: keep that in memory where the OS allows.
    shm = "/dev/shm"
    base = shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None
    path = tempfile.mkdtemp(prefix="wattbench-fuzz-", dir=base)
    atexit.register(shutil.rmtree, path, True)
    return path


def remove_scratch() -> None:
    """Remove the scratch directory now: processes that end with os._exit never run atexit."""
    if scratch_dir.cache_info().currsize:
        shutil.rmtree(scratch_dir(), ignore_errors=True)
        scratch_dir.cache_clear()


def is_finite_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


# ====================================================================== MQTT payloads (collector)

REJECT_REASONS = frozenset(contract.load_schema("reject")["properties"]["reason"]["enum"])
# Receive times: one after every vector (all accept), one before most of them (future rejects).
RECV_LATE_MS = 4_000_000_000_000
RECV_EARLY_MS = 1_763_700_000_000
SIGNED_VECTOR = "samples_signed_hmac"


@functools.cache
def valid_vectors() -> tuple[contract.Vector, ...]:
    return tuple(contract.vectors("valid"))


@functools.cache
def invalid_vectors() -> tuple[contract.Vector, ...]:
    return tuple(contract.vectors("invalid"))


@functools.cache
def payload_corpus() -> list[bytes]:
    return [v.raw for v in valid_vectors() + invalid_vectors()]


@functools.cache
def hmac_key() -> tuple[str, bytes]:
    vec = next(v for v in valid_vectors() if v.name == SIGNED_VECTOR)
    return vec.payload["dev"], bytes.fromhex(vec.extra["hmac_key"])


@functools.cache
def validator() -> Any:
    """The collector's validator, with a key for the signed vector's device so the HMAC path runs too."""
    from wattbench.ingest.auth import Verifier
    from wattbench.ingest.validate import Validator

    dev, key = hmac_key()
    return Validator(verifier=Verifier({dev: key}))


@functools.cache
def reject_check() -> Callable[[Any], Any]:
    import fastjsonschema

    return fastjsonschema.compile(contract.inline_refs("reject"))


@functools.cache
def reference_schema(kind: str) -> Any:
    return contract.jsonschema_validator(kind)


TOPIC_PARAMS = (
    "",
    "A",
    "+",
    "#",
    "a/b",
    "x" * 65,
    "é",
    "ok-dev",
    "bench-a",
    "sim-01",
    " ",
    "a\u0000b",
    "$SYS",
)


def mutate_topic(src: Source, topic: str) -> str:
    k = src.below(40)
    if k < 34:
        return topic
    parts = topic.split("/")
    if k < 36:
        parts[3] = pick(src, TOPIC_PARAMS)
    elif k < 37:
        parts[1] = pick(src, ("v2", "v0", "V1", ""))
    elif k < 38:
        parts.append(pick(src, ("", "x", "samples")))
    else:
        return src.blob(40).decode("utf-8", errors="replace").replace("\ud800", "")
    return "/".join(parts)


def gen_payload(src: Source) -> tuple[str, bytes, int]:
    """(topic, payload bytes, receive ms): a valid vector, a mutation of one, or garbage."""
    from wattbench.ingest.auth import sign, split_signed

    vec = pick(src, valid_vectors())
    topic = vec.topic
    k = src.below(100)
    if k < 5:
        raw = vec.raw
    elif k < 20:
        raw = dump_loose(nudge_numbers(src, json.loads(vec.raw)), src)
    elif k < 50:
        doc = json.loads(vec.raw)
        for _ in range(1 + src.below(3)):
            doc = mutate_doc(src, doc)
        raw = dump_loose(doc, src)
    elif k < 80:
        raw = mutate_bytes(src, vec.raw, payload_corpus())
    elif k < 88:
        inv = pick(src, invalid_vectors())
        topic = inv.topic
        raw = inv.raw if chance(src, 50) else mutate_bytes(src, inv.raw, payload_corpus())
    elif k < 95:
        raw = src.blob(200)
    else:
        raw = pick(
            src, (b"{" * 50_000, b"[" * 200_000, b"9" * 5000, b" " * 140_000, b'"' + b"a" * 131_000 + b'"')
        )
    if vec.name == SIGNED_VECTOR and chance(src, 50):
        # Re-sign the mutated batch so that it reaches the checks after the signature.
        body, _mac = split_signed(raw)
        if body.endswith(b"}"):
            raw = sign(body, hmac_key()[1])
    topic = mutate_topic(src, topic)
    recv = RECV_LATE_MS if chance(src, 80) else RECV_EARLY_MS
    return topic, raw, recv


def _has_surrogate(node: Any) -> bool:
    if isinstance(node, str):
        return any(0xD800 <= ord(ch) <= 0xDFFF for ch in node)
    if isinstance(node, dict):
        return any(_has_surrogate(k) or _has_surrogate(v) for k, v in node.items())
    if isinstance(node, list):
        return any(_has_surrogate(v) for v in node)
    return False


def _reference_decode(raw: bytes) -> tuple[bool | None, Any]:
    """(decodes?, document) by the contract's strict decoder plus the collector's documented extra
    refusals: integers too long for Python and strings that are not Unicode text (lone surrogates).
    None when the answer depends on the stack depth (nesting near the recursion limit), where the fast
    and the reference decoder may fairly differ."""
    try:
        doc = contract.strict_loads(raw)
    except contract.DecodeError as exc:
        return (None if "recursion" in str(exc) else False), None
    except ValueError:
        return False, None
    except RecursionError:
        return None, None
    try:
        if _has_surrogate(doc):
            return False, None
    except RecursionError:
        return None, None
    return True, doc


@target("mqtt.validate", "MQTT payload decoding and validation (collector)", gen_payload)
def run_validate(inp: tuple[str, bytes, int]) -> str:
    from wattbench.ingest.validate import Accepted, Rejected

    topic, raw, recv = inp
    out = validator().check(topic, raw, recv)
    if isinstance(out, Rejected):
        assert out.reason in REJECT_REASONS, f"reject reason outside the contract: {out.reason!r}"
        assert isinstance(out.detail, str) and out.detail.strip(), "reject without a detail"
        if out.reason == "decode":
            ok, _ = _reference_decode(raw)
            assert ok is not True, "decode reject of a payload the contract decoder accepts"
        elif out.reason in ("schema", "version", "mismatch", "auth", "future", "stale"):
            ok, _ = _reference_decode(raw)
            assert ok is not False, f"{out.reason} reject of a payload the contract decoder refuses"
        return f"reject:{out.reason}"
    assert isinstance(out, Accepted), f"check returned {type(out).__name__}"
    ok, doc = _reference_decode(raw)
    assert ok is True, "accepted a payload the contract decoder refuses"
    assert doc == out.payload, "fast decoder and contract decoder disagree"
    kind = out.kind
    assert contract.match_topic(topic) == (kind, out.params), "accepted under the wrong topic kind"
    if len(raw) < 20_000:
        errors = list(reference_schema(kind).iter_errors(doc))
        assert not errors, f"accepted a payload the contract schema refuses: {errors[0].message[:200]}"
    return f"accept:{kind}"


def gen_pipeline(src: Source) -> tuple[list[tuple[str, bytes]], int]:
    msgs = []
    for _ in range(1 + src.below(3)):
        topic, raw, _recv = gen_payload(src)
        msgs.append((topic, raw))
    return msgs, RECV_LATE_MS if chance(src, 80) else RECV_EARLY_MS


@functools.cache
def _lines_for() -> dict[str, Callable[[Any], Any]]:
    from wattbench.store.influx import lineproto

    return {
        "samples": lambda body: lineproto.sample_lines(body["dev"], body["rows"], []),
        "status": lambda body: lineproto.status_line(body["doc"], body["t"]),
        "phase": lineproto.phase_line,
        "result": lineproto.result_lines,
        "reject": lambda body: lineproto.reject_line(body["collector"], body["notice"]),
    }


@target(
    "mqtt.pipeline", "collector ingest pipeline: accounting, notices, spool and line protocol", gen_pipeline
)
def run_pipeline(inp: tuple[list[tuple[str, bytes]], int]) -> str:
    """Messages through Pipeline.handle, then everything a collector does with the result."""
    from wattbench.ingest import records
    from wattbench.ingest.pipeline import Pipeline
    from wattbench.ingest.validate import Rejected

    msgs, recv = inp
    p = Pipeline("collector-fuzz", validator=validator())
    label = ""
    for topic, raw in msgs:
        out = p.handle(topic, raw, recv)
        if isinstance(out, Rejected) and out.detail.startswith("could not be checked ("):
            validator().check(topic, raw, recv)  # raises the exception the pipeline swallowed
            raise AssertionError("pipeline reported a validator failure that does not reproduce")
        label = f"reject:{out.reason}" if isinstance(out, Rejected) else f"accept:{out.kind}"
    c = p.counters()
    assert c["messages"] == len(msgs) == c["accepted"] + c["rejected"], f"message counters do not add up: {c}"
    assert sum(c["reject_reasons"].values()) == c["rejected"] + c["energy_steps"], (
        f"reject reasons miscounted: {c}"
    )
    batch, notices = p.take()
    check = reject_check()
    for notice in notices:
        check(notice)  # raises JsonSchemaValueException: a notice outside the contract
    # The writer thread spools these bytes when the store is down; the store gets line protocol.
    encoded = records.encode(batch.records)
    assert len(records.decode(encoded)) == len(batch.records), "records do not survive the spool encoding"
    lines = _lines_for()
    for kind, body in batch.records:
        if kind in lines:
            lines[kind](body)
    return label


# ====================================================================== HMAC batch signatures


def gen_auth(src: Source) -> tuple[bytes, bytes, int]:
    from wattbench.ingest.auth import sign

    vec = pick(src, valid_vectors())
    key = src.blob(80) if chance(src, 50) else hmac_key()[1]
    k = src.below(10)
    if k < 3:
        raw = vec.raw
    elif k < 5:
        raw = sign(vec.raw, key) if vec.raw.endswith(b"}") else vec.raw
    elif k < 8:
        raw = mutate_bytes(src, sign(vec.raw, key) if vec.raw.endswith(b"}") else vec.raw, payload_corpus())
    else:
        raw = src.blob(120) + pick(src, (b"", b"}", b',"mac":"' + b"a" * 64 + b'"}', b'"}\n'))
    return raw, key, src.below(1 << 20)


@target("auth.hmac", "HMAC batch signatures: split_signed and Verifier.check (collector)", gen_auth)
def run_auth(inp: tuple[bytes, bytes, int]) -> str:
    from wattbench.ingest.auth import AuthError, Verifier, sign, split_signed

    raw, key, flip = inp
    body, mac = split_signed(raw)
    assert isinstance(body, bytes), "split_signed returned no bytes"
    if mac is None:
        assert body == raw, "unsigned payload changed by split_signed"
    else:
        assert re.fullmatch(r"[0-9a-f]{64}", mac), f"mac is not 64 lowercase hex: {mac!r}"
        assert body.endswith(b"}") and len(body) < len(raw), "signed part is not the payload without its mac"
    expected = hmac.new(key, body, hashlib.sha256).hexdigest()
    should_pass = mac is not None and hmac.compare_digest(expected, mac)
    verifier = Verifier({"dev-a": key})
    try:
        verifier.check("dev-a", raw)
        passed = True
    except AuthError as exc:
        assert str(exc), "AuthError without a reason"
        assert len(key) < 8 or key.hex() not in str(exc), "the key appears in the reject reason"
        passed = False
    assert passed == should_pass, f"verifier says {passed}, HMAC-SHA256 says {should_pass}"
    Verifier({}).check("dev-b", raw)  # no key, not required: accepted unchecked
    try:
        Verifier({}, require=True).check("dev-b", raw)
        raise AssertionError("required signature not enforced for a device without a key")
    except AuthError:
        pass
    if raw.endswith(b"}") and mac is None:
        signed_raw = sign(raw, key)
        assert split_signed(signed_raw) == (raw, expected), "sign/split_signed do not round-trip"
        verifier.check("dev-a", signed_raw)
        bit = flip % (8 * len(signed_raw))
        damaged = bytearray(signed_raw)
        damaged[bit // 8] ^= 1 << (bit % 8)
        try:
            verifier.check("dev-a", bytes(damaged))
            raise AssertionError("a signed batch with one flipped bit was accepted")
        except AuthError:
            pass
        return "signed-roundtrip"
    return "pass" if passed else "error:AuthError"


# ====================================================================== Modbus-RTU (firmware)


def modbus_reply(addr: int, function: int, regs: list[int]) -> bytes:
    """A normal read reply, framed with the firmware's own CRC encoder."""
    from wattbench_fw import modbus

    body = b"".join(r.to_bytes(2, "big") for r in regs)
    return modbus.with_crc(bytes((addr, function, len(body))) + body)


def gen_modbus(src: Source) -> tuple[bytes, int, int, int]:
    from wattbench_fw import modbus

    addr = pick(src, (1, 0xF8, 247, 2)) if chance(src, 90) else src.below(256)
    function = pick(src, (0x03, 0x04))
    count = pick(src, (1, 2, 10)) if chance(src, 80) else src.below(126)
    regs = [
        src.below(0x10000) if chance(src, 70) else pick(src, (0, 0xFFFF, 0x8000, 0x7FFF))
        for _ in range(count)
    ]
    k = src.below(10)
    if k < 2:
        frame = modbus_reply(addr, function, regs)
    elif k < 3:
        frame = modbus.with_crc(bytes((addr, function | 0x80, src.below(256))))
    elif k < 8:
        frame = mutate_bytes(src, modbus_reply(addr, function, regs))
        if chance(src, 30):  # re-frame: garbage with a good CRC reaches the field checks
            frame = modbus.with_crc(frame[:-2]) if len(frame) >= 2 else frame
    else:
        frame = src.blob(40)
    return frame, addr, function, count


@target("modbus.reply", "Modbus-RTU read reply decoder and CRC-16 (firmware)", gen_modbus)
def run_modbus(inp: tuple[bytes, int, int, int]) -> str:
    from wattbench_fw import modbus
    from wattbench_fw.contract import FLAG_CRC, FLAG_SENSOR_ERROR
    from wattbench_fw.errors import MeterError
    from wattbench_fw.meters import pzem004t

    frame, addr, function, count = inp
    assert modbus.crc16(frame) == ref.crc16_modbus(frame), "crc16 differs from CRC-16/MODBUS"
    assert isinstance(modbus.reply_complete(frame, count), bool), "reply_complete is not a bool"
    try:
        expected: Any = ref.modbus_read_reply(frame, addr, function, count)
    except ref.RefError as e:
        expected = e
    try:
        regs = modbus.parse_read_reply(frame, addr, function, count)
    except MeterError as exc:
        assert isinstance(expected, ref.RefError), f"refused a valid reply: {exc}"
        want = FLAG_SENSOR_ERROR if expected.flag_kind == "exception" else FLAG_CRC
        assert exc.flag == want, f"{type(exc).__name__} for a frame the reference refuses for {expected}"
        if expected.flag_kind == "exception":
            assert isinstance(exc, modbus.ModbusException) and exc.code == frame[2], "wrong exception code"
        label = error_label(exc)
    else:
        assert not isinstance(expected, ref.RefError), f"accepted a reply the reference refuses ({expected})"
        assert regs == expected, "register values differ from the frame"
        label = "ok"
    try:
        pzem004t.parse_reset_energy_reply(frame, addr)
    except MeterError:
        pass
    return label


def gen_crc(src: Source) -> tuple[bytes, int]:
    return src.blob(256), src.below(1 << 16)


@target("modbus.crc", "CRC-16/MODBUS framing property (firmware)", gen_crc)
def run_crc(inp: tuple[bytes, int]) -> str:
    from wattbench_fw import modbus

    data, bit = inp
    framed = modbus.with_crc(data)
    assert framed[:-2] == data, "with_crc changed the data"
    assert int.from_bytes(framed[-2:], "little") == ref.crc16_modbus(data), (
        "CRC bytes differ from CRC-16/MODBUS"
    )
    if len(framed) < 4:
        assert not modbus.crc_ok(framed), "a frame too short to carry a reply passed crc_ok"
        return "short"
    assert modbus.crc_ok(framed), "frame with its own CRC fails crc_ok"
    bit %= 8 * len(framed)
    damaged = bytearray(framed)
    damaged[bit // 8] ^= 1 << (bit % 8)
    assert not modbus.crc_ok(bytes(damaged)), f"single-bit error at bit {bit} not detected"
    return "ok"


# ====================================================================== meter drivers (firmware)


class FakeUart:
    """A serial port whose device answers every request with one fixed reply."""

    def __init__(self, reply: bytes) -> None:
        self.reply = reply
        self.pending = b""

    def write(self, data: bytes) -> int:
        self.pending = self.reply
        return len(data)

    def any(self) -> int:
        return len(self.pending)

    def read(self, n: int = -1) -> bytes | None:
        if not self.pending:
            return None
        n = len(self.pending) if n is None or n < 0 else n
        out, self.pending = self.pending[:n], self.pending[n:]
        return out


class FakeI2C:
    """An I2C bus returning fixed register bytes."""

    def __init__(self, regs: dict[int, bytes]) -> None:
        self.regs = regs

    def readfrom_mem_into(self, addr: int, reg: int, buf: bytearray) -> None:
        data = self.regs.get(reg, b"")
        for i in range(len(buf)):
            buf[i] = data[i] if i < len(data) else 0

    def writeto_mem(self, addr: int, reg: int, data: bytes) -> None:
        pass

    def writeto(self, addr: int, data: bytes) -> None:
        pass

    def readfrom_into(self, addr: int, buf: bytearray) -> None:
        self.readfrom_mem_into(addr, -1, buf)


def check_clean(vals: dict[str, Any], flags: int) -> tuple[dict[str, Any], int]:
    """A driver reading through the sampler's cleaning step: the result must be contract-valid."""
    from wattbench_fw.contract import BOUNDS
    from wattbench_fw.contract_boot import FLAGS_MAX
    from wattbench_fw.sampler import clean

    assert isinstance(flags, int) and 0 <= flags <= FLAGS_MAX, f"flags out of range: {flags!r}"
    out, oflags = clean(dict(vals), flags)
    assert isinstance(oflags, int) and 0 <= oflags <= FLAGS_MAX, f"cleaned flags out of range: {oflags!r}"
    for key, v in out.items():
        if key == "n":
            continue
        assert is_finite_number(v), f"cleaned value {key}={v!r} is not a finite number"
        lo, hi = BOUNDS[key]
        assert lo <= v <= hi, f"cleaned value {key}={v!r} outside the contract bounds"
    return out, oflags


PZEM_VARIANTS = ("10A", "100A")


def gen_pzem(src: Source) -> tuple[bytes, str]:
    if chance(src, 50):
        regs = [src.below(0x10000) for _ in range(10)]
    else:  # plausible readings: 0-100 A, 0-23 kW, a few MWh
        amps, watts, wh = src.below(100_001), src.below(230_001), src.below(5_000_000)
        regs = [
            src.below(2601),
            amps & 0xFFFF,
            amps >> 16,
            watts & 0xFFFF,
            watts >> 16,
            wh & 0xFFFF,
            wh >> 16,
            src.below(700),
            src.below(101),
            pick(src, (0, 0xFFFF)),
        ]
    k = src.below(10)
    if k < 4:
        frame = modbus_reply(1, 0x04, regs)
    elif k < 8:
        frame = mutate_bytes(src, modbus_reply(1, 0x04, regs))
    else:
        frame = src.blob(30)
    return frame, pick(src, PZEM_VARIANTS)


@target("pzem004t.read", "PZEM-004T driver: Modbus reply to measurement (firmware)", gen_pzem)
def run_pzem(inp: tuple[bytes, str]) -> str:
    from wattbench_fw.contract import FLAG_OVER_RANGE
    from wattbench_fw.errors import MeterError
    from wattbench_fw.meters.pzem004t import MAX_AMPS, PZEM004T

    frame, variant = inp
    meter = PZEM004T(FakeUart(frame), addr=1, variant=variant, timeout_ms=0)
    try:
        regs = ref.modbus_read_reply(frame, 1, 0x04, 10)
    except ref.RefError:
        regs = None
    try:
        vals, flags = meter.read()
    except MeterError as exc:
        assert regs is None, f"refused a valid reply: {exc!r}"
        return error_label(exc)
    assert regs is not None, "accepted a reply the Modbus reference refuses"
    # Datasheet scaling: 0.1 V, 0.001 A, 0.1 W, 1 Wh, 0.1 Hz, 0.01 PF; 32-bit values low word first.
    want = {
        "V": regs[0] / 10,
        "A": (regs[2] << 16 | regs[1]) / 1000,
        "W": (regs[4] << 16 | regs[3]) / 10,
        "Wh": regs[6] << 16 | regs[5],
        "Hz": regs[7] / 10,
        "PF": regs[8] / 100,
    }
    if want["A"] > MAX_AMPS[variant]:
        assert flags & FLAG_OVER_RANGE, "current above the meter's range not flagged"
        assert not {"A", "W", "PF"} & set(vals), "values derived from an over-range current were kept"
    else:
        assert not flags & FLAG_OVER_RANGE, "in-range reading flagged over range"
    for key, v in vals.items():
        if key == "u":
            continue
        assert math.isclose(v, want[key], rel_tol=1e-12, abs_tol=1e-12), (
            f"{key}={v} but the registers say {want[key]}"
        )
    check_clean(vals, flags)
    return "ok" if not flags else f"flags:{flags}"


WT300_ITEMS = ("W", "V", "A", "PF", "Hz")
WT300_MARKERS = {
    "NAN": "nan",
    "9.91E+37": "nan",
    "INF": "inf",
    "-INF": "inf",
    "9.9E+37": "inf",
    "-9.9E+37": "inf",
}


def gen_wt300(src: Source) -> tuple[bytes, tuple[str, ...], dict[str, str] | None]:
    """(reply line, items, per-item marker kind or None when the line is not well-formed)."""
    others = [q for q in WT300_ITEMS[1:] if chance(src, 60)]
    items = ("W", *others)
    if chance(src, 50):
        items = tuple(sorted(items, key=lambda q: src.below(100)))
    tokens, kinds = [], {}
    for q in items:
        if chance(src, 25):
            tok = pick(src, tuple(WT300_MARKERS))
            kinds[q] = WT300_MARKERS[tok]
        else:
            mag = src.below(10**6) / pick(src, (1, 10, 1000, 1e6))
            tok = pick(src, ("%+.4E", "%.5E", "%g", "%.3f"))
            tok = tok % (mag if chance(src, 80) else -mag)
            kinds[q] = "num"
        tokens.append(tok)
    line = ",".join(tokens).encode()
    k = src.below(10)
    if k < 5:
        return line, items, kinds
    if k < 9:
        return mutate_bytes(src, line), items, None
    return src.blob(60), items, None


@target("wt300.reply", "Yokogawa WT300 SCPI numeric reply parser (firmware)", gen_wt300)
def run_wt300(inp: tuple[bytes, tuple[str, ...], dict[str, str] | None]) -> str:
    from wattbench_fw.contract import FLAG_MISSED, FLAG_OVER_RANGE
    from wattbench_fw.errors import MeterError, SensorError
    from wattbench_fw.meters import wt300

    line, items, kinds = inp
    try:
        wt300.check_identity(line.decode("latin-1"))
    except SensorError:
        pass
    try:
        vals, flags = wt300.parse_reply(line, items)
    except MeterError as exc:
        assert kinds is None, f"refused a well-formed reply: {exc!r}"
        return error_label(exc)
    assert isinstance(vals, dict) and set(vals) <= set(items), f"values for items not asked for: {vals}"
    assert not flags & ~(FLAG_MISSED | FLAG_OVER_RANGE), f"unexpected flags {flags}"
    for key, v in vals.items():
        assert isinstance(v, float), f"{key}={v!r} is not a float"
    if kinds is not None:
        if kinds["W"] == "nan":
            assert (vals, flags) == ({}, FLAG_MISSED), "missing power not reported as a missed read"
        else:
            want_over = any(k == "inf" for k in kinds.values())
            assert bool(flags & FLAG_OVER_RANGE) == want_over, (
                "over-range marker not flagged (or flagged without one)"
            )
            assert set(vals) == {q for q, k in kinds.items() if k == "num"}, "marker fields not withheld"
            tokens = line.decode().split(",")
            for q, tok in zip(items, tokens, strict=True):
                if q in vals:
                    assert vals[q] == float(tok), f"{q}: {vals[q]} parsed from {tok!r}"
    # The same line through the driver, then the sampler's cleaning.
    meter = wt300.WT300(FakeUart(line + b"\n"), items=items, timeout_ms=0)
    try:
        rvals, rflags = meter.read()
    except MeterError as exc:
        raise AssertionError(f"driver refused a line the parser accepts: {exc!r}") from None
    check_clean(rvals, rflags)
    return "ok" if not flags else f"flags:{flags}"


INA226_CONFIGS = ((0.002, 10.0), (0.1, 0.8), (0.0005, 80.0), (0.01, 20.0))


def gen_ina226(src: Source) -> tuple[bytes, int]:
    edge = (b"\x7f\xff", b"\x80\x00", b"\xff\xff", b"\x00\x00", b"\x00\x04", b"\x00\x08")
    data = b"".join(src.blob(2).ljust(2, b"\0") if chance(src, 70) else pick(src, edge) for _ in range(5))
    return data, src.below(len(INA226_CONFIGS))


@target("ina226.read", "INA226 register decoding (firmware)", gen_ina226)
def run_ina226(inp: tuple[bytes, int]) -> str:
    from wattbench_fw.contract import FLAG_OVER_RANGE, FLAG_REVERSE
    from wattbench_fw.errors import MeterError
    from wattbench_fw.meters import ina226

    data, cfg = inp
    shunt_ohm, max_a = INA226_CONFIGS[cfg]
    words = [int.from_bytes(data[i : i + 2], "big") for i in range(0, 10, 2)]
    shunt, bus, current, power, mask = words
    order = (ina226.REG_SHUNT, ina226.REG_BUS, ina226.REG_CURRENT, ina226.REG_POWER, ina226.REG_MASK)
    regs = {reg: data[2 * i : 2 * i + 2] for i, reg in enumerate(order)}
    meter = ina226.INA226(FakeI2C(regs), shunt_ohm=shunt_ohm, max_a=max_a)
    lsb = meter.current_lsb
    try:
        vals, flags = meter.read()
    except MeterError as exc:
        return error_label(exc)
    # Datasheet: bus 1.25 mV/LSB unsigned; current signed 16-bit x Current_LSB; power 25 x Current_LSB.
    assert math.isclose(vals["V"], bus * 1.25e-3, rel_tol=1e-12), "bus voltage scaling"
    assert 0 <= vals["V"] <= 0xFFFF * 1.25e-3
    amps = ref.signed(current, 16) * lsb
    assert math.isclose(
        ina226.decode(shunt, bus, current, power, lsb)["Vshunt"],
        ref.signed(shunt, 16) * 2.5e-6,
        rel_tol=1e-12,
        abs_tol=1e-15,
    ), "shunt voltage sign or scaling"
    saturated = bool(mask & 0x0004) or ref.signed(shunt, 16) in (32767, -32768)
    if saturated:
        assert flags & FLAG_OVER_RANGE and "A" not in vals and "W" not in vals, "saturated ADC not flagged"
    elif amps < 0:
        assert flags & FLAG_REVERSE and "A" not in vals and "W" not in vals, "reverse current not flagged"
    else:
        assert math.isclose(vals["A"], amps, rel_tol=1e-12, abs_tol=1e-15), "current sign or scaling"
        assert 0 <= vals["A"] <= max_a, f"current {vals['A']} beyond the configured {max_a} A"
        assert math.isclose(vals["W"], power * 25 * lsb, rel_tol=1e-12, abs_tol=1e-15), "power scaling"
        assert 0 <= vals["W"] <= 0xFFFF * 25 * lsb
    check_clean(vals, flags)
    return "ok" if not flags else f"flags:{flags}"


INA228_CONFIGS = ((0.002, 10.0, 0), (0.015, 10.0, 1), (0.0005, 80.0, 0), (0.1, 1.0, 0))


def gen_ina228(src: Source) -> tuple[bytes, int]:
    sizes = (3, 3, 3, 5, 2)
    parts = []
    for n in sizes:
        if chance(src, 70):
            parts.append(src.blob(n).ljust(n, b"\0"))
        else:
            parts.append(
                pick(src, (b"\x80", b"\x7f", b"\xff", b"\x00")) + pick(src, (b"\xff", b"\x00")) * (n - 1)
            )
    return b"".join(parts), src.below(len(INA228_CONFIGS))


@target("ina228.read", "INA228 register decoding, 20/24/40-bit values (firmware)", gen_ina228)
def run_ina228(inp: tuple[bytes, int]) -> str:
    from wattbench_fw.contract import FLAG_OVER_RANGE, FLAG_REVERSE
    from wattbench_fw.errors import MeterError
    from wattbench_fw.meters import ina228

    data, cfg = inp
    shunt_ohm, max_a, adc_range = INA228_CONFIGS[cfg]
    vbus_b, cur_b, pow_b, en_b, diag_b = data[0:3], data[3:6], data[6:9], data[9:14], data[14:16]
    regs = {
        ina228.REG_VBUS: vbus_b,
        ina228.REG_CURRENT: cur_b,
        ina228.REG_POWER: pow_b,
        ina228.REG_ENERGY: en_b,
        ina228.REG_DIAG_ALRT: diag_b,
        ina228.REG_CHARGE: en_b,
        ina228.REG_DIETEMP: diag_b,
    }
    meter = ina228.INA228(FakeI2C(regs), shunt_ohm=shunt_ohm, max_a=max_a, adc_range=adc_range)
    lsb = meter.current_lsb
    vbus, cur, pw, en = (int.from_bytes(b, "big") for b in (vbus_b, cur_b, pow_b, en_b))
    diag = int.from_bytes(diag_b, "big")
    # Sign handling of every width against int.from_bytes.
    assert ina228.s20(cur) == ref.signed_high20_of_24(cur), "20-bit sign in a 24-bit register"
    assert ina228.s40(en) == ref.signed(en, 40), "40-bit sign"
    assert meter.read_charge() == ref.signed(en, 40) * lsb, "charge sign or scaling"
    assert meter.read_die_temp() == ref.signed(diag, 16) * 7.8125e-3, "die temperature sign or scaling"
    assert math.isclose(
        ina228.shunt_volts(cur, adc_range),
        ref.signed_high20_of_24(cur) * (78.125e-9 if adc_range else 312.5e-9),
        rel_tol=1e-12,
        abs_tol=1e-18,
    ), "shunt voltage sign or scaling"
    try:
        vals, flags = meter.read()
    except MeterError as exc:
        return error_label(exc)
    assert math.isclose(vals["V"], (vbus >> 4) * 195.3125e-6, rel_tol=1e-12), "bus voltage scaling"
    assert 0 <= vals["V"] < (1 << 20) * 195.3125e-6
    assert math.isclose(vals["Wh"], en * 16 * 3.2 * lsb / 3600, rel_tol=1e-12), "energy scaling"
    assert vals["Wh"] >= 0
    amps = ref.signed_high20_of_24(cur) * lsb
    if diag & (1 << 9):
        assert flags & FLAG_OVER_RANGE and "A" not in vals, "math overflow not flagged"
    elif amps < 0:
        assert flags & FLAG_REVERSE and "A" not in vals and "W" not in vals, "reverse current not flagged"
    else:
        assert math.isclose(vals["A"], amps, rel_tol=1e-12, abs_tol=1e-15), "current sign or scaling"
        assert 0 <= vals["A"] < max_a, f"current {vals['A']} beyond the configured {max_a} A"
        assert math.isclose(vals["W"], pw * 3.2 * lsb, rel_tol=1e-12, abs_tol=1e-15), "power scaling"
    check_clean(vals, flags)
    return "ok" if not flags else f"flags:{flags}"


# ====================================================================== node sensors (firmware)


def gen_sensor(src: Source) -> tuple[str, bytes]:
    kind = pick(src, ("sht3x", "ds18b20"))
    if kind == "sht3x":
        words = [src.below(0x10000).to_bytes(2, "big") for _ in range(2)]
        good = b"".join(w + bytes((ref.crc8_sensirion(w),)) for w in words)
        n = 6
    else:
        t = src.below(0x10000) if chance(src, 30) else (pick(src, (-55, 125, 85, 0, -10)) * 16) & 0xFFFF
        body = t.to_bytes(2, "little") + src.blob(6).ljust(6, b"\0")
        good = body + bytes((ref.crc8_maxim(body),))
        n = 9
    k = src.below(10)
    if k < 3:
        data = good
    elif k < 8:
        data = mutate_bytes(src, good)
    elif k < 9:
        data = b"\xff" * n
    else:
        data = src.blob(12)
    return kind, data


@target("sensors.crc", "SHT3x CRC-8 and DS18B20 scratchpad decoding (firmware)", gen_sensor)
def run_sensor(inp: tuple[str, bytes]) -> str:
    from wattbench_fw.errors import CRCError, FrameError, MeterError, NoReply
    from wattbench_fw.sensors import ds18b20, sht3x

    kind, data = inp
    if kind == "sht3x":
        assert sht3x.crc8(data) == ref.crc8_sensirion(data), "SHT3x CRC-8 differs from the reference"
        valid = (
            len(data) == 6
            and ref.crc8_sensirion(data[0:2]) == data[2]
            and ref.crc8_sensirion(data[3:5]) == data[5]
        )
        try:
            t, rh = sht3x.decode(data)
        except (CRCError, FrameError) as exc:
            assert not valid, f"refused a valid measurement: {exc!r}"
            return error_label(exc)
        assert valid, "accepted a measurement with a bad CRC or length"
        assert t == -45 + 175 * int.from_bytes(data[0:2], "big") / 65535, "temperature conversion"
        assert rh == 100 * int.from_bytes(data[3:5], "big") / 65535, "humidity conversion"
        assert -45 <= t <= 130 and 0 <= rh <= 100
        meter = sht3x.SHT3x(FakeI2C({-1: data}))
        check_clean(*meter_read(meter))
        if len(data) == 6:
            for bit in range(48):  # every single-bit error is caught by the CRC
                damaged = bytearray(data)
                damaged[bit // 8] ^= 1 << (bit % 8)
                try:
                    sht3x.decode(bytes(damaged))
                    raise AssertionError(f"single-bit error at bit {bit} not detected")
                except CRCError:
                    pass
        return "ok"
    assert ds18b20.crc8_maxim(data) == ref.crc8_maxim(data), "Maxim CRC-8 differs from the reference"
    try:
        t, raw = ds18b20.decode_scratchpad(data)
    except MeterError as exc:
        if len(data) != 9:
            assert isinstance(exc, FrameError), "wrong error for a short scratchpad"
        elif data == b"\xff" * 9:
            assert isinstance(exc, NoReply), "an all-ones bus not reported as no reply"
        else:
            assert isinstance(exc, CRCError) and ref.crc8_maxim(data[:8]) != data[8], (
                f"refused a valid scratchpad: {exc!r}"
            )
        return error_label(exc)
    assert len(data) == 9 and ref.crc8_maxim(data[:8]) == data[8], "accepted a scratchpad with a bad CRC"
    assert raw == int.from_bytes(data[0:2], "little"), "raw word"
    assert t == ref.signed(raw, 16) / 16, "temperature sign or scaling"
    check_clean({"T": t}, 0)
    return "ok"


def meter_read(meter: Any) -> tuple[dict[str, Any], int]:
    from wattbench_fw import port

    sleep = port.sleep_ms
    port.sleep_ms = lambda ms: None  # the SHT3x waits for its conversion; nothing to wait for here
    try:
        return meter.read()  # type: ignore[no-any-return]
    finally:
        port.sleep_ms = sleep


# ====================================================================== configuration loaders

FW_BASE_CONFIG: dict[str, Any] = {
    "dev": "bench-a",
    "board": "host",
    "broker": {"host": "127.0.0.1", "port": 1883, "user": "bench-a", "password": "pw"},
    "buses": {
        "u1": {"type": "serial", "port": "/dev/ttyUSB0", "baud": 9600},
        "i1": {"type": "i2c", "id": 0, "scl": 5, "sda": 4, "freq": 400000},
        "w1": {"type": "onewire", "pin": 2},
    },
    "channels": [
        {
            "c": "psu1",
            "meter": "pzem004t",
            "bus": "u1",
            "hz": 1,
            "role": "power",
            "node": "n1",
            "cal": {"gain": 1.0, "offset": 0.0},
            "opts": {"addr": 1},
        },
        {"c": "dc", "meter": "ina228", "bus": "i1", "hz": 10, "agg": 10, "opts": {"shunt_ohm": 0.002}},
        {"c": "inlet", "meter": "ds18b20", "bus": "w1", "hz": 0.5, "role": "inlet"},
        {"c": "sim", "meter": "sim", "hz": 2},
    ],
    "batch": {"max_rows": 100, "interval_ms": 500},
}


def gen_fw_config(src: Source) -> tuple[bytes, bytes | None]:
    doc = copy.deepcopy(FW_BASE_CONFIG)
    k = src.below(10)
    if k < 7:
        for _ in range(src.below(4)):
            doc = mutate_doc(src, doc)
        raw = dump_loose(doc, src)
    elif k < 9:
        raw = mutate_bytes(src, json.dumps(doc).encode())
    else:
        raw = pick(src, (deep_list(100_000).text, deep_dict(100_000).text, b"", b"\xff", src.blob(64)))
    board = None
    if chance(src, 15):
        board = dump_loose(
            mutate_doc(src, {"board": "esp32", "wifi": {"ssid": "lab"}, "buffer": {"ram_bytes": 65536}}), src
        )
    return raw, board


def _write(name: str, data: bytes) -> str:
    path = os.path.join(scratch_dir(), name)
    with open(path, "wb") as f:
        f.write(data)
    return path


@target("config.firmware", "appliance configuration loader (firmware/wattbench_fw/config.py)", gen_fw_config)
def run_fw_config(inp: tuple[bytes, bytes | None]) -> str:
    from wattbench_fw import config
    from wattbench_fw.errors import ConfigError

    raw, board = inp
    path = _write("config.json", raw)
    board_path = _write("board.json", board) if board is not None else None
    try:
        cfg = config.load(path, board_path)
    except ConfigError as exc:
        assert str(exc), "ConfigError without a message"
        return "error:ConfigError"
    assert isinstance(cfg, dict), "load returned no dict"
    assert 1 <= len(cfg["channels"]) <= 16
    return "ok"


COLLECTOR_BASE_CONFIG: dict[str, Any] = {
    "mqtt": {"broker": "127.0.0.1:1883", "user": "collector-1", "protocol": "5", "keepalive_s": 30},
    "store": {"store": "sqlite:///tmp/x.sqlite", "sqlite_sync": "FULL"},
    "influx": {"db": "wattbench", "batch_lines": 5000},
    "collector": {"id": "collector-1", "health_period_s": 5.0, "retry_s": 2.0, "max_batch_samples": 1000},
}


def _toml_key(key: str) -> str:
    return json.dumps(key, ensure_ascii=False)


def _toml_value(v: Any) -> str:
    if isinstance(v, RawJSON):
        text = v.text.decode("utf-8", errors="replace")
        return text.replace('{"a":', "{a = ")
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v if x is not None) + "]"
    if isinstance(v, dict):
        return (
            "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items() if x is not None) + "}"
        )
    return json.dumps(str(v))


def to_toml(doc: Any) -> bytes:
    """A JSON document written as TOML: scalars first, then one table per object member."""
    if not isinstance(doc, dict):
        return f"value = {_toml_value(doc)}\n".encode("utf-8", errors="surrogatepass")
    lines = [
        f"{_toml_key(k)} = {_toml_value(v)}"
        for k, v in doc.items()
        if v is not None and not isinstance(v, dict)
    ]
    for k, v in doc.items():
        if isinstance(v, dict):
            lines.append(f"[{_toml_key(k)}]")
            lines.extend(f"{_toml_key(kk)} = {_toml_value(vv)}" for kk, vv in v.items() if vv is not None)
    return ("\n".join(lines) + "\n").encode("utf-8", errors="surrogatepass")


ENV_VALUES = (
    "",
    "x",
    "1",
    "0",
    "true",
    "5",
    "3.1.1",
    "mqtt://h:1",
    "[::1]:1883",
    "h:0",
    "h:99999",
    "~",
    "~no-such-user-wb/x",
    "collector-1",
    "UPPER",
    "a" * 40,
    "é",
    "http://u:p@influx:8086",
    "sqlite:///tmp/x",
)


def gen_collector_config(src: Source) -> tuple[bytes, dict[str, str]]:
    from wattbench import config

    doc = copy.deepcopy(COLLECTOR_BASE_CONFIG)
    k = src.below(10)
    if k < 7:
        for _ in range(src.below(4)):
            doc = mutate_doc(src, doc)
        raw = to_toml(doc)
    elif k < 9:
        raw = mutate_bytes(src, to_toml(doc))
    else:
        raw = src.blob(80)
    env: dict[str, str] = {}
    names = sorted(config.ENV)
    for _ in range(src.below(3)):
        env[pick(src, names)] = pick(src, ENV_VALUES)
    if chance(src, 10):
        var = pick(src, ("WATTBENCH_MQTT_PASSWORD_FILE", "WATTBENCH_INFLUX_TOKEN_FILE"))
        env[var] = pick(src, secret_files())
    return raw, env


@functools.cache
def secret_files() -> tuple[str, ...]:
    text = _write("secret.txt", b"s3cret-value\n")
    binary = _write("secret.bin", bytes(range(256)))
    return (text, binary, scratch_dir(), os.path.join(scratch_dir(), "missing"))


@target(
    "config.collector", "collector configuration loader (collector/wattbench/config.py)", gen_collector_config
)
def run_collector_config(inp: tuple[bytes, dict[str, str]]) -> str:
    from wattbench import config

    raw, env = inp
    path = _write("collector.toml", raw)
    try:
        cfg = config.load_config(path, env=env).resolved()
    except config.ConfigError as exc:
        assert str(exc), "ConfigError without a message"
        return "error:ConfigError"
    assert config.ID_PATTERN.match(cfg.id), f"resolved id {cfg.id!r}"
    assert cfg.protocol in ("5", "3.1.1")
    assert 0 < cfg.port < 65536
    assert 1 <= cfg.receive_maximum <= 65535
    assert cfg.health_period_s > 0 and cfg.retry_s > 0, (
        f"periods not positive after resolved(): health {cfg.health_period_s!r}, retry {cfg.retry_s!r}"
    )
    text = repr(cfg)
    for name in ("mqtt_password", "influx_token", "influx_password"):
        assert f"{name}=" not in text, f"{name} appears in repr()"
    return "ok"


def gen_keyfile(src: Source) -> bytes:
    doc: Any = {"bench-a": "00" * 32, "bench-b": hmac_key()[1].hex()}
    k = src.below(10)
    if k < 6:
        for _ in range(1 + src.below(3)):
            doc = mutate_doc(src, doc)
        return dump_loose(doc, src)
    if k < 9:
        return mutate_bytes(src, json.dumps(doc).encode())
    return pick(src, (deep_list(50_000).text, b"\xff\xfe", b"", b"[]", b"null"))


@target("auth.keyfile", "HMAC key file loader, Verifier.from_file (collector)", gen_keyfile)
def run_keyfile(raw: bytes) -> str:
    from wattbench.ingest.auth import Verifier

    path = _write("keys.json", raw)
    try:
        v = Verifier.from_file(path)
    except ValueError as exc:
        assert str(exc), "error without a message"
        return f"error:{type(exc).__name__}"
    assert all(isinstance(d, str) for d in v.devices)
    return "ok"


# ====================================================================== appliance state files (firmware)

STATE_DOC = {
    "gen": 7,
    "boot": 12,
    "seq": 40000,
    "dropped": 3,
    "energy": {"psu1": [10.5, 3.25, 15.5], "dc": [0.0, None, 5.0]},
}


def gen_state(src: Source) -> tuple[bytes | None, bytes | None]:
    good = json.dumps(STATE_DOC).encode()

    def one() -> bytes | None:
        k = src.below(10)
        if k < 2:
            return None
        if k < 3:
            return good
        if k < 7:
            doc = copy.deepcopy(STATE_DOC)
            for _ in range(1 + src.below(2)):
                doc = mutate_doc(src, doc)
            return dump_loose(doc, src)
        if k < 9:
            return mutate_bytes(src, good)
        return src.blob(30)

    return one(), one()


@target("persist.state", "appliance state files read at boot (firmware/wattbench_fw/persist.py)", gen_state)
def run_state(inp: tuple[bytes | None, bytes | None]) -> str:
    from wattbench_fw.persist import SLOTS, EnergyTracker, Sequence, State

    d = os.path.join(scratch_dir(), "state")
    os.makedirs(d, exist_ok=True)
    for name, data in zip(SLOTS, inp, strict=True):
        path = os.path.join(d, name)
        if data is None:
            if os.path.exists(path):
                os.remove(path)
        else:
            with open(path, "wb") as f:
                f.write(data)
    state = State(d)
    boot = state.next_boot()
    assert isinstance(boot, int) and 0 <= boot < 2**32, f"boot counter out of range: {boot!r}"
    seq = Sequence(state, 1000)
    s = seq.take()
    assert isinstance(s, int) and s >= 0, f"sequence number not a non-negative integer: {s!r}"
    out = EnergyTracker(state, "psu1").update(1.0)
    assert is_finite_number(out) and out >= 0, f"energy total not a finite non-negative number: {out!r}"
    return "ok"


# ====================================================================== flash spool (firmware)


def gen_flash_payload(src: Source) -> bytes:
    """A samples batch as the appliance encodes it (from a vector, numbers nudged, maybe signed), a
    mutation of one, or any other payload."""
    from wattbench_fw import encode
    from wattbench_fw.sign import Signer

    vecs = [v for v in valid_vectors() if v.schema == "samples"]
    doc = json.loads(pick(src, vecs).raw)
    if chance(src, 40):
        doc = nudge_numbers(src, doc)
    try:
        raw = encode.batch(doc["dev"], doc["boot"], doc["clk"], [encode.row(r) for r in doc["samples"]])
    except (KeyError, TypeError, ValueError, OverflowError):
        try:
            raw = json.dumps(doc).encode()
        except ValueError:  # a nudged integer past the interpreter's limit on digits in a string
            raw = src.blob(300)
    if chance(src, 20):
        raw = Signer(b"k" * 32).sign(raw)
    k = src.below(10)
    if k < 5:
        return raw
    if k < 9:
        return mutate_bytes(src, raw, payload_corpus())
    return src.blob(300)


@target(
    "flash.compact", "compact flash form of a batch (firmware/wattbench_fw/compact.py)", gen_flash_payload
)
def run_flash_compact(raw: bytes) -> str:
    from wattbench_fw import compact

    packed = compact.pack(raw)
    if packed is None:
        return "kept-as-json"
    assert compact.unpack(packed) == raw, "the compact form does not rebuild the payload byte for byte"
    return "packed"


def gen_flash_segment(src: Source) -> tuple[bytes, list[int]]:
    """A segment file of compact and JSON records as the buffer writes them, then maybe damaged."""
    from wattbench_fw import compact
    from wattbench_fw.buffer import MAGIC, MAGIC_COMPACT

    out = bytearray()
    counts = []
    for _ in range(1 + src.below(4)):
        raw = gen_flash_payload(src)
        n = 1 + src.below(500)
        body = compact.pack(raw)
        magic = MAGIC_COMPACT
        if body is None or chance(src, 30):
            body, magic = raw, MAGIC
        out += magic + n.to_bytes(2, "big") + len(body).to_bytes(4, "big") + body
        counts.append(n)
    k = src.below(10)
    if k < 4:
        return bytes(out), counts
    if k < 6:
        return bytes(out[: src.below(len(out) + 1)]), []  # a power cut while writing
    if k < 9:
        return mutate_bytes(src, bytes(out)), []
    return src.blob(200), []


@target(
    "flash.segment",
    "segment files read at boot and sent (firmware/wattbench_fw/buffer.py)",
    gen_flash_segment,
)
def run_flash_segment(inp: tuple[bytes, list[int]]) -> str:
    from wattbench_fw.buffer import Buffer

    data, counts = inp
    d = os.path.join(scratch_dir(), "spool")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    with open(os.path.join(d, "seg00000000.bin"), "wb") as f:
        f.write(data)
    buf = Buffer(ram_bytes=1, flash_bytes=1 << 20, segment_bytes=65536, directory=d)
    held = buf.flash_samples()
    if counts:
        assert held == sum(counts), "an undamaged segment lost records at boot"
    sent = 0
    while (nxt := buf.next_unsent()) is not None:
        payload = nxt[1]
        if isinstance(payload, list):  # a compact record: pieces the MQTT client sends as one payload
            assert payload and all(isinstance(p, bytes) for p in payload), "a piece is not bytes"
        else:
            assert isinstance(payload, (bytes, bytearray)), "a record came back as something else than bytes"
        sent += 1
        assert buf.ack(nxt[0]), "a record handed out could not be acknowledged"
    assert buf.acked_samples + buf.dropped == held, "samples neither sent nor counted as dropped"
    assert buf.empty() and not os.listdir(d), "flash not emptied after everything was acknowledged"
    if counts:
        assert sent == len(counts) and buf.dropped == 0, "an undamaged segment did not send every record"
    return "dropped" if buf.dropped else "sent"


# ====================================================================== meter options from the config


@functools.cache
def meter_option_names(kind: str) -> tuple[str, ...]:
    """The options a meter's driver takes: the keyword parameters of its constructors, the driver's own
    first, then those its base classes take through **opts. Read from the driver, so a new meter
    needs no line here."""
    import inspect

    from wattbench_fw import meters

    names: list[str] = []
    for klass in meters.driver_class(kind).__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        for i, p in enumerate(inspect.signature(init).parameters.values()):
            # The first two are self and the bus, which come from the board, not the config.
            if i >= 2 and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name not in names:
                names.append(p.name)
    return tuple(names)


def gen_meter_opts(src: Source) -> tuple[str, dict[str, Any]]:
    from wattbench_fw import meters

    kind = pick(src, meters.KINDS)
    names = meter_option_names(kind)
    opts: dict[str, Any] = {}
    for _ in range(src.below(4)):
        value = awkward_value(src)
        if isinstance(value, RawJSON):
            value = 0
        elif isinstance(value, int) and not isinstance(value, bool) and 10**5 < abs(value) < 2**48:
            # A driver multiplying such a count by a string or list would allocate gigabytes on this
            # machine; far larger counts fail at once with MemoryError and stay in.
            value = float(value)
        opts[pick(src, names) if chance(src, 90) else "bogus"] = value
    return kind, opts


@target(
    "meters.create",
    "meter options from the config to a driver (firmware/wattbench_fw/meters)",
    gen_meter_opts,
)
def run_meter_opts(inp: tuple[str, dict[str, Any]]) -> str:
    from wattbench_fw import meters

    kind, opts = inp
    try:
        meters.create(kind, None, dict(opts))
    except ValueError as exc:  # ConfigError is a ValueError; drivers refuse bad values with ValueError
        return f"error:{type(exc).__name__}"
    return "ok"
