"""Home Assistant MQTT discovery for an appliance.

From the appliance's metadata (the payload it publishes on its meta topic) this builds the retained
discovery messages that make Home Assistant show each channel's power, energy, voltage, current, power
factor, frequency, temperature and humidity as sensors of one device. No new topic is needed: every
sensor reads the samples topic, and its value template picks the newest row of its own channel that
carries the quantity. A batch without such a row renders an empty string, which Home Assistant ignores
for numeric sensors, so the sensor keeps its last value instead of dropping to zero. Availability follows
the retained status topic, whose last will says "offline".

Pure code for MicroPython and CPython: nothing here touches the network.
"""

import json

from wattbench_fw.contract import topic

DISCOVERY_PREFIX = "homeassistant"
MANUFACTURER = "wattbench"

# quantity: (object id suffix, name, device_class, unit, state_class, display precision)
# The Wh counter never decreases across reboots and meter resets (contract), which is exactly what
# total_increasing promises Home Assistant's energy statistics.
SENSORS = {
    "W": ("power", "power", "power", "W", "measurement", 1),
    "Wh": ("energy", "energy", "energy", "Wh", "total_increasing", 1),
    "V": ("voltage", "voltage", "voltage", "V", "measurement", 1),
    "A": ("current", "current", "current", "A", "measurement", 3),
    "PF": ("power_factor", "power factor", "power_factor", None, "measurement", 3),
    "Hz": ("frequency", "frequency", "frequency", "Hz", "measurement", 2),
    "T": ("temperature", "temperature", "temperature", "°C", "measurement", 1),
    "RH": ("humidity", "humidity", "humidity", "%", "measurement", 0),
}
ORDER = ("W", "Wh", "V", "A", "PF", "Hz", "T", "RH")

BOARD_NAMES = {
    "esp32": "ESP32",
    "esp32-psram": "ESP32 (PSRAM)",
    "picow": "Raspberry Pi Pico W",
    "host": "host",
}
METER_NAMES = {
    "pzem004t": "PZEM-004T",
    "ina226": "INA226",
    "ina228": "INA228",
    "wt300": "Yokogawa WT300",
    "sim": "simulated",
    "ds18b20": "DS18B20",
    "sht3x": "SHT3x",
}


def _object_id(text):
    # Discovery topic levels allow [a-zA-Z0-9_-]; channel ids may also hold dots.
    return text.replace(".", "_")


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


def device_block(meta):
    meters = []
    for ch in meta["channels"]:
        name = ch.get("model") or METER_NAMES.get(ch["meter"], ch["meter"])
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


def sensor_config(meta, channel, quantity, device=None):
    """The discovery payload (a dict) of one sensor."""
    dev = meta["dev"]
    suffix, label, device_class, unit, state_class, precision = SENSORS[quantity]
    cfg = {
        "name": channel + " " + label,
        "unique_id": "wattbench_" + dev + "_" + _object_id(channel) + "_" + suffix,
        "object_id": "wattbench_" + dev + "_" + _object_id(channel) + "_" + suffix,
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
            }
        ],
        "device": device if device is not None else device_block(meta),
        "origin": {"name": "wattbench", "sw_version": meta["fw"]},
    }
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


def messages(meta, prefix=DISCOVERY_PREFIX):
    """Yield (topic, payload bytes) for every sensor; publish each retained, QoS 1.

    A generator, so a board builds one payload at a time instead of holding them all."""
    device = device_block(meta)
    for channel, quantity in sensors(meta):
        payload = json.dumps(sensor_config(meta, channel, quantity, device))
        yield config_topic(meta["dev"], channel, quantity, prefix), payload.encode()


def removals(meta, prefix=DISCOVERY_PREFIX):
    """Yield (topic, b"") for every sensor: an empty retained config removes it from Home Assistant,
    which is what switching discovery off in the config should do."""
    for channel, quantity in sensors(meta):
        yield config_topic(meta["dev"], channel, quantity, prefix), b""
