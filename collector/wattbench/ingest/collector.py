"""The collector service: MQTT in, validated and accounted records out to the store, nothing lost.

This module is the thread shell: it opens the store and the spool, connects, runs the threads and
stops them, and gives the collector's figures. The durability policy is the Writer's (ingest/writer.py),
the status file StateFile's (ingest/state.py).

Three threads:
- paho's network thread puts each message into the inbox, with the connection generation it came on;
- the ingest thread (Intake, ingest/intake.py) has messages checked (ingest/checks.py), validated and
  accounted (Pipeline) and hands batches to the writer; while the writer is busy the next batch grows,
  so batches size themselves to the store's pace;
- the writer thread (Handover, ingest/handover.py) has the Writer commit each batch to the store, or to
  the spool when the store is down, and only then acknowledges the batch's messages to the broker.
  Between batches it lets the Writer replay the spool, in order, once the store answers again.

A message is therefore acknowledged only when its data is durable (store or spool). Killed at any
point, the collector loses nothing: the broker redelivers what was not acknowledged, and the store's
idempotent keys absorb what is written twice.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ..bridge import PlugConfigError, load_plugs
from ..bridge.translate import Bridge
from ..config import CollectorConfig, ConfigError
from ..exits import Exit
from ..forms import split_metrics_address
from ..owner import Busy, hold
from ..spool import Spool, SpoolError
from ..store import SampleEncoder, missing_folder, open_store
from .auth import Verifier
from .checks import Checks, Message
from .handover import Handover
from .intake import HealthReport, Intake, now_ms
from .live import Live, channels_now
from .metrics import serve
from .mqtt import BrokerRefused, BrokerUnreachable, MqttLink, preflight
from .pipeline import Pipeline
from .state import StateFile
from .validate import Validator
from .writer import NotDurable, Writer, WriterStats

if TYPE_CHECKING:
    from ..store import Store

log = logging.getLogger(__name__)


class CollectorError(RuntimeError):
    """A fatal condition; exit_code says which (see docs/collector.md)."""

    def __init__(self, message: str, exit_code: Exit) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class Collector:
    """Run with start() / stop(), or use as a context manager. Thread-safe figures: counters(), devices()."""

    def __init__(
        self, config: CollectorConfig | None = None, store: Store | None = None, **overrides: Any
    ) -> None:

        cfg = config or CollectorConfig()
        for key, value in overrides.items():
            if not hasattr(cfg, key):
                raise ConfigError(f"unknown setting {key!r}")
            setattr(cfg, key, value)
        self.config = cfg.resolved()
        if store is None and self.config.store:
            # Found now, with the configuration: the state folder is made at start, a store's never.
            folder = missing_folder(self.config.store)
            if folder is not None and folder.resolve() != Path(self.config.state_dir).resolve():
                said = self.config.named("store")
                raise ConfigError(f"{said} {self.config.store}: no folder {folder} (nothing was created)")
        self._given_store = store
        self._owner: IO[str] | None = None
        self.store: Store | None = store
        self.spool: Spool | None = None
        self.deadletter: Spool | None = None
        self.writer: Writer | None = None
        self.link: Any = None
        self.pipeline = self._pipeline(None)
        self._encoder: SampleEncoder | None = None
        self.error: CollectorError | None = None
        self.started_ms = 0
        # (connection generation, packet id, qos, topic, payload, receive time ms, retain, DUP)
        self._inbox: deque[Message] = deque()
        self._checks = Checks()
        self._handover = Handover()
        self._health = HealthReport(self.config.health_period_s)
        self._metrics_server: Any = None
        self._wake = threading.Event()
        # With a commit interval the ingest thread runs on that cadence and is not woken per message:
        # at ten messages per appliance and second, a wake-up each (a lock hand-off between the MQTT and
        # the ingest thread) costs more than the message. A long queue still wakes it.
        self._wake_at = 1 if self.config.commit_interval_ms == 0 else 512
        self._stopping = threading.Event()
        self._stopped = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._pipeline_lock = threading.Lock()
        self.bridge: Bridge | None = None
        if self.config.plugs:
            try:
                # Read before anything starts: a wrong mapping is exit 2, not a collector that drops plugs.
                self.bridge = Bridge(load_plugs(self.config.plugs), boot=int(time.time()))
            except PlugConfigError as exc:
                raise ConfigError(f"{self.config.named('plugs')}: {exc}") from None
        self.state_file = StateFile(self.config.state_dir, self.config.id)
        self.state_path = self.state_file.path

    def _pipeline(self, encoder: SampleEncoder | None) -> Pipeline:
        """encoder: the store's; until the store is open there is none."""
        return Pipeline(
            self.config.id,
            Validator(verifier=self._verifier(), encoder=encoder),
            track_gaps=not self.config.share or self.config.share_by_topic,
            keep_latest=bool(self.config.metrics),
        )

    def _verifier(self) -> Any:

        if not self.config.hmac_keys and not self.config.hmac_require:
            return None

        if not self.config.hmac_keys:
            return Verifier({}, require=True)
        # named as the user gave it: --hmac-keys, WATTBENCH_HMAC_KEYS or the key in the file
        given = f"{self.config.named('hmac_keys')} {self.config.hmac_keys}"
        try:
            return Verifier.from_file(self.config.hmac_keys, require=self.config.hmac_require)
        except OSError as exc:
            raise ConfigError(f"{given}: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise ConfigError(f"{given}: {exc}") from None

    # ------------------------------------------------------------------ lifecycle

    def start(self, cancel: threading.Event | None = None) -> Collector:
        """Open the store and spool, connect, subscribe. Raises CollectorError when that fails.

        cancel: a stop asked while the broker has not answered yet (Ctrl-C, SIGTERM). When it is set
        before the collector is subscribed, start() closes what it opened and returns a collector that
        has stopped, without waiting for the connect timeout; nothing was received, so nothing is lost."""

        cfg = self.config
        if cfg.metrics:
            # Bound first: an address in use is a mistake in the configuration, found before the store
            # is created or the broker asked. A scrape meanwhile sees a collector that is starting.
            self._serve_metrics()
        try:
            try:
                Path(cfg.state_dir).mkdir(parents=True, exist_ok=True)
                # One process per id and state folder: a second one would write the same status file
                # and spool, and take the first's session at the broker, after which the first
                # stores nothing.
                self._owner = hold(Path(cfg.state_dir) / f"collector-{cfg.id}.lock")
            except Busy as exc:
                raise CollectorError(
                    f"another collector (pid {exc.pid}) runs with the id {cfg.id} and the state folder "
                    f"{cfg.state_dir}: stop it, or give this one another --id or --state-dir",
                    Exit.CONFIG,
                ) from None
            except OSError as exc:
                raise CollectorError(f"state folder unusable: {exc}", Exit.STORAGE) from None
            try:
                self.spool = spool = Spool(cfg.spool_dir)
                self.deadletter = deadletter = Spool(Path(cfg.spool_dir) / "deadletter")
            except (SpoolError, OSError) as exc:
                raise CollectorError(f"spool unusable: {exc}", Exit.STORAGE) from None
            # The broker is asked before the store is opened: a wrong address, or credentials it
            # refuses, leave no store file behind and subscribe nothing.
            try:
                protocol = preflight(cfg, cancel)
            except (BrokerRefused, BrokerUnreachable) as exc:
                raise CollectorError(str(exc), Exit.BROKER) from None
            if protocol is None:
                self._close_storage()
                self._stopped.set()
                log.info("collector %s stopped before the broker at %s answered", cfg.id, cfg.broker)
                return self
            # Said once the broker has answered: a refusal is then the command's one line, alone.
            if self._metrics_server is not None:
                log.info("serving Prometheus /metrics on http://%s/metrics", cfg.metrics)
            log.info("collector %s starting: %s", cfg.id, json.dumps(cfg.describe()))
            if cfg.protocol_fallback and protocol == "3.1.1":
                if cfg.share:
                    raise CollectorError(
                        f"broker {cfg.broker} speaks only MQTT 3.1.1; shared subscriptions need MQTT 5",
                        Exit.BROKER,
                    )
                log.info("broker %s does not speak MQTT 5: using MQTT 3.1.1", cfg.broker)
            if self.store is None:
                self.store = self._open_store()
        except CollectorError:
            self._close_storage()  # and /metrics, which is already served
            raise
        self._encoder = self.store.start_writing()
        if self._encoder is not None:
            # Nothing has gone into the first pipeline yet: state is restored into this one.
            with self._pipeline_lock:
                self.pipeline = self._pipeline(self._encoder)
        self.writer = Writer(self.store, spool, deadletter, retry_s=cfg.retry_s)
        self._restore_state()
        self._checks.start_pool(cfg, encoder=self._encoder)
        self.started_ms = now_ms()
        self._health.start()
        self.link = MqttLink(
            cfg,
            self._on_message,
            protocol=protocol,
            extra_filters=self.bridge.filters() if self.bridge else (),
        )
        self._threads = [
            threading.Thread(target=self._guard, args=(self._ingest_loop,), name="wb-ingest", daemon=True),
            threading.Thread(target=self._guard, args=(self._writer_loop,), name="wb-writer", daemon=True),
        ]
        for t in self._threads:
            t.start()
        self.link.start()
        try:
            ready = self.link.wait_ready(cfg.connect_timeout_s, cancel)
        except BrokerRefused as exc:
            self._abort()
            raise CollectorError(str(exc), Exit.BROKER) from None
        if not ready and cancel is not None and cancel.is_set():
            self._abort()
            self._stopped.set()
            log.info("collector %s stopped before the broker at %s answered", cfg.id, cfg.broker)
            return self
        if not ready:
            detail = self.link.why_not_connected()
            self._abort()
            raise CollectorError(
                f"cannot reach the MQTT broker at {cfg.broker} within {cfg.connect_timeout_s:g} s ({detail})",
                Exit.BROKER,
            )
        log.info(
            "collector %s subscribed%s; storing into %s",
            cfg.id,
            f" in share group {cfg.share!r}" if cfg.share else "",
            self.store,
        )
        return self

    def _serve_metrics(self) -> None:
        host, port = split_metrics_address(self.config.metrics)
        try:
            self._metrics_server = serve(self.live, host, port)
        except OSError as exc:
            raise CollectorError(
                f"cannot serve /metrics on {self.config.metrics}: {exc}", Exit.CONFIG
            ) from None

    def live(self) -> Live:
        """One consistent copy of what the collector knows now, for /metrics."""
        with self._pipeline_lock:
            p = self.pipeline
            channels = channels_now(p.latest, p.meta)
            devices = {dev: acct.summary() for dev, acct in p.accounts.devices.items()}
            result = p.last_result
        return Live(now_ms(), channels, devices, self.counters(), result)

    def _open_store(self) -> Store:

        spec = self.config.store_spec()
        try:
            return open_store(spec, **self.config.store_options())
        except Exception as exc:
            raise CollectorError(
                f"cannot open the store {self.config.describe()['store']}: {exc}", Exit.STORAGE
            ) from None

    def _abort(self) -> None:
        self._stopping.set()
        self._wake.set()
        if self.link is not None:
            self.link.stop()
        self._join(5)
        self._close_storage()

    def stop(self, timeout: float = 60.0) -> None:
        """Drain what has arrived, commit and acknowledge it, then disconnect. Idempotent."""
        if self._stopped.is_set() or self.link is None:
            return
        log.info("collector %s stopping: draining %d queued messages", self.config.id, len(self._inbox))
        self._stopping.set()
        self._wake.set()
        self._join(timeout)
        try:
            self.link.stop()  # after the writer: the last acknowledgements go out before DISCONNECT
        except Exception as exc:  # the broker may already be gone
            log.debug("disconnect: %s", exc)
        self._close_storage()
        self._stopped.set()
        c = self.counters()
        log.info(
            "collector %s stopped: %d messages, %d samples stored, %d rejected, spool %d bytes",
            self.config.id,
            c["messages"],
            c["samples_stored"],
            c["rejected"],
            c["spool_bytes"],
        )

    def _join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.1, deadline - time.monotonic()))

    def _close_storage(self) -> None:
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
            self._metrics_server.server_close()
            self._metrics_server = None
        if self.store is not None and self._given_store is None:
            try:
                self.store.close()
            except Exception as exc:
                log.warning("closing the store: %s", exc)
        for sp in (self.spool, self.deadletter):
            if sp is not None:
                sp.close()
        self._checks.close()
        if self._owner is not None:
            self._owner.close()  # the id and its state are free for the next collector
            self._owner = None

    def __enter__(self) -> Collector:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the collector stops by itself (fatal error) or timeout; True if it stopped."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._stopping.is_set():
            if deadline is not None and time.monotonic() >= deadline:
                return False
            self._stopping.wait(0.5)
        return True

    @property
    def running(self) -> bool:
        return bool(self._threads) and not self._stopping.is_set()

    def _guard(self, loop: Any) -> None:
        try:
            loop()
        except CollectorError as exc:
            self._fail(exc)
        except Exception as exc:  # keep the cause visible; a dead thread must stop the service
            log.exception("internal error in %s", threading.current_thread().name)
            self._fail(CollectorError(f"internal error: {exc!r}", Exit.INTERNAL))

    def _fail(self, exc: CollectorError) -> None:
        with self._lock:
            if self.error is None:
                self.error = exc
        log.error("%s", exc)
        self._stopping.set()
        self._wake.set()

    # ------------------------------------------------------------------ paho thread

    def _on_message(
        self, gen: int, mid: int, qos: int, topic: str, payload: bytes, retain: bool, dup: bool
    ) -> None:
        self._inbox.append((gen, mid, qos, topic, payload, now_ms(), retain, dup))
        if len(self._inbox) >= self._wake_at:
            self._wake.set()

    # ------------------------------------------------------------------ ingest and writer threads

    def _ingest_loop(self) -> None:
        assert self.store is not None  # start() opens it before the threads run
        Intake(
            self.config,
            pipeline=self.pipeline,
            pipeline_lock=self._pipeline_lock,
            inbox=self._inbox,
            checks=self._checks,
            handover=self._handover,
            health=self._health,
            link=self.link,
            bridge=self.bridge,
            spool_figures=self._spool_figures,
            stopping=self._stopping,
            wake=self._wake,
            failed=self._has_failed,
        ).run()

    def _writer_loop(self) -> None:
        assert self.writer is not None  # start() makes it before this thread runs
        try:
            self._handover.run(self.writer, self.link.ack, self._write_state, self._has_failed)
        except NotDurable as exc:
            # Neither store nor spool can keep the data: acknowledge nothing and stop, so the broker
            # keeps every unacknowledged message for the next start.
            raise CollectorError(str(exc), Exit.STORAGE) from None

    def _has_failed(self) -> bool:
        return self.error is not None

    @property
    def acked(self) -> int:
        """Messages acknowledged to the broker, their data durable."""
        return self._handover.acked

    @property
    def store_down(self) -> bool:
        return self.writer is not None and self.writer.store_down

    def _spool_figures(self) -> tuple[int, float]:
        sp = self.spool
        if sp is None:
            return 0, 0.0
        return sp.size_bytes, sp.age_s()

    # ------------------------------------------------------------------ state file

    def _restore_state(self) -> None:
        if not self.config.restore_state:
            return
        accounts = self.state_file.accounts()
        if accounts is not None:
            self.pipeline.accounts.restore(accounts)
            log.info("resumed accounting for %d device(s) from %s", len(accounts), self.state_path)
        plugs = self.state_file.plugs()
        if plugs is not None and self.bridge is not None:
            # The plugs' numbering goes on where the accounting left it, so neither counts a restart.
            self.bridge.restore(plugs)

    def _write_state(self, snapshot: dict[str, Any]) -> None:
        spool_bytes, spool_age = self._spool_figures()
        self.state_file.write(
            {
                "t": snapshot["t"],
                "written_ms": now_ms(),
                "started_ms": self.started_ms,
                "config": self.config.describe(),
                "connected": bool(self.link is not None and self.link.connected.is_set()),
                "store_down": self.store_down,
                "spool": {"dir": self.config.spool_dir, "bytes": spool_bytes, "age_s": spool_age},
                "counters": snapshot["counters"],
                "writer": self._writer_figures(),
                "meta": snapshot.get("meta", {}),
                "rejects": self.pipeline.last_rejects[-10:],
                "accounts": snapshot["accounts"],
                "plugs": snapshot.get("plugs", {}),
            }
        )

    def _writer_figures(self) -> dict[str, Any]:
        figures = self.writer.figures() if self.writer is not None else WriterStats().figures()
        return {"commits": figures.pop("commits"), "acked": self.acked, **figures}

    # ------------------------------------------------------------------ figures

    def counters(self) -> dict[str, Any]:
        with self._pipeline_lock:
            out = self.pipeline.counters()
        out.update(self._writer_figures())
        spool_bytes, spool_age = self._spool_figures()
        out.update(
            inbox=len(self._inbox),
            spool_bytes=spool_bytes,
            spool_age_s=spool_age,
            store_down=self.store_down,
            connected=bool(self.link is not None and self.link.connected.is_set()),
            connects=self.link.connects if self.link is not None else 0,
        )
        return out

    def devices(self) -> dict[str, dict[str, Any]]:
        with self._pipeline_lock:
            return {dev: acct.summary() for dev, acct in self.pipeline.accounts.devices.items()}

    def wait_for(self, predicate: Any, timeout: float = 60.0, interval: float = 0.1) -> bool:
        """Poll predicate(counters) until true or timeout; for tests and the demo."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate(self.counters()):
                return True
            if self.error is not None:
                return False
            time.sleep(interval)
        return bool(predicate(self.counters()))
