"""The meter table (wattbench_fw.meters.TABLE) is the one list of meter kinds, and each row describes
its meter completely: the contract's meta schema, the configuration check, Home Assistant and the
manifest read it, and every row's driver, folder, README and sample configuration are there. No code
outside the table lists the kinds again, and outside_its_plugin() tells which files name a kind
beyond its folder, its row and its own test file (a meter added in this shape has none)."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

import wattbench_schema as schema
from wattbench_fw import app, config, contract, encode, hass, meters
from wattbench_fw.errors import ConfigError

ROOT = Path(__file__).resolve().parents[3]
FIRMWARE = ROOT / "firmware" / "wattbench_fw"
ROWS = meters.TABLE
# A bus of each type, as the configuration check accepts them.
BUS_OF_TYPE = {
    "uart": {"type": "uart", "id": 2},
    "serial": {"type": "serial", "port": "/dev/ttyUSB0"},
    "i2c": {"type": "i2c", "id": 0, "scl": 5, "sda": 4},
    "onewire": {"type": "onewire", "pin": 4},
}


def _meter_property(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["properties"]["channels"]["items"]["properties"]["meter"]


def test_the_contracts_meter_kinds_are_the_table() -> None:
    kinds = list(meters.KINDS)
    assert len(set(kinds)) == len(kinds) == len(ROWS)
    # ... and the smart-plug formats the collector bridges (schema/bridged.json), never a firmware kind
    bridged = list(schema.bridged_kinds())
    assert not set(bridged) & set(kinds)
    assert _meter_property(schema.load_schema("meta"))["enum"] == kinds + bridged
    # The schema file bounds the name and lists no kinds of its own that could drift from the table.
    on_disk = _meter_property(json.loads((schema.SCHEMA_DIR / "meta.schema.json").read_text()))
    assert "enum" not in on_disk and on_disk["type"] == "string"
    for kind in kinds:
        assert re.fullmatch(on_disk["pattern"], kind), kind
    # A kind outside the table is still refused, by every validator of the contract.
    validator = schema.jsonschema_validator("meta")
    (unknown,) = [v for v in schema.vectors("invalid") if v.name == "meta_unknown_meter"]
    assert not validator.is_valid(unknown.payload)


def test_every_driver_folder_has_a_row() -> None:
    folders = {
        "wattbench_fw." + p.parent.parent.name + "." + p.parent.name
        for group in ("meters", "sensors")
        for p in (FIRMWARE / group).glob("*/__init__.py")
    }
    assert folders == {f"wattbench_fw.{r[1]}.{r[0]}" for r in ROWS}


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_a_row_describes_its_meter(row: tuple[str, str, str, tuple[str, ...], str]) -> None:
    kind, package, class_name, buses, display = row
    module = f"wattbench_fw.{package}.{kind}"
    assert package in ("meters", "sensors") and meters.row(kind) == row
    cls = getattr(importlib.import_module(module), class_name)
    assert meters.driver_class(kind) is cls and cls.KIND == kind
    assert set(buses) <= set(config.BUS_TYPES)
    assert isinstance(display, str) and display

    folder = Path(importlib.import_module(module).__file__ or "").parent
    assert folder.name == kind
    readme = (folder / "README.md").read_text()
    assert "## Options (`opts`)" in readme and "## Behaviour" in readme, folder
    if buses:
        assert "## Wiring" in readme, folder

    # The folder's sample channel passes the configuration check, on a bus of a type the row allows.
    sample = json.loads((folder / "sample.json").read_text())
    assert sample["meter"] == kind
    bus = {sample["bus"]: BUS_OF_TYPE[buses[0]]} if buses else {}
    cfg = config.load({"dev": "x", "broker": {"host": "b"}, "buses": bus, "channels": [sample]})
    ch = cfg["channels"][0]
    for other in sorted(set(BUS_OF_TYPE) - set(buses)) if buses else ():
        wrong = {**bus, "wrong": BUS_OF_TYPE[other]}
        with pytest.raises(ConfigError, match=rf"^channels\[0\]\.bus: {kind} needs a "):
            config.load(
                {
                    "dev": "x",
                    "broker": {"host": "b"},
                    "buses": wrong,
                    "channels": [{**sample, "bus": "wrong"}],
                }
            )

    # The meta message it leads to passes the contract, and Home Assistant shows the meter's name.
    driver = meters.create(kind, None, dict(ch["opts"]))
    # QUANTITIES may depend on the options (the WT300 reads the items it is given), so the built driver's.
    assert driver.QUANTITIES and set(driver.QUANTITIES) <= set(contract.QUANTITIES)
    meta = schema.strict_loads(encode.meta("x", "0.1.0", "host", [app.channel_meta(ch, driver)]))
    schema.jsonschema_validator("meta").validate(meta)
    without_model = {**meta, "channels": [{k: v for k, v in meta["channels"][0].items() if k != "model"}]}
    assert hass.device_block(without_model)["model"] == "host + " + display


def _repository_files() -> list[Path]:
    try:
        out = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return [ROOT / line for line in out.splitlines() if line]
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", ".services", "__pycache__", "node_modules", ".venv"}
        return [p for p in ROOT.rglob("*") if p.is_file() and not skip & set(p.relative_to(ROOT).parts)]


def _mentions(word: str) -> dict[str, list[str]]:
    """Repository files (relative path) naming `word` as a whole word, with the lines that do."""
    rx = re.compile(r"(?<![A-Za-z0-9_])" + re.escape(word) + r"(?![A-Za-z0-9_])", re.IGNORECASE)
    found: dict[str, list[str]] = {}
    for path in _repository_files():
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        lines = [line.strip() for line in text.splitlines() if rx.search(line)]
        if lines:
            found[path.relative_to(ROOT).as_posix()] = lines
    return found


def outside_its_plugin(kind: str) -> list[str]:
    """Repository files that name a meter kind anywhere but in its folder, its table row and its own
    test file (tests/firmware/meters/test_<kind>.py). Any file here had to be edited to add it."""
    row = meters.row(kind)
    assert row is not None, kind
    folder = (
        Path(importlib.import_module(f"wattbench_fw.{row[1]}.{kind}").__file__ or "")
        .parent.relative_to(ROOT)
        .as_posix()
    )
    found = _mentions(kind)
    table = found.pop("firmware/wattbench_fw/meters/__init__.py", [])
    assert len(table) == 1 and table[0].startswith(f'("{kind}", '), table
    own_test = f"tests/firmware/meters/test_{kind}.py"
    return sorted(p for p in found if not p.startswith(folder + "/") and p != own_test)


# Code that once listed every meter kind and now reads the table. A kind named in one of these files is
# a second list growing again; the only one allowed is host mode's simulated appliance, which builds
# channels of the simulated meter on purpose.
REGISTRATION_CODE = (
    "firmware/wattbench_fw/*.py",
    "collector/wattbench/**/*.py",
    "schema/v1/*.json",
    "schema/*.py",
)
ALLOWED = {("sim", "firmware/wattbench_fw/host.py")}


@pytest.mark.parametrize("kind", meters.KINDS)
def test_no_code_outside_the_table_lists_a_meter_kind(kind: str) -> None:
    quoted = re.compile(r"[\"']" + re.escape(kind) + r"[\"']")
    named = set()
    for pattern in REGISTRATION_CODE:
        for path in ROOT.glob(pattern):
            rel = path.relative_to(ROOT).as_posix()
            if rel != "firmware/wattbench_fw/meters/__init__.py" and quoted.search(path.read_text()):
                named.add((kind, rel))
    assert named <= ALLOWED, sorted(named - ALLOWED)


@pytest.mark.micropython
def test_the_table_imports_every_driver_lazily_under_micropython(mpy: Any) -> None:
    (out,) = mpy("""
import sys
from wattbench_fw import meters
before = sorted(m for m in sys.modules if m.startswith("wattbench_fw.meters.") or m.startswith("wattbench_fw.sensors."))
found = []
for kind in meters.KINDS:
    cls = meters.driver_class(kind)
    r = meters.row(kind)
    found.append([kind, cls.KIND, cls.__name__, list(r[3]), r[4]])
try:
    meters.driver_class("zigbee")
    unknown = None
except ValueError as e:
    unknown = str(e)
report({"before": before, "found": found, "unknown": unknown})
""")
    assert out["before"] == []  # importing the table imports no driver
    assert out["found"] == [[r[0], r[0], r[2], list(r[3]), r[4]] for r in ROWS]
    assert out["unknown"] == "unknown meter 'zigbee'"
