"""ESPHome: each sensor's state on its own topic, `<topic>/sensor/<object id>/state`, a plain number.

`sensors` maps contract quantities to the node's sensor object ids (W is required):

    sensors = { W = "power", V = "voltage", A = "current", Wh = "energy" }

The power sensor's state makes a sample, with the newest state of each other sensor. `energy_unit`
says what the energy sensor counts in ("Wh" or "kWh", as its unit_of_measurement). A state of "nan"
(ESPHome's word for a sensor without a value) or anything else that is not a number is refused.
"""

from __future__ import annotations

import math

from .. import BridgeError, Plug, PlugConfigError

KNOWN = ("W", "V", "A", "PF", "Hz", "Wh")


class ESPHome:
    def __init__(self) -> None:
        self._held: dict[str, float] = {}  # quantity -> the plug's newest state of it

    def topics(self, plug: Plug) -> list[str]:
        return [f"{plug.topic}/sensor/{obj}/state" for obj in plug.options["sensors"].values()]

    def check(self, plug: Plug) -> None:
        extra = set(plug.options) - {"sensors", "energy_unit"}
        if extra:
            raise PlugConfigError(f"unknown key {sorted(extra)[0]} for esphome")
        sensors = plug.options.get("sensors")
        if not isinstance(sensors, dict) or "W" not in sensors:
            raise PlugConfigError(
                'sensors must map quantities to sensor object ids, W included: sensors = { W = "power" }'
            )
        for q, obj in sensors.items():
            if q not in KNOWN:
                raise PlugConfigError(f"sensors: {q} is not one of {', '.join(KNOWN)}")
            if not isinstance(obj, str) or not obj or any(c in obj for c in "/#+"):
                raise PlugConfigError(f"sensors.{q} must be a sensor object id")
        if plug.options.get("energy_unit", "kWh") not in ("Wh", "kWh"):
            raise PlugConfigError("energy_unit must be Wh or kWh")

    def scope(self, plug: Plug) -> tuple[str, bool]:
        return plug.topic, False

    def read(self, plug: Plug, topic: str, payload: bytes) -> dict[str, float] | None:
        obj = topic.split("/")[-2]
        quantity = next((q for q, o in plug.options["sensors"].items() if o == obj), None)
        if quantity is None:
            return None
        text = payload.decode("utf-8", "replace").strip()
        try:
            value = float(text)
        except ValueError:
            raise BridgeError(f"sensor {obj}: {text[:20]!r} is not a number") from None
        if not math.isfinite(value):
            raise BridgeError(f"sensor {obj}: no value ({text[:20]})")
        if quantity == "Wh" and plug.options.get("energy_unit", "kWh") == "kWh":
            value *= 1000.0
        self._held[quantity] = value
        if quantity != "W":
            return None
        return dict(self._held)


FORMAT = ESPHome
