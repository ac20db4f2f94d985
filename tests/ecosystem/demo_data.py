"""A few minutes of wattbench data in the contract's InfluxDB layout, for dashboard queries.

Two appliances, each with two AC channels and an inlet probe, sampled at 1 Hz; their status and the
collector's health points; one scored run with its phase events and per-level results. Field types
come from schema/v1/influx.json, so the data cannot drift from the layout the dashboards read.
"""

from __future__ import annotations

import math
import urllib.parse
import urllib.request
from typing import Any

import wattbench_schema as contract

T0_MS = 1763713200000  # 2025-11-21T08:20:00Z
DURATION_S = 300
DEVICES = ("bench-a", "bench-b")
POWER_CHANNELS = ("psu1", "psu2")
INLET_CHANNEL = "inlet"
RUN_ID = "20251121T082000Z-demo"
COLLECTOR = "col1"
HEALTH_PERIOD_S = 10
LEVELS = (("l100", 1.0), ("l50", 0.5), ("idle", None))
LEVEL_S = 60


def _escape_tag(value: str) -> str:
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=").replace(" ", "\\ ")


def _field(kind: str, value: Any) -> str:
    if kind == "int":
        return f"{int(value)}i"
    if kind == "float":
        return repr(float(value))
    if kind == "bool":
        return "true" if value else "false"
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def line(measurement: str, tags: dict[str, str], fields: dict[str, Any], t_ms: int) -> str:
    """One line-protocol point, typed by the contract; unknown tags or fields are a bug here."""
    spec = contract.influx_layout()["measurements"][measurement]
    assert set(tags) <= set(spec["tags"]), (measurement, set(tags) - set(spec["tags"]))
    kinds = spec["fields"]
    unknown = set(fields) - set(kinds)
    assert not unknown, (measurement, unknown)
    tag_part = "".join(f",{k}={_escape_tag(v)}" for k, v in sorted(tags.items()))
    field_part = ",".join(f"{k}={_field(kinds[k], v)}" for k, v in fields.items())
    return f"{measurement}{tag_part} {field_part} {t_ms}"


