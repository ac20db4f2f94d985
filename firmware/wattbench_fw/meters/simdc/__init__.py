"""Simulated DC rail: the simulated meter's power models (const, steps, sine, cpu) and fault injection
on a DC supply rail, reported the way a shunt monitor such as the INA226 reports one: W, V, A and Wh,
no power factor and no frequency. Needs no bus (pass None).

It shows the shape of a meter plug-in: this folder plus one row of the table in
wattbench_fw/meters/__init__.py, and nothing else in the firmware or the contract names it.
"""

from wattbench_fw.meters.sim import SimMeter


class SimDC(SimMeter):
    KIND = "simdc"
    QUANTITIES = ("W", "V", "A", "Wh")

    def __init__(self, bus=None, volts=12.0, **opts):
        # The AC simulation's power factor and mains frequency mean nothing on a DC rail; taking them
        # silently would let a configuration believe it set something.
        for name in ("pf", "hz"):
            if name in opts:
                raise TypeError("a DC rail has no %s option" % name)
        SimMeter.__init__(self, bus, volts=volts, pf=1.0, **opts)

    def info(self):
        return {"model": "simdc-" + self.model, "acc": self.acc}

    def read(self):
        vals, flags = SimMeter.read(self)
        # A = W / V here (the AC meter divides by V x PF, and PF is 1); PF and Hz are absent, never 0.
        del vals["PF"]
        del vals["Hz"]
        return vals, flags
