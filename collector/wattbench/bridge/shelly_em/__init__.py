"""Shelly Gen2+ three-phase energy meters (Pro 3EM, 3EM-63 Gen3 in the triphase profile): the EM
component, `em:<N>`, with every phase's power and their total, and the EMData component of the same
id, `emdata:<N>`, with their energies. Both on `<topic>/status/...` or in the notifications on
`<topic>/events/rpc` (`via = "rpc"`, shelly/gen2.py).

    em:0      {"id": 0, "a_current": 4.029, "a_voltage": 236.1, "a_act_power": 951.2,
               "a_aprt_power": 951.9, "a_pf": 1.0, "a_freq": 50.0, "b_...": ..., "c_...": ...,
               "n_current": null, "total_current": 12.087, "total_act_power": 2852.9,
               "total_aprt_power": 2855.4, "user_calibrated_phase": []}
    emdata:0  {"id": 0, "a_total_act_energy": 2776.01, "a_total_act_ret_energy": 0, "b_...": ...,
               "c_...": ..., "total_act": 8328.06, "total_act_ret": 0}

Sources: https://shelly-api-docs.shelly.cloud/gen2/ComponentsAndServices/EM#status and
https://shelly-api-docs.shelly.cloud/gen2/ComponentsAndServices/EMData#status. Energies are Wh.

One mapping row reads one `phase`: "a", "b", "c" or "total", each its own device. The total is the
meter's whole and the phases its parts: the mapping refuses both as role power (the same watts twice),
so the usual rows are the total as power and the phases as component (summed only by a run that names
them), or the phases as power and the total as other.
"""

from __future__ import annotations

from .. import Plug, PlugConfigError
from ..shelly.gen2 import Fields, Gen2Component

PHASES = ("a", "b", "c", "total")


class ShellyEM(Gen2Component):
    kind = "shelly_em"
    key = "em"
    data = "emdata"
    options = ("phase",)

    def check_more(self, plug: Plug) -> None:
        if plug.options.get("phase") not in PHASES:
            raise PlugConfigError('phase must be "a", "b", "c" or "total"')

    def fields(self, plug: Plug) -> Fields:
        p = plug.options["phase"]
        if p == "total":
            return ((("total_act_power",), "W"), (("total_current",), "A"))
        return (
            ((f"{p}_act_power",), "W"),
            ((f"{p}_voltage",), "V"),
            ((f"{p}_current",), "A"),
            ((f"{p}_pf",), "PF"),
            ((f"{p}_freq",), "Hz"),
        )

    def data_fields(self, plug: Plug) -> Fields:
        p = plug.options["phase"]
        return ((("total_act",), "Wh"),) if p == "total" else (((f"{p}_total_act_energy",), "Wh"),)

    def scope(self, plug: Plug) -> tuple[str, bool]:
        return f"{plug.topic} {self.names(plug)[0]}", plug.options["phase"] == "total"


FORMAT = ShellyEM
