"""The collector in-process, as the demo runs it: the embedded amqtt broker (MQTT 3.1.1) and the
SQLite file store. Also the command's exit codes."""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest

from wattbench.broker import EmbeddedBroker
from wattbench.ingest import Collector, CollectorConfig, CollectorError
from wattbench.store import open_store
from wattbench_devkit import services
from wattbench_devkit.streams import Publisher, Stream

from .conftest import _child_env


def _config(broker: EmbeddedBroker, work: Path, cid: str, **settings: Any) -> CollectorConfig:
    """A collector of the embedded broker with its SQLite file and state in work."""
    work.mkdir(parents=True, exist_ok=True)
    return CollectorConfig(
        store=str(work / "wb.sqlite"),
        state_dir=str(work),
        id=cid,
        **settings,
        **broker.collector_options(),
    )


def _publisher(broker: EmbeddedBroker) -> Publisher:
    return Publisher(broker.host, broker.port, protocol=mqtt.MQTTv311)


def test_embedded_broker_sqlite_store_exactly_once_across_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "wb.sqlite"
    stream = Stream(devices=3, channels=2, batch=100, samples_per_device=4000, prefix="emb")
    msgs = stream.messages()
    half = len(msgs) // 2
    with EmbeddedBroker() as broker:
        cfg = _config(broker, tmp_path, "demo", health_period_s=0.5, validate_workers=0)
        collector = Collector(cfg).start()
        pub = _publisher(broker)
        pub.publish_all(msgs[:half])
        assert collector.wait_for(lambda c: c["messages"] >= half, timeout=60)
        collector.stop()
        pub.publish_all(msgs[half:])  # queued by the broker for the stopped collector's session
        collector = Collector(cfg).start()
        assert collector.wait_for(lambda c: c["samples_stored"] >= stream.total, timeout=60), (
            collector.counters()
        )
        devices = collector.devices()
        collector.stop()
        pub.close()
    store = open_store(str(db))
    checks = {c["dev"]: c for c in store.sequence_check()}
    for i in range(3):
        c = checks[stream.dev(i)]
        assert (c["count"], c["first"], c["last"], c["missing"]) == (4000, 0, 3999, 0), c
        d = devices[stream.dev(i)]
        assert d["received"] == d["stored"] == 4000 and d["gaps"] == 0 and d["duplicates"] == 0, d
    assert {h["dev"] for h in store.health()} == {stream.dev(i) for i in range(3)}
    store.close()


def _collect(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wattbench.cli", "collect", *args],
        capture_output=True,
        text=True,
        env=_child_env(),
        timeout=timeout,
    )


