"""Sample stores: the embedded SQLite file store and InfluxDB."""

from __future__ import annotations

from .base import Series, Store, StoreError, StoreMissing

__all__ = ["Series", "Store", "StoreError", "StoreMissing", "open_store"]


def open_store(spec: str | None, *, must_exist: bool = False, **options: object) -> Store:
    """Open a store from a URL.

    None, a path or sqlite:///path: the embedded file store. http(s)://host:port: InfluxDB, with
    database/bucket, org and credentials from options or WATTBENCH_INFLUX_* environment variables.

    must_exist is for readers: a SQLite file that is not there raises StoreMissing instead of being
    created empty, and InfluxDB must answer now (StoreUnavailable) rather than at the first query.
    """
    if spec is None or spec.startswith("sqlite:") or "://" not in spec:
        from .sqlite import SqliteStore

        path = spec[len("sqlite://") :] if spec and spec.startswith("sqlite://") else spec
        return SqliteStore(path or "wattbench.sqlite", must_exist=must_exist, **options)  # type: ignore[arg-type]
    if spec.startswith(("http://", "https://")):
        from .influx import InfluxStore

        store = InfluxStore(spec, **options)  # type: ignore[arg-type]
        if must_exist:
            store._ping()  # raises StoreUnavailable with the reason
        return store
    raise StoreError(
        f"unknown store {spec!r}: give a file path, sqlite:///path or http(s)://influx-host:port"
    )
