"""Which channels a run sums: only server power, by the role each device's metadata gave it during the
run; a sweep binds to its appliances before it starts and says which; a chosen channel that falls
silent fails the run by name; every report lists what it summed."""

from __future__ import annotations

import argparse
import json
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sweep_synth import RUN, T0, MemoryStore, SeriesFetch, specpower_phases, sweep_events, trace

import wattbench_schema as contract
from wattbench.cli import report as report_cli
from wattbench.core.align import ChannelSpec
from wattbench.core.evaluate import evaluate
from wattbench.ingest.pipeline import Pipeline
from wattbench.store.sqlite import SqliteStore
from wattbench.sweep import channels as chans


def _meta(dev: str, *channels: dict[str, Any]) -> dict[str, Any]:
    return {"v": 1, "dev": dev, "fw": "0.1.0", "board": "host", "channels": list(channels)}


def _ch(c: str, role: str | None, node: str | None = "srv1", meter: str = "sim") -> dict[str, Any]:
    out: dict[str, Any] = {"c": c, "meter": meter, "q": ["W"], "hz": 2}
    if role is not None:
        out["role"] = role
    if node is not None:
        out["node"] = node
    return out


def _stored_run(tmp_path: Path, meta: dict[str, Any], watts: dict[str, float], store: Any = None) -> Any:
    """A run whose events name no channels, its samples, and the device's metadata as the collector
    received it (retained, a minute before the run), in the embedded store unless another is given."""
    store = store if store is not None else SqliteStore(tmp_path / "wb.sqlite")
    pipeline = Pipeline("c1")
    pipeline.handle(f"wattbench/v1/dev/{meta['dev']}/meta", contract.dumps(meta), T0 - 60_000)
    batch, _ = pipeline.take()
    from wattbench.ingest import records as rec

    rec.apply(store, batch.records)
    events = sweep_events(specpower_phases())
    assert not any(e.get("channels") for e in events)
    for e in events:
        store.write_phase(e)
    end = events[-1]["t"]
    seq = 0
    for ch, w in watts.items():
        s = trace(meta["dev"], ch, T0 - 5000, end + 5000, 2, lambda t, w=w: np.full(t.shape, w))
        rows = [
            {"s": seq + i, "t": int(t), "c": ch, "W": float(v)}
            for i, (t, v) in enumerate(zip(s.t_ms, s.values["W"], strict=True))
        ]
        seq += len(rows)
        store.write_samples(meta["dev"], rows)
    store.flush()
    return store


def _report(store: Any, *argv: str) -> Any:
    parser = argparse.ArgumentParser()
    report_cli.add_arguments(parser)
    loaded = report_cli.load(parser.parse_args(["latest", "--no-inlet-required", *argv]), store)
    assert not isinstance(loaded, str), loaded
    return loaded[0]


def test_a_channel_whose_role_is_other_is_never_summed(tmp_path: Path) -> None:
    meta = _meta("bench", _ch("psu", "power"), _ch("aux", "other"))
    store = _stored_run(tmp_path, meta, {"psu": 150.0, "aux": 40.0})
    ev = _report(store)
    watts = {r["phase"]: r["W"] for r in ev.result["levels"]}
    assert watts and all(w == pytest.approx(150.0) for w in watts.values()), watts
    assert ev.valid, [c for c in ev.checks if not c.ok]
    listed = ev.result["channels"]
    assert [(c["dev"], c["ch"], c["role"], c["meter"], c["node"]) for c in listed] == [
        ("bench", "psu", "power", "sim", "srv1")
    ]
    assert listed[0]["samples"] > 0
    contract.jsonschema_validator("result").validate(ev.result)
    # every report lists them
    from wattbench.report.html import render_html
    from wattbench.report.jsonreport import report_dict
    from wattbench.report.table import render_text

    text = render_text(ev.levels, ev.result["overall"], valid=ev.valid, channels=ev.result["channels"])
    row = next(line for line in text.splitlines() if line.strip().startswith("bench"))
    assert row.split()[:5] == ["bench", "psu", "sim", "power", "(summed)"] and "aux" not in text
    page = render_html(ev, store.series)
    assert "<h2>Channels</h2>" in page and "<td>psu</td>" in page and "<td>aux</td>" not in page
    assert report_dict(ev, detail=False)["result"]["channels"] == listed
    store.close()


