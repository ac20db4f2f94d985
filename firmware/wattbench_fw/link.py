"""Keeps the MQTT session up and drains the store-and-forward buffer into it.

Reconnects use exponential backoff with jitter, decided here on each service() call, so the main
loop (and the watchdog it feeds) never waits on the broker. On every (re)connect the retained meta
and status messages are published first, then unacknowledged batches are sent again oldest first,
with up to `inflight` QoS 1 publishes awaiting PUBACK at a time.
"""

import random

from wattbench_fw import port
from wattbench_fw.contract import topic


class Link:
    def __init__(
        self,
        client,
        buffer,
        dev,
        status_payload,
        meta_payload,
        inflight=8,
        backoff_min_ms=500,
        backoff_max_ms=30000,
        status_interval_s=30,
        net_up=None,
        max_out_bytes=65536,
        extra_retained=None,
    ):
        self.client = client
        self.buffer = buffer
        self.dev = dev
        self.status_payload = status_payload  # callable(state, reason) -> bytes
        self.meta_payload = meta_payload  # callable() -> bytes
        self.inflight = inflight
        self.backoff_min_ms = backoff_min_ms
        self.backoff_max_ms = backoff_max_ms
        self.status_interval_ms = int(status_interval_s * 1000)
        self.net_up = net_up or (lambda: True)
        self.max_out_bytes = max_out_bytes
        self.extra_retained = extra_retained  # callable -> iterable of (topic, payload), sent on connect
        self._extra = None
        self.t_samples = topic("samples", dev)
        self.t_status = topic("status", dev)
        self.t_meta = topic("meta", dev)
        client.on_puback = self._on_puback
        self._pids = {}  # pid -> buffer entry id
        self._up = False
        self._ever_up = False
        self._fails = 0
        self._next_try = port.ticks_ms()
        self._last_status = 0
        self.connects = 0
        self.disconnects = 0
        self.attempts = 0
        self.batches_sent = 0
        self.batches_acked = 0
        self.last_error = None
        self.backoff_ms = 0

    @property
    def up(self):
        return self._up

    def _on_puback(self, pid):
        eid = self._pids.pop(pid, None)
        if eid is not None:
            self.buffer.ack(eid)
            self.batches_acked += 1

    def _schedule_retry(self, why):
        self.last_error = why
        delay = min(self.backoff_max_ms, self.backoff_min_ms << min(self._fails, 16))
        # Jitter keeps a rack of appliances from reconnecting in lockstep after a broker restart.
        delay = int(delay * (0.5 + 0.5 * random.random()))
        self.backoff_ms = delay
        self._fails += 1
        self._next_try = port.ticks_add(port.ticks_ms(), delay)

    def _lost(self):
        if self._up:
            self.disconnects += 1
        self._up = False
        self._pids = {}
        self.buffer.rewind()

    def service(self):
        c = self.client
        if c.state == c.IDLE:
            if self._up:
                self._lost()
                self._schedule_retry(c.error)
            if not self.net_up():
                return
            if port.ticks_diff(port.ticks_ms(), self._next_try) < 0:
                return
            self.attempts += 1
            try:
                c.start()
            except OSError as exc:
                self._schedule_retry(str(exc) or repr(exc))
                return
        c.service()
        if c.state == c.IDLE:
            if self._up:
                self._lost()
            self._schedule_retry(c.error)
            return
        if not c.connected:
            return
        if not self._up:
            self._on_connect()
            if not c.connected:
                return
        self._fill()
        if port.ticks_diff(port.ticks_ms(), self._last_status) >= self.status_interval_ms:
            self.publish_status("periodic")

    def _on_connect(self):
        self._up = True
        self._fails = 0
        self.connects += 1
        self._pids = {}
        self.buffer.rewind()
        reason = "reconnect" if self._ever_up else "boot"
        self._ever_up = True
        self.client.publish(self.t_meta, self.meta_payload(), qos=1, retain=True)
        self.publish_status(reason)
        self._extra = iter(self.extra_retained()) if self.extra_retained else None

    def publish_status(self, reason, state="online"):
        if not self.client.connected:
            return None
        self._last_status = port.ticks_ms()
        return self.client.publish(self.t_status, self.status_payload(state, reason), qos=1, retain=True)

    def _fill(self):
        c = self.client
        while c.connected and len(self._pids) < self.inflight and c.out_bytes() < self.max_out_bytes:
            nxt = self.buffer.next_unsent()
            if nxt is None:
                break
            eid, payload = nxt
            pid = c.publish(self.t_samples, payload, qos=1, retain=False)
            if c.connected:
                self._pids[pid] = eid
                self.batches_sent += 1
        # The extra retained messages (Home Assistant discovery) once the link is idle: the backlog
        # in flash delivered and its index freed, nothing in flight or queued. Built at the
        # reconnect beside a backfill, or in the same turn as its last records were queued,
        # discovery's module and messages needed runs of about 1 KB that the heap did not have
        # (esp32 profile, MicroPython 1.27.0 unix port, fixed heap: four channels at 10 Hz after
        # 4 minutes offline; the typical configuration with HMAC after 5). They are retained: the
        # broker still has the earlier connection's meanwhile.
        if self.buffer.flash_used or self.buffer.has_unsent() or self._pids or c.out_bytes():
            return
        while self._extra is not None and c.connected and c.out_bytes() < self.max_out_bytes:
            # One message at a time: a board never holds all of them in RAM at once.
            nxt = next(self._extra, None)
            if nxt is None:
                self._extra = None
                break
            c.publish(nxt[0], nxt[1], qos=1, retain=True)

    def in_flight(self):
        return len(self._pids)

    def wait(self, timeout_ms):
        self.client.wait(timeout_ms)

    def shutdown(self, timeout_ms=2000):
        """Publish the retained offline status, wait briefly for its PUBACK, disconnect cleanly."""
        c = self.client
        if c.connected:
            pid = self.publish_status("shutdown", state="offline")
            start = port.ticks_ms()
            while c.connected and pid in c.inflight and port.ticks_diff(port.ticks_ms(), start) < timeout_ms:
                c.service()
                c.wait(5)
            c.disconnect()
        else:
            c.close()
        self._up = False
