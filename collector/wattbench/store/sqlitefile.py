"""The embedded store's SQLite file: its tables, which mirror the InfluxDB measurements of
schema/v1/influx.json, and opening it, to write (making the tables, adding the columns an older
layout lacks) or to read where it cannot be written.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from . import layout
from .base import StoreError, StoreMissing, missing_folder

SAMPLE_FLOATS = ("W", "V", "A", "PF", "Hz", "Wh", "T", "RH", "u", "Wmin", "Wmax")
SAMPLE_COLS = ("dev", "ch", "time", "sub", "s", "f", "n", *SAMPLE_FLOATS)
STATUS_COLS = (
    "state",
    "boot",
    "seq",
    "buf_ram",
    "buf_flash",
    "dropped",
    "up",
    "clk_sync",
    "clk_age",
    "clk_err",
    "rssi",
)
HEALTH_COLS = tuple(layout.LAYOUT["wb_health"]["fields"])
# The layout's doc field is the doc column every table here has; a column holds the whole document,
# however long, so InfluxDB's parts and their count (doc_parts) have no column.
DOC_FIELDS = ("doc", layout.DOC_PARTS)
PHASE_COLS = tuple(c for c in layout.LAYOUT["wb_phase"]["fields"] if c not in DOC_FIELDS)
RESULT_COLS = tuple(c for c in layout.LAYOUT["wb_result"]["fields"] if c not in DOC_FIELDS)

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS wb_sample (
  dev TEXT NOT NULL, ch TEXT NOT NULL, time INTEGER NOT NULL, sub INTEGER NOT NULL DEFAULT 0,
  s INTEGER, f INTEGER, n INTEGER,
  {", ".join(f'"{c}" REAL' for c in SAMPLE_FLOATS)},
  PRIMARY KEY (dev, ch, time, sub)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS wb_sample_time ON wb_sample (time);
CREATE TABLE IF NOT EXISTS wb_status (
  dev TEXT NOT NULL, time INTEGER NOT NULL, {", ".join(f'"{c}"' for c in STATUS_COLS)}, doc TEXT,
  PRIMARY KEY (dev, time)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS wb_health (
  dev TEXT NOT NULL, collector TEXT NOT NULL, time INTEGER NOT NULL, {", ".join(f'"{c}"' for c in HEALTH_COLS)},
  PRIMARY KEY (dev, collector, time)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS wb_phase (
  run TEXT NOT NULL, phase TEXT NOT NULL, event TEXT NOT NULL, time INTEGER NOT NULL,
  {", ".join(f'"{c}"' for c in PHASE_COLS)}, doc TEXT,
  PRIMARY KEY (run, phase, event, time)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS wb_result (
  run TEXT NOT NULL, phase TEXT NOT NULL, time INTEGER NOT NULL, {", ".join(f'"{c}"' for c in RESULT_COLS)}, doc TEXT,
  PRIMARY KEY (run, phase, time)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS wb_meta (
  dev TEXT NOT NULL, time INTEGER NOT NULL, fw TEXT, board TEXT, channels INTEGER, doc TEXT NOT NULL,
  PRIMARY KEY (dev, time)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS wb_reject (
  reason TEXT NOT NULL, collector TEXT NOT NULL, time INTEGER NOT NULL, topic TEXT, dev TEXT, detail TEXT, size INTEGER,
  PRIMARY KEY (reason, collector, time)
) WITHOUT ROWID;
"""
# Columns the layout gained after the first stores were written: CREATE TABLE IF NOT EXISTS leaves an
# older file's table alone, so they are added when the file is opened to write.
NEWER_COLUMNS = (("wb_health", HEALTH_COLS), ("wb_phase", PHASE_COLS), ("wb_result", RESULT_COLS))


def _cannot_write(exc: sqlite3.OperationalError) -> bool:
    """SQLite's words for a file or folder this process may read but not write."""
    text = str(exc)
    return "unable to open database file" in text or "readonly database" in text


