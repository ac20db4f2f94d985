"""Shelly Gen2 and later (Plus, Pro, Gen3, Gen4): the switch component's status,
`<topic>/status/switch:<N>`, sent on every change and at least once a minute when "generic status
update over MQTT" is on.

    {"id": 0, "output": true, "apower": 150.2, "voltage": 230.1, "current": 0.68, "pf": 0.96,
     "freq": 50.0, "aenergy": {"total": 12345.6, "by_minute": [...], "minute_ts": 1764064800}, ...}

aenergy.total is Wh. `switch` picks the component (0 by default). A status without apower (a switch
without metering, or a partial update) is refused, not read as 0 W.
"""

from __future__ import annotations

from .. import BridgeError, Plug, PlugConfigError, json_object, number

FIELDS = (
    (("apower",), "W"),
    (("voltage",), "V"),
    (("current",), "A"),
    (("pf",), "PF"),
    (("freq",), "Hz"),
    (("aenergy", "total"), "Wh"),
)


class Shelly:
    def topics(self, plug: Plug) -> list[str]:
        return [f"{plug.topic}/status/switch:{plug.options.get('switch', 0)}"]

    def check(self, plug: Plug) -> None:
        extra = set(plug.options) - {"switch"}
        if extra:
            raise PlugConfigError(f"unknown key {sorted(extra)[0]} for shelly")
        switch = plug.options.get("switch", 0)
        if isinstance(switch, bool) or not isinstance(switch, int) or not 0 <= switch < 16:
            raise PlugConfigError("switch must be the switch component's id, 0 to 15")

    def read(self, plug: Plug, topic: str, payload: bytes) -> dict[str, float] | None:
        doc = json_object(payload)
        out: dict[str, float] = {}
        for path, q in FIELDS:
            value = number(doc, *path)
            if value is not None:
                out[q] = value
        if "W" not in out:
            raise BridgeError("apower missing")
        return out


FORMAT = Shelly
