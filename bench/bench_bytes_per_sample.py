"""Bytes per sample on the wire and on the appliance's flash.

Wire: wattbench sample batches vs a Tasmota-style SENSOR report. Counts whole MQTT PUBLISH packets
(fixed header, remaining length, topic, packet id, payload) plus the 4-byte PUBACK that QoS 1 adds,
divided by the samples they carry. TCP/IP and TLS overhead come on top for both and are left out.
The comparison is a Tasmota-style plug: one JSON object per reading on tele/<device>/SENSOR with the
ENERGY block (TotalStartTime, Total, Yesterday, Today, Power, ApparentPower, ReactivePower, Factor,
Voltage, Current) and a Time stamp, published at QoS 0 (no packet id, no PUBACK), which favours it.

Flash: the same batches of 4 channels x 10 Hz, closed as the appliance closes them while offline,
spilled by the firmware's buffer into segment files in a temporary directory. The previous record
(b"WB": 8-byte header + the JSON payload) and the compact record are set side by side, with the
offline time 1 MiB of flash holds for each. Every batch is read back from flash and must be the
exact payload that was stored (exit status 1 otherwise).

    python bench/bench_bytes_per_sample.py
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
from collections.abc import Callable

from wattbench_fw import encode, mqtt
from wattbench_fw.buffer import HEADER, Buffer
from wattbench_fw.contract import topic

T0 = 1_763_709_600_000
CLK = {"sync": "ntp", "age": 42.5, "off": -3.2, "err": 4.1, "ppm": 11.7, "steps": 0}
PUBACK = 4


def publish_bytes(topic_name: str, payload: bytes, qos: int) -> int:
    return (
        len(mqtt.publish_header(topic_name, len(payload), qos, False, 1 if qos else 0))
        + len(payload)
        + (PUBACK if qos else 0)
    )


def ac_row(i: int, period_ms: int) -> dict[str, object]:
    """A PZEM-004T-like reading: every AC quantity, energy and uncertainty."""
    return {
        "s": 100_000 + i,
        "t": T0 + i * period_ms,
        "c": "psu1",
        "W": round(231.4 + (i % 17) * 0.3, 1),
        "V": 229.8,
        "A": round(1.012 + (i % 5) * 0.001, 3),
        "PF": 0.99,
        "Hz": 50.0,
        "Wh": 1234 + i // 3600,
        "u": 0.005,
    }


def dc_row(i: int, period_ms: int) -> dict[str, object]:
    """An aggregated INA228-like reading: W mean/min/max, V, A, n."""
    return {
        "s": 100_000 + i,
        "t": T0 + i * period_ms,
        "c": "rail12v",
        "W": round(96.25 + (i % 13) * 0.013, 3),
        "V": 12.031,
        "A": round(8.0002 + (i % 7) * 0.0011, 4),
        "n": 100,
        "Wmin": 95.91,
        "Wmax": 96.702,
    }


def ours(make_row, rows_per_batch: int, period_ms: int, batches: int = 20) -> float:
    t = topic("samples", "bench-a")
    total = 0
    for b in range(batches):
        rows = [encode.row(make_row(b * rows_per_batch + i, period_ms)) for i in range(rows_per_batch)]
        total += publish_bytes(t, encode.batch("bench-a", 3, CLK, rows), qos=1)
    return total / (batches * rows_per_batch)


def tasmota(n: int = 200) -> float:
    total = 0
    for i in range(n):
        payload = json.dumps(
            {
                "Time": f"2025-11-21T07:20:{i % 60:02d}",
                "ENERGY": {
                    "TotalStartTime": "2025-01-01T00:00:00",
                    "Total": round(1.234 + i / 3.6e6, 3),
                    "Yesterday": 0.923,
                    "Today": 0.337,
                    "Power": 231,
                    "ApparentPower": 233,
                    "ReactivePower": 31,
                    "Factor": 0.99,
                    "Voltage": 230,
                    "Current": 1.012,
                },
            },
            separators=(",", ":"),
        ).encode()
        total += publish_bytes("tele/tasmota_5A9AE8/SENSOR", payload, qos=0)
    return total / n


CHANNELS = 4
HZ = 10
MIB = 1 << 20


def ac_rows(rng: random.Random, ticks: int) -> list[dict[str, object]]:
    """4 PZEM-004T-like channels at 10 Hz, read one after another each tick: the meter's resolution
    (0.1 W, 0.1 V, 0.001 A, 0.01 PF, 0.1 Hz, 1 Wh) with load noise."""
    rows: list[dict[str, object]] = []
    watts = [231.4, 118.0, 402.7, 65.3]
    for k in range(ticks):
        for c in range(CHANNELS):
            watts[c] = max(0.0, watts[c] + rng.gauss(0, 1.5))
            volts = round(229.8 + rng.gauss(0, 0.3), 1)
            pf = round(min(1.0, 0.97 + rng.gauss(0, 0.01)), 2)
            rows.append(
                {
                    "s": 100_000 + len(rows),
                    "t": T0 + k * 100 + c * 6,
                    "c": f"psu{c + 1}",
                    "W": round(watts[c], 1),
                    "V": volts,
                    "A": round(watts[c] / volts / pf, 3),
                    "PF": pf,
                    "Hz": round(50.0 + rng.gauss(0, 0.02), 1),
                    "Wh": 1234 + c * 100 + int(k * watts[c] / 36000),
                    "u": 0.005,
                }
            )
    return rows


def dc_rows(rng: random.Random, ticks: int) -> list[dict[str, object]]:
    """4 INA228-like rails at 10 Hz, each row the mean, min and max of n=10 raw reads, rounded as
    the sampler rounds them (3 decimals for W and V, 5 for A)."""
    rows: list[dict[str, object]] = []
    base = [96.25, 41.7, 12.9, 5.02]
    volts = [12.031, 12.004, 5.012, 3.301]
    for k in range(ticks):
        for c in range(CHANNELS):
            reads = [base[c] + rng.gauss(0, 0.08) for _ in range(10)]
            w = sum(reads) / 10
            v = volts[c] + rng.gauss(0, 0.002)
            rows.append(
                {
                    "s": 500_000 + len(rows),
                    "t": T0 + k * 100 + c * 2,
                    "c": f"rail{c + 1}",
                    "W": round(w, 3),
                    "V": round(v, 3),
                    "A": round(w / v, 5),
                    "n": 10,
                    "Wmin": round(min(reads), 3),
                    "Wmax": round(max(reads), 3),
                }
            )
    return rows


def batches(rows: list[dict[str, object]], max_rows: int, max_bytes: int) -> list[tuple[bytes, int]]:
    """Payloads closed as App._add_row closes them while offline: at max_rows, or before a row
    would take the batch within 256 bytes of max_bytes."""
    out: list[tuple[bytes, int]] = []
    texts: list[str] = []
    size = 0
    for r in rows:
        text = encode.row(r)
        if texts and size + len(text) + 256 > max_bytes:
            out.append((encode.batch("bench-a", 3, CLK, texts), len(texts)))
            texts, size = [], 0
        texts.append(text)
        size += len(text) + 1
        if len(texts) >= max_rows:
            out.append((encode.batch("bench-a", 3, CLK, texts), len(texts)))
            texts, size = [], 0
    if texts:
        out.append((encode.batch("bench-a", 3, CLK, texts), len(texts)))
    return out


def flash(payloads: list[tuple[bytes, int]]) -> tuple[float, float, float, bool]:
    """Bytes per sample: previous record on flash, compact record on flash, on the wire; and whether
    every batch came back from flash byte for byte."""
    samples = sum(n for _, n in payloads)
    old = sum(HEADER + len(p) for p, _ in payloads)
    wire = sum(publish_bytes(topic("samples", "bench-a"), p, qos=1) for p, _ in payloads)
    with tempfile.TemporaryDirectory() as d:
        buf = Buffer(ram_bytes=1, flash_bytes=64 * MIB, segment_bytes=65536, directory=d)
        for p, n in payloads:
            buf.push(p, n)
        new = buf.flash_used
        back = []
        while (nxt := buf.next_unsent()) is not None:
            back.append(nxt[1])
            buf.ack(nxt[0])
    exact = back == [p for p, _ in payloads] and buf.spilled == len(payloads) and buf.dropped == 0
    return old / samples, new / samples, wire / samples, exact


def minutes_per_mib(bytes_per_sample: float) -> float:
    return MIB / bytes_per_sample / (CHANNELS * HZ) / 60


def flash_table() -> bool:
    rng = random.Random(19)
    ticks = 3000  # five minutes of 4 channels at 10 Hz per case
    kinds: list[tuple[str, Callable[[random.Random, int], list[dict[str, object]]]]] = [
        ("AC (PZEM-like: W V A PF Hz Wh u)", ac_rows),
        ("DC (INA228-like: W V A n Wmin Wmax)", dc_rows),
    ]
    shapes = [
        ("esp32 offline batches (100 rows / 4 KB)", 100, 4096),
        ("1 s batches (40 rows)", 40, 65536),
        ("100 ms batches (4 rows)", 4, 65536),
        ("host offline batches (500 rows / 64 KB)", 500, 65536),
    ]
    print()
    print(f"On flash, {CHANNELS} channels x {HZ} Hz; bytes per sample and offline minutes per MiB of flash")
    print(
        f"{'rows':<38} {'batches':<42} {'wire':>6} {'old':>6} {'new':>6} {'old/new':>7}"
        f" {'min/MiB old':>11} {'min/MiB new':>11}"
    )
    ok = True
    for kind, make in kinds:
        rows = make(rng, ticks)
        for shape, max_rows, max_bytes in shapes:
            old, new, wire, exact = flash(batches(rows, max_rows, max_bytes))
            ok = ok and exact
            print(
                f"{kind:<38} {shape:<42} {wire:>6.1f} {old:>6.1f} {new:>6.1f} {old / new:>7.2f}"
                f" {minutes_per_mib(old):>11.1f} {minutes_per_mib(new):>11.1f}"
                + ("" if exact else "  NOT READ BACK EXACTLY")
            )
    return ok


def main() -> None:
    ref = tasmota()
    print(f"Tasmota-style SENSOR report, one per reading (QoS 0): {ref:.1f} bytes/sample")
    cases = [
        ("AC (PZEM-like, all quantities), 1 Hz, 10 s batches", ac_row, 10, 1000),
        ("AC (PZEM-like, all quantities), 10 Hz, 1 s batches", ac_row, 10, 100),
        ("AC (PZEM-like, all quantities), 500-row batches", ac_row, 500, 100),
        ("DC aggregated (INA228-like, mean/min/max/n), 10 Hz, 1 s batches", dc_row, 10, 100),
        ("DC aggregated, 500-row batches", dc_row, 500, 100),
    ]
    for name, fn, rows, period in cases:
        b = ours(fn, rows, period)
        print(
            f"wattbench batch, {name} (QoS 1 + PUBACK): {b:.1f} bytes/sample, ratio to Tasmota {b / ref:.2f}"
        )
    if not flash_table():
        sys.exit(1)


if __name__ == "__main__":
    main()
