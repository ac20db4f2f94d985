"""What a run measured and how, for every report (terminal, JSON, HTML): the system under test as the
run_start event recorded it, each calibration interval, the timing of each interval, and the inlet
temperature or why there is none. Read from the run's phase events and its result message, so a stored
run reports the same as a freshly scored one."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.align import windows_from_events
from ..core.conformance import short_statement

# SPECpower_ssj2008's measurement window; a run with shorter windows is a rehearsal, not comparable.
SPEC_WINDOW_S = 240.0


def rate_unit(ops_label: str = "ops") -> str:
    """The unit of a throughput: the workload's op per second ("ops/s", "hashes/s"). SPEC's *_ops
    names (ssj_ops) are a throughput already and stay as they are."""
    return ops_label if ops_label.endswith("_ops") else f"{ops_label}/s"


def result_ops_label(result: Mapping[str, Any]) -> str:
    """The op a result's throughput counts (its workload's unit), "ops" when it does not say."""
    return str(result.get("unit") or "ops")


def units(ops_label: str = "ops") -> dict[str, str]:
    """The unit of each figure of the result's levels and summary, for a workload counting ops_label."""
    rate = rate_unit(ops_label)
    return {
        **UNITS,
        "ops": rate,
        "calibrated": rate,
        "peak_ops": rate,
        "ratio": f"{rate} per W",
        "overall": f"{rate} per W",
    }


# The unit of each figure of the result's levels and summary ("ops" is a throughput, like ssj_ops).
UNITS: dict[str, str] = {
    "ops": "ops/s",
    "calibrated": "ops/s",
    "peak_ops": "ops/s",
    "W": "W",
    "peak_W": "W",
    "idle_W": "W",
    "Wh": "Wh",
    "energy_Wh": "Wh",
    "ratio": "ops/s per W",
    "overall": "ops/s per W",
    "inlet_C": "°C",
    "actual": "fraction of calibrated throughput",
    "target": "fraction of calibrated throughput",
    "u": "fraction of W",
}

# (key in the run_start event's sut object, label). The first ones are always shown, as "not
# recorded" when absent; the others only when present.
SUT_SHOWN = (
    ("cpu", "CPU model"),
    ("cores", "cores"),
    ("memory_MiB", "memory"),
    ("os", "OS"),
    ("kernel", "kernel"),
)
SUT_OPTIONAL = (("sockets", "sockets"), ("arch", "architecture"), ("note", "note"))
NOT_RECORDED = "not recorded"
WAIVED_TEXT = "inlet temperature not measured (waived: --no-inlet-required)"


