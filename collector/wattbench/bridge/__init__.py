"""The smart-plug bridge: plugs and meters that already publish their power on MQTT (Tasmota, Shelly
Gen1 and Gen2+, ESPHome) become wattbench devices in the collector process, so counters, gap checks, storage and
scoring treat them as they treat an appliance.

Each plug is one row of a mapping file (TOML, `plugs = "..."` in the collector's configuration, or
`wattbench collect --plugs FILE`): its format, the topic it publishes under, the device id and channel
it becomes, its role and node, and its reporting period. A format is a folder here (code, README,
sample.toml) plus one row in schema/bridged.json. Several rows may read one device's topics (two relays
of a Tasmota, the phases and the total of a Shelly Pro 3EM): each message goes to every row that reads
its topic, and each row is its own wattbench device.

The translation of a plug's messages, with what it drops and the plug's state, is translate.py's; this
module holds the plug's row, the mapping file's reader and the helpers the formats share.
"""

from __future__ import annotations

import importlib
import json
import math
import re
import tomllib
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import wattbench_schema as contract
from wattbench_schema import bridged_kinds

ROLES = ("power", "inlet", "component", "other")

# A format's read() may add the plug's own time of the reading to the quantities it returns:
# DEVICE_TIME, UTC ms, the earliest the reading can be from, and DEVICE_TIME_RES, how much later it may
# be (ms; 0 when the time is exact). plug_time_ms() and epoch_ms() make them from what plugs print.
DEVICE_TIME = "t"
DEVICE_TIME_RES = "t_res"
# A plug's time before this is a clock that was never set (Tasmota starts at 1970 until NTP answers):
# no time at all, never a reason to drop.
CLOCK_SET_MS = 1_451_606_400_000  # 2016-01-01


def _pattern(schema_name: str, *path: str) -> str:
    """A pattern of the contract, so the mapping file is held to exactly what its messages must meet."""
    node: Any = contract.load_schema(schema_name)
    for key in path:
        node = node[key]
    return str(node["pattern"])


DEVICE = _pattern("common", "$defs", "device_id")
CHANNEL = _pattern("common", "$defs", "channel_id")
NODE = _pattern("meta", "properties", "channels", "items", "properties", "node")


class BridgeError(ValueError):
    """A plug message the bridge cannot read; the message says why (it becomes a reject's detail)."""


class PlugConfigError(ValueError):
    """The mapping file is wrong; the message names the plug and the key."""


@dataclass(frozen=True)
class Plug:
    kind: str  # the format, a row of schema/bridged.json
    topic: str  # the plug's own topic name (Tasmota %topic%, Shelly and ESPHome topic prefix)
    dev: str  # the wattbench device id it becomes
    period_s: float  # how often the plug reports, as set on the plug
    channel: str = "plug"
    role: str = "power"
    node: str | None = None
    acc: float | None = None
    model: str | None = None
    options: dict[str, Any] = field(default_factory=dict)  # the format's own keys
    zone: str | None = None  # the zone of the plug's clock when it prints local time without one


class Format(Protocol):
    """One plug format: the topics a plug of it publishes, and its messages read into quantities."""

    def topics(self, plug: Plug) -> list[str]:
        """The MQTT subscription filters for the plug."""
        ...

    def check(self, plug: Plug) -> None:
        """Refuse the plug's format options (PlugConfigError naming the key)."""
        ...

    def read(self, plug: Plug, topic: str, payload: bytes) -> dict[str, float] | None:
        """The quantities of one message (contract short keys, W required), None for a message that
        updates the plug's state without making a sample; BridgeError when it cannot be read. When the
        message says when the reading was taken, DEVICE_TIME and DEVICE_TIME_RES too."""
        ...

    def scope(self, plug: Plug) -> tuple[str, bool]:
        """The physical meter the row reads (rows of one meter give the same name) and whether the row
        is that meter's whole (a device total, the total of a three-phase meter) rather than one part."""
        ...


def format_for(kind: str) -> Format:
    """A new reader of the format (one per plug: a format may hold a plug's state between messages)."""
    if kind not in bridged_kinds():
        raise PlugConfigError(f"format {kind!r}: one of {', '.join(bridged_kinds())}")
    module = importlib.import_module(f"{__name__}.{kind}")
    fmt: Format = module.FORMAT()
    return fmt


def json_object(payload: bytes) -> dict[str, Any]:
    """A plug message that must be one JSON object; BridgeError naming what it is otherwise."""
    try:
        doc = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        raise BridgeError(f"not JSON: {payload[:40]!r}") from None
    if not isinstance(doc, dict):
        raise BridgeError("not a JSON object")
    return doc


def number(doc: Any, *path: str | int) -> float | None:
    """The finite number at path in a decoded JSON document; None when absent; BridgeError otherwise."""
    node = doc
    for key in path:
        if isinstance(key, int):
            if not isinstance(node, list) or len(node) <= key:
                return None
        elif not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    if node is None:
        return None
    if isinstance(node, bool) or not isinstance(node, (int, float)) or not math.isfinite(node):
        raise BridgeError(f"{'.'.join(str(p) for p in path)} is {json.dumps(node)[:40]}, not a number")
    return float(node)


