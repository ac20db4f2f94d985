"""A plug's messages translated (Bridge). What a plug sends becomes contract messages (meta.schema.json, samples.schema.json) that go through the
collector's own validation and accounting. A plug has no clock worth the name, so its samples are
stamped when they arrive (clk.sync "recv", err the reporting period). Sequence numbers are the
bridge's: one per message, and a message missing from the plug's regular reporting (an interval over
1.5 periods) skips the numbers it would have had, so the accounting counts it as missing. A message
the bridge cannot read is a counted reject (reason "plug"), never a sample of 0 W.

Only a fresh reading becomes a sample. Three kinds of message are dropped before that, each counted
per plug with its reason (DROP_REASONS; `wattbench status` shows them):
- retained: the broker's stored copy, sent because the collector subscribed (start, restart,
  reconnect). Its age is unknown, and the live copy, if any, was taken when it was published.
- stale: the plug's own time (a format's DEVICE_TIME) is more than STALE_PERIODS reporting periods,
  plus that time's resolution and CLOCK_SLACK_MS, before its arrival.
- repeat: the same bytes on the same topic as one of the plug's last RECENT messages, when MQTT
  marks it a redelivery (the DUP flag) or when the message names its reading's time (DEVICE_TIME, any
  resolution: equal bytes are then the same reading). Without either (a bare value, as ESPHome
  sends), equal bytes are a plug reporting a steady value again, and are a reading.
A stale message still tells that the plug was reporting, so it moves the plug's clock for the gap
count (it is not counted missing), and so does the plug's latest message said again; a retained
one, a redelivery or the repeat of an older message does not.

A plug timed on arrival (its own time, if any, coarser than the period: Shelly's status, ESPHome,
Tasmota without a zone) has its silences counted when it is back at its regular pace, not at the
first message after the silence. That message may be the first of a burst the broker had queued for
the collector's persistent session while the collector was down: the whole queue then arrives within
milliseconds, and the silence before it says nothing about what was lost. Nor does the burst's arrival
tell how many messages the silence held: the collector comes back at any phase of the plug's period,
so a count taken there is off by up to one. What can be counted is the time from the last message
before the silence to the first one after it that arrives at the plug's own pace (between BURST and
SILENCE periods after the one before): both came live, so that time is whole periods, and the
messages it should have held, less those that came (the burst, and any message heard but not stored),
are the missing ones. Until then the silence is held (gap_from, gap_count) and every message of it
takes one number, so numbers rise in arrival order and a burst longer than the silence counts none
missing (never a negative count). Without a queue (QoS 0, a plug that was off) the count is the same,
one message later. A second silence before the count is settled stays part of the same held span. A
copy of the latest message within BURST periods of it is the latest delivered again (QoS 0 and 1, or
a DUP), not a report of a steady plug, and counts for nothing; a steady plug whose queued messages
are byte for byte the same is therefore counted missing for them, as each is a repeat. A plug timed
on its own fine clock is unchanged: a burst is told from a silence by the times it names.

Samples of a plug never share a millisecond: a burst the broker had queued, arriving within one, is
stamped one ms apart in arrival order (the contract's time resolution; err, one reporting period,
covers it). The sequence number, the clock of the gap count, a silence held, the last stamp and the
recent messages are the plug's state, saved with the collector's (state(), restore()), so a restarted
collector goes on with the same boot and numbers: a silence across the restart is counted missing,
a burst across it is not, and a redelivery after it is still a repeat.
"""

from __future__ import annotations

import hashlib
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from paho.mqtt.client import topic_matches_sub

import wattbench_schema as contract

from . import (
    CLOCK_SET_MS,
    DEVICE_TIME,
    DEVICE_TIME_RES,
    BridgeError,
    Plug,
    format_for,
)

QUANTITIES = ("W", "V", "A", "PF", "Hz", "Wh")
DROP_REASONS = ("retained", "stale", "repeat")
STALE_PERIODS = 2.0
# The plug's and the host's clocks (each within NTP's few tens of ms) and the delivery may differ by
# this much without making a fresh reading stale.
CLOCK_SLACK_MS = 1000
RECENT = 64
# In reporting periods after the message before: sooner is a burst (a queue being delivered), later a
# silence (messages the plug did not send or the collector did not get).
BURST = 0.5
SILENCE = 1.5


