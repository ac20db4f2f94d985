"""One sweep from start to scored result: drive the plan, wait for the samples, align, score, check,
then publish the result (retained) and store it. Shared by `wattbench sweep` and `wattbench demo`."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import compliance as cp
from .. import score as sc
from ..align import ChannelSpec
from ..store.base import StoreError
from . import channels as chans
from .driver import Driver, RunRecord
from .evaluate import Evaluation, evaluate
from .plan import Plan
from .progress import Display
from .publish import Fanout, MqttSink, Sink, StoreSink

log = logging.getLogger(__name__)


@dataclass
class MqttSettings:
    broker: str
    username: str | None = None
    password: str | None = None
    tls_ca: str | None = None

    def client(self, client_id: str) -> Any:
        """A connected paho client with its loop running (for reading retained metadata)."""
        import threading

        import paho.mqtt.client as mqtt

        from .publish import SinkError, parse_broker

        host, port = parse_broker(self.broker)
        c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id[:64], protocol=mqtt.MQTTv311)
        if self.username:
            c.username_pw_set(self.username, self.password)
        if self.tls_ca:
            c.tls_set(ca_certs=self.tls_ca)
        ready = threading.Event()
        c.on_connect = lambda *a: ready.set()
        try:
            c.connect(host, port, keepalive=30)
        except OSError as exc:
            raise SinkError(f"MQTT broker {host}:{port} unreachable: {exc.strerror or exc}") from None
        c.loop_start()
        if not ready.wait(10):
            c.loop_stop()
            raise SinkError(f"MQTT broker {host}:{port}: no answer to CONNECT")
        return c


@dataclass
class SweepSetup:
    run: str
    plan: Plan
    workload: Any
    store: Any = None
    mqtt: MqttSettings | None = None
    channels: Sequence[ChannelSpec] | None = None
    offsets_ms: dict[str, float] | None = None
    limits: cp.Limits = field(default_factory=cp.Limits)
    cost: sc.CostInputs | None = None
    display: Display | None = None
    wait_data_s: float = 20.0
    deadband_ms: float = chans.DEFAULT_DEADBAND_MS
    extra_sinks: Sequence[Sink] = ()


@dataclass
class Outcome:
    record: RunRecord
    evaluation: Evaluation
    channels: list[ChannelSpec]
    data_complete: bool
    store_error: str | None = None  # why the run could not be scored from the store, if it could not


def discover_channels(setup: SweepSetup) -> list[ChannelSpec] | None:
    if setup.channels:
        return list(setup.channels)
    if setup.mqtt is not None:
        try:
            metas = chans.read_meta(lambda: setup.mqtt.client(f"wattbench-meta-{setup.run}"))  # type: ignore[union-attr]
        except Exception as exc:
            log.warning("could not read appliance metadata: %s", exc)
            metas = []
        found = chans.from_meta(metas)
        if found:
            return found
    return None


def run_sweep(setup: SweepSetup) -> Outcome:
    sinks: list[Sink] = list(setup.extra_sinks)
    if setup.store is not None:
        sinks.append(StoreSink(setup.store))
    if setup.mqtt is not None:
        m = setup.mqtt
        sinks.append(MqttSink(m.broker, f"wattbench-sweep-{setup.run}", m.username, m.password, m.tls_ca))
    fanout = Fanout(sinks)
    try:
        specs = discover_channels(setup)
        driver = Driver(
            setup.run,
            setup.plan,
            setup.workload,
            fanout,
            display=setup.display,
            channels=[s.key for s in specs or []],
        )
        record = driver.run()
        store_error = None
        try:
            evaluation, specs, complete = score_record(setup, record, specs)
        except StoreError as exc:
            # The store went away during the run. What was measured is kept: the result says why it
            # has no power, and `wattbench report RUN --rescore` scores it once the store is back.
            store_error = f"the store could not be read after the run: {exc}"
            log.error("%s", store_error)
            evaluation = evaluate(
                record.run,
                record.events,
                None,
                [],
                {},
                setup.limits,
                setup.cost,
                planned=record.planned,
                interrupted=record.interrupted or store_error,
                calibration_use=setup.plan.calibration_use,
            )
            specs, complete = list(specs or []), False
        fanout.result(evaluation.result)
    finally:
        fanout.close()
    return Outcome(record, evaluation, specs, complete, store_error)


def score_record(
    setup: SweepSetup, record: RunRecord, specs: list[ChannelSpec] | None
) -> tuple[Evaluation, list[ChannelSpec], bool]:
    store = setup.store
    measured = dict(setup.offsets_ms or {})
    # Offsets given by the operator are taken as exact; estimated ones pass through the deadband.
    deadband = 0.0 if setup.offsets_ms is not None else setup.deadband_ms
    complete = True
    fetch = None
    if store is not None and record.start_ms is not None:
        if specs is None:
            specs = chans.from_store(store, record.start_ms, record.end_ms or record.start_ms)
        devices = sorted({s.dev for s in specs})
        last_end = max((e["t"] for e in record.events if e["event"] == "measure_end"), default=None)
        if last_end is not None and specs:
            # The offset for the wait is only a guess at where the last window's samples lie.
            guess = measured if setup.offsets_ms is not None else chans.offsets_from_store(store, devices)
            complete = chans.wait_for_data(store, specs, last_end, guess, setup.wait_data_s)
        if setup.offsets_ms is None:
            # Read after the wait: the health points that saw the last window's batches are in by now.
            span = (record.start_ms, record.end_ms or last_end or record.start_ms)
            measured = chans.offsets_from_store(store, devices, *span)
        fetch = store.series
    evaluation = evaluate(
        record.run,
        record.events,
        fetch,
        specs or [],
        measured,
        setup.limits,
        setup.cost,
        planned=record.planned,
        interrupted=record.interrupted,
        calibration_use=setup.plan.calibration_use,
        deadband_ms=deadband,
    )
    return evaluation, list(specs or []), complete