def epoch_ms(seconds: float | None) -> int | None:
    """A plug's Unix time in s as UTC ms; None when absent or from a clock that was never set."""
    if seconds is None:
        return None
    ms = round(seconds * 1000)
    return ms if ms >= CLOCK_SET_MS else None


def plug_time_ms(text: object, zone: str | None) -> int | None:
    """A plug's ISO 8601 time as UTC ms: its own offset when it prints one, else the plug's zone; None
    when it has neither (local time of an unknown zone is no time), is not a time, or is from a clock
    that was never set."""
    if not isinstance(text, str):
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None:
        if zone is None:
            return None
        when = when.replace(tzinfo=ZoneInfo(zone))
    return epoch_ms(when.timestamp())


def _is_zone(name: object) -> bool:
    if not isinstance(name, str) or not name:
        return False
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


def load_plugs(path: str | Path) -> list[Plug]:
    """The plugs of a mapping file; PlugConfigError with the plug and key for anything wrong."""

    try:
        doc = tomllib.loads(Path(path).read_text())
    except OSError as exc:
        raise PlugConfigError(f"plugs file {path}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise PlugConfigError(f"plugs file {path}: {exc}") from None
    rows = doc.get("plug")
    if not isinstance(rows, list) or not rows:
        raise PlugConfigError(f"plugs file {path}: no [[plug]] table")
    plugs: list[Plug] = []
    scopes: list[tuple[str, bool]] = []
    for i, row in enumerate(rows, 1):
        where = f"plugs file {path}, plug {i}"
        if not isinstance(row, dict):
            raise PlugConfigError(f"{where}: not a table")
        known = {"format", "topic", "dev", "period_s", "channel", "role", "node", "acc", "model", "zone"}
        kind = row.get("format")
        if not isinstance(kind, str):
            raise PlugConfigError(f"{where}: format missing")
        fmt = format_for(kind)
        topic, dev = row.get("topic"), row.get("dev")
        if not isinstance(topic, str) or not topic or any(c in topic for c in "#+\0"):
            raise PlugConfigError(f"{where}: topic must be the plug's topic name, without wildcards")
        if not isinstance(dev, str) or not re.match(DEVICE, dev):
            raise PlugConfigError(f"{where}: dev must be a device id ({DEVICE})")
        period = row.get("period_s")
        if isinstance(period, bool) or not isinstance(period, (int, float)) or not 0 < period <= 86400:
            raise PlugConfigError(f"{where}: period_s must be the plug's reporting period in s (0 to 86400)")
        channel = row.get("channel", "plug")
        if not isinstance(channel, str) or not re.match(CHANNEL, channel):
            raise PlugConfigError(f"{where}: channel must be a channel id ({CHANNEL})")
        role = row.get("role", "power")
        if role not in ROLES:
            raise PlugConfigError(f"{where}: role must be one of {', '.join(ROLES)}")
        node = row.get("node")
        if node is not None and (not isinstance(node, str) or not re.match(NODE, node)):
            raise PlugConfigError(f"{where}: node must be a node name")
        acc = row.get("acc")
        if acc is not None and (
            isinstance(acc, bool) or not isinstance(acc, (int, float)) or not 0 <= acc <= 1
        ):
            raise PlugConfigError(f"{where}: acc must be the relative accuracy of W, 0 to 1")
        model = row.get("model")
        if model is not None and (not isinstance(model, str) or len(model) > 32):
            raise PlugConfigError(f"{where}: model must be text of at most 32 characters")
        zone = row.get("zone")
        if zone is not None and not _is_zone(zone):
            raise PlugConfigError(f"{where}: zone must be a time zone name such as Europe/Berlin or UTC")
        plug = Plug(
            kind,
            topic,
            dev,
            float(period),
            channel,
            role,
            node,
            None if acc is None else float(acc),
            model,
            {k: v for k, v in row.items() if k not in known},
            zone,
        )
        try:
            fmt.check(plug)
        except PlugConfigError as exc:
            raise PlugConfigError(f"{where}: {exc}") from None
        plugs.append(plug)
        scopes.append(fmt.scope(plug))
    devs = [p.dev for p in plugs]
    twice = sorted({d for d in devs if devs.count(d) > 1})
    if twice:
        raise PlugConfigError(f"plugs file {path}: device {', '.join(twice)} named by more than one plug")
    _whole_and_parts(path, plugs, scopes)
    return plugs


def _whole_and_parts(path: str | Path, plugs: list[Plug], scopes: list[tuple[str, bool]]) -> None:
    """A meter's whole and one of its parts both of role power would be summed into the same wall
    power: the same watts twice. One of them must take another role (component: summed only when a run
    names it; other: never)."""
    whole: dict[str, Plug] = {}
    part: dict[str, Plug] = {}
    for plug, (meter, is_whole) in zip(plugs, scopes, strict=True):
        if plug.role == "power":
            (whole if is_whole else part).setdefault(meter, plug)
    for meter, w in whole.items():
        p = part.get(meter)
        if p is not None:
            raise PlugConfigError(
                f"plugs file {path}: {w.dev} is the whole of {meter} and {p.dev} one of its parts, both "
                "role power: their watts would be summed twice; give the parts role component (or the "
                "whole role other)"
            )
