"""One sweep from start to scored result: drive the plan, wait for the samples, align, score, check,
then publish the result (retained) and store it. Shared by `wattbench sweep` and `wattbench demo`."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.align import ChannelSpec
from ..core.evaluate import Evaluation
from ..core.plan import Plan
from ..mqttconn import AddressError, BrokerError, Settings, open_client
from ..store.base import Store, StoreError
from . import channels as chans
from .driver import Driver, RunRecord
from .progress import Display
from .publish import Fanout, MqttSink, Sink, SinkError, StoreSink
from .scoring import RunFacts, ScoringOptions, runs_driving, score_run

log = logging.getLogger(__name__)


@dataclass
class MqttSettings:
    broker: str
    username: str | None = None
    password: str | None = None
    tls_ca: str | None = None

    def client(self, client_id: str) -> Any:
        """A connected paho client with its loop running (for reading retained metadata)."""

        try:
            settings = Settings.parse(self.broker, self.username, self.password, self.tls_ca)
            return open_client(settings, client_id[:64])
        except (AddressError, BrokerError) as exc:
            raise SinkError(str(exc)) from None


@dataclass
class SweepSetup:
    run: str
    plan: Plan
    workload: Any
    store: Store | None = None
    mqtt: MqttSettings | None = None
    channels: Sequence[ChannelSpec] | None = None
    # The scoring options: limits, cost, clock offsets given, and the channels named (the sweep binds
    # to `channels` when given, else to these, else to those it finds).
    scoring: ScoringOptions = field(default_factory=ScoringOptions)
    display: Display | None = None
    wait_data_s: float = 20.0
    extra_sinks: Sequence[Sink] = ()
    # Told the chosen channels (and those left out, with why) before the run begins.
    announce: Callable[[str], None] | None = None
    listen_s: float = 5.0  # how long to listen for appliances publishing power when none is named
    # A cluster sweep's nodes: without named channels, the appliances of all of them are summed.
    nodes: Sequence[str] | None = None
    # The store as the user named it (credentials left out), for messages.
    store_name: str = "the store"


class NothingMeasured(Exception):
    """The run ended before its first measurement window closed: nothing was published or stored,
    and there is nothing to score. record.interrupted says why it ended."""

    def __init__(self, record: RunRecord) -> None:
        super().__init__(record.interrupted or "the run ended before its first measurement window")
        self.record = record


@dataclass
class Outcome:
    record: RunRecord
    evaluation: Evaluation
    channels: list[ChannelSpec]
    data_complete: bool
    store_error: str | None = None  # why the run could not be scored from the store, if it could not
    broker_outage: str | None = None  # the MQTT broker's outage during the run, in one sentence


def bind_channels(setup: SweepSetup) -> chans.Choice:
    """The channels this sweep sums, chosen before it starts: the ones named (checked against their
    metadata), or else the power channels of the one appliance online and publishing power, seen on the
    broker or, without one, in the store. Raises ChannelError when that cannot be done without a
    guess; with neither broker nor store the run measures ops only."""
    named = setup.channels or setup.scoring.named_channels
    if named:
        return _check_named(setup, named)
    if setup.mqtt is not None:
        seen = chans.survey(_meta_client(setup), listen_s=setup.listen_s)
    elif setup.store is not None:
        seen = chans.survey_store(setup.store, int(time.time() * 1000))
    else:
        return chans.Choice()  # no broker and no store: the run measures ops only, and says so
    choice = chans.bind_from_survey(seen, setup.nodes)
    if not any(s.role == "power" for s in choice.specs) and setup.store is not None:
        where = (
            "on the broker (may this user read wattbench/v1/dev/+/meta?)" if setup.mqtt else "in the store"
        )
        why = "; ".join(choice.notes) or f"no appliance metadata found {where}"
        raise chans.ChannelError(
            f"no appliance is online and publishing power ({why}): name the channels with --channel DEV/CH"
        )
    return choice


def _check_named(setup: SweepSetup, named: Sequence[ChannelSpec]) -> chans.Choice:
    """Named channels checked against what the broker's retained metadata and the store say of their
    devices, before anything is published or stored: every sweep, suite worklet and cluster sweep
    binds here, so a channel that no device has, an offline device or a role that does not fit is one
    ChannelError now instead of a run that cannot be scored."""
    devices = {s.dev for s in named}
    docs: list[Mapping[str, Any]] = []
    states: dict[str, str] = {}
    places: list[str] = []
    if setup.mqtt is not None:
        seen = chans.survey(_meta_client(setup), listen_s=min(setup.listen_s, 2.0), wanted=devices)
        docs.extend(seen.metas.values())
        states = seen.states
        places.append("on the broker")
    known = chans.known_channels(docs)
    if setup.store is not None:
        places.append("in the store")
        now = int(time.time() * 1000)
        if devices - set(known) or setup.mqtt is None:
            # A device with no metadata on the broker (a smart plug the collector bridges) is described
            # by what the collector stored for it.
            stored = [
                doc for _, doc in setup.store.meta_history(now, now) if str(doc.get("dev")) not in known
            ]
            docs.extend(stored)
            known.update(chans.known_channels(stored))
        described = set(known)
        if devices - described:
            # A store filled without metadata (by Telegraf) still shows which channels are publishing.
            for dev, ch in setup.store.channels(now - chans.RECENT_MS, now + chans.RECENT_MS):
                if dev not in described:
                    known.setdefault(dev, set()).add(ch)
    if places:
        problems = chans.unknown_named(named, known, " or ".join(places))
        if problems:
            raise chans.ChannelError("; ".join(problems))
    offline = [s for s in named if states.get(s.dev) == "offline"]
    if offline:
        raise chans.ChannelError(
            "; ".join(
                f"{chans.typed_as(s)}: {s.dev} is offline (retained status), cannot be measured"
                for s in offline
            )
        )
    choice = chans.apply_roles(named, chans.roles_from_metas(docs), typed=not setup.channels)
    if choice.problems:
        raise chans.ChannelError("; ".join(choice.problems))
    return choice


def check_offsets(given: Sequence[str], choice: chans.Choice) -> None:
    """Each --clock-offset names a device the run measures (chans.unmeasured_offsets)."""
    problems = chans.unmeasured_offsets(dict(chans.parse_offset(text) for text in given), choice)
    if problems:
        raise chans.ChannelError(problems[0])


# How long a sweep waits for the first sample of a channel in its store: a collector started just
# before it (the demo's, a script's) stores its first batch within a few seconds.
FED_WAIT_S = 10.0


def longest_batch_ms(store: Store, devices: Collection[str]) -> int:
    """The longest any of the devices holds its samples before publishing them, as its stored
    metadata says; 0 when none says."""
    now = int(time.time() * 1000)
    metas = {str(doc.get("dev")): doc for _, doc in store.meta_history(now, now)}
    return max((chans.batch_ms(metas.get(dev)) for dev in devices), default=0)


def check_store_fed(setup: SweepSetup, choice: chans.Choice, wait_s: float = FED_WAIT_S) -> None:
    """Every power channel the run sums has a sample in the store from the last 30 s, before the first
    phase. A store the collector does not write into (another file, a misspelt database, a collector
    stopped) still holds the channels' metadata, so binding passes; without this the whole plan ran
    and then found no power."""
    if setup.store is None:
        return
    wanted = {(s.dev, s.ch) for s in choice.specs if s.role == "power"}
    # A device that holds its samples for a minute has its newest stored sample up to a minute old.
    back_ms = chans.RECENT_MS + longest_batch_ms(setup.store, {dev for dev, _ in wanted})
    deadline = time.monotonic() + wait_s
    while True:
        now = int(time.time() * 1000)
        missing = sorted(wanted - set(setup.store.channels(now - back_ms, now + chans.RECENT_MS)))
        if not missing or time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    if missing:
        names = ", ".join(f"{dev}/{ch}" for dev, ch in missing)
        raise chans.ChannelError(
            f"{setup.store_name} holds no sample of {names} from the last {back_ms // 1000} s: is "
            "`wattbench collect` writing into it? (nothing was measured or stored)"
        )


def check_meter_free(setup: SweepSetup, choice: chans.Choice) -> None:
    """No other run in the store is driving a power channel this run sums: both would be scored with
    each other's load in their watts (the exclusive check fails them at their end), so the second is
    told now, before its first phase."""
    if setup.store is None:
        return
    power = [s for s in choice.specs if s.role == "power"]
    busy = runs_driving(setup.store, [s.key for s in power], int(time.time() * 1000))
    if busy:
        other, (shared, quiet, left) = next(iter(busy.items()))
        raise chans.ChannelError(
            f"channel {', '.join(shared)}: run {other} is driving it (its last event "
            f"{quiet / 1000:.0f} s ago; a run stopped without its end counts for {left / 1000:.0f} s more): "
            "wait for it, or measure another channel (nothing was measured or stored)"
        )


def _meta_client(setup: SweepSetup) -> Callable[[], object]:
    mqtt = setup.mqtt
    assert mqtt is not None
    return lambda: mqtt.client(f"wattbench-meta-{setup.run}")


def describe(choice: chans.Choice) -> list[str]:
    """The chosen channels as lines for the operator, before the run."""
    lines = []
    for s in choice.specs:
        what = "summed as server power" if s.role == "power" else "inlet temperature"
        extra = ", ".join(
            x for x in (s.meter and f"meter {s.meter}", s.role == "power" and f"node {s.node_name}") if x
        )
        lines.append(f"channel {s.key}: {what}" + (f" ({extra})" if extra else ""))
    if not any(s.role == "power" for s in choice.specs):
        lines.append("no power channel: the run measures ops only")
    lines.extend(f"left out: {note}" for note in choice.notes)
    return lines


def run_sweep(setup: SweepSetup) -> Outcome:
    sinks: list[Sink] = list(setup.extra_sinks)
    if setup.store is not None:
        sinks.append(StoreSink(setup.store))
    mqtt_sink = None
    if setup.mqtt is not None:
        m = setup.mqtt
        mqtt_sink = MqttSink(m.broker, f"wattbench-sweep-{setup.run}", m.username, m.password, m.tls_ca)
        sinks.append(mqtt_sink)
    fanout = Fanout(sinks)
    try:
        choice = bind_channels(setup)
        check_offsets(setup.scoring.clock_offset, choice)
        check_store_fed(setup, choice)
        check_meter_free(setup, choice)
        for line in describe(choice):
            (setup.announce or log.warning)(line)
        specs = choice.specs
        driver = Driver(
            setup.run,
            setup.plan,
            setup.workload,
            fanout,
            display=setup.display,
            channels=[s.key for s in specs],
        )
        record = driver.run()
        if not record.measured:
            raise NothingMeasured(record)
        store_error = None
        try:
            evaluation, specs, complete = score_record(setup, record, specs)
        except StoreError as exc:
            # The store went away during the run. What was measured is kept: the result says why it
            # has no power, and `wattbench report RUN --rescore` scores it once the store is back.
            store_error = f"the store could not be read after the run: {exc}"
            log.error("%s", store_error)
            evaluation = score_run(None, record.run, setup.scoring, facts(setup, record, [], store_error))
            specs, complete = list(specs or []), False
        fanout.result(evaluation.result)
    finally:
        fanout.close()
    outage = mqtt_sink.outage() if mqtt_sink is not None else None
    return Outcome(record, evaluation, specs, complete, store_error, outage)


def score_record(
    setup: SweepSetup, record: RunRecord, specs: list[ChannelSpec] | None
) -> tuple[Evaluation, list[ChannelSpec], bool]:
    """The run scored (scoring.score_run) once its last window's samples are in the store, or
    setup.wait_data_s has passed: the evaluation, the channels summed, and whether the data came."""
    store = setup.store
    specs = list(specs or [])
    complete = True
    last_end = max((e["t"] for e in record.events if e["event"] == "measure_end"), default=None)
    if store is not None and last_end is not None and specs:
        # The offset for the wait is only a guess at where the last window's samples lie.
        given = setup.scoring.offsets
        guess = (
            given if given is not None else chans.offsets_from_store(store, sorted({s.dev for s in specs}))
        )
        # The last window's samples come with the next batch: an appliance batching every minute
        # needs the minute, whatever --wait-data says.
        batch_s = longest_batch_ms(store, {s.dev for s in specs}) / 1000.0
        wait_s = max(setup.wait_data_s, batch_s + chans.BATCH_SLACK_S) if batch_s else setup.wait_data_s
        complete = chans.wait_for_data(store, specs, last_end, guess, wait_s)
    evaluation = score_run(store, record.run, setup.scoring, facts(setup, record, specs))
    return evaluation, evaluation.channels, complete


def facts(setup: SweepSetup, record: RunRecord, bound: list[ChannelSpec], why: str | None = None) -> RunFacts:
    """What this sweep knows of its run that the store does not (why: why it could not be scored
    from the store)."""
    return RunFacts(
        record.events,
        planned=record.planned,
        interrupted=record.interrupted or why,
        calibrations=[p.name for p in setup.plan.calibrations],
        calibration_use=setup.plan.calibration_use,
        bound=bound,
    )
