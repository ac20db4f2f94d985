"""The collector's status file: what a restart resumes from, and what it refuses to resume from."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from wattbench.broker import EmbeddedBroker
from wattbench.ingest import Collector, CollectorConfig, CollectorError
from wattbench.ingest.state import STATE_VERSION, StateFile

ACCOUNTS = {"bench-a": {"received": 10}}


def test_round_trip(tmp_path: Path) -> None:
    sf = StateFile(tmp_path, "c1")
    sf.write({"t": 5, "accounts": ACCOUNTS})
    doc = json.loads((tmp_path / "collector-c1.json").read_text())
    assert doc["state_version"] == STATE_VERSION and doc["id"] == "c1" and doc["t"] == 5
    assert sf.accounts() == ACCOUNTS
    assert list(tmp_path.iterdir()) == [tmp_path / "collector-c1.json"], "no temporary file left"


@pytest.mark.parametrize(
    "content",
    [
        None,  # no file
        "{not json",
        "[]",
        "null",
        json.dumps({"state_version": STATE_VERSION + 1, "id": "c1", "accounts": ACCOUNTS}),
        json.dumps({"state_version": STATE_VERSION, "id": "c2", "accounts": ACCOUNTS}),
        json.dumps({"state_version": STATE_VERSION, "id": "c1", "accounts": ["bench-a"]}),
    ],
)
def test_nothing_to_resume_from(tmp_path: Path, content: str | None) -> None:
    if content is not None:
        (tmp_path / "collector-c1.json").write_text(content)
    assert StateFile(tmp_path, "c1").accounts() is None


def test_a_write_that_fails_is_logged_not_raised(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="wattbench.cli.collect"):
        StateFile(tmp_path / "gone", "c1").write({"t": 1})
    assert "cannot write the status file" in caplog.text


def test_a_status_file_that_is_not_an_object_does_not_break_the_start(tmp_path: Path) -> None:
    """A damaged status file is ignored like a missing one: the start goes on to the broker (here
    unreachable, so the documented exit code 3) instead of failing with a traceback."""
    (tmp_path / "collector-c1.json").write_text("[]")
    closed = EmbeddedBroker().port  # a free port nobody listens on
    collector = Collector(
        CollectorConfig(
            broker=f"127.0.0.1:{closed}",
            protocol="3.1.1",
            connect_timeout_s=1,
            store=str(tmp_path / "wb.sqlite"),
            state_dir=str(tmp_path),
            id="c1",
            validate_workers=0,
        )
    )
    with pytest.raises(CollectorError) as err:
        collector.start()
    assert err.value.exit_code == 3
