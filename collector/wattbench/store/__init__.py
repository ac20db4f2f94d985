"""Sample stores: the embedded SQLite file store and InfluxDB, and the registry that opens them.

A backend is its module plus one row of BACKENDS: the URL schemes it opens and the class that opens
them. Its module is imported only when a store of that kind is opened, so reading a SQLite file never
loads urllib3 or influxdb_client.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from .base import (
    SampleEncoder,
    SampleSink,
    Series,
    Store,
    StoreError,
    StoreMissing,
    StoreReader,
    failure_text,
    file_path,
    missing_folder,
)

__all__ = [
    "BACKENDS",
    "Backend",
    "SampleEncoder",
    "SampleSink",
    "Series",
    "Store",
    "StoreError",
    "StoreMissing",
    "StoreReader",
    "failure_text",
    "file_path",
    "known_spec",
    "missing_folder",
    "open_reader",
    "open_store",
    "register",
]


@dataclass(frozen=True)
class Backend:
    """One row of the registry. The class named by module and cls has a class method
    `open(spec, must_exist, options) -> Store`; spec is the address as the user gave it."""

    name: str
    schemes: tuple[str, ...]  # the address prefixes it opens ("http://"); () for bare file paths
    module: str
    cls: str


BACKENDS: list[Backend] = [
    Backend("sqlite", ("sqlite:",), "wattbench.store.sqlite", "SqliteStore"),
    Backend("influx", ("http://", "https://"), "wattbench.store.influx", "InfluxStore"),
]
# What a spec that is no URL (None, a plain path) opens.
DEFAULT = "sqlite"


def register(backend: Backend) -> None:
    """Add a row (a backend outside this package); a row of the same name is replaced."""
    BACKENDS[:] = [b for b in BACKENDS if b.name != backend.name] + [backend]


def _backend(spec: str | None) -> Backend | None:
    if spec is not None:
        for backend in BACKENDS:
            if spec.startswith(backend.schemes):
                return backend
    if spec is None or "://" not in spec:
        return next(b for b in BACKENDS if b.name == DEFAULT)
    return None


def known_spec(spec: str) -> bool:
    """Whether some backend opens this address (a plain path always is: the file store's)."""
    return _backend(spec) is not None


def open_store(spec: str | None, *, must_exist: bool = False, **options: object) -> Store:
    """Open a store from its address.

    None, a path or sqlite:///path: the embedded file store. http(s)://host:port: InfluxDB, with
    database/bucket, org and credentials from options (the settings resolve them; no backend reads the
    environment).

    must_exist is for readers: a SQLite file that is not there raises StoreMissing instead of being
    created empty, and InfluxDB must answer now (StoreUnavailable) rather than at the first query.
    read_only is for readers too: a SQLite file this process may read but not write (a folder of
    another user's, a read-only share) is read as it is instead of refused; InfluxDB ignores it.
    """
    backend = _backend(spec)
    if backend is None:
        raise StoreError(
            f"unknown store {spec!r}: give a file path, sqlite:///path or http(s)://influx-host:port"
        )
    store: Store = getattr(importlib.import_module(backend.module), backend.cls).open(
        spec, must_exist, options
    )
    return store


def open_reader(spec: str | None, **options: object) -> StoreReader:
    """A store to read: open_store with must_exist, seen through its query side only, and opened
    read-only where this process cannot write (read_only)."""
    return open_store(spec, must_exist=True, read_only=True, **options)
