"""The smart-plug bridge: plugs and meters that already publish their power on MQTT (Tasmota, Shelly
Gen1 and Gen2+, ESPHome) become wattbench devices in the collector process, so counters, gap checks, storage and
scoring treat them as they treat an appliance.

Each plug is one row of a mapping file (TOML, `plugs = "..."` in the collector's configuration, or
`wattbench collect --plugs FILE`): its format, the topic it publishes under, the device id and channel
it becomes, its role and node, and its reporting period. A format is a folder here (code, README,
sample.toml) plus one row in schema/bridged.json. Several rows may read one device's topics (two relays
of a Tasmota, the phases and the total of a Shelly Pro 3EM): each message goes to every row that reads
its topic, and each row is its own wattbench device.

What a plug sends becomes contract messages (meta.schema.json, samples.schema.json) that go through the
collector's own validation and accounting. A plug has no clock worth the name, so its samples are
stamped when they arrive (clk.sync "recv", err the reporting period). Sequence numbers are the
bridge's: one per message, and a message missing from the plug's regular reporting (an interval over
1.5 periods) skips the numbers it would have had, so the accounting counts it as missing. A message
the bridge cannot read is a counted reject (reason "plug"), never a sample of 0 W.
"""

from __future__ import annotations

import importlib
import json
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from paho.mqtt.client import topic_matches_sub

import wattbench_schema as contract
from wattbench_schema import bridged_kinds

ROLES = ("power", "inlet", "component", "other")
QUANTITIES = ("W", "V", "A", "PF", "Hz", "Wh")


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
        updates the plug's state without making a sample; BridgeError when it cannot be read."""
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


def load_plugs(path: str | Path) -> list[Plug]:
    """The plugs of a mapping file; PlugConfigError with the plug and key for anything wrong."""
    import re

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
        known = {"format", "topic", "dev", "period_s", "channel", "role", "node", "acc", "model"}
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


@dataclass
class _State:
    seq: int = -1
    last_ms: int | None = None
    meta_sent: bool = False


@dataclass
class Translated:
    """What one plug message became: contract messages (topic, payload) for the collector's pipeline,
    or the reason it could not be read (reject_detail) for the plug's device (dev)."""

    messages: list[tuple[str, bytes]]
    dev: str
    reject_detail: str | None = None


class Bridge:
    def __init__(self, plugs: list[Plug], boot: int) -> None:
        """boot: the bridge's boot number for every plug (the collector's start, in s): a restarted
        collector numbers its samples afresh, as a rebooted appliance does."""
        self.plugs = plugs
        self.boot = boot & 0xFFFFFFFF
        self._formats = {p.dev: format_for(p.kind) for p in plugs}
        self._state = {p.dev: _State() for p in plugs}
        self._by_filter: list[tuple[str, Plug]] = [
            (f, p) for p in plugs for f in self._formats[p.dev].topics(p)
        ]

    def filters(self) -> list[str]:
        return sorted({f for f, _ in self._by_filter})

    def plugs_for(self, topic: str) -> list[Plug]:
        """Every row that reads the topic: rows of one device (its relays, its phases and its total)
        share its topics, and each makes its own sample of the message."""
        out: list[Plug] = []
        for f, plug in self._by_filter:
            if plug not in out and topic_matches_sub(f, topic):
                out.append(plug)
        return out

    def translate(self, plug: Plug, topic: str, payload: bytes, recv_ms: int) -> Translated:
        try:
            values = self._formats[plug.dev].read(plug, topic, payload)
        except BridgeError as exc:
            return Translated([], plug.dev, f"{plug.kind} plug {plug.topic}: {exc}")
        if values is None:
            return Translated([], plug.dev)
        watts = values.get("W")
        if watts is None:
            return Translated([], plug.dev, f"{plug.kind} plug {plug.topic}: no power in the message")
        if watts < 0:
            return Translated([], plug.dev, f"{plug.kind} plug {plug.topic}: negative power {watts:g} W")
        state = self._state[plug.dev]
        out: list[tuple[str, bytes]] = []
        if not state.meta_sent:
            out.append(
                (contract.topic_for("meta", dev=plug.dev), contract.dumps(self._meta(plug, values, recv_ms)))
            )
            state.meta_sent = True
        step = 1
        if state.last_ms is not None:
            # The plug reports every period_s: a longer silence is messages that never came.
            periods = (recv_ms - state.last_ms) / 1000.0 / plug.period_s
            if periods > 1.5:
                step = max(1, round(periods))
        state.seq += step
        state.last_ms = recv_ms
        sample: dict[str, Any] = {"s": state.seq, "t": recv_ms, "c": plug.channel}
        sample.update({k: v for k, v in values.items() if k in QUANTITIES})
        if plug.acc is not None:
            sample["u"] = plug.acc
        doc = {
            "v": contract.VERSION,
            "dev": plug.dev,
            "boot": self.boot,
            "clk": {"sync": "recv", "err": min(plug.period_s * 1000.0, 1e7)},
            "samples": [sample],
        }
        out.append((contract.topic_for("samples", dev=plug.dev), contract.dumps(doc)))
        return Translated(out, plug.dev)

    def _meta(self, plug: Plug, values: dict[str, float], recv_ms: int) -> dict[str, Any]:
        channel: dict[str, Any] = {
            "c": plug.channel,
            "meter": plug.kind,
            "q": [q for q in QUANTITIES if q in values] or ["W"],
            "hz": min(1.0 / plug.period_s, 10000.0),
            "role": plug.role,
            "upd": plug.period_s,
            "model": (plug.model or f"{plug.kind} {plug.topic}")[:32],
        }
        if plug.node:
            channel["node"] = plug.node
        if plug.acc is not None:
            channel["acc"] = plug.acc
        return {
            "v": contract.VERSION,
            "dev": plug.dev,
            "t": recv_ms,
            "fw": f"wattbench bridge {plug.kind}"[:32],
            "board": "host",
            "channels": [channel],
        }