def run_start(events: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    return next((e for e in events if e.get("event") == "run_start"), {})


def timing(events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each interval that has a measurement window: ramp-up, window and ramp-down, in seconds."""
    marks: dict[str, dict[str, int]] = {}
    kinds: dict[str, str] = {}
    order: list[str] = []
    for e in sorted(events, key=lambda e: (e.get("n", 0), e.get("t", 0))):
        phase = str(e.get("phase"))
        if phase == "run":
            continue
        if phase not in marks:
            order.append(phase)
        marks.setdefault(phase, {})[str(e.get("event"))] = int(e["t"])
        if e.get("kind"):
            kinds[phase] = str(e["kind"])
    out = []
    for phase in order:
        m = marks[phase]
        if not {"measure_start", "measure_end"} <= m.keys():
            continue
        row: dict[str, Any] = {"phase": phase}
        if phase in kinds:
            row["kind"] = kinds[phase]
        if "phase_start" in m:
            row["ramp_up_s"] = max(m["measure_start"] - m["phase_start"], 0) / 1000.0
        row["measure_s"] = max(m["measure_end"] - m["measure_start"], 0) / 1000.0
        if "phase_end" in m:
            row["ramp_down_s"] = max(m["phase_end"] - m["measure_end"], 0) / 1000.0
        out.append(row)
    return out


def calibration(events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:

    return [
        {"phase": w.phase, "ops_per_s": (w.ops or 0) / w.duration_s}
        for w in windows_from_events(events)
        if w.kind == "calibration" and w.duration_s > 0
    ][:10]


def inlet(result: Mapping[str, Any]) -> dict[str, Any]:
    """measured (with the range of the windows' means), not measured, or waived: no reading and the
    check switched off. A result without checks (an old store) never counts as waived."""
    temps = [float(r["inlet_C"]) for r in result.get("levels", []) if "inlet_C" in r]
    if temps:
        return {"state": "measured", "min_C": min(temps), "max_C": max(temps)}
    checks = result.get("checks", [])
    if checks and not any(c.get("name") == "inlet_temp" for c in checks):
        return {"state": "waived"}
    return {"state": "not measured"}


def measured(evaluation: Any) -> dict[str, Any]:
    """The report's "measured" section (schema/v1/report.schema.json)."""
    events = evaluation.events
    start = run_start(events)
    rows = timing(events)
    out: dict[str, Any] = {
        "sut": dict(start.get("sut") or {}),
        "calibration": calibration(events),
        "timing": rows,
        "inlet": inlet(evaluation.result),
    }
    if evaluation.calibration_missing:
        out["calibrated_missing"] = str(evaluation.calibration_missing)[:200]
    if start.get("host"):
        out["host"] = str(start["host"])
    out.update(how(evaluation.result))
    windows = [r["measure_s"] for r in rows if r.get("kind") != "concurrency"]
    if windows:
        out["shortest_window_s"] = min(windows)
        out["rehearsal"] = min(windows) < SPEC_WINDOW_S
    return out


def how(result: Mapping[str, Any]) -> dict[str, Any]:
    """What the result recorded of how the run was measured: the workload's command line, the host's
    load average at the start and end, and whether the summed power came from a simulated meter."""
    out: dict[str, Any] = {}
    if result.get("command"):
        out["command"] = str(result["command"])
    load = result.get("load")
    if isinstance(load, Mapping) and load:
        out["load"] = {k: float(load[k]) for k in ("start", "end") if k in load}
    if result.get("simulated_meter"):
        out["simulated_meter"] = True
    return out


# ---------------------------------------------------------------------- text for the renderers
SIMULATED_TEXT = (
    "simulated meter: the power is modelled (in a demo, from this host's CPU use), not measured; "
    "it shows how wattbench works, not what this machine draws"
)


def workload_text(result: Mapping[str, Any]) -> str:
    """The workload and, for one that runs a program, its command line as recorded (redacted)."""
    name = str(result.get("workload") or NOT_RECORDED)
    return f"{name}: {result['command']}" if result.get("command") else name


def load_text(m: Mapping[str, Any]) -> str:
    """The host's 1-minute load average at the start and the end of the run."""
    load = m.get("load") or {}
    if not load:
        return NOT_RECORDED
    cores = m.get("sut", {}).get("cores")
    parts = [
        f"{load[k]:.2f} at the {k}" if k in load else f"{NOT_RECORDED} at the {k}" for k in ("start", "end")
    ]
    return "1-minute load average " + ", ".join(parts) + (f" ({cores} cores)" if cores else "")


def suite_items(m: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, text) rows of what a suite measured (suite.schema.json's measured)."""
    rows = [
        ("system under test", " · ".join(f"{k}: {v}" for k, v in sut_items(m))),
        ("host load", load_text(m)),
    ]
    if m.get("simulated_meter"):
        rows.append(("meter", SIMULATED_TEXT))
    if "shortest_window_s" in m:
        timing = f"{m.get('intervals', 0)} measurement windows, the shortest {m['shortest_window_s']:g} s"
    else:
        timing = "no measurement window was recorded"
    rows.append(("timing", timing))
    return rows


def how_items(m: Mapping[str, Any], result: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, text) rows of the workload's command line, the host's load and a simulated meter."""
    rows = [("workload", workload_text(result)), ("host load", load_text(m))]
    if m.get("simulated_meter"):
        rows.append(("meter", SIMULATED_TEXT))
    return rows


def _memory(mib: Any) -> str:
    gib = float(mib) / 1024.0
    return f"{gib:.3g} GiB" if gib >= 1 else f"{float(mib):.0f} MiB"


def sut_items(m: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, value) of the system under test, "not recorded" for what the run did not say."""
    sut = m.get("sut", {})
    out = [("host", str(m.get("host") or NOT_RECORDED))]
    for key, label in SUT_SHOWN:
        v = sut.get(key)
        if v is None:
            out.append((label, NOT_RECORDED))
        else:
            out.append((label, _memory(v) if key == "memory_MiB" else str(v)))
    out += [(label, str(sut[key])) for key, label in SUT_OPTIONAL if key in sut]
    return out


def _seconds(values: Sequence[float]) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:g} s" if math.isclose(lo, hi, abs_tol=0.05) else f"{lo:g}–{hi:g} s"


def timing_text(m: Mapping[str, Any]) -> str:
    rows = m.get("timing", [])
    if not rows:
        return "no measurement window was recorded"
    parts = []
    for key, label in (
        ("ramp_up_s", "ramp-up"),
        ("measure_s", "measurement window"),
        ("ramp_down_s", "ramp-down"),
    ):
        vals = [float(r[key]) for r in rows if key in r]
        if vals:
            parts.append(f"{label} {_seconds(vals)}")
    return f"{len(rows)} interval{'' if len(rows) == 1 else 's'}: " + ", ".join(parts)


def rehearsal_text(m: Mapping[str, Any]) -> str | None:
    if not m.get("rehearsal"):
        return None
    return (
        f"REHEARSAL: measurement windows as short as {m['shortest_window_s']:g} s, shorter than "
        f"SPECpower's {SPEC_WINDOW_S:g} s: a rehearsal, not a comparable result"
    )


def calibration_text(m: Mapping[str, Any], calibrated: float | None, fmt: Any, ops_label: str = "ops") -> str:
    cal = m.get("calibration", [])
    if not cal:
        return "no calibration interval"
    rate = rate_unit(ops_label)
    text = ", ".join(f"{c['phase']} {fmt(c['ops_per_s'])} {rate}" for c in cal)
    if calibrated:
        text += f"; calibrated throughput {fmt(calibrated)} {rate}"
    elif m.get("calibrated_missing"):
        text += f"; no calibrated throughput: {m['calibrated_missing']}"
    return text


def inlet_text(m: Mapping[str, Any]) -> str:
    i = m.get("inlet", {})
    if i.get("state") == "measured":
        lo, hi = i["min_C"], i["max_C"]
        span = f"{lo:.1f} °C" if abs(hi - lo) < 0.05 else f"{lo:.1f}–{hi:.1f} °C"
        return f"inlet {span} (mean of each window)"
    if i.get("state") == "waived":
        return WAIVED_TEXT
    return "inlet temperature not measured"


def failed_names(checks: Sequence[Any]) -> list[str]:
    """Names of the failed checks, each once, in order."""
    out: list[str] = []
    for c in checks:
        if not c.ok and c.name not in out:
            out.append(c.name)
    return out


def standard_short(result: Mapping[str, Any]) -> str | None:
    """'EE HPC WG Level 1, not SPEC-comparable' from the result's standard statement, or None when the
    result has none (scored without a store, or an older result)."""
    st = result.get("standard")
    if not isinstance(st, Mapping):
        return None
    return short_statement(int(st.get("eehpc_level", 0)), bool(st.get("spec")))


def standard_text(result: Mapping[str, Any]) -> str:
    """The measurement's standard statement in words, or why there is none."""
    st = result.get("standard")
    if isinstance(st, Mapping) and st.get("statement"):
        return str(st["statement"])
    return "not stated: no power was measured for this run"


def options_text(result: Mapping[str, Any]) -> str:
    """The scoring options the result was scored with, as a command line would give them."""
    opts = result.get("options")
    if not isinstance(opts, Mapping):
        return "not recorded"
    if not opts:
        return "the defaults"
    words = []
    for name, value in opts.items():
        if value is True:
            words.append(str(name))
        elif isinstance(value, list):
            words += [f"{name} {v}" for v in value]
        else:
            words.append(f"{name} {value}")
    return " ".join(words)


def badge_text(valid: bool, checks: Sequence[Any], result: Mapping[str, Any] | None = None) -> str:
    """VALID (as the standard its measurement meets, when stated) or INVALID and what failed."""
    if valid:
        short = standard_short(result or {})
        return f"VALID as {short}" if short else "VALID"
    names = failed_names(checks)
    if not names:
        return "INVALID"
    return f"INVALID: {', '.join(names)} failed"


def failures_first(checks: Sequence[Any]) -> list[Any]:
    return [c for c in checks if not c.ok] + [c for c in checks if c.ok]


# How a result's channel row shows its role: the summed ones say so; a component is summed only when
# the run named it, and its power is then not the server's wall power.
SUMMED_ROLE = {"power": "power (summed)", "component": "component (summed: named; not wall power)"}


def role_cell(row: Mapping[str, Any]) -> str:
    role = str(row.get("role", ""))
    return SUMMED_ROLE.get(role, role)


def accuracy_cell(row: Mapping[str, Any]) -> str:
    if "acc" in row:
        return f"{row['acc'] * 100:.2g} %"
    return "unknown" if row.get("role") in SUMMED_ROLE else ""