@pytest.mark.services
def test_scoring_from_influxdb_alone_sums_only_server_power(tmp_path: Path, influxdb: Any) -> None:
    from wattbench.store import open_store

    store = open_store(influxdb.url, db=influxdb.db)
    meta = _meta("bench", _ch("psu", "power"), _ch("aux", "other"))
    _stored_run(tmp_path, meta, {"psu": 150.0, "aux": 40.0}, store)
    ev = _report(store)
    assert ev.valid, [c for c in ev.checks if not c.ok]
    assert all(r["W"] == pytest.approx(150.0) for r in ev.result["levels"])
    assert [(c["dev"], c["ch"], c["role"]) for c in ev.result["channels"]] == [("bench", "psu", "power")]
    store.close()


def test_a_channel_without_a_stated_role_is_not_summed_and_the_run_says_why(tmp_path: Path) -> None:
    meta = _meta("bench", _ch("psu", "power"), _ch("aux", None))
    store = _stored_run(tmp_path, meta, {"psu": 150.0, "aux": 40.0})
    ev = _report(store)
    assert all(r["W"] == pytest.approx(150.0) for r in ev.result["levels"])
    failed = [c for c in ev.checks if c.name == "channels" and not c.ok]
    assert failed and "bench/aux" in failed[0].reason and "role" in failed[0].reason
    assert not ev.valid
    store.close()


def test_without_stored_metadata_nothing_is_guessed(tmp_path: Path) -> None:
    store = _stored_run(tmp_path, _meta("bench", _ch("psu", "power")), {"psu": 150.0})
    store._db.execute("DELETE FROM wb_meta")
    ev = _report(store)
    assert not ev.valid and not ev.result["levels"]
    failed = [c for c in ev.checks if c.name == "channels" and not c.ok]
    assert failed and "bench/psu" in failed[0].reason
    # named by the operator, the channel is scored
    ev = _report(store, "--channel", "bench/psu")
    assert ev.valid and all(r["W"] == pytest.approx(150.0) for r in ev.result["levels"])
    store.close()


def test_a_named_channel_whose_stored_role_is_not_power_is_refused(tmp_path: Path) -> None:
    store = _stored_run(
        tmp_path, _meta("bench", _ch("psu", "power"), _ch("aux", "other")), {"psu": 150.0, "aux": 40.0}
    )
    ev = _report(store, "--channel", "bench/psu", "--channel", "bench/aux")
    assert not ev.valid
    failed = [c for c in ev.checks if c.name == "channels" and not c.ok]
    assert failed and "bench/aux" in failed[0].reason and "other" in failed[0].reason
    assert all(r["W"] == pytest.approx(150.0) for r in ev.result["levels"])
    store.close()


def test_channels_the_run_named_keep_their_stored_roles(tmp_path: Path) -> None:
    meta = _meta(
        "bench", _ch("psu", "power"), _ch("aux", "other"), {**_ch("inlet", "inlet", None), "q": ["T"]}
    )
    store = _stored_run(tmp_path, meta, {"psu": 150.0, "aux": 40.0})
    start = store.phases(RUN)[0]
    store.write_phase({**start, "channels": ["bench/psu", "bench/inlet"]})
    store.flush()
    ev = _report(store)
    assert ev.valid, [c for c in ev.checks if not c.ok]
    assert [(c["ch"], c["role"]) for c in ev.result["channels"]] == [("psu", "power"), ("inlet", "inlet")]
    # a run that named a channel whose metadata says other: refused by name, never summed
    store.write_phase({**start, "channels": ["bench/psu", "bench/aux"]})
    store.flush()
    ev = _report(store)
    assert all(r["W"] == pytest.approx(150.0) for r in ev.result["levels"])
    failed = [c for c in ev.checks if c.name == "channels" and not c.ok]
    assert failed and "bench/aux" in failed[0].reason
    store.close()


def test_a_chosen_channel_that_falls_silent_fails_the_run_by_name() -> None:
    events = sweep_events(specpower_phases())
    end = events[-1]["t"]
    half = T0 + (end - T0) // 2
    fetch = SeriesFetch(
        [
            trace("a", "psu", T0, end, 2, lambda t: np.full(t.shape, 150.0)),
            trace("b", "psu", T0, half, 2, lambda t: np.full(t.shape, 50.0)),
        ]
    )
    specs = [ChannelSpec("a", "psu"), ChannelSpec("b", "psu")]
    from wattbench.core.compliance import Limits

    ev = evaluate(RUN, events, fetch, specs, {}, Limits(require_inlet=False))
    assert not ev.valid
    failed = [c for c in ev.checks if c.name == "channels" and not c.ok]
    assert failed and "b/psu" in failed[0].reason and "a/psu" not in failed[0].reason
    assert "silent" in failed[0].reason


