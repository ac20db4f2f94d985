"""Shelly Gen2+ power meters without a relay (Plus PM Mini, Plug PM Gen3, PM Mini Gen3): the PM1
component's status, `pm1:<N>`, on `<topic>/status/pm1:<N>` or in the notifications on
`<topic>/events/rpc` (`via = "rpc"`, shelly/gen2.py).

    {"id": 0, "voltage": 230.2, "current": 0.652, "apower": 142.8, "aprtpower": 150.0, "pf": 0.95,
     "freq": 50.0, "aenergy": {"total": 8123.4, "by_minute": [...], "minute_ts": 1764064800},
     "ret_aenergy": {"total": 0.0, ...}}

Source: https://shelly-api-docs.shelly.cloud/gen2/ComponentsAndServices/PM1#status. aenergy.total is Wh;
ret_aenergy (energy returned to the grid) is not read. `pm1` picks the component (0 by default).
"""

from __future__ import annotations

from .. import Plug
from ..shelly import FIELDS
from ..shelly.gen2 import Fields, Gen2Component


class ShellyPM1(Gen2Component):
    kind = "shelly_pm1"
    key = "pm1"

    def fields(self, plug: Plug) -> Fields:
        return FIELDS


FORMAT = ShellyPM1
