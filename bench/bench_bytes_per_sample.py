"""Bytes per sample on the wire: wattbench sample batches vs a Tasmota-style SENSOR report.

Counts whole MQTT PUBLISH packets (fixed header, remaining length, topic, packet id, payload) plus
the 4-byte PUBACK that QoS 1 adds, divided by the samples they carry. TCP/IP and TLS overhead come on
top for both and are left out.

The comparison is a Tasmota-style plug: one JSON object per reading on tele/<device>/SENSOR with the
ENERGY block (TotalStartTime, Total, Yesterday, Today, Power, ApparentPower, ReactivePower, Factor,
Voltage, Current) and a Time stamp, published at QoS 0 (no packet id, no PUBACK), which favours it.

    python bench/bench_bytes_per_sample.py
"""

from __future__ import annotations

import json

from wattbench_fw import encode, mqtt
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


if __name__ == "__main__":
    main()
