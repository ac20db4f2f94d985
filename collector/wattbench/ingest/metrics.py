"""The collector's /metrics endpoint (Prometheus text format, or OpenMetrics when the scraper asks for
it), from the standard prometheus_client: each channel's newest reading, the devices' accounting and
the collector's own counters, and the newest run's score.

A scrape reads the collector's live copy (live.py) and turns it into metric families on the spot: no
second set of counters is kept beside the accounting, so what Prometheus shows is what `wattbench
status` and the wb_health points show. Prometheus stamps a value with its scrape time, not the device's:
wattbench_sample_age_seconds says how old each channel's newest reading was at the scrape."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector as PromCollector
from prometheus_client.registry import CollectorRegistry

from ..core.clocktrack import device_minus_host
from .live import Live

# Sample quantity -> (metric name, help, kind). Wh is the device's own energy counter: a counter,
# which may start again at a reboot (Prometheus' rate() and increase() handle that).
QUANTITIES: dict[str, tuple[str, str, str]] = {
    "W": ("wattbench_power_watts", "Active power of the channel's newest sample", "gauge"),
    "Wh": ("wattbench_energy_watt_hours", "The meter's energy counter at the newest sample", "counter"),
    "V": ("wattbench_voltage_volts", "RMS voltage of the newest sample", "gauge"),
    "A": ("wattbench_current_amperes", "RMS current of the newest sample", "gauge"),
    "PF": ("wattbench_power_factor", "Power factor of the newest sample", "gauge"),
    "Hz": ("wattbench_frequency_hertz", "Line frequency of the newest sample", "gauge"),
    "T": ("wattbench_temperature_celsius", "Temperature of the newest sample", "gauge"),
    "RH": ("wattbench_humidity_percent", "Relative humidity of the newest sample", "gauge"),
}
CHANNEL_LABELS = ["dev", "ch", "role", "node"]

# Device accounting fields (DeviceAccount.health()) -> (metric, help, kind). The clock offset is not
# among them: the accounting keeps it host minus device, and it is shown turned (OFFSET).
DEVICE_FIELDS: dict[str, tuple[str, str, str]] = {
    "received": ("wattbench_device_samples_received", "Samples received, duplicates included", "counter"),
    "stored": ("wattbench_device_samples_stored", "Samples handed to the store", "counter"),
    "duplicates": ("wattbench_device_duplicates", "Samples received again and dropped", "counter"),
    "missing": ("wattbench_device_missing_samples", "Sequence numbers not (yet) received", "gauge"),
    "gaps": ("wattbench_device_gaps", "Jumps in the sequence numbers", "counter"),
    "rejects": ("wattbench_device_rejects", "Messages of the device rejected", "counter"),
    "out_of_order": ("wattbench_device_out_of_order", "Samples that arrived late and were kept", "counter"),
    "rate_hz": ("wattbench_device_rate_hz", "Samples a second, from the device's own clock", "gauge"),
}
OFFSET = (
    "wattbench_device_clock_offset_ms",
    "Device clock minus host clock, estimated (as wattbench status)",
)


class LiveCollector(PromCollector):
    """A prometheus_client collector over a function returning the collector's live copy."""

    def __init__(self, live: Callable[[], Live]) -> None:
        self.live = live

    def collect(self) -> Iterator[Metric]:
        live = self.live()
        yield from _channels(live)
        yield from _devices(live)
        yield from _collector(live)
        yield from _result(live.result)


def _family(name: str, doc: str, kind: str, labels: list[str]) -> Any:
    if kind == "counter":
        return CounterMetricFamily(name, doc, labels=labels)
    return GaugeMetricFamily(name, doc, labels=labels)


def _channels(live: Live) -> Iterator[Metric]:
    families = {q: _family(n, h, k, CHANNEL_LABELS) for q, (n, h, k) in QUANTITIES.items()}
    age = GaugeMetricFamily(
        "wattbench_sample_age_seconds",
        "Age of the channel's newest sample at the scrape (collector clock minus device time)",
        labels=CHANNEL_LABELS,
    )
    flagged = GaugeMetricFamily(
        "wattbench_sample_flags", "Contract flag bits of the channel's newest sample", labels=CHANNEL_LABELS
    )
    for c in live.channels:
        labels = [c.dev, c.ch, c.role or "unknown", c.node or ""]
        for q, value in c.values.items():
            if q in families:
                families[q].add_metric(labels, value)
        age.add_metric(labels, max(0.0, (live.t_ms - c.t_ms) / 1000.0))
        flagged.add_metric(labels, float(c.flags))
    yield from families.values()
    yield age
    yield flagged