def test_roles_come_from_the_metadata_in_effect_during_the_run() -> None:
    store = MemoryStore()
    store.metas = [
        (T0 - 10_000, _meta("bench", _ch("psu", "power"), _ch("aux", "other"))),
    ]
    roles = chans.stored_roles(store, T0, T0 + 1000)
    assert roles[("bench", "psu")].role == "power" and roles[("bench", "aux")].role == "other"
    # a role that changed during the run is not known for the run
    store.metas.append((T0 + 500, _meta("bench", _ch("psu", "other"), _ch("aux", "other"))))
    roles = chans.stored_roles(store, T0, T0 + 1000)
    assert roles[("bench", "psu")].role is None and "changed" in roles[("bench", "psu")].problem


# ---------------------------------------------------------------- binding at the start, real broker


def _retain(broker: Any, topic: str, doc: dict[str, Any]) -> None:
    import paho.mqtt.client as mqtt

    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"retain-{time.monotonic_ns()}")
    c.connect(broker.host, broker.port)
    c.loop_start()
    c.publish(topic, json.dumps(doc), qos=1, retain=True).wait_for_publish(10)
    c.loop_stop()
    c.disconnect()


def _offline_device(broker: Any) -> None:
    """An appliance that was here once: retained metadata and its last will, no samples."""
    _retain(broker, "wattbench/v1/dev/old-c/meta", _meta("old-c", _ch("psu", "power")))
    _retain(broker, "wattbench/v1/dev/old-c/status", {"v": 1, "dev": "old-c", "state": "offline"})


def _appliance(broker: Any, dev: str, watts: float, extra: list[dict[str, Any]] | None = None) -> Any:
    fw_host = pytest.importorskip("wattbench_fw.host")
    cfg = fw_host.sim_config(
        dev=dev, broker=f"{broker.host}:{broker.port}", hz=5, model="const", watts=watts, batch_ms=250
    )
    cfg["channels"].extend(extra or [])
    app = fw_host.HostAppliance(cfg).start()
    assert app.wait_connected(20)
    return app


class PhaseTap:
    def __init__(self, broker: Any) -> None:
        import paho.mqtt.client as mqtt

        self.events: list[dict[str, Any]] = []
        self.started = threading.Event()
        self.c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="phase-tap")
        self.c.on_message = self._on
        self.c.connect(broker.host, broker.port)
        self.c.subscribe("wattbench/v1/run/+/phase", qos=1)
        self.c.loop_start()

    def _on(self, c: Any, u: Any, m: Any) -> None:
        self.events.append(json.loads(m.payload))

    def close(self) -> None:
        self.c.loop_stop()
        self.c.disconnect()


SHORT = ["--calibrations", "3", "--levels", "100", "--no-idle", "--pre", "0", "--measure", "0.3"]
SHORT += ["--post", "0", "--gap", "0", "--workers", "1", "--quiet", "--wait-data", "1"]


def _store(tmp_path: Path) -> list[str]:
    """The store the collector writes: a sweep refuses to run without one (unless --ops-only) and never
    creates it."""
    path = tmp_path / "wb.sqlite"
    SqliteStore(path).close()
    return ["--store", str(path)]


