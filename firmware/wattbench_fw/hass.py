"""Home Assistant MQTT discovery for an appliance.

From the appliance's metadata (the payload it publishes on its meta topic) this builds the retained
discovery messages that make Home Assistant show each channel's power, energy, voltage, current, power
factor, frequency, temperature and humidity as sensors of one device. Every sensor but energy reads the
samples topic, and its value template picks the newest row of its own channel that carries the
quantity. A batch without such a row renders an empty string, which Home Assistant ignores for numeric
sensors, so the sensor keeps its last value instead of dropping to zero.

Two things the contract's topics cannot tell Home Assistant come on one extra, Home Assistant-only
topic (state_topic(): under the discovery prefix, not retained, QoS 0, one message per closed batch),
built by HassState (in hass_state.py):

- Energy for Home Assistant's statistics. The contract's Wh counter never goes backwards; after an
  unclean stop it resumes from a saved reservation, which can be above the last value sent. That jump
  is not energy used, so Home Assistant does not read that counter: its energy sensor (state class
  total) shows the energy measured since this boot's first reading, with last_reset at that reading.
  A restart is then a new cycle that starts at zero, and Home Assistant's sum only ever grows by
  measured increments.
- Per-channel availability. A channel whose reads fail STALE_ROWS times in a row is "offline", and
  back "online" with its next good read, so its sensors go unavailable instead of keeping the last good
  value. Every sensor also follows the retained status topic, whose last will says "offline"; it is
  available only while both say so (availability_mode all).

Pure code for MicroPython and CPython: nothing here touches the network.
"""

import json

from wattbench_fw.contract import topic

# The runtime half (what the appliance sends on every batch) lives in its own small module, so this
# discovery code can be unloaded after boot on a board (app.py) while the state keeps running.
from wattbench_fw.hass_state import DISCOVERY_PREFIX, QUANTITIES, STALE_ROWS, HassState, state_topic  # noqa: F401

MANUFACTURER = "wattbench"

# quantity: (object id suffix, name, device_class, unit, state_class, display precision)
# Energy is "total" with a last_reset: the value is the energy measured since this boot's first reading.
SENSORS = {
    "W": ("power", "power", "power", "W", "measurement", 1),
    "Wh": ("energy", "energy", "energy", "Wh", "total", 3),
    "V": ("voltage", "voltage", "voltage", "V", "measurement", 1),
    "A": ("current", "current", "current", "A", "measurement", 3),
    "PF": ("power_factor", "power factor", "power_factor", None, "measurement", 3),
    "Hz": ("frequency", "frequency", "frequency", "Hz", "measurement", 2),
    "T": ("temperature", "temperature", "temperature", "°C", "measurement", 1),
    "RH": ("humidity", "humidity", "humidity", "%", "measurement", 0),
}
ORDER = QUANTITIES

BOARD_NAMES = {
    "esp32": "ESP32",
    "esp32-psram": "ESP32 (PSRAM)",
    "picow": "Raspberry Pi Pico W",
    "host": "host",
}


def _object_id(text):
    # Discovery topic levels allow [a-zA-Z0-9_-]; channel ids may also hold dots.
    return text.replace(".", "_")


def _slug(text):
    """Home Assistant's entity id form of text: lower case, runs of other characters as one "_"."""
    out = []
    for ch in text.lower():
        if ("a" <= ch <= "z") or ("0" <= ch <= "9"):
            out.append(ch)
        elif out and out[-1] != "_":
            out.append("_")
    return "".join(out).strip("_")


def _lookup(channel):
    # The channel's entry of a HassState payload; absent entries render as empty (ignored).
    return "{% set c = value_json['" + channel + "'] if '" + channel + "' in value_json else {} %}"


def energy_template(channel):
    return _lookup(channel) + "{{ c.e if c.e is defined else '' }}"


def last_reset_template(channel):
    return _lookup(channel) + "{{ (c.r / 1000) | timestamp_utc if c.r is defined else '' }}"


def channel_availability_template(channel):
    return _lookup(channel) + "{{ c.a if c.a is defined else '' }}"


