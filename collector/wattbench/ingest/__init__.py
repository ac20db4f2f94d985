"""Ingest: MQTT messages in, validated and accounted records out.

Pure parts (validate, accounting, pipeline, records) have no I/O. writer (store, spool, dead letters,
replay) reaches storage only through the store and spools it is given; mqtt, state, checks (the
checking processes) and collector with its threads (intake, handover) do the rest of the I/O.
In-process use, as the demo does it:

    from wattbench.ingest import Collector, CollectorConfig
    c = Collector(CollectorConfig(broker="127.0.0.1:1883", store="/tmp/wb.sqlite")).start()
    ...
    c.counters(); c.devices()
    c.stop()
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..config import CollectorConfig

if TYPE_CHECKING:
    from .collector import Collector, CollectorError

__all__ = ["Collector", "CollectorConfig", "CollectorError"]


def __getattr__(name: str) -> Any:
    # The collector imports paho and the store lazily; keep `import wattbench.ingest` light.
    if name in ("Collector", "CollectorError"):
        from . import collector  # late: start-up

        return getattr(collector, name)
    raise AttributeError(name)
