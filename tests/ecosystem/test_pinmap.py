"""hardware/pinmap.md says what the firmware board profiles say: every row names a profile key and the
pin it holds, and every pin in a profile has a row."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
PINMAP = REPO / "hardware" / "pinmap.md"
BOARDS = {"ESP32": "esp32", "Raspberry Pi Pico W": "picow"}
PIN_KEYS = ("tx", "rx", "scl", "sda", "pin")


def _profile(board: str) -> dict[str, Any]:
    path = REPO / "firmware" / "wattbench_fw" / "boards" / f"{board}.json"
    if not path.exists():
        pytest.skip(f"{path.relative_to(REPO)} does not exist yet")
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


def _sections() -> dict[str, list[dict[str, str]]]:
    """Rows of the first table under each '## <board>' heading, as dicts keyed by column name."""
    out: dict[str, list[dict[str, str]]] = {}
    board = None
    header: list[str] | None = None
    for line in PINMAP.read_text().splitlines():
        if line.startswith("## "):
            title = line[3:].strip()
            board = next((b for name, b in BOARDS.items() if title.startswith(name)), None)
            header = None
            continue
        if board is None or not line.startswith("|"):
            if header is not None and board in out:
                board = None  # only the first table of a section is the pin map
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
            out[board] = []
        elif not set("".join(cells)) <= set("-: "):
            out[board].append(dict(zip(header, cells, strict=True)))
    return out


def _lookup(profile: dict[str, Any], dotted: str) -> Any:
    node: Any = profile
    for part in dotted.split("."):
        node = node[part]
    return node


def _pins(profile: dict[str, Any]) -> dict[str, Any]:
    """Every profile entry that is a pin: bus pins, the LED and the safe-mode input."""
    out = {}
    for bus, spec in profile["buses"].items():
        for key in PIN_KEYS:
            if key in spec:
                out[f"buses.{bus}.{key}"] = spec[key]
    for key in ("led", "safe_pin"):
        if key in profile:
            out[key] = profile[key]
    return out


@pytest.mark.parametrize("board", sorted(BOARDS.values()))
def test_pinmap_matches_board_profile(board: str) -> None:
    profile = _profile(board)
    rows = _sections().get(board)
    assert rows, f"hardware/pinmap.md has no pin table for {board}"
    listed = {}
    for row in rows:
        key = re.fullmatch(r"`([\w.]+)`", row["Profile key"])
        assert key, row
        listed[key.group(1)] = row["GPIO"]
    pins = _pins(profile)
    assert set(listed) == set(pins), "every pin of the profile has exactly one row"
    for key, pin in pins.items():
        assert listed[key] == str(pin), f"{board} {key}: pinmap.md says {listed[key]}, profile says {pin}"
        assert _lookup(profile, key) == pin


def test_uart_speed_matches_the_pzem() -> None:
    """The PZEM-004T talks 9600 baud 8N1 only; pinmap.md and the ESP32 profile say the same."""
    profile = _profile("esp32")
    assert profile["buses"]["uart2"]["baud"] == 9600
    assert "9600 baud" in PINMAP.read_text()
