"""The InfluxDB store: the layout's mapping (mapping.py) over an HTTP transport (http.py), with the
line protocol its writes are made in (lineproto.py) and the one pass that checks and writes a sample
batch's lines in the collector's checking processes (fastlines.py)."""

from __future__ import annotations

from .http import InfluxHttp, StoreRejected, StoreUnavailable
from .lineproto import LineEncoder
from .mapping import InfluxStore

__all__ = ["InfluxHttp", "InfluxStore", "LineEncoder", "StoreRejected", "StoreUnavailable"]