def value_template(channel, quantity):
    """Jinja for Home Assistant: the newest value of `quantity` on `channel` in a sample batch."""
    return (
        "{% set r = value_json.samples | selectattr('c', 'eq', '"
        + channel
        + "') | selectattr('"
        + quantity
        + "', 'defined') | list %}{{ r[-1]['"
        + quantity
        + "'] if r else '' }}"
    )


def device_block(meta, names=None):
    """Home Assistant's device: board and meters. `names` is meters.names() of the channels' kinds,
    made at boot by a board, which then need not load the meter table again for each discovery."""
    if names is None:
        from wattbench_fw import meters

        names = meters.names([ch["meter"] for ch in meta["channels"]])
    meters = []
    for ch in meta["channels"]:
        name = ch.get("model") or names.get(ch["meter"], ch["meter"])
        if name not in meters:
            meters.append(name)
    board = BOARD_NAMES.get(meta["board"], meta["board"])
    return {
        "identifiers": ["wattbench_" + meta["dev"]],
        "name": "wattbench " + meta["dev"],
        "manufacturer": MANUFACTURER,
        "model": board + " + " + " + ".join(meters),
        "sw_version": meta["fw"],
    }


def config_topic(dev, channel, quantity, prefix=DISCOVERY_PREFIX):
    # The node id is the bare device id, which is also the appliance's MQTT user name: a broker ACL
    # can then grant each appliance its own discovery configs only (homeassistant/+/%u/#), since
    # Mosquitto substitutes %u only for a whole topic level.
    suffix = SENSORS[quantity][0]
    return prefix + "/sensor/" + dev + "/" + _object_id(channel) + "_" + suffix + "/config"


def sensor_config(meta, channel, quantity, device=None, prefix=DISCOVERY_PREFIX):
    """The discovery payload (a dict) of one sensor."""
    dev = meta["dev"]
    suffix, label, device_class, unit, state_class, precision = SENSORS[quantity]
    uid = "wattbench_" + dev + "_" + _object_id(channel) + "_" + suffix
    cfg = {
        "name": channel + " " + label,
        "unique_id": uid,
        # Releases before 2025.10 ignore this key and name the entity after device and sensor name,
        # which gives the same id; object_id is not sent, as 2025.10 deprecates it.
        "default_entity_id": "sensor." + _slug(uid),
        "state_topic": topic("samples", dev),
        "value_template": value_template(channel, quantity),
        "device_class": device_class,
        "state_class": state_class,
        "suggested_display_precision": precision,
        "availability": [
            {
                "topic": topic("status", dev),
                "value_template": "{{ value_json.state }}",
                "payload_available": "online",
                "payload_not_available": "offline",
            },
            {
                "topic": state_topic(dev, prefix),
                "value_template": channel_availability_template(channel),
                "payload_available": "online",
                "payload_not_available": "offline",
            },
        ],
        "availability_mode": "all",
        "device": device if device is not None else device_block(meta),
        "origin": {"name": "wattbench", "sw_version": meta["fw"]},
    }
    if quantity == "Wh":
        cfg["state_topic"] = state_topic(dev, prefix)
        cfg["value_template"] = energy_template(channel)
        cfg["last_reset_value_template"] = last_reset_template(channel)
    if unit is not None:
        cfg["unit_of_measurement"] = unit
    return cfg


def sensors(meta):
    """(channel, quantity) of every sensor the appliance offers, in a stable order."""
    out = []
    for ch in meta["channels"]:
        for q in ORDER:
            if q in ch["q"]:
                out.append((ch["c"], q))
    return out


def messages(meta, prefix=DISCOVERY_PREFIX, names=None):
    """Yield (topic, payload bytes) for every sensor; publish each retained, QoS 1. `names`: as for
    device_block.

    A generator, so a board builds one payload at a time instead of holding them all."""
    device = device_block(meta, names)
    for channel, quantity in sensors(meta):
        payload = json.dumps(sensor_config(meta, channel, quantity, device, prefix))
        yield config_topic(meta["dev"], channel, quantity, prefix), payload.encode()


def removals(meta, prefix=DISCOVERY_PREFIX):
    """Yield (topic, b"") for every sensor: an empty retained config removes it from Home Assistant,
    which is what switching discovery off in the config should do."""
    for channel, quantity in sensors(meta):
        yield config_topic(meta["dev"], channel, quantity, prefix), b""