def _load_watts(dev_index: int, ch_index: int, second: int) -> float:
    """Power follows the run: full load, half load, idle, with a small ripple."""
    level = min(second // LEVEL_S, len(LEVELS))
    base = (250.0, 160.0, 80.0, 80.0)[level] if second >= 0 else 80.0
    return base / 2 + 10 * dev_index + 3 * ch_index + 2.0 * math.sin(second / 7.0)


# ------------------------------------------------------------------ contract-shaped records


def sample_rows() -> dict[str, list[dict[str, Any]]]:
    """Per device, the sample rows of its batches (samples.schema.json), in sequence order."""
    out: dict[str, list[dict[str, Any]]] = {}
    for d, dev in enumerate(DEVICES):
        rows: list[dict[str, Any]] = []
        seq = 1000
        wh = {ch: 1000.0 * (d + 1) + 10 * c for c, ch in enumerate(POWER_CHANNELS)}
        for second in range(DURATION_S):
            t = T0_MS + second * 1000
            for c, ch in enumerate(POWER_CHANNELS):
                w = _load_watts(d, c, second)
                wh[ch] += w / 3600.0  # the counter integrates power; it never goes down
                v = 229.5 + 0.3 * math.cos(second / 11.0)
                pf = 0.95 + 0.01 * c
                rows.append(
                    {
                        "s": seq,
                        "t": t,
                        "c": ch,
                        "W": round(w, 3),
                        "V": round(v, 2),
                        "A": round(w / (v * pf), 4),
                        "PF": pf,
                        "Hz": 50.0,
                        "Wh": round(wh[ch], 4),
                        "u": 0.005,
                    }
                )
                seq += 1
            temp = round(22.5 + 0.5 * d + 0.1 * math.sin(second / 30.0), 3)
            rows.append({"s": seq, "t": t, "c": INLET_CHANNEL, "T": temp, "RH": 41.0 + d})
            seq += 1
            if d == 1 and second % 97 == 5:
                seq += 1  # a lost row: the collector counts this as a gap
        out[dev] = rows
    return out


def batches(dev: str, rows: list[dict[str, Any]], size: int = 100) -> list[dict[str, Any]]:
    clk = {"sync": "ntp", "age": 40.0, "off": -1.5, "err": 4.0}
    return [
        {"v": 1, "dev": dev, "boot": 3, "clk": clk, "samples": rows[i : i + size]}
        for i in range(0, len(rows), size)
    ]


def statuses() -> list[tuple[dict[str, Any], int]]:
    """(status payload, receive time) pairs: one a minute per device, one of them offline."""
    out = []
    for d, dev in enumerate(DEVICES):
        for k, second in enumerate(range(0, DURATION_S, 60)):
            t = T0_MS + second * 1000 + 1
            status: dict[str, Any] = {
                "v": 1,
                "dev": dev,
                "state": "offline" if (d == 1 and k == 3) else "online",
                "t": t,
                "reason": "periodic",
                "boot": 3 + d,
                "up": 100.0 + second,
                "seq": 1000 + second * 3,
                "buf": {"ram": 0, "flash": 0, "dropped": 0},
                "clk": {"sync": "ntp", "age": 40.0 + second % 60, "err": 3.5 + d},
                "rssi": -60 - d * 5,
            }
            out.append((status, t))
    return out


def healths() -> list[tuple[str, str, dict[str, Any], int]]:
    """(collector, dev, wb_health fields, time): the collector's running counters every 10 s."""
    out = []
    for d, dev in enumerate(DEVICES):
        gaps = 0
        for second in range(HEALTH_PERIOD_S, DURATION_S + 1, HEALTH_PERIOD_S):
            if d == 1 and second % 100 == 0:
                gaps += 1
            received = second * (len(POWER_CHANNELS) + 1)
            fields = {
                "received": received,
                "stored": received,
                "duplicates": 0,
                "gaps": gaps,
                "missing": gaps,
                "out_of_order": 0,
                "rejects": 0,
                "offset_ms": -3.0 + 5.0 * d + 0.5 * math.sin(second / 50.0),
                "rate_hz": float(len(POWER_CHANNELS) + 1),
                "clk_age": float(second % 60),
                "clk_err": 4.0 + d,
                "spool_bytes": 0,
                "spool_age": 0.0,
            }
            out.append((COLLECTOR, dev, fields, T0_MS + second * 1000))
    return out


def phase_events() -> list[dict[str, Any]]:
    """The run's phase events (phase.schema.json)."""
    events: list[dict[str, Any]] = []

    def event(t: int, name: str, phase: str, **fields: Any) -> None:
        events.append(
            {"v": 1, "run": RUN_ID, "n": len(events), "t": t, "event": name, "phase": phase, **fields}
        )

    event(T0_MS, "run_start", "run", kind="run", workload="builtin")
    for i, (phase, target) in enumerate(LEVELS):
        start = T0_MS + i * LEVEL_S * 1000
        kind = "idle" if target is None else "target"
        extra = {} if target is None else {"target": target, "rate": 3000.0 * target}
        event(start + 1, "phase_start", phase, kind=kind, **extra)
        event(start + 10_000, "measure_start", phase, kind=kind, **extra)
        ops = 0 if target is None else int(3000 * target * 40)
        event(start + 50_000, "measure_end", phase, kind=kind, ops=ops, **extra)
        event(start + LEVEL_S * 1000 - 1, "phase_end", phase, kind=kind, **extra)
    event(T0_MS + len(LEVELS) * LEVEL_S * 1000, "run_end", "run", kind="run")
    return events


def result() -> dict[str, Any]:
    """The scored run (result.schema.json)."""
    levels = []
    total_ops = 0.0
    total_w = 0.0
    for i, (phase, target) in enumerate(LEVELS):
        second = i * LEVEL_S + 30
        watts = sum(_load_watts(d, c, second) for d in range(len(DEVICES)) for c in range(2))
        ops = 0.0 if target is None else 3000.0 * target * 40
        total_ops += ops
        total_w += watts
        level: dict[str, Any] = {
            "phase": phase,
            "kind": "idle" if target is None else "target",
            "ops": ops,
            "W": watts,
            "Wh": watts * 40 / 3600,
            "ratio": ops / 40 / watts,
            "inlet_C": 23.0,
        }
        if target is not None:
            level["target"] = target
            level["actual"] = target
        levels.append(level)
    return {
        "v": 1,
        "run": RUN_ID,
        "t": T0_MS + len(LEVELS) * LEVEL_S * 1000 + 500,
        "valid": True,
        "workload": "builtin",
        "overall": total_ops / 40 / total_w,
        "levels": levels,
        "checks": [{"name": "complete", "ok": True}],
    }


# ------------------------------------------------------------------ the same records as line protocol


def sample_lines() -> list[str]:
    return [
        line(
            "wb_sample",
            {"dev": dev, "ch": row["c"]},
            {k: v for k, v in row.items() if k not in ("t", "c")},
            row["t"],
        )
        for dev, rows in sample_rows().items()
        for row in rows
    ]


def status_lines() -> list[str]:
    lines = []
    for status, t in statuses():
        fields = {
            "state": status["state"],
            "clk_sync": status["clk"]["sync"],
            "boot": status["boot"],
            "seq": status["seq"],
            "buf_ram": status["buf"]["ram"],
            "buf_flash": status["buf"]["flash"],
            "dropped": status["buf"]["dropped"],
            "rssi": status["rssi"],
            "up": status["up"],
            "clk_age": status["clk"]["age"],
            "clk_err": status["clk"]["err"],
        }
        lines.append(line("wb_status", {"dev": status["dev"]}, fields, t))
    return lines


def health_lines() -> list[str]:
    return [line("wb_health", {"dev": dev, "collector": col}, fields, t) for col, dev, fields, t in healths()]


def phase_lines() -> list[str]:
    kinds = contract.influx_layout()["measurements"]["wb_phase"]["fields"]
    return [
        line(
            "wb_phase",
            {"run": e["run"], "phase": e["phase"], "event": e["event"]},
            {k: e[k] for k in kinds if k in e},
            e["t"],
        )
        for e in phase_events()
    ]


def result_lines() -> list[str]:
    res = result()
    lines = []
    for level in res["levels"]:
        fields = {k: v for k, v in level.items() if k != "phase"}
        fields["valid"] = res["valid"]
        lines.append(line("wb_result", {"run": res["run"], "phase": level["phase"]}, fields, res["t"]))
    overall = {"overall": res["overall"], "valid": res["valid"]}
    lines.append(line("wb_result", {"run": res["run"], "phase": "overall"}, overall, res["t"]))
    return lines


def all_lines() -> list[str]:
    return sample_lines() + status_lines() + health_lines() + phase_lines() + result_lines()


def window() -> tuple[int, int]:
    """The time range holding all demo points, in epoch ms."""
    return T0_MS - 60_000, T0_MS + (DURATION_S + 120) * 1000


def write(url: str, db: str, lines: list[str] | None = None, chunk: int = 5000) -> int:
    """Write the demo points through the InfluxDB 1.x HTTP API; returns the number written."""
    points = all_lines() if lines is None else lines
    query = urllib.parse.urlencode({"db": db, "precision": "ms"})
    for i in range(0, len(points), chunk):
        body = "\n".join(points[i : i + chunk]).encode()
        req = urllib.request.Request(f"{url}/write?{query}", data=body, method="POST")
        with urllib.request.urlopen(req, timeout=60) as resp:
            if resp.status != 204:
                raise RuntimeError(f"write failed with HTTP {resp.status}")
    return len(points)
