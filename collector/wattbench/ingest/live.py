"""What the collector knows right now, as one consistent copy: the newest sample of every channel,
every device's accounting, the collector's own counters and the newest run result. The /metrics
endpoint (metrics.py) shows it; it is taken under the pipeline's lock, so a scrape never sees a batch
half accounted."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ChannelNow:
    dev: str
    ch: str
    t_ms: int  # the device's time of the newest sample
    values: dict[str, float]  # the quantities it carried (W, Wh, V, A, T, ...), finite only
    flags: int
    role: str | None  # from the device's metadata; None when none was seen
    node: str | None
    meter: str | None


@dataclass(frozen=True)
class Live:
    t_ms: int  # the collector's clock when the copy was taken
    channels: list[ChannelNow] = field(default_factory=list)
    devices: dict[str, dict[str, Any]] = field(default_factory=dict)  # DeviceAccount.summary()
    counters: dict[str, Any] = field(default_factory=dict)  # Collector.counters()
    result: dict[str, Any] | None = None  # the newest result message (result.schema.json)


def channels_now(
    latest: dict[tuple[str, str], dict[str, Any]], meta: dict[str, dict[str, Any]]
) -> list[ChannelNow]:
    out = []
    for (dev, ch), row in sorted(latest.items()):
        described = {c.get("c"): c for c in meta.get(dev, {}).get("channels", [])}.get(ch, {})
        values = {
            k: float(v)
            for k, v in row.items()
            if k not in ("c", "t", "s", "f", "u")
            and isinstance(v, (int, float))
            and not isinstance(v, bool)
            and v == v
            and abs(v) != float("inf")
        }
        out.append(
            ChannelNow(
                dev,
                ch,
                int(row["t"]),
                values,
                int(row.get("f", 0)),
                described.get("role"),
                described.get("node"),
                described.get("meter"),
            )
        )
    return out
