"""What the appliances say about themselves: their retained metadata and status, and which channels
publish power, heard on the broker (survey) or read from the store (survey_store). channels.py binds a
sweep to channels from it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from wattbench_schema import jsonschema_validator, match_topic, strict_loads, subscription

if TYPE_CHECKING:
    from ..store.base import Store

log = logging.getLogger(__name__)


@dataclass
class Survey:
    """What the broker says about the appliances: retained metadata and status, and which channels
    published power while it listened."""

    metas: dict[str, dict[str, Any]] = field(default_factory=dict)
    states: dict[str, str] = field(default_factory=dict)
    publishing: set[tuple[str, str]] = field(default_factory=set)
    listened_s: float = 0.0


def survey(
    client_factory: Any, listen_s: float = 5.0, quiet: float = 0.5, wanted: Collection[str] | None = None
) -> Survey:
    """Retained metadata and status of every appliance, and the channels that publish W within
    listen_s (less once every online appliance's power channels have been heard). wanted: the devices
    whose metadata is all that is asked for (named channels need no power heard): listening ends once
    theirs has come. client_factory() returns a connected paho client with its network loop running; it
    is disconnected here."""
    validators = {k: jsonschema_validator(k) for k in ("meta", "status")}
    out = Survey()
    last = [time.monotonic()]
    lock = threading.Lock()

    def on_message(client: Any, userdata: Any, msg: Any) -> None:
        kind = match_topic(msg.topic)
        if kind is None or kind[0] not in ("meta", "status", "samples"):
            return  # some brokers deliver more than the filter asked for
        try:
            doc = strict_loads(msg.payload)
            if kind[0] in validators:
                validators[kind[0]].validate(doc)
        except Exception as exc:
            log.warning("ignoring %s on %s: %s", kind[0], msg.topic, getattr(exc, "message", exc))
            return
        if not isinstance(doc, dict):
            return
        with lock:
            if kind[0] == "meta":
                out.metas[doc["dev"]] = doc
                last[0] = time.monotonic()
            elif kind[0] == "status":
                out.states[doc["dev"]] = doc["state"]
                last[0] = time.monotonic()
            else:
                dev = doc.get("dev")
                for row in doc.get("samples") or []:
                    if isinstance(row, dict) and isinstance(row.get("W"), (int, float)):
                        out.publishing.add((str(dev), str(row.get("c"))))

    def heard_all() -> bool:
        if wanted is not None:
            return set(wanted) <= set(out.metas)
        for dev, meta in out.metas.items():
            if out.states.get(dev) != "online":
                continue
            for ch in meta.get("channels", []):
                if ch.get("role") == "power" and (dev, ch.get("c")) not in out.publishing:
                    return False
        return bool(out.metas)

    def longest_batch_s() -> float:
        return max(
            (batch_ms(m) / 1000.0 for d, m in out.metas.items() if out.states.get(d) == "online"),
            default=0.0,
        )

    client = client_factory()
    t0 = time.monotonic()
    said = 0.0
    try:
        client.on_message = on_message
        for kind in ("meta", "status", "samples"):
            client.subscribe(subscription(kind), qos=1)
        while True:
            with lock:
                if time.monotonic() - last[0] > quiet and heard_all():
                    break
                # An appliance that publishes a batch a minute is heard within the minute, not within
                # the few seconds that do for one publishing every second.
                longest = longest_batch_s()
            # A batch within the listening time is heard in it; a longer one is waited for.
            wait_s = longest + BATCH_SLACK_S if longest > listen_s else listen_s
            if time.monotonic() >= t0 + wait_s:
                break
            if wait_s > listen_s and longest > said:
                said = longest
                log.warning(
                    "waiting up to %.0f s for samples: an appliance online publishes a batch every %.0f s",
                    wait_s,
                    longest,
                )
            time.sleep(0.05)
    finally:
        client.disconnect()
        client.loop_stop()
    out.listened_s = time.monotonic() - t0
    return out


# A device whose samples reach the store within this much of now (either way: its clock may be off) is
# taken as publishing; one that holds its samples for a longer batch (its metadata's batch_ms), within
# that much more.
RECENT_MS = 30_000
# Beyond a batch's interval: its delivery and storing.
BATCH_SLACK_S = 5.0


def batch_ms(meta: dict[str, Any] | None) -> int:
    """How long the device holds samples before it publishes them, as its metadata says; 0 when it
    does not say (a bridged plug, an older appliance)."""
    value = (meta or {}).get("batch_ms")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def survey_store(store: Store, now_ms: int) -> Survey:
    """The same survey from the store, for a sweep without a broker: the latest stored metadata, and
    as online the devices whose power channels have samples around now."""
    out = Survey(listened_s=RECENT_MS / 1000)
    for _, doc in store.meta_history(now_ms, now_ms):
        out.metas[str(doc["dev"])] = doc
    for dev, meta in out.metas.items():
        since = now_ms - RECENT_MS - batch_ms(meta)
        for ch in meta.get("channels", []):
            if ch.get("role") == "power" and has_power(store, dev, str(ch["c"]), since, now_ms + RECENT_MS):
                out.publishing.add((dev, str(ch["c"])))
                out.states[dev] = "online"
        out.states.setdefault(dev, "silent")
    return out


def has_power(store: Store, dev: str, ch: str, start_ms: int, end_ms: int) -> bool:
    """True when the channel has a power value in the span."""
    s = store.series(dev, ch, start_ms, end_ms, ("W",))
    return bool(s.values["W"].size) and bool((~np.isnan(s.values["W"])).any())
