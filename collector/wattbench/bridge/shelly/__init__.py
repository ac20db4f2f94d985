"""Shelly Gen2 and later (Plus, Pro, Gen3, Gen4): the switch component's status, `switch:<N>`, on
`<topic>/status/switch:<N>` (generic status update over MQTT, on every change and at least once a
minute) or in the notifications on `<topic>/events/rpc` (`via = "rpc"`, shelly/gen2.py).

    {"id": 0, "output": true, "apower": 150.2, "voltage": 230.1, "current": 0.68, "pf": 0.96,
     "freq": 50.0, "aenergy": {"total": 12345.6, "by_minute": [...], "minute_ts": 1764064800}, ...}

Source: https://shelly-api-docs.shelly.cloud/gen2/ComponentsAndServices/Switch#status. aenergy.total is
Wh. `switch` picks the component (0 by default). A whole status without apower (a switch without
metering) is refused, not read as 0 W.
"""

from __future__ import annotations

from .. import Plug
from .gen2 import Fields, Gen2Component

FIELDS: Fields = (
    (("apower",), "W"),
    (("voltage",), "V"),
    (("current",), "A"),
    (("pf",), "PF"),
    (("freq",), "Hz"),
    (("aenergy", "total"), "Wh"),
)


class Shelly(Gen2Component):
    kind = "shelly"
    key = "switch"

    def fields(self, plug: Plug) -> Fields:
        return FIELDS


FORMAT = Shelly