@dataclass
class _State:
    boot: int
    seq: int = -1
    last_recv: int | None = None  # arrival of the last message that counts for gaps
    last_dev: int | None = None  # its own time, when it named one as fine as the period
    last_t: int | None = None  # the last sample's stamp
    gap_from: int | None = None  # arrival of the last message before a silence not yet counted
    gap_count: int = 0  # numbers taken since, by the messages heard and any counted missing
    meta_sent: bool = False
    recent: deque[str] = field(default_factory=lambda: deque(maxlen=RECENT))
    drops: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DROP_REASONS, 0))

    def saved(self) -> dict[str, Any]:
        return {
            "boot": self.boot,
            "seq": self.seq,
            "last_recv": self.last_recv,
            "last_dev": self.last_dev,
            "last_t": self.last_t,
            "gap_from": self.gap_from,
            "gap_count": self.gap_count,
            "recent": list(self.recent),
            "drops": dict(self.drops),
        }

    @classmethod
    def from_saved(cls, doc: dict[str, Any]) -> _State:
        """KeyError, TypeError or ValueError for a damaged entry."""

        def opt_int(name: str) -> int | None:
            value = doc.get(name)
            if value is None:
                return None
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(name)
            return value

        boot, seq = doc["boot"], doc["seq"]
        if any(isinstance(v, bool) or not isinstance(v, int) for v in (boot, seq)):
            raise TypeError("boot, seq")
        out = cls(boot & 0xFFFFFFFF, seq, opt_int("last_recv"), opt_int("last_dev"), opt_int("last_t"))
        # A collector from before silences were held saved neither: it holds none.
        out.gap_from = opt_int("gap_from")
        if out.gap_from is not None:
            out.gap_count = opt_int("gap_count") or 0
            if out.gap_count < 0:
                raise ValueError("gap_count")
        out.recent.extend(str(k) for k in doc.get("recent") or [])
        drops = doc.get("drops") or {}
        for reason in DROP_REASONS:
            if isinstance(drops.get(reason), int):
                out.drops[reason] = drops[reason]
        return out


@dataclass
class Translated:
    """What one plug message became: contract messages (topic, payload) for the collector's pipeline,
    the reason it could not be read (reject_detail), or the reason it is no fresh reading (dropped,
    one of DROP_REASONS), for the plug's device (dev)."""

    messages: list[tuple[str, bytes]]
    dev: str
    reject_detail: str | None = None
    dropped: str | None = None


def _device_time(values: dict[str, float]) -> tuple[int | None, float]:
    """The plug's own time of a reading (DEVICE_TIME, taken out of values) and its resolution in ms."""
    t = values.pop(DEVICE_TIME, None)
    res = values.pop(DEVICE_TIME_RES, 0.0)
    if t is None or t < CLOCK_SET_MS:
        return None, 0.0
    return int(t), max(0.0, float(res))


def message_key(topic: str, payload: bytes) -> str:
    """What makes two plug messages the same message: their topic and bytes (64 bits of BLAKE2b)."""
    h = hashlib.blake2b(topic.encode("utf-8", "replace"), digest_size=8)
    h.update(b"\0")
    h.update(payload)
    return h.hexdigest()