def test_exit_codes(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("connect_timeout_s = 1\n")
    closed = EmbeddedBroker().port  # a free port nobody listens on
    out = _collect("--broker", f"127.0.0.1:{closed}", "--config", str(cfg), "--state-dir", str(tmp_path))
    assert out.returncode == 3, out.stderr
    assert "cannot reach the MQTT broker" in out.stderr
    out = _collect("--id", "Not Valid", "--state-dir", str(tmp_path))
    assert out.returncode == 2 and out.stderr.startswith("wattbench collect: --id 'Not Valid' must match")
    blocker = tmp_path / "file"
    blocker.write_text("")
    out = _collect(
        "--broker", f"127.0.0.1:{closed}", "--spool", str(blocker / "spool"), "--state-dir", str(tmp_path)
    )
    # checked before the collector starts (it was exit 4 once the spool was opened)
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith(f"wattbench collect: --spool: {blocker}/spool: {blocker} is a file"), (
        out.stderr
    )


def test_the_collector_logs_under_its_own_module_name(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # It logged as wattbench.cli.collect, a command's name, though the demo and the tests run it too.
    import threading

    cfg = CollectorConfig(
        broker=f"127.0.0.1:{services.free_port()}",
        store=str(tmp_path / "wb.sqlite"),
        state_dir=str(tmp_path),
        id="named",
    )
    cancel = threading.Event()
    cancel.set()  # stopped before the broker answered: the collector says so and stops
    with caplog.at_level(logging.INFO, logger="wattbench"):
        Collector(cfg).start(cancel=cancel)
    said = [r.name for r in caplog.records if r.getMessage().startswith("collector named stopped")]
    assert said == ["wattbench.ingest.collector"]


def test_sigterm_drains_and_exits_zero(tmp_path: Path) -> None:
    """Also: with the default protocol "auto" the collector falls back to MQTT 3.1.1 for amqtt."""
    import signal

    with EmbeddedBroker() as broker:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "wattbench.cli",
                "collect",
                "--broker",
                broker.url,
                "--store",
                str(tmp_path / "wb.sqlite"),
                "--state-dir",
                str(tmp_path),
                "--id",
                "t1",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=_child_env(),
        )
        # Stopped once it is subscribed: an idle collector writes no status file (nothing to commit),
        # so waiting for one ran out its 30 s every time.
        assert proc.stdout is not None
        head = []
        for line in proc.stdout:
            head.append(line)
            if "subscribed" in line:
                break
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
        out = "".join(head) + out
    assert proc.returncode == 0, out
    assert "using MQTT 3.1.1" in out and "stopping" in out and "stopped" in out


def test_a_dead_validation_process_does_not_stop_ingest(tmp_path: Path) -> None:
    import os
    import signal

    stream = Stream(devices=1, channels=1, batch=50, samples_per_device=2000, prefix="pool")
    msgs = stream.messages()
    with EmbeddedBroker() as broker:
        collector = Collector(_config(broker, tmp_path, "pool", validate_workers=1)).start()
        pub = _publisher(broker)
        pub.publish_all(msgs[:10])
        assert collector.wait_for(lambda c: c["samples_stored"] >= 500, timeout=60)
        for pid in list(collector._checks.pool._pool._processes):  # the worker dies as if OOM-killed
            os.kill(pid, signal.SIGKILL)
        pub.publish_all(msgs[10:])
        assert collector.wait_for(lambda c: c["samples_stored"] >= stream.total, timeout=60), (
            collector.counters()
        )
        assert collector.error is None and collector._checks.pool is None
        collector.stop()
        pub.close()


def _commits_for(tmp_path: Path, interval_ms: int) -> tuple[int, int]:
    """Messages trickled in one at a time for about two seconds: (commits, samples stored)."""
    stream = Stream(devices=1, channels=2, batch=4, samples_per_device=160, prefix=f"tick{interval_ms}")
    msgs = stream.messages()
    with EmbeddedBroker() as broker:
        cfg = _config(
            broker,
            tmp_path / str(interval_ms),
            "tick",
            health_period_s=3600,
            validate_workers=0,
            commit_interval_ms=interval_ms,
        )
        collector = Collector(cfg).start()
        pub = _publisher(broker)
        for m in msgs:
            pub.publish_all([m])
            time.sleep(0.05)
        assert collector.wait_for(lambda c: c["samples_stored"] >= stream.total, timeout=30)
        commits = int(collector.counters()["commits"])
        collector.stop()
        pub.close()
    return commits, stream.total


def test_a_commit_interval_groups_messages_into_fewer_commits(tmp_path: Path) -> None:
    # The low-latency profile's appliances send ten times the messages; one commit per message would
    # cost a store write and a state save each. With an interval, a commit holds what arrived meanwhile.
    eager, total = _commits_for(tmp_path, 0)
    paced, total_paced = _commits_for(tmp_path, 400)
    assert total == total_paced == 160
    assert eager >= 25  # about one per message (40 messages)
    assert paced <= 10, paced  # about 2.4 s of messages at one commit per 0.4 s, and the last one


def test_acknowledgements_wait_for_the_ack_interval_and_all_go_out(tmp_path: Path) -> None:
    # Stored at every commit, acknowledged (with a status file save) at most every 400 ms: fewer
    # acknowledgement rounds than commits, the last ones sent with nothing else arriving, and none
    # missing: a restart on the same session gets nothing again.
    stream = Stream(devices=1, channels=2, batch=4, samples_per_device=160, prefix="ack")
    msgs = stream.messages()
    with EmbeddedBroker() as broker:
        cfg = _config(
            broker,
            tmp_path,
            "ack",
            health_period_s=3600,
            validate_workers=0,
            commit_interval_ms=50,
            ack_interval_ms=400,
        )
        collector = Collector(cfg).start()
        pub = _publisher(broker)
        rounds = set()
        for m in msgs:
            pub.publish_all([m])
            time.sleep(0.05)
            rounds.add(collector.acked)
        assert collector.wait_for(lambda c: c["samples_stored"] >= stream.total, timeout=30)
        assert collector.wait_for(lambda c: collector.acked == len(msgs), timeout=5), collector.acked
        commits = int(collector.counters()["commits"])
        assert len(rounds) <= 10 < commits, (rounds, commits)  # about 2.4 s of messages
        collector.stop()
        again = Collector(cfg).start()
        time.sleep(1.5)
        assert again.counters()["messages"] == 0, "a message was left unacknowledged"
        assert again.devices()[stream.dev(0)]["stored"] == stream.total
        again.stop()
        pub.close()


def test_profiles_change_only_what_was_not_set(tmp_path: Path) -> None:
    from wattbench.config import ConfigError, load_config

    low = load_config(
        None, env={}, overrides={"profile": "low-latency", "state_dir": str(tmp_path)}
    ).resolved()
    assert (low.commit_interval_ms, low.ack_interval_ms, low.max_batch_samples, low.validate_workers) == (
        50,
        250,
        5000,
        0,
    )
    mine = load_config(
        None,
        env={"WATTBENCH_PROFILE": "low-latency"},
        overrides={"state_dir": str(tmp_path)},
    )
    mine.max_batch_samples = 800
    assert mine.resolved().max_batch_samples == 800
    default = load_config(None, env={}, overrides={"state_dir": str(tmp_path)}).resolved()
    assert (default.commit_interval_ms, default.ack_interval_ms, default.max_batch_samples) == (0, 0, 50_000)
    try:
        load_config(None, env={}, overrides={"profile": "fastest"}).resolved()
    except ConfigError as exc:
        assert "profile 'fastest'" in str(exc)
    else:
        raise AssertionError("an unknown profile was accepted")


def test_refused_credentials_leave_no_store_behind(tmp_path: Path) -> None:
    """A password the broker refuses is exit 3 in one line, found before the store is created: the
    store file used to be made first, and the refusal came only from the collector's own session."""
    if shutil.which("mosquitto_passwd") is None:
        pytest.skip("mosquitto_passwd is not installed")
    pw = tmp_path / "passwd"
    pw.write_text("")
    subprocess.run(["mosquitto_passwd", "-b", str(pw), "bench", "s3cret"], check=True)
    port = services.free_port()
    conf = (
        f"per_listener_settings false\nallow_anonymous false\npassword_file {pw}\nlistener {port} 127.0.0.1\n"
    )
    try:
        broker = services.Mosquitto(tmp_path / "mosq", port=port, extra_conf=conf)
    except services.ServiceUnavailable as exc:
        pytest.skip(str(exc))
    broker.start()
    try:
        store = tmp_path / "wb.sqlite"
        cfg = CollectorConfig(
            broker=f"127.0.0.1:{port}",
            mqtt_user="bench",
            mqtt_password="nope",
            store=str(store),
            state_dir=str(tmp_path / "state"),
            id="refused",
            connect_timeout_s=5,
        ).resolved()
        t0 = time.monotonic()
        with pytest.raises(CollectorError) as failed:
            Collector(cfg).start()
        assert failed.value.exit_code == 3
        assert "refused the collector" in str(failed.value)
        assert time.monotonic() - t0 < 5
        assert not store.exists()
        # The command says it in its one line: no "starting" or "serving /metrics" log line before it.
        argv = ["collect", "--broker", f"127.0.0.1:{port}", "--mqtt-user", "bench", "--store", str(store)]
        argv += ["--state-dir", str(tmp_path / "state"), "--metrics", f"127.0.0.1:{services.free_port()}"]
        env = dict(_child_env(), WATTBENCH_MQTT_PASSWORD="nope")
        out = subprocess.run(
            [sys.executable, "-m", "wattbench.cli", *argv],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert out.returncode == 3, out.stderr
        assert len(out.stderr.splitlines()) == 1, out.stderr
        assert out.stderr.startswith("wattbench collect: ") and "refused the collector" in out.stderr
        assert not store.exists()
    finally:
        broker.stop()


def test_an_mqtt_5_client_told_to_use_3_1_1_is_no_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The collector asks for MQTT 5 first and takes 3.1.1 when refused, as it is meant to: the embedded
    broker logged two WARNING lines for every collector start ("Invalid connection from ..." and
    "Failed to initialize client session: Invalid protocol from ...: 5"), which read as a fault."""
    caplog.set_level(logging.DEBUG)
    with EmbeddedBroker() as broker:
        cfg = CollectorConfig(
            broker=broker.url, store=str(tmp_path / "wb.sqlite"), state_dir=str(tmp_path), id="c5"
        )
        collector = Collector(cfg).start()
        assert collector.wait_for(lambda c: True, timeout=10)
        collector.stop()
    warnings = [r for r in caplog.records if r.name.startswith("amqtt") and r.levelno >= logging.WARNING]
    assert not warnings, [r.getMessage() for r in warnings]
    said = [r.getMessage() for r in caplog.records if r.name == "wattbench.broker"]
    assert any("asked for MQTT 5" in m for m in said), said
