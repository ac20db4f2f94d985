"""What every Shelly Gen2 and later format shares (switch, pm1, em with emdata, em1 with em1data): a
component's status arrives either whole on `<prefix>/status/<component>` (the device's "generic status
update over MQTT") or as RPC notifications on `<prefix>/events/rpc`, `via` in the mapping row choosing
which, so one change is never read twice.

    {"src": "shellypro3em-a0dd6c9ef474", "dst": "shellypro3em-a0dd6c9ef474/events",
     "method": "NotifyStatus", "params": {"ts": 1764064800.52, "em:0": {"id": 0, "a_act_power": 101.2}}}

NotifyFullStatus carries every component's whole status; NotifyStatus only what changed
(https://shelly-api-docs.shelly.cloud/gen2/General/Notifications: "overlay the changes from
NotifyStatus over a known status"). So a reader keeps each component's last status and lays a partial
one over it; a field no message has given stays unknown, never 0. A notification makes a sample when it
changed one of the quantities read; one that changed only the energy component (emdata, em1data) or a
temperature updates the held status and waits for the next power reading.
"""

from __future__ import annotations

from typing import Any

from .. import DEVICE_TIME, DEVICE_TIME_RES, BridgeError, Plug, PlugConfigError, epoch_ms, json_object, number

VIA = ("status", "rpc")
NOTIFY = ("NotifyStatus", "NotifyFullStatus")

Fields = tuple[tuple[tuple[str, ...], str], ...]  # a path in a component's status, and its quantity


def overlay(base: dict[str, Any], change: dict[str, Any]) -> dict[str, Any]:
    """base with change laid over it, nested objects (aenergy) field by field."""
    out = dict(base)
    for key, value in change.items():
        old = out.get(key)
        out[key] = overlay(old, value) if isinstance(old, dict) and isinstance(value, dict) else value
    return out


def component_id(plug: Plug, key: str) -> int:
    value = plug.options.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 16:
        raise PlugConfigError(f"{key} must be the {key} component's id, 0 to 15")
    return value


class Gen2Component:
    """One mapping row's reader of a Gen2+ component. A format sets `kind`, `key` (the option naming the
    component's id, and the component's type), `data` (the component holding its energy, or None) and
    `options` (its own keys beyond `via` and `key`), and says which fields it reads."""

    kind = ""
    key = ""
    data: str | None = None
    options: tuple[str, ...] = ()

    def __init__(self) -> None:
        self._status: dict[str, dict[str, Any]] = {}  # component name -> its last status, as laid over

    # -- what a format states

    def fields(self, plug: Plug) -> Fields:
        """The power component's fields read, W first."""
        raise NotImplementedError

    def data_fields(self, plug: Plug) -> Fields:
        """The energy component's fields read."""
        return ()

    def check_more(self, plug: Plug) -> None:
        """The format's own options."""

    def scope(self, plug: Plug) -> tuple[str, bool]:
        return f"{plug.topic} {self.names(plug)[0]}", False

    # -- shared

    def names(self, plug: Plug) -> tuple[str, str | None]:
        n = component_id(plug, self.key)
        return f"{self.key}:{n}", None if self.data is None else f"{self.data}:{n}"

    def topics(self, plug: Plug) -> list[str]:
        if plug.options.get("via", "status") == "rpc":
            return [f"{plug.topic}/events/rpc"]
        return [f"{plug.topic}/status/{name}" for name in self.names(plug) if name is not None]

    def check(self, plug: Plug) -> None:
        extra = set(plug.options) - {"via", self.key, *self.options}
        if extra:
            raise PlugConfigError(f"unknown key {sorted(extra)[0]} for {self.kind}")
        if plug.options.get("via", "status") not in VIA:
            raise PlugConfigError(
                'via must be "status" (generic status update, <prefix>/status/...) or "rpc" '
                "(notifications on <prefix>/events/rpc)"
            )
        component_id(plug, self.key)
        self.check_more(plug)

    def read(self, plug: Plug, topic: str, payload: bytes) -> dict[str, float] | None:
        doc = json_object(payload)
        main, data = self.names(plug)
        if topic.endswith("/events/rpc"):
            return self._notification(plug, doc, main, data)
        # The generic status update is the component's whole status.
        if data is not None and topic.endswith(f"/{data}"):
            self._status[data] = doc
            return None  # the energy component: held for the next power reading
        self._status[main] = doc
        out = self._values(plug, main, data, required=True)
        # aenergy.minute_ts, the start of a minute at most two before the status, is the reading's own
        # time to that resolution: enough to tell a stale message, not to stamp a sample.
        when = epoch_ms(number(doc, "aenergy", "minute_ts"))
        if out is not None and when is not None:
            out[DEVICE_TIME], out[DEVICE_TIME_RES] = when, 120_000.0
        return out

    def _notification(
        self, plug: Plug, doc: dict[str, Any], main: str, data: str | None
    ) -> dict[str, float] | None:
        method = doc.get("method")
        if method not in NOTIFY:
            return None  # NotifyEvent and the replies to RPC calls carry no status
        params = doc.get("params")
        if not isinstance(params, dict):
            raise BridgeError(f"{method} params is not an object")
        whole = method == "NotifyFullStatus"
        changed: dict[str, Any] | None = None
        for name in (main, data):
            if name is None or name not in params:
                continue
            part = params[name]
            if not isinstance(part, dict):
                raise BridgeError(f"{method} {name} is not an object")
            self._status[name] = part if whole else overlay(self._status.get(name, {}), part)
            if name == main:
                changed = part
        if changed is None:
            return None
        if whole:
            out = self._values(plug, main, data, required=True)
        elif not any(path[0] in changed for path, _ in self.fields(plug)):
            return None  # only what is not read changed (a temperature, the output)
        else:
            # A partial status before any whole one may lack the power: unknown, so no sample (never 0 W).
            out = self._values(plug, main, data, required=False)
        # The notification's own ts (s, to the hundredth), not a minute_ts held from an older status,
        # is when this reading was made.
        ts = params.get("ts")
        when = epoch_ms(ts) if isinstance(ts, int | float) and not isinstance(ts, bool) else None
        if out is not None and when is not None:
            out[DEVICE_TIME], out[DEVICE_TIME_RES] = when, 10.0
        return out

    def _values(self, plug: Plug, main: str, data: str | None, required: bool) -> dict[str, float] | None:
        out: dict[str, float] = {}
        status = self._status.get(main, {})
        for path, q in self.fields(plug):
            value = number(status, *path)
            if value is not None:
                out[q] = value
        if data is not None and data in self._status:
            for path, q in self.data_fields(plug):
                value = number(self._status[data], *path)
                if value is not None:
                    out[q] = value
        if "W" not in out:
            if required:
                raise BridgeError(f"{'.'.join(self.fields(plug)[0][0])} missing")
            return None
        return out
