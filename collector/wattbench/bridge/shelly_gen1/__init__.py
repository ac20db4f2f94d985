"""Shelly Gen1 (Plug, Plug S, 1PM, 2.5, EM, 3EM): one topic per quantity, a plain number each, under
the device's prefix `shellies/<id>` (or the custom prefix set on it), published on every change and every
update period (30 s by default).

A relay's meter, `relay = <n>` (Plug S, 1PM, 2.5):

    shellies/shellyplug-s-C8C9A3/relay/0/power   "148.32"    W
    shellies/shellyplug-s-C8C9A3/relay/0/energy  "740712"    Watt-minutes (energy counter)

A Shelly 2.5 in roller mode, `roller = 0`: its one meter, the motor's, on roller/0 instead of relay/<n>:

    shellies/shellyswitch25-98CDAC1F03B2/roller/0/power   "104.71"  W
    shellies/shellyswitch25-98CDAC1F03B2/roller/0/energy  "2073"    Watt-minutes (energy counter)

An energy meter's channel, `emeter = <n>` (EM: 0-1, 3EM: one per phase, 0-2):

    shellies/shellyem3-ECFABC0A1B2C/emeter/0/power    "951.20"   W
    shellies/shellyem3-ECFABC0A1B2C/emeter/0/voltage  "236.10"   V
    shellies/shellyem3-ECFABC0A1B2C/emeter/0/current  "4.03"     A (3EM)
    shellies/shellyem3-ECFABC0A1B2C/emeter/0/pf       "1.00"     (EM and 3EM)
    shellies/shellyem3-ECFABC0A1B2C/emeter/0/total    "2776010.5"  Wh, kept across reboots

Sources: https://shelly-api-docs.shelly.cloud/gen1/#shelly-plug-plugs-mqtt,
https://shelly-api-docs.shelly.cloud/gen1/#shelly2-5-mqtt,
https://shelly-api-docs.shelly.cloud/gen1/#shelly-em-mqtt and
https://shelly-api-docs.shelly.cloud/gen1/#shelly-3em-mqtt. A relay's or a roller's energy is
Watt-minutes, made Wh (/60) here. An emeter's `total` (Wh) is its energy; its `energy` and
`returned_energy` (Watt-minutes, another counter of the same energy, and power sent back) are not read,
so a channel has one counter.

The power topic makes a sample, with the newest value of each other topic read, as ESPHome's states.
"""

from __future__ import annotations

import math

from .. import BridgeError, Plug, PlugConfigError

# quantity topic -> (contract quantity, scale)
RELAY = {"power": ("W", 1.0), "energy": ("Wh", 1.0 / 60.0)}
EMETER = {
    "power": ("W", 1.0),
    "voltage": ("V", 1.0),
    "current": ("A", 1.0),
    "pf": ("PF", 1.0),
    "total": ("Wh", 1.0),
}


# option -> the highest number it takes (a Gen1 device has one roller, roller/0)
METERS = {"relay": 7, "emeter": 7, "roller": 0}


class ShellyGen1:
    def __init__(self) -> None:
        self._held: dict[str, float] = {}  # quantity -> the device's newest value of it

    def _where(self, plug: Plug) -> tuple[str, int, dict[str, tuple[str, float]]]:
        if "emeter" in plug.options:
            return "emeter", plug.options["emeter"], EMETER
        if "roller" in plug.options:
            # A 2.5 in roller mode meters the motor as relays are metered: same topics, same units.
            return "roller", plug.options["roller"], RELAY
        return "relay", plug.options.get("relay", 0), RELAY

    def topics(self, plug: Plug) -> list[str]:
        part, n, table = self._where(plug)
        return [f"{plug.topic}/{part}/{n}/{name}" for name in table]

    def check(self, plug: Plug) -> None:
        extra = set(plug.options) - set(METERS)
        if extra:
            raise PlugConfigError(f"unknown key {sorted(extra)[0]} for shelly_gen1")
        if len(set(plug.options) & set(METERS)) > 1:
            raise PlugConfigError("one of relay, emeter or roller (not both): one row reads one meter")
        part, n, _ = self._where(plug)
        top = METERS[part]
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= top:
            if not top:
                raise PlugConfigError(f"{part} must be 0: a Gen1 device has one {part}")
            raise PlugConfigError(f"{part} must be the {part}'s number, 0 to {top}")

    def scope(self, plug: Plug) -> tuple[str, bool]:
        return plug.topic, False

    def read(self, plug: Plug, topic: str, payload: bytes) -> dict[str, float] | None:
        _, _, table = self._where(plug)
        name = topic.rsplit("/", 1)[-1]
        if name not in table:
            return None
        quantity, scale = table[name]
        text = payload.decode("utf-8", "replace").strip()
        try:
            value = float(text)
        except ValueError:
            raise BridgeError(f"{name}: {text[:20]!r} is not a number") from None
        if not math.isfinite(value):
            raise BridgeError(f"{name}: {text[:20]!r} is not a number")
        self._held[quantity] = value * scale
        if quantity != "W":
            return None
        return dict(self._held)


FORMAT = ShellyGen1