@pytest.mark.services
@pytest.mark.timeout(180)
def test_sweep_without_channel_refuses_two_live_appliances(
    mosquitto: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from wattbench.cli import main

    _offline_device(mosquitto)
    apps = [_appliance(mosquitto, "bench-a", 150.0), _appliance(mosquitto, "bench-b", 50.0)]
    tap = PhaseTap(mosquitto)
    try:
        code = main(
            [
                "sweep",
                "--broker",
                f"{mosquitto.host}:{mosquitto.port}",
                "--run",
                "two-live",
                *SHORT,
                *_store(tmp_path),
            ]
        )
    finally:
        for app in apps:
            app.stop(timeout=10)
        tap.close()
    err = capsys.readouterr().err
    assert code == 2, err
    refusal = [line for line in err.splitlines() if "online and publishing power" in line]
    assert len(refusal) == 1 and "Traceback" not in err, err
    assert "bench-a/sim" in refusal[0] and "bench-b/sim" in refusal[0] and "--channel" in refusal[0]
    assert "old-c" not in refusal[0]
    assert tap.events == []  # refused before the run began


@pytest.mark.services
@pytest.mark.timeout(180)
def test_sweep_without_channel_binds_the_one_live_appliance_power_only(
    mosquitto: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from wattbench.cli import main
    from wattbench.ingest import Collector, CollectorConfig

    _offline_device(mosquitto)
    aux = {"c": "aux", "meter": "sim", "hz": 5, "role": "other", "opts": {"model": "const", "watts": 40.0}}
    app = _appliance(mosquitto, "bench-a", 150.0, [aux])
    tap = PhaseTap(mosquitto)
    store = _store(tmp_path)
    # The collector writing into the store: a sweep checks that its channels reach the store.
    collector = Collector(
        CollectorConfig(
            broker=f"{mosquitto.host}:{mosquitto.port}",
            store=store[1],
            state_dir=str(tmp_path / "st"),
            id="c1",
        )
    ).start()
    try:
        code = main(
            ["sweep", "--broker", f"{mosquitto.host}:{mosquitto.port}", "--run", "one-live", *SHORT, *store]
        )
    finally:
        collector.stop()
        app.stop(timeout=10)
        tap.close()
    out = capsys.readouterr()
    starts = [e for e in tap.events if e["event"] == "run_start"]
    assert len(starts) == 1 and starts[0]["channels"] == ["bench-a/sim"], (code, out.err)
    text = out.out + out.err
    assert "bench-a/sim" in text and "old-c" in text and "bench-a/aux" in text  # listed, with why not


@pytest.mark.services
@pytest.mark.timeout(180)
def test_sweep_refuses_a_named_channel_that_is_not_server_power_or_is_offline(
    mosquitto: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from wattbench.cli import main

    _offline_device(mosquitto)
    aux = {"c": "aux", "meter": "sim", "hz": 5, "role": "other", "opts": {"model": "const", "watts": 40.0}}
    app = _appliance(mosquitto, "bench-a", 150.0, [aux])
    tap = PhaseTap(mosquitto)
    broker = f"{mosquitto.host}:{mosquitto.port}"
    try:
        other = main(
            [
                "sweep",
                "--broker",
                broker,
                "--channel",
                "bench-a/sim",
                "--channel",
                "bench-a/aux",
                *SHORT,
                *_store(tmp_path),
            ]
        )
        other_err = capsys.readouterr().err
        offline = main(["sweep", "--broker", broker, "--channel", "old-c/psu", *SHORT, *_store(tmp_path)])
        offline_err = capsys.readouterr().err
    finally:
        app.stop(timeout=10)
        tap.close()
    assert other == 2 and "bench-a/aux" in other_err and "role other" in other_err, other_err
    # named by the option that named it: --inlet old-c/psu gave the same line, and which was wrong?
    assert offline == 2 and "--channel old-c/psu: old-c is offline" in offline_err, offline_err
    assert "Traceback" not in other_err + offline_err
    assert tap.events == []


def test_without_a_broker_the_sweep_binds_from_the_store() -> None:
    from wattbench.sweep.session import SweepSetup, bind_channels, describe

    now = int(time.time() * 1000)
    store = MemoryStore()
    store.write_meta(_meta("bench-a", _ch("psu", "power"), _ch("aux", "other")), now - 3_600_000)
    store.write_meta(_meta("old-c", _ch("psu", "power")), now - 3_600_000)
    store.add_series(trace("bench-a", "psu", now - 10_000, now, 1, lambda t: np.full(t.shape, 150.0)))
    store.add_series(trace("bench-a", "aux", now - 10_000, now, 1, lambda t: np.full(t.shape, 40.0)))
    store.add_series(
        trace("old-c", "psu", now - 7_200_000, now - 7_100_000, 1, lambda t: np.full(t.shape, 9.0))
    )
    setup = SweepSetup(run="r", plan=None, workload=None, store=store)
    choice = bind_channels(setup)
    assert [s.key for s in choice.specs] == ["bench-a/psu"]
    lines = describe(choice)
    assert lines[0].startswith("channel bench-a/psu: summed as server power")
    assert any("bench-a/aux" in line and "other" in line for line in lines)
    assert any("old-c" in line and "not taken" in line for line in lines)
    # a second bench publishing into the same store: no guess
    store.write_meta(_meta("bench-b", _ch("psu", "power")), now - 3_600_000)
    store.add_series(trace("bench-b", "psu", now - 10_000, now, 1, lambda t: np.full(t.shape, 50.0)))
    with pytest.raises(chans.ChannelError, match=r"bench-a/psu.*bench-b/psu.*--channel"):
        bind_channels(setup)


def test_an_appliance_that_batches_for_a_minute_is_taken_as_publishing_by_the_store() -> None:
    """The store check took a device as publishing when it had a sample from the last 30 s: an
    appliance that publishes a batch a minute (batch.interval_ms 60000) has its newest stored sample up
    to a minute old, and the sweep refused it as "holds no sample ... is collect writing into it?"."""
    from wattbench.sweep.session import SweepSetup, bind_channels, check_store_fed

    now = int(time.time() * 1000)
    store = MemoryStore()
    store.write_meta(_meta("slow", _ch("psu", "power")) | {"batch_ms": 60_000}, now - 3_600_000)
    store.add_series(trace("slow", "psu", now - 120_000, now - 50_000, 1, lambda t: np.full(t.shape, 90.0)))
    setup = SweepSetup(run="r", plan=None, workload=None, store=store)
    choice = bind_channels(setup)
    assert [s.key for s in choice.specs] == ["slow/psu"]
    check_store_fed(setup, choice, wait_s=0)
    # Without the batch in its metadata the same samples are a store nobody writes.
    plain = MemoryStore()
    plain.write_meta(_meta("slow", _ch("psu", "power")), now - 3_600_000)
    plain.add_series(trace("slow", "psu", now - 120_000, now - 50_000, 1, lambda t: np.full(t.shape, 90.0)))
    named = _named_setup(plain, "slow/psu")
    with pytest.raises(chans.ChannelError, match=r"no sample of slow/psu from the last 30 s"):
        check_store_fed(named, bind_channels(named), wait_s=0)
    # A minute's batch and more: the device has stopped.
    stale = MemoryStore()
    stale.write_meta(_meta("slow", _ch("psu", "power")) | {"batch_ms": 60_000}, now - 3_600_000)
    stale.add_series(trace("slow", "psu", now - 300_000, now - 100_000, 1, lambda t: np.full(t.shape, 90.0)))
    named = _named_setup(stale, "slow/psu")
    with pytest.raises(chans.ChannelError, match=r"no sample of slow/psu from the last 90 s"):
        check_store_fed(named, bind_channels(named), wait_s=0)


@pytest.mark.services
@pytest.mark.timeout(120)
def test_the_broker_survey_waits_for_an_appliance_that_batches_for_longer_than_it_listens(
    mosquitto: Any,
) -> None:
    """The survey listened 5 s for power: an appliance publishing a batch every 8 s was not heard, and a
    sweep without --channel said no appliance was publishing. Its metadata now says how long to wait."""
    import paho.mqtt.client as mqtt

    fw_host = pytest.importorskip("wattbench_fw.host")
    cfg = fw_host.sim_config(
        dev="slow-b",
        broker=f"{mosquitto.host}:{mosquitto.port}",
        hz=5,
        model="const",
        watts=80.0,
        batch_ms=8000,
    )
    app = fw_host.HostAppliance(cfg).start()
    try:
        assert app.wait_connected(20)
        # A batch has gone: the next one is a whole interval away.
        deadline = time.monotonic() + 20
        while app.counters()["acked_samples"] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)

        def client() -> Any:
            c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"survey-{time.monotonic_ns()}")
            c.connect(mosquitto.host, mosquitto.port)
            c.loop_start()
            return c

        heard = chans.survey(client, listen_s=2.0)
    finally:
        app.stop(timeout=10)
    assert heard.metas["slow-b"]["batch_ms"] == 8000
    assert ("slow-b", "sim") in heard.publishing
    assert heard.listened_s < 8 + 5 + 2


# ------------------------------------------------- named channels checked before anything runs


def _named_setup(store: Any, *named: str) -> Any:
    from wattbench.sweep.session import SweepSetup

    specs = [chans.parse_channel(n) for n in named]
    return SweepSetup(run="r", plan=None, workload=None, store=store, channels=specs)


def test_without_a_broker_named_channels_are_checked_against_the_store() -> None:
    from wattbench.sweep.session import bind_channels

    now = int(time.time() * 1000)
    store = MemoryStore()
    store.write_meta(_meta("bench-a", _ch("psu", "power"), _ch("aux", "other")), now - 3_600_000)
    # A device the store holds samples of but no metadata (a store that Telegraf fills).
    store.add_series(trace("tg", "psu", now - 10_000, now, 1, lambda t: np.full(t.shape, 90.0)))
    assert [s.key for s in bind_channels(_named_setup(store, "bench-a/psu", "tg/psu")).specs] == [
        "bench-a/psu",
        "tg/psu",
    ]
    with pytest.raises(chans.ChannelError) as typo:
        bind_channels(_named_setup(store, "bench-a/psu1"))
    assert str(typo.value) == (
        "--channel bench-a/psu1: bench-a has no channel psu1, did you mean bench-a/psu? "
        "(its channels: aux, psu)"
    )
    with pytest.raises(chans.ChannelError) as device:
        bind_channels(_named_setup(store, "bench-b/psu"))
    assert str(device.value) == (
        "--channel bench-b/psu: no device bench-b in the store, "
        "did you mean bench-a? (devices seen: bench-a, tg)"
    )
    with pytest.raises(
        chans.ChannelError, match=r"^--channel tg/pus: tg has no channel pus, did you mean tg/psu"
    ):
        bind_channels(_named_setup(store, "tg/pus"))


def _cli(argv: list[str], cwd: Path) -> tuple[Any, float]:
    """The installed command as a user runs it, and how long it took."""
    import subprocess
    import sys

    cli = Path(sys.executable).with_name("wattbench")
    t0 = time.monotonic()
    out = subprocess.run([str(cli), *argv], capture_output=True, text=True, cwd=cwd, timeout=30)
    return out, time.monotonic() - t0


SUITE = 'name = "typo"\nlevels = "100"\n\n[[worklet]]\nworklet = "sha256"\nworkers = 1\n'
TYPO = "--channel sim-01/nosuch: sim-01 has no channel nosuch (its channels: aux, sim)"
MISTAKES = [
    pytest.param("sweep", ["--channel", "sim-01/nosuch"], TYPO, id="channel-typo"),
    pytest.param("suite", ["--channel", "sim-01/nosuch"], TYPO, id="suite-channel-typo"),
    pytest.param(
        "sweep",
        ["--channel", "sim-01/sm@srv1"],
        "--channel sim-01/sm@srv1: sim-01 has no channel sm, did you mean sim-01/sim? "
        "(its channels: aux, sim)",
        id="channel-near-match",
    ),
    pytest.param(
        "sweep",
        ["--channel", "sim-1/sim"],
        "--channel sim-1/sim: no device sim-1 on the broker or in the store, did you mean sim-01? "
        "(devices seen: old-c, sim-01)",
        id="device-typo",
    ),
    pytest.param(
        "sweep",
        ["--channel", "sim-01/sim", "--inlet", "sim-01/aux"],
        "--inlet sim-01/aux: its metadata gives role other, not inlet",
        id="inlet-of-another-role",
    ),
    pytest.param(
        "sweep",
        ["--channel", "sim-01/aux"],
        "--channel sim-01/aux: its metadata gives role other, not power",
        id="power-of-another-role",
    ),
]


@pytest.mark.services
@pytest.mark.timeout(120)
@pytest.mark.parametrize(("command", "named", "line"), MISTAKES)
def test_a_mistake_in_a_named_channel_is_one_line_before_anything_runs(
    command: str, named: list[str], line: str, mosquitto: Any, tmp_path: Path
) -> None:
    """Issue #42: `--channel sim-01/nosuch` ran every phase and then waited for data that could never
    come (72 minutes with the default timing). Checked against the retained metadata, it is one line
    and exit 2 within seconds, with nothing published or stored; the default timing is kept, so a
    mistake found late would show as a timeout."""
    _offline_device(mosquitto)
    aux = {"c": "aux", "meter": "sim", "hz": 5, "role": "other", "opts": {"model": "const", "watts": 40.0}}
    app = _appliance(mosquitto, "sim-01", 150.0, [aux])
    tap = PhaseTap(mosquitto)
    store = _store(tmp_path)
    (tmp_path / "suite.toml").write_text(SUITE)
    target = [str(tmp_path / "suite.toml")] if command == "suite" else ["--workers", "1"]
    argv = [command, *target, "--broker", f"{mosquitto.host}:{mosquitto.port}", *store, *named, "--quiet"]
    try:
        out, took = _cli(argv, tmp_path)
        time.sleep(0.5)  # anything published would have reached the tap by now
    finally:
        app.stop(timeout=10)
        tap.close()
    assert out.returncode == 2, out.stderr
    assert out.stderr == f"wattbench {command}: {line}\n"
    assert took < 5.0, took
    assert tap.events == []
    stored = SqliteStore(store[1])
    try:
        assert stored.runs() == []
    finally:
        stored.close()
