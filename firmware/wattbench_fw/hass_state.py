"""What an appliance sends Home Assistant on every closed batch: energy measured since this boot and
per-channel availability (see hass.py for why). Kept apart from the discovery code so that a board can
unload discovery after boot while this keeps running; it needs no more than json.

Pure code for MicroPython and CPython: nothing here touches the network.
"""

import json

DISCOVERY_PREFIX = "homeassistant"
# A channel is unavailable after this many failed reads in a row (rows without values).
STALE_ROWS = 3
# The quantities a row can carry; a row with none of them is a failed read.
QUANTITIES = ("W", "Wh", "V", "A", "PF", "Hz", "T", "RH")


def state_topic(dev, prefix=DISCOVERY_PREFIX):
    """The Home Assistant-only topic of HassState's payloads. Under the device's own discovery node, so
    the broker rule that lets an appliance announce itself (homeassistant/+/%u/#) also covers it; Home
    Assistant's discovery ignores topics there that do not end in /config."""
    return prefix + "/sensor/" + dev + "/state"


class HassState:
    """What Home Assistant reads on state_topic(): per channel the energy measured since this boot's
    first reading ("e", Wh, and "r", that reading's UTC ms, for last_reset) and availability ("a").

    observe() takes every contract row the appliance publishes; payload() gives the JSON to send.
    """

    def __init__(self, channels, stale_rows=STALE_ROWS):
        self.stale_rows = max(1, int(stale_rows))
        self.ch = {}
        for c in channels:
            # [consecutive failed rows, first Wh of this boot, its t, newest Wh]
            self.ch[c] = [0, None, None, None]

    def observe(self, row):
        st = self.ch.get(row.get("c"))
        if st is None or row.get("t") is None:
            return
        good = False
        for q in QUANTITIES:
            if q in row:
                good = True
                break
        if not good:
            st[0] += 1
            return
        st[0] = 0
        wh = row.get("Wh")
        if wh is not None:
            if st[1] is None:
                # Whatever the counter carried into this boot (a saved reservation included) is
                # the zero of this cycle: only what is measured from here on counts.
                st[1] = wh
                st[2] = row["t"]
            st[3] = wh

    def available(self, channel):
        """False once the channel's last STALE_ROWS reads have all failed."""
        st = self.ch[channel]
        return st[0] < self.stale_rows

    def energy(self, channel):
        """Wh measured since this boot's first energy reading, or None before it."""
        st = self.ch[channel]
        if st[1] is None:
            return None
        return round(max(0.0, st[3] - st[1]), 6)

    def payload(self):
        doc = {}
        for c in self.ch:
            st = self.ch[c]
            entry = {"a": "online" if st[0] < self.stale_rows else "offline"}
            e = self.energy(c)
            if e is not None:
                entry["e"] = e
                entry["r"] = st[2]
            doc[c] = entry
        return json.dumps(doc).encode()