class Bridge:
    def __init__(self, plugs: list[Plug], boot: int) -> None:
        """boot: the bridge's boot number for a plug it has no saved state of (the collector's first
        start, in s); a plug restored from saved state goes on with its own boot and numbers."""
        self.plugs = plugs
        self.boot = boot & 0xFFFFFFFF
        self._formats = {p.dev: format_for(p.kind) for p in plugs}
        self._state = {p.dev: _State(self.boot) for p in plugs}
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

    # ------------------------------------------------------------------ saved state

    def state(self) -> dict[str, Any]:
        """Every plug's numbering, gap clock, recent messages and drops, JSON-ready."""
        return {dev: st.saved() for dev, st in self._state.items()}

    def restore(self, doc: dict[str, Any]) -> None:
        """Go on from state(): plugs of the mapping only; a damaged entry starts that plug afresh."""
        for dev in self._state:
            item = doc.get(dev)
            if not isinstance(item, dict):
                continue
            try:
                self._state[dev] = _State.from_saved(item)
            except (KeyError, TypeError, ValueError):
                continue

    def drops(self) -> dict[str, dict[str, int]]:
        return {dev: dict(st.drops) for dev, st in self._state.items()}

    # ------------------------------------------------------------------ messages

    def translate(
        self,
        plug: Plug,
        topic: str,
        payload: bytes,
        recv_ms: int,
        retained: bool = False,
        redelivered: bool = False,
    ) -> Translated:
        """retained: the broker sent its stored copy (MQTT's retain flag on delivery); redelivered:
        MQTT's DUP flag."""
        state = self._state[plug.dev]
        if retained:
            return self._drop(state, plug, "retained")
        key = message_key(topic, payload)
        seen = key in state.recent
        if seen and redelivered:
            return self._drop(state, plug, "repeat")
        try:
            values = self._formats[plug.dev].read(plug, topic, payload)
        except BridgeError as exc:
            return Translated([], plug.dev, f"{plug.kind} plug {plug.topic}: {exc}")
        if values is None:
            return Translated([], plug.dev)
        dev_ms, dev_res = _device_time(values)
        # Only a time as fine as the period tells readings apart for the gap count.
        fine = dev_ms if dev_ms is not None and dev_res <= plug.period_s * 1000.0 else None
        if seen and dev_ms is not None:
            # The message names when it was taken: equal bytes are the same reading again. The plug
            # saying its latest once more shows it is still reporting; an older one says nothing new.
            if key == state.recent[-1] and not self._burst(state, plug, recv_ms):
                state.seq += self._count(state, plug, recv_ms, fine, numbered=False)
                self._heard(state, recv_ms, fine)
            return self._drop(state, plug, "repeat")
        state.recent.append(key)
        if (
            dev_ms is not None
            and recv_ms - (dev_ms + dev_res) > STALE_PERIODS * plug.period_s * 1000.0 + CLOCK_SLACK_MS
        ):
            state.seq += self._count(state, plug, recv_ms, fine, numbered=False)
            self._heard(state, recv_ms, fine)
            return self._drop(state, plug, "stale")
        watts = values.get("W")
        if watts is None:
            return Translated([], plug.dev, f"{plug.kind} plug {plug.topic}: no power in the message")
        if watts < 0:
            return Translated([], plug.dev, f"{plug.kind} plug {plug.topic}: negative power {watts:g} W")
        out: list[tuple[str, bytes]] = []
        if not state.meta_sent:
            out.append(
                (contract.topic_for("meta", dev=plug.dev), contract.dumps(self._meta(plug, values, recv_ms)))
            )
            state.meta_sent = True
        state.seq += self._count(state, plug, recv_ms, fine, numbered=True)
        self._heard(state, recv_ms, fine)
        # One ms apart at least: a queued burst keeps every reading under its own key in the store.
        t = recv_ms if state.last_t is None else max(recv_ms, state.last_t + 1)
        state.last_t = t
        sample: dict[str, Any] = {"s": state.seq, "t": t, "c": plug.channel}
        sample.update({k: v for k, v in values.items() if k in QUANTITIES})
        if plug.acc is not None:
            sample["u"] = plug.acc
        doc = {
            "v": contract.VERSION,
            "dev": plug.dev,
            "boot": state.boot,
            "clk": {"sync": "recv", "err": min(plug.period_s * 1000.0, 1e7)},
            "samples": [sample],
        }
        out.append((contract.topic_for("samples", dev=plug.dev), contract.dumps(doc)))
        return Translated(out, plug.dev)

    @staticmethod
    def _burst(state: _State, plug: Plug, recv_ms: int) -> bool:
        return state.last_recv is not None and recv_ms - state.last_recv < BURST * plug.period_s * 1000.0

    @staticmethod
    def _count(state: _State, plug: Plug, recv_ms: int, dev_ms: int | None, numbered: bool) -> int:
        """How far the numbering moves for a message: one for a sample (none for a message heard but
        not stored), plus the numbers of the messages that never came before it. On the plug's own
        clock when this and the last message both named their time finely; else on arrival, where a
        silence is held until the plug is back at its pace (the module's docstring says why)."""
        own = 1 if numbered else 0
        if state.last_recv is None:
            return own
        period_ms = plug.period_s * 1000.0
        since = recv_ms - state.last_recv
        if dev_ms is not None and state.last_dev is not None:
            periods = (dev_ms - state.last_dev) / period_ms
            step = max(1, round(periods)) if numbered and periods > SILENCE else own
        else:
            step = own
            if since > SILENCE * period_ms and state.gap_from is None:
                state.gap_from, state.gap_count = state.last_recv, 0
        if state.gap_from is None:
            return step
        taken = max(step, 1)  # a message heard but not stored still came
        if BURST * period_ms <= since <= SILENCE * period_ms:
            expected = round((recv_ms - state.gap_from) / period_ms)
            missing = max(0, expected - state.gap_count - taken)
            state.gap_from, state.gap_count = None, 0
            return step + missing
        state.gap_count += taken
        return step

    @staticmethod
    def _heard(state: _State, recv_ms: int, dev_ms: int | None) -> None:
        state.last_recv = recv_ms if state.last_recv is None else max(recv_ms, state.last_recv)
        if dev_ms is None:
            state.last_dev = None
        elif state.last_dev is None or dev_ms > state.last_dev:
            state.last_dev = dev_ms

    @staticmethod
    def _drop(state: _State, plug: Plug, reason: str) -> Translated:
        state.drops[reason] += 1
        return Translated([], plug.dev, dropped=reason)

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