def _devices(live: Live) -> Iterator[Metric]:
    families = {f: _family(n, h, k, ["dev"]) for f, (n, h, k) in DEVICE_FIELDS.items()}
    offset = GaugeMetricFamily(*OFFSET, labels=["dev"])
    seen = GaugeMetricFamily(
        "wattbench_device_last_seen_seconds", "Collector clock of the device's last batch", labels=["dev"]
    )
    for dev, summary in sorted(live.devices.items()):
        for name, fam in families.items():
            value = summary.get(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                fam.add_metric([dev], float(value))
        measured = summary.get("offset_ms")
        if isinstance(measured, (int, float)) and not isinstance(measured, bool):
            offset.add_metric([dev], device_minus_host(measured))
        if summary.get("last_seen_ms") is not None:
            seen.add_metric([dev], summary["last_seen_ms"] / 1000.0)
    yield from families.values()
    yield offset
    yield seen


def _collector(live: Live) -> Iterator[Metric]:
    c = live.counters
    yield CounterMetricFamily(
        "wattbench_collector_messages", "MQTT messages handled", value=float(c.get("messages", 0))
    )
    rejected = CounterMetricFamily(
        "wattbench_collector_rejected", "Messages rejected, by reason", labels=["reason"]
    )
    for reason, n in sorted((c.get("reject_reasons") or {}).items()):
        rejected.add_metric([reason], float(n))
    yield rejected
    yield GaugeMetricFamily(
        "wattbench_collector_connected",
        "1 while connected to the broker",
        value=float(bool(c.get("connected"))),
    )
    yield GaugeMetricFamily(
        "wattbench_collector_store_down",
        "1 while the store cannot be written",
        value=float(bool(c.get("store_down"))),
    )
    yield GaugeMetricFamily(
        "wattbench_collector_spool_bytes",
        "Bytes waiting in the spool for the store",
        value=float(c.get("spool_bytes", 0)),
    )


def _result(result: dict[str, Any] | None) -> Iterator[Metric]:
    """The newest run's score: its overall ∑ops/∑power, validity, and per level the ops and the power,
    so a recording rule can form ops per watt (deploy/prometheus/wattbench.rules.yml)."""
    overall = GaugeMetricFamily(
        "wattbench_run_overall", "The newest run's overall score (sum of ops / sum of power)", labels=["run"]
    )
    valid = GaugeMetricFamily("wattbench_run_valid", "1 when the newest run is VALID", labels=["run"])
    ops = GaugeMetricFamily("wattbench_run_level_ops", "Ops per second of a level", labels=["run", "phase"])
    watts = GaugeMetricFamily(
        "wattbench_run_level_watts", "Average power of a level", labels=["run", "phase"]
    )
    if result is not None:
        run = str(result["run"])
        overall.add_metric([run], float(result["overall"]))
        valid.add_metric([run], float(bool(result["valid"])))
        for level in result.get("levels", []):
            if level.get("ops") is not None:
                ops.add_metric([run, str(level["phase"])], float(level["ops"]))
            if level.get("W") is not None:
                watts.add_metric([run, str(level["phase"])], float(level["W"]))
    yield from (overall, valid, ops, watts)


def registry_for(live: Callable[[], Live]) -> CollectorRegistry:
    """A registry of its own (not the process-wide default), so two collectors in one process each
    show their own figures."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(LiveCollector(live))
    return registry


def serve(live: Callable[[], Live], host: str, port: int) -> Any:
    """Serve /metrics on host:port in a daemon thread; returns the server (its shutdown() stops it).
    An address in use raises OSError here, before the collector starts."""
    from prometheus_client import start_http_server  # late: start-up

    server, _thread = start_http_server(port, addr=host, registry=registry_for(live))
    return server
