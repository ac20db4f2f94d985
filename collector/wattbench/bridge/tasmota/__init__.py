"""Tasmota: the energy monitor's telemetry, `tele/<topic>/SENSOR`, every TelePeriod seconds.

    {"Time": "2026-11-25T10:00:00", "ENERGY": {"Total": 12.345, "Power": 150, "Voltage": 230,
     "Current": 0.68, "Factor": 0.96, "Frequency": 50, ...}}

Source: https://tasmota.github.io/docs/MQTT/ (telemetry) and the energy monitoring page,
https://tasmota.github.io/docs/Power-Monitoring-Calibration/. Total is kWh (made Wh here). Frequency
(Hz) is there when the energy chip measures it (FreqRes).

A device with several relays sends lists (Power: [150, 20]): `index` picks the relay (0 for the
first); without it such a message is refused, not guessed. With SetOption129 0, Tasmota's default
(https://tasmota.github.io/docs/Commands/#setoption129), Total, Today and Yesterday stay single numbers:
the whole device's energy, so a relay's row reads no energy, never the device's as its own. With
SetOption129 1 they are lists and each relay reads its own. `device_total = true` makes the row the
device as a whole instead: the relays' power and current summed, and the device's Total (or the sum of
the relays' with SetOption129 1). Such a row and a relay's row are never both role power (bridge).

Tasmota's Time is local time in whole seconds, without a zone unless `SetOption52 1`: with the plug's
`zone` (or that offset) it is the reading's own time, which tells a stale message; samples are still
stamped when they arrive. After the command `Time 3` it is epoch seconds instead, and after `Time 2` an
`Epoch` beside it (https://tasmota.github.io/docs/Commands/#time): UTC, so no zone is needed.
"""

from __future__ import annotations

from typing import Any

from .. import (
    DEVICE_TIME,
    DEVICE_TIME_RES,
    BridgeError,
    Plug,
    PlugConfigError,
    epoch_ms,
    json_object,
    number,
    plug_time_ms,
)

# key, quantity, scale, whether a relay has its own (a single number beside a relay's list is the
# device's, except the line's voltage, which every relay shares)
FIELDS = (
    ("Power", "W", 1.0, True),
    ("Voltage", "V", 1.0, False),
    ("Current", "A", 1.0, True),
    ("Factor", "PF", 1.0, True),
    ("Frequency", "Hz", 1.0, False),
    ("Total", "Wh", 1000.0, True),
)
# what the device as a whole is: the sum of its relays' (power, current, energy)
SUMMED = ("W", "A", "Wh")
# The line's, given per phase when SetOption150 1 (or when the phases differ): the device's only when
# every phase says the same.
LINE = ("V", "Hz")


class Tasmota:
    def topics(self, plug: Plug) -> list[str]:
        return [f"tele/{plug.topic}/SENSOR"]

    def check(self, plug: Plug) -> None:
        extra = set(plug.options) - {"index", "device_total"}
        if extra:
            raise PlugConfigError(f"unknown key {sorted(extra)[0]} for tasmota")
        index = plug.options.get("index")
        if index is not None and (
            isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < 8
        ):
            raise PlugConfigError("index must be the relay's number, 0 to 7")
        total = plug.options.get("device_total", False)
        if not isinstance(total, bool):
            raise PlugConfigError("device_total must be true or false")
        if total and index is not None:
            raise PlugConfigError("device_total or index, not both: the device as a whole or one relay")

    def scope(self, plug: Plug) -> tuple[str, bool]:
        return f"tele/{plug.topic}", bool(plug.options.get("device_total", False))

    def read(self, plug: Plug, topic: str, payload: bytes) -> dict[str, float] | None:
        doc = json_object(payload)
        energy = doc.get("ENERGY")
        if energy is None:
            return None  # SENSOR telemetry of another sensor on the same device: no sample
        if not isinstance(energy, dict):
            raise BridgeError("ENERGY is not an object")
        if plug.options.get("device_total", False):
            out = _device(energy)
        else:
            out = _relay(energy, plug.options.get("index"))
        if "W" not in out:
            raise BridgeError("ENERGY.Power missing")
        when = _epoch(doc.get("Epoch"))
        if when is None:
            when = _epoch(doc.get("Time"))
        if when is None:
            when = plug_time_ms(doc.get("Time"), plug.zone)
        if when is not None:
            out[DEVICE_TIME], out[DEVICE_TIME_RES] = when, 1000.0  # whole seconds
        return out


def _epoch(value: object) -> int | None:
    """Epoch seconds as Tasmota prints them (`Time 2`, `Time 3`) as UTC ms; None for anything else: a
    time that cannot be read is only a time not known, never a reason to refuse the reading."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return epoch_ms(value)


def _relay(energy: dict[str, Any], index: int | None) -> dict[str, float]:
    several = isinstance(energy.get("Power"), list)
    out: dict[str, float] = {}
    for key, q, scale, own in FIELDS:
        raw = energy.get(key)
        if isinstance(raw, list):
            if index is None:
                raise BridgeError(f"ENERGY.{key} has {len(raw)} values (one per relay): set index")
            value = number(energy, key, index)
        elif several and own:
            continue  # the whole device's (SetOption129 0), not this relay's
        else:
            value = number(energy, key)
        if value is not None:
            out[q] = value * scale
    return out


def _device(energy: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, q, scale, _ in FIELDS:
        raw = energy.get(key)
        if isinstance(raw, list):
            values = [number(energy, key, i) for i in range(len(raw))]
            known = [v for v in values if v is not None]
            if len(known) != len(values) or not known:
                continue  # a relay without a value: the sum would be a part read as the whole
            if q in SUMMED:
                out[q] = sum(known) * scale
            elif q in LINE and len(set(known)) == 1:
                out[q] = known[0] * scale
            continue
        value = number(energy, key)
        if value is not None:
            out[q] = value * scale
    return out


FORMAT = Tasmota
