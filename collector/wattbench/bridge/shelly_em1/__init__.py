"""Shelly Gen2+ single-phase energy meters (Pro EM, EM Gen3, EM Gen4, and a Pro 3EM in its monophase
profile): one EM1 component per measured circuit, `em1:<N>`, its power, and the EM1Data component of
the same id, `em1data:<N>`, its energy. Both on `<topic>/status/...` or in the notifications on
`<topic>/events/rpc` (`via = "rpc"`, shelly/gen2.py).

    em1:0      {"id": 0, "current": 2.088, "voltage": 236.1, "act_power": 492.5, "aprt_power": 493.0,
                "pf": 0.99, "freq": 50.0, "calibration": "factory"}
    em1data:0  {"id": 0, "total_act_energy": 6644.90, "total_act_ret_energy": 2595.26}

Sources: https://shelly-api-docs.shelly.cloud/gen2/ComponentsAndServices/EM1#status and
https://shelly-api-docs.shelly.cloud/gen2/ComponentsAndServices/EM1Data#status. Energies are Wh. An
em1 status makes a sample, with the newest em1data energy; an em1data status alone makes none. A
negative act_power (power sent back to the grid) is refused like any negative power.
"""

from __future__ import annotations

from .. import Plug
from ..shelly.gen2 import Fields, Gen2Component

FIELDS: Fields = (
    (("act_power",), "W"),
    (("voltage",), "V"),
    (("current",), "A"),
    (("pf",), "PF"),
    (("freq",), "Hz"),
)
DATA: Fields = ((("total_act_energy",), "Wh"),)


class ShellyEM1(Gen2Component):
    kind = "shelly_em1"
    key = "em1"
    data = "em1data"

    def fields(self, plug: Plug) -> Fields:
        return FIELDS

    def data_fields(self, plug: Plug) -> Fields:
        return DATA


FORMAT = ShellyEM1