def connect(path: str, synchronous: str, must_exist: bool, read_only: bool) -> sqlite3.Connection:
    """The store's file, opened to write (its tables made, an older layout's columns added), or with
    read_only, where this process cannot write it, opened to read as it is. must_exist: a file that is
    not there, is empty or is another program's database is refused, never made or changed.
    Failures raise StoreError."""
    if path != ":memory:":
        check_path(Path(path).expanduser(), must_exist or read_only)
    try:
        try:
            return _writable(path, synchronous, must_exist or read_only)
        except sqlite3.OperationalError as exc:
            if not _cannot_write(exc) or path == ":memory:":
                raise
            if not read_only:
                raise StoreError(
                    f"store {path} cannot be written by this user (the file or its folder is read-only "
                    "here): run this as the user that writes it"
                ) from None
            return _unwritable(path)
    except sqlite3.Error as exc:  # a reader sees StoreError only, whatever the backend
        raise StoreError(f"store {path}: {exc}") from None


def _connect(target: str, uri: bool = False) -> sqlite3.Connection:
    return sqlite3.connect(target, uri=uri, check_same_thread=False, isolation_level=None, timeout=30)


def _writable(path: str, synchronous: str, must_exist: bool) -> sqlite3.Connection:
    if must_exist and path != ":memory:":
        # mode=rw: SQLite itself refuses to create the file, even if it vanished just now.
        db = _connect(Path(path).expanduser().resolve().as_uri() + "?mode=rw", uri=True)
    else:
        db = _connect(path)
    try:
        if path != ":memory:":
            check_is_ours(db, path)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(f"PRAGMA synchronous={synchronous.upper()}")
        db.executescript(SCHEMA)
        for table, col in _missing_columns(db):
            db.execute(f'ALTER TABLE {table} ADD COLUMN "{col}"')
    except (sqlite3.Error, StoreError):
        db.close()
        raise
    return db


def _missing_columns(db: sqlite3.Connection) -> list[tuple[str, str]]:
    """(table, column) of the NEWER_COLUMNS an older file lacks."""
    out = []
    for table, cols in NEWER_COLUMNS:
        have = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        out += [(table, col) for col in cols if col not in have]
    return out


def _unwritable(path: str) -> sqlite3.Connection:
    """A store in a folder this process cannot write (the systemd collector's, a read-only share). A
    file in WAL mode wants its -shm beside it: with the collector running, both are there and a
    read-only open sees all it has committed. Without them (a clean stop checkpoints the log and
    removes both) the file is read as immutable, which is safe because no log holds anything the file
    lacks. A log without its -shm is refused: reading the file alone would miss what the log holds."""
    full = Path(path).expanduser().resolve()
    uri = full.as_uri() + "?mode=ro"
    db = _connect(uri, uri=True)
    try:
        db.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.OperationalError:
        db.close()
        if Path(f"{full}-wal").exists():
            raise StoreError(
                f"store {path}: cannot be read from here: its folder cannot be written and a collector's "
                "log (-wal) is there without its index (-shm); read it as the user that writes it"
            ) from None
        db = _connect(uri + "&immutable=1", uri=True)
    try:
        check_is_ours(db, path)
        if _missing_columns(db):
            raise StoreError(
                f"store {path} was written by an older wattbench and cannot be brought up to date "
                "from here (its folder cannot be written): open it once as the user that writes it"
            )
    except (sqlite3.Error, StoreError):
        db.close()
        raise
    return db


def check_path(path: Path, must_exist: bool) -> None:
    if path.is_dir():
        raise StoreError(f"store {path} is a folder, not a SQLite file")
    if must_exist:
        if not path.exists():
            raise StoreMissing(f"no store at {path} (give --store or --influx; nothing was created)")
        if path.is_file() and path.stat().st_size == 0:
            # SQLite would take it for a new database and a reader would write its tables into it.
            raise StoreError(f"store {path} is empty: no wattbench store (nothing was changed)")
        return
    folder = missing_folder(str(path))
    if folder is not None:
        raise StoreError(f"store {path}: no folder {folder} (nothing was created)")


def check_is_ours(db: sqlite3.Connection, path: str) -> None:
    """A file that exists was made by a collector, or is someone else's: a reader adds no tables to
    another program's database. (A file too new to have any table is one a collector just made.)"""
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if tables and "wb_sample" not in tables:
        raise StoreError(
            f"store {path} is a SQLite file but no wattbench store (it has no wb_sample table; nothing "
            "was changed)"
        )
