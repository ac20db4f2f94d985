"""The collector's ingest thread: inbox -> checks -> pipeline -> writer thread, in named steps.

Each turn of the loop (Intake.run):
1. feed: arrived messages go to the checks (ingest/checks.py) a chunk at a time; a bridged plug's
   message is translated and handled at once;
2. account: checked messages go through the pipeline, oldest first, until the batch is full;
3. hand over: the batch and the acknowledgements that are due go to the writer thread
   (ingest/handover.py) when the writer is free and the commit interval has passed, when the batch is
   full, when health is due, or at the end of the drain;
4. idle: when nothing moved, sleep until a message, the next commit time, or the time of the
   acknowledgements held.

While the writer is busy the batch keeps growing, so commits size themselves to the store's pace.
The three clocks of the loop each have their own small class: Cadence (commits), AckTimer
(acknowledgements and status-file saves) and HealthReport (health points).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import wattbench_schema as contract

from ..bridge.translate import Bridge
from ..config import CollectorConfig
from .checks import Checks, Message
from .handover import Ack, Commit, Handover
from .parallel import Verdict
from .pipeline import Batch, Pipeline
from .validate import Rejected

log = logging.getLogger(__name__)


def now_ms() -> int:
    return int(time.time() * 1000)


class Cadence:
    """When the next batch may go to the writer: at once when commit_interval_ms is 0."""

    def __init__(self, interval_ms: int) -> None:
        self.interval_s = interval_ms / 1000
        self.next = 0.0

    def due(self, now: float) -> bool:
        return now >= self.next

    def handed_over(self, now: float) -> None:
        self.next = now + self.interval_s


class AckTimer:
    """The acknowledgements held until their messages' data is durable.

    They wait for the next state save, at most ack_interval_ms, and never so many that the broker's
    in-flight window (receive_maximum; 20 in Mosquitto for MQTT 3.1.1) fills."""

    def __init__(self, interval_ms: int, cap: int) -> None:
        self.held: list[Ack] = []
        self.every_s = interval_ms / 1000
        self.cap = cap
        self.next = 0.0

    def due(self, now: float, final: bool) -> bool:
        held = self.held
        return bool(held) and (final or now >= self.next or len(held) >= self.cap)

    def take(self, now: float) -> list[Ack]:
        held, self.held = self.held, []
        self.next = now + self.every_s
        return held


class HealthReport:
    """A health point per device every health_period_s, and a warning when a device repeats times."""

    def __init__(self, period_s: float) -> None:
        self.period_s = period_s
        self.next = 0.0
        self._warned_repeats: dict[str, int] = {}

    def start(self) -> None:
        self.next = time.monotonic() + self.period_s

    def due(self, final: bool) -> bool:
        """Whether health is due now (always at the end); if so, the next one is a period away."""
        if final or time.monotonic() >= self.next:
            self.next = time.monotonic() + self.period_s
            return True
        return False

    def into_batch(self, pipeline: Pipeline, spool_bytes: int, spool_age_s: float) -> None:
        t = now_ms()
        for dev, acct in pipeline.accounts.devices.items():
            seen = self._warned_repeats.get(dev, 0)
            if acct.t_repeats > seen:
                self._warned_repeats[dev] = acct.t_repeats
                log.warning(
                    "device %s sent %d sample(s) not later than the previous one of their channel; "
                    "samples in the same ms overwrite each other in the store (device clock or firmware)",
                    dev,
                    acct.t_repeats - seen,
                )
        pipeline.add_health(t, spool_bytes, spool_age_s)


class Intake:
    """The ingest thread's loop and its steps. The pipeline is shared with the collector's figures,
    under pipeline_lock; the checks and the handover belong to the collector, which closes them."""

    def __init__(
        self,
        config: CollectorConfig,
        *,
        pipeline: Pipeline,
        pipeline_lock: threading.Lock,
        inbox: deque[Message],
        checks: Checks,
        handover: Handover,
        health: HealthReport,
        link: Any,
        bridge: Bridge | None,
        spool_figures: Callable[[], tuple[int, float]],
        stopping: threading.Event,
        wake: threading.Event,
        failed: Callable[[], bool],
    ) -> None:
        self.config = config
        self._pipeline = pipeline
        self._pipeline_lock = pipeline_lock
        self._inbox = inbox
        self._checks = checks
        self._handover = handover
        self._health = health
        self._link = link
        self._bridge = bridge
        self._spool_figures = spool_figures
        self._stopping = stopping
        self._wake = wake
        self._failed = failed
        self._cadence = Cadence(config.commit_interval_ms)
        ack_cap = config.receive_maximum // 2 if link is None or link.v5 else 10
        self._acks = AckTimer(config.ack_interval_ms, ack_cap)
        self._drain_left: int | None = None  # once stopping: what had arrived by then, and no more
        self._drops_told: set[tuple[str, str]] = set()

    def run(self) -> None:
        checks = self._checks
        while True:
            if self._stopping.is_set() and self._drain_left is None:
                self._drain_left = len(self._inbox)
            moved = self._feed()
            done = self._account(moved)
            final = self._drain_left == 0 and not checks.pending
            if not self._hand_over(final):
                return
            if not moved and not done and not checks.pending:
                self._idle()

    # ------------------------------------------------------------------ 1. feed

    def _feed(self) -> int:
        """Arrived messages to the checks, as many chunks as they have room for; how many were taken."""
        inbox, checks, bridge = self._inbox, self._checks, self._bridge
        chunk = checks.chunk
        # A local copy: this runs once per message.
        left = self._drain_left
        moved = 0
        while inbox and checks.room() and (left is None or left > 0):
            items: list[Message] = []
            while inbox and len(items) < chunk and (left is None or left > 0):
                m = inbox.popleft()
                if left is not None:
                    left -= 1
                if bridge is not None and self._bridged(bridge, m):
                    moved += 1
                    continue
                items.append(m)
            if not items:
                continue
            checks.submit(items)
            moved += len(items)
        self._drain_left = left
        return moved

    def _bridged(self, bridge: Bridge, m: Message) -> bool:
        """A bridged plug's message: made into contract messages and handled here, in this process
        (plugs send a message every few seconds); False for any other topic."""
        gen, mid, qos, topic, payload, recv_ms, retain, dup = m
        plugs = bridge.plugs_for(topic)
        if not plugs:
            return False
        with self._pipeline_lock:
            # Under the pipeline's lock: the plug's numbering is saved in the same snapshot as the
            # accounting of the samples it made. Every row reading the topic gets the message.
            for plug in plugs:
                out = bridge.translate(plug, topic, payload, recv_ms, retained=retain, redelivered=dup)
                for t, raw in out.messages:
                    self._pipeline.handle(t, raw, recv_ms)
                if out.dropped is not None and (out.dev, out.dropped) not in self._drops_told:
                    self._drops_told.add((out.dev, out.dropped))
                    log.info(
                        "plug %s: a %s message on %s is no fresh reading and makes no sample "
                        "(counted in `wattbench status`; told once)",
                        out.dev,
                        out.dropped,
                        topic,
                    )
                if out.reject_detail is not None:
                    excerpt = payload[:64].decode("utf-8", "replace")
                    rejected = Rejected("plug", out.reject_detail, topic, len(payload), out.dev, excerpt)
                    self._pipeline.handle(topic, payload, recv_ms, (rejected, None, None))
        self._acks.held.append((gen, mid, qos))
        return True

    # ------------------------------------------------------------------ 2. account

    def _account(self, moved: int) -> int:
        """Checked messages through the pipeline, in arrival order, until the batch is full; how many.
        It waits for a check only when it has nothing else to do."""
        checks, pipeline = self._checks, self._pipeline
        limit = self.config.max_batch_samples
        done = 0
        while checks.pending and pipeline.batch.samples < limit:
            if not checks.front_ready():
                if done or moved or (pipeline.batch and self._handover.writer_free()):
                    break  # other work first: hand over, or queue more checks
                if not checks.wait_front(0.05):
                    break
            items, verdicts = checks.pop()
            self._into_pipeline(items, verdicts)
            done += len(items)
        return done

    def _into_pipeline(self, items: list[Message], verdicts: list[Verdict] | None) -> None:
        """A chunk of messages into the pipeline, whose records join its batch; verdicts None: the
        stateless check too runs here."""
        pipeline = self._pipeline
        acks = self._acks.held
        with self._pipeline_lock:
            # Without verdicts (no pool, or a broken one) the pipeline checks here, with the store's
            # one pass too.
            for k, m in enumerate(items):
                pipeline.handle(m[3], m[4], m[5], None if verdicts is None else verdicts[k])
                acks.append((m[0], m[1], m[2]))

    # ------------------------------------------------------------------ 3. hand over

    def _hand_over(self, final: bool) -> bool:
        """The batch, and the acknowledgements that are due, to the writer thread when it is time;
        False when the loop ends: the final commit is handed over, or the collector failed."""
        pipeline, acks, cadence = self._pipeline, self._acks, self._cadence
        with self._pipeline_lock:
            health = self._health.due(final)
            if health:
                self._health.into_batch(pipeline, *self._spool_figures())
            full = pipeline.batch.samples >= self.config.max_batch_samples
            now = time.monotonic()
            ack_due = acks.due(now, final)
            have = ack_due or bool(pipeline.batch)
            due = self._handover.writer_free() and cadence.due(now)
            handover = have and (final or health or full or due)
            if handover:
                cadence.handed_over(now)
            batch, notices = pipeline.take() if handover else (None, [])
            # The accounting as of exactly this batch: saved before its acknowledgements go out,
            # so a restarted collector never counts an acknowledged message as unseen. Batches
            # committed without acknowledgements are covered by the next snapshot, which is
            # written after them.
            send_acks = handover and (ack_due or final or not acks.every_s)
            snapshot = self._snapshot() if send_acks else None
        self._publish_notices(notices)
        if batch is None and not final:
            return True
        commit = Commit(batch or Batch(), acks.take(now) if send_acks else [], snapshot, final)
        if not self._handover.put(commit, self._failed):
            return False
        return not final

    def _snapshot(self) -> dict[str, Any]:
        p = self._pipeline
        return {
            "t": now_ms(),
            "accounts": p.accounts.state(),
            "counters": p.counters(),
            "meta": {dev: [c["c"] for c in m.get("channels", [])] for dev, m in p.meta.items()},
            "plugs": {} if self._bridge is None else self._bridge.state(),
        }

    def _publish_notices(self, notices: list[dict[str, Any]]) -> None:
        if not notices or not self.config.publish_rejects or self._link is None:
            return
        topic = contract.topic_for("reject", source=self.config.id)
        for notice in notices:
            try:
                self._link.publish(topic, contract.dumps(notice), qos=1)
            except Exception as exc:  # a notice is advisory; its record is in the store already
                log.debug("reject notice not published: %s", exc)
        log.warning(
            "rejected %d message(s); last: %s on %s: %s",
            len(notices),
            notices[-1]["reason"],
            notices[-1]["topic"],
            notices[-1]["detail"],
        )

    # ------------------------------------------------------------------ 4. idle

    def _idle(self) -> None:
        wait = 0.2
        cadence, acks = self._cadence, self._acks
        if cadence.interval_s:  # messages and batches wait for the next commit time
            wait = min(wait, max(0.001, cadence.next - time.monotonic()))
        if acks.held:  # held acknowledgements go out on time when nothing else arrives
            wait = min(wait, max(0.001, acks.next - time.monotonic()))
        self._wake.wait(wait)
        self._wake.clear()
