"""Tasmota: the energy monitor's telemetry, `tele/<topic>/SENSOR`, every TelePeriod seconds.

    {"Time": "2026-11-25T10:00:00", "ENERGY": {"Total": 12.345, "Power": 150, "Voltage": 230,
     "Current": 0.68, "Factor": 0.96, ...}}

Total is kWh (made Wh here). A device with several relays sends lists (Power: [150, 0]): `index`
picks the relay (0 for the first); without it such a message is refused, not guessed. Tasmota's Time
is local time without a zone, so it is not used: samples are stamped when they arrive.
"""

from __future__ import annotations

from .. import BridgeError, Plug, PlugConfigError, json_object, number

FIELDS = (
    ("Power", "W", 1.0),
    ("Voltage", "V", 1.0),
    ("Current", "A", 1.0),
    ("Factor", "PF", 1.0),
    ("Total", "Wh", 1000.0),
)


class Tasmota:
    def topics(self, plug: Plug) -> list[str]:
        return [f"tele/{plug.topic}/SENSOR"]

    def check(self, plug: Plug) -> None:
        extra = set(plug.options) - {"index"}
        if extra:
            raise PlugConfigError(f"unknown key {sorted(extra)[0]} for tasmota")
        index = plug.options.get("index")
        if index is not None and (
            isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < 8
        ):
            raise PlugConfigError("index must be the relay's number, 0 to 7")

    def read(self, plug: Plug, topic: str, payload: bytes) -> dict[str, float] | None:
        doc = json_object(payload)
        energy = doc.get("ENERGY")
        if energy is None:
            return None  # SENSOR telemetry of another sensor on the same device: no sample
        if not isinstance(energy, dict):
            raise BridgeError("ENERGY is not an object")
        index = plug.options.get("index")
        out: dict[str, float] = {}
        for key, q, scale in FIELDS:
            raw = energy.get(key)
            if isinstance(raw, list):
                if index is None:
                    raise BridgeError(f"ENERGY.{key} has {len(raw)} values (one per relay): set index")
                value = number(energy, key, index)
            else:
                value = number(energy, key)
            if value is not None:
                out[q] = value * scale
        if "W" not in out:
            raise BridgeError("ENERGY.Power missing")
        return out


FORMAT = Tasmota
