"""The appliance: sampler -> batches -> store-and-forward buffer -> MQTT, in one cooperative loop.

The same class runs on a board (wattbench_fw.device) and on a host (wattbench_fw.host). step() does
one bounded slice of work and returns how long the caller may sleep; nothing in it blocks for more
than a bus timeout, so the caller can feed a watchdog after every step.
"""

from wattbench_fw import __version__, encode, port
from wattbench_fw.buffer import Buffer
from wattbench_fw.contract import MAX_BATCH_SAMPLES, MAX_PAYLOAD_BYTES, topic
from wattbench_fw.link import Link
from wattbench_fw.mqtt import MQTTClient
from wattbench_fw.persist import EnergyTracker, Sequence, State
from wattbench_fw.sampler import Channel, Sampler

MAX_WAIT_US = 20000  # the link is serviced at least this often
MAX_PENDING_ROWS = 5000  # rows held while the clock has no time at all


def channel_meta(ch_cfg, driver):
    info = driver.info() if hasattr(driver, "info") else {}
    m = {"c": ch_cfg["c"], "meter": ch_cfg["meter"], "q": list(driver.QUANTITIES), "hz": ch_cfg["hz"]}
    if ch_cfg.get("agg", 1) > 1:
        m["agg"] = ch_cfg["agg"]
    for key in ("role", "node"):
        if key in ch_cfg:
            m[key] = ch_cfg[key]
    model = ch_cfg.get("model") or info.get("model")
    if model:
        m["model"] = model[:32]
    if info.get("range"):
        m["range"] = info["range"]
    cal = ch_cfg.get("cal") or {}
    if cal.get("gain", 1.0) != 1.0 or cal.get("offset", 0.0) != 0.0 or cal.get("date"):
        m["cal"] = {"gain": cal.get("gain", 1.0), "offset": cal.get("offset", 0.0)}
        if cal.get("date"):
            m["cal"]["date"] = cal["date"][:32]
    if info.get("acc") is not None:
        m["acc"] = info["acc"]
    if info.get("upd") is not None:
        m["upd"] = info["upd"]
    return m


