"""A store backend is its module plus one registry row. The in-memory test store (sweep_synth), made a
backend by one register() call and nothing else, takes the collector's ingest and answers `wattbench
report`, which find it by its address alone."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import paho.mqtt.client as mqtt
import pytest
from sweep_synth import RUN, T0, MemoryStore, specpower_phases, sweep_events, trace

import wattbench_schema
from wattbench import store as stores
from wattbench.broker import EmbeddedBroker
from wattbench.cli import report as report_cli
from wattbench.ingest import Collector, CollectorConfig
from wattbench.store import Backend, open_reader, open_store, register
from wattbench_devkit.streams import Publisher, Stream


@pytest.fixture
def memory_backend(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(stores, "BACKENDS", list(stores.BACKENDS))
    monkeypatch.setattr(MemoryStore, "named", {})
    register(Backend("memory", ("memory://",), "sweep_synth", "MemoryStore"))
    yield


def test_an_unregistered_address_is_refused() -> None:
    with pytest.raises(stores.StoreError, match="unknown store"):
        open_store("memory://rig")


def test_the_collector_ingests_into_a_registered_backend(memory_backend: None, tmp_path: Path) -> None:
    stream = Stream(devices=2, channels=2, batch=50, samples_per_device=600, prefix="mem")
    msgs = stream.messages()
    with EmbeddedBroker() as broker:
        cfg = CollectorConfig(
            store="memory://rig",
            state_dir=str(tmp_path),
            id="mem",
            validate_workers=0,
            **broker.collector_options(),
        )
        collector = Collector(cfg).start()
        pub = Publisher(broker.host, broker.port, protocol=mqtt.MQTTv311)
        pub.publish_all(msgs)
        assert collector.wait_for(lambda c: c["samples_stored"] >= stream.total, timeout=60)
        collector.stop()
        pub.close()
    reader = open_reader("memory://rig")
    checks = reader.sequence_check()
    assert [c["dev"] for c in checks] == sorted({topic.split("/")[3] for topic, _ in msgs})
    assert sum(c["count"] for c in checks) == stream.total and all(c["missing"] == 0 for c in checks)


def test_report_scores_a_run_read_from_a_registered_backend(
    memory_backend: None, capsys: pytest.CaptureFixture[str]
) -> None:
    events = sweep_events(specpower_phases())
    store = open_store("memory://rig")
    for e in events:
        store.write_phase(e)
    assert isinstance(store, MemoryStore)
    store.add_series(trace("bench", "psu", T0, events[-1]["t"], 10, lambda t: 150 + 20 * np.sin(t / 3000.0)))
    parser = argparse.ArgumentParser()
    report_cli.add_arguments(parser)
    args = parser.parse_args([RUN, "--store", "memory://rig", "--channel", "bench/psu", "--json"])
    assert report_cli.run(args) == 0
    doc = wattbench_schema.strict_loads(capsys.readouterr().out)
    assert doc["result"]["run"] == RUN and doc["result"]["overall"] > 0
