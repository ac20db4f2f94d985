"""Sample stores: the embedded SQLite file store and InfluxDB."""

from __future__ import annotations

from .base import Series, Store

__all__ = ["Series", "Store", "open_store"]


def open_store(spec: str | None, **options: object) -> Store:
    """Open a store from a URL.

    None, a path or sqlite:///path: the embedded file store. http(s)://host:port: InfluxDB, with
    database/bucket, org and credentials from options or WATTBENCH_INFLUX_* environment variables.
    """
    if spec is None or spec.startswith("sqlite:") or "://" not in spec:
        from .sqlite import SqliteStore

        path = spec[len("sqlite://") :] if spec and spec.startswith("sqlite://") else spec
        return SqliteStore(path or "wattbench.sqlite", **options)  # type: ignore[arg-type]
    if spec.startswith(("http://", "https://")):
        from .influx import InfluxStore

        return InfluxStore(spec, **options)  # type: ignore[arg-type]
    raise ValueError(
        f"unknown store {spec!r}: give a file path, sqlite:///path or http(s)://influx-host:port"
    )