class Appliance:
    def __init__(
        self,
        cfg,
        drivers,
        clock,
        mono=None,
        client=None,
        net_up=None,
        rssi=None,
        on_row=None,
        ssl_context=None,
        max_samples=None,
        meter_names=None,
    ):
        self.cfg = cfg
        self.dev = cfg["dev"]
        self.board = cfg["board"]
        self.mono = mono or port.Mono()
        self.clock = clock
        self.t0 = self.mono.now()
        self.rssi = rssi
        self.on_row = on_row
        self.max_samples = max_samples
        self.meter_names = meter_names  # meters.names() of the channels, made at boot on a board
        fdir = cfg["flash_dir"]
        self.state = State(fdir)
        self.boot = self.state.next_boot()
        self.seq = Sequence(self.state, cfg["seq_block"])
        self.drivers = drivers
        channels = []
        self.energy = []
        for ch_cfg in cfg["channels"]:
            drv = drivers[ch_cfg["c"]]
            tracker = None
            if "Wh" in drv.QUANTITIES:
                tracker = EnergyTracker(self.state, ch_cfg["c"], cfg["energy_margin_wh"])
                self.energy.append(tracker)
            cal = ch_cfg.get("cal") or {}
            late = cfg.get("max_late_ms")
            channels.append(
                Channel(
                    ch_cfg["c"],
                    drv,
                    ch_cfg["hz"],
                    ch_cfg.get("agg", 1),
                    cal.get("gain", 1.0),
                    cal.get("offset", 0.0),
                    tracker,
                    None if late is None else int(late * 1000),
                )
            )
        self.sampler = Sampler(channels, self.seq, clock, self.mono.now)
        b = cfg["buffer"]
        self.buffer = Buffer(
            b["ram_bytes"],
            b["flash_bytes"],
            b["segment_bytes"],
            port.join(fdir, "spool") if fdir else None,
            dropped=self.state.dropped,
        )
        bk = cfg["broker"]
        if client is None:
            will = (topic("status", self.dev), encode.will(self.dev), 1, True)
            client = MQTTClient(
                bk["client_id"],
                bk["host"],
                bk["port"],
                bk["user"],
                bk["password"],
                bk["keepalive"],
                ssl_context,
                will,
                bk["connect_timeout_ms"],
            )
        self.client = client
        self.link = Link(
            client,
            self.buffer,
            self.dev,
            self._status_payload,
            self._meta_payload,
            inflight=bk["inflight"],
            backoff_min_ms=cfg["backoff"]["min_ms"],
            backoff_max_ms=cfg["backoff"]["max_ms"],
            status_interval_s=cfg["status_s"],
            net_up=net_up,
            # Bytes waiting for the socket are RAM: about one batch beyond what the socket holds.
            max_out_bytes=min(cfg["batch"]["max_bytes"], MAX_PAYLOAD_BYTES),
        )
        bt = cfg["batch"]
        self.max_rows = min(bt["max_rows"], MAX_BATCH_SAMPLES)
        self.max_bytes = min(bt["max_bytes"], MAX_PAYLOAD_BYTES - 1024)
        self.interval_us = bt["interval_ms"] * 1000
        self._rows = []
        self._row_bytes = 0
        self._batch_start = None
        self._pending = []
        self.sampling = True
        self.batches = 0
        self.samples = 0
        self.flagged = 0
        self.errors = 0
        self.last_error = None
        self.signer = None
        if cfg.get("hmac_key"):
            from binascii import unhexlify

            from wattbench_fw.sign import Signer

            self.signer = Signer(unhexlify(cfg["hmac_key"]))
        hass_on = cfg.get("hass")
        self.hass_state = None
        if hass_on is not None:
            # Switched off explicitly: clear the retained configs of earlier boots so the sensors
            # disappear from Home Assistant instead of going stale.
            self.link.extra_retained = self._hass_messages if hass_on else self._hass_removals
        if hass_on:
            # Only the small runtime half: the discovery module is loaded for each round of
            # announcements and released after it (_hass).
            from wattbench_fw import hass_state

            self.hass_state = hass_state.HassState([c["c"] for c in cfg["channels"]])
            self._hass_topic = hass_state.state_topic(self.dev)
        self._persist_us = int(cfg["persist_s"] * 1e6)
        self._last_persist = self.t0

    # ---- payloads -----------------------------------------------------------------------------

    def _utc_ms(self):
        u = self.clock.utc_us(self.mono.now())
        return None if u is None else u // 1000

    def _status_payload(self, state, reason):
        now = self.mono.now()
        rssi = None
        if self.rssi is not None:
            try:
                rssi = self.rssi()
            except Exception:  # noqa: BLE001 - radio query is best effort
                rssi = None
        return encode.status(
            self.dev,
            state,
            t_ms=self._utc_ms(),
            reason=reason,
            fw=__version__,
            boot=self.boot,
            up=round((now - self.t0) / 1e6, 1),
            seq=self.seq.next,
            buf=self.buffer.counts(),
            clk=self.clock.status(now),
            rssi=rssi,
            mem=port.free_mem(),
            repairs=self.state.repairs,
        )

    def meta(self):
        """The metadata document (dict) this appliance announces."""
        doc = {
            "v": 1,
            "dev": self.dev,
            "fw": __version__,
            "board": self.board,
            "channels": [channel_meta(c, self.drivers[c["c"]]) for c in self.cfg["channels"]],
            "batch_ms": self.cfg["batch"]["interval_ms"],
        }
        if self.signer is not None:
            doc["hmac"] = True
        return doc

    def _meta_payload(self):
        doc = self.meta()
        return encode.meta(
            self.dev,
            doc["fw"],
            self.board,
            doc["channels"],
            t_ms=self._utc_ms(),
            hmac=doc.get("hmac"),
            batch_ms=doc["batch_ms"],
        )

    def _hass_messages(self):
        return self._hass("messages")

    def _hass_removals(self):
        return self._hass("removals")

    def _hass(self, which):
        # Discovery runs once per connection: its module is loaded for it and released after.
        from wattbench_fw import hass

        try:
            if which == "messages":
                yield from hass.messages(self.meta(), names=self.meter_names)
            else:
                yield from hass.removals(self.meta())
        finally:
            hass = None
            port.release("wattbench_fw.hass")
            port.release("wattbench_fw.meters")  # discovery reads the meter table; device.boot let it go

    # ---- batching -----------------------------------------------------------------------------

    def _add_row(self, row):
        if row.get("t") is None:
            self._pending.append(row)
            if len(self._pending) > MAX_PENDING_ROWS:
                self._pending.pop(0)
                self.buffer.dropped += 1
            return
        # Kept as bytes: the batch is then joined from them without a second copy of every row.
        text = encode.row(row).encode()
        if self._rows and self._row_bytes + len(text) + 256 > self.max_bytes:
            self._close_batch()
        if self._batch_start is None:
            self._batch_start = self.mono.now()
        self._rows.append(text)
        self._row_bytes += len(text) + 1
        self.samples += 1
        if row.get("f"):
            self.flagged += 1
        if self.hass_state is not None:
            self.hass_state.observe(row)
        if self.on_row is not None:
            self.on_row(row)
        if len(self._rows) >= self.max_rows:
            self._close_batch()

    def _close_batch(self):
        if not self._rows:
            return
        rows = self._rows
        size = self._row_bytes + 256  # the rows, their head and tail (and a signature)
        self._rows = []
        self._row_bytes = 0
        self._batch_start = None
        self.buffer.make_room(size)
        self._push(rows, self.clock.status(self.mono.now()))
        if self.hass_state is not None and self.link.up and self.client.connected:
            # A live view, not stored and forwarded: while the link is down Home Assistant has the
            # status topic's "offline", and the next batch after reconnecting brings it up to date.
            self.client.publish(self._hass_topic, self.hass_state.payload(), qos=0, retain=False)

    def _push(self, rows, clk):
        """Encode rows as one batch into the buffer, or as two halves when the heap has no free run
        of the whole batch's size: on a board's fragmented heap a 4 KB batch can fail where two of
        2 KB fit. Before, the failed batch stayed open, every later close failed the same way and
        the rows sampled meanwhile were lost (the esp32 profile under the unix port's fixed heap)."""
        try:
            payload = encode.batch(self.dev, self.boot, clk, rows, self.signer)
        except MemoryError:
            if len(rows) < 2:
                raise
            half = len(rows) // 2
            self._push(rows[:half], clk)
            self._push(rows[half:], clk)
            return
        self.buffer.push(payload, len(rows))
        self.batches += 1

    def _flush_pending(self):
        if self._pending and self.sampler.resolve_pending(self._pending):
            rows, self._pending = self._pending, []
            for r in rows:
                self._add_row(r)

    # ---- loop ---------------------------------------------------------------------------------

    def start(self):
        self.sampler.start()

    def step(self):
        """One slice of work. Returns microseconds the caller may sleep before the next step."""
        try:
            self._flush_pending()
            if self.sampling:
                limit = 200
                if self.max_samples is not None:
                    limit = min(limit, self.max_samples - self.sampler.rows_out)
                for row in self.sampler.poll(limit) if limit > 0 else ():
                    if self._pending:
                        self._pending.append(row)
                    else:
                        self._add_row(row)
                if self.max_samples is not None and self.sampler.rows_out >= self.max_samples:
                    self.sampling = False
            now = self.mono.now()
            # While the link is down a batch closes only when full: flash then holds a few large
            # records instead of one per interval, and each record costs RAM in the flash index.
            if self._batch_start is not None and (
                not self.sampling or (self.link.up and now - self._batch_start >= self.interval_us)
            ):
                self._close_batch()
            self.link.service()
            if now - self._last_persist >= self._persist_us:
                self._last_persist = now
                self.persist()
        except Exception as exc:  # noqa: BLE001 - log, count and keep sampling
            self.errors += 1
            self.last_error = repr(exc)
        now = self.mono.now()
        wait = MAX_WAIT_US
        if self.sampling:
            due = self.sampler.next_due()
            if due is not None:
                wait = min(wait, due - now)
        if self._batch_start is not None and self.link.up:
            wait = min(wait, self._batch_start + self.interval_us - now)
        return max(0, wait)

    def idle(self, wait_us):
        """Sleep up to wait_us, waking early for broker traffic."""
        if wait_us <= 0:
            return
        if wait_us < 2000:
            port.sleep_us(wait_us)
        else:
            self.link.wait(wait_us // 1000)

    def persist(self):
        self.state.dropped = self.buffer.dropped
        self.state.save()

    def drained(self):
        """Everything sampled so far has been acknowledged by the broker."""
        return not self._rows and not self._pending and self.buffer.empty()

    def shutdown(self, spill=True):
        """Close the open batch, keep unsent data in flash, announce offline, save state."""
        self.sampling = False
        self.sampler.resolve_pending(self._pending)
        self._flush_pending()
        self._close_batch()
        if spill:
            self.buffer.spill_all()
        self.link.shutdown()
        for tracker in self.energy:
            tracker.close()
        self.persist()

    def counters(self):
        chans = {}
        for ch in self.sampler.channels:
            chans[ch.name] = {
                "reads": ch.reads,
                "failed": ch.failed_reads,
                "missed_slots": ch.missed_slots,
                "lost_slots": ch.lost_slots,
                "last_error": ch.last_error,
            }
        bufc = self.buffer.counts()
        return {
            "boot": self.boot,
            "samples": self.samples,
            "flagged": self.flagged,
            "seq_next": self.seq.next,
            "batches": self.batches,
            "acked_samples": self.buffer.acked_samples,
            "ram": bufc["ram"],
            "flash": bufc["flash"],
            "dropped": bufc["dropped"],
            "state_repairs": self.state.repairs,
            "state_lost": list(self.state.lost),
            "connected": self.link.up,
            "in_flight": self.link.in_flight(),
            "connects": self.link.connects,
            "disconnects": self.link.disconnects,
            "errors": self.errors,
            "last_error": self.last_error,
            "link_error": self.link.last_error,
            "channels": chans,
        }
