"""A small non-blocking MQTT 3.1.1 client for the appliance.

umqtt.simple waits for each PUBACK, and umqtt.robust reconnects in a blocking loop that starves a
watchdog. This client never blocks for long: the socket is non-blocking, several QoS 1 publishes
can be in flight at once with their PUBACKs tracked, keepalive pings and timeouts are checked in
service(), and reconnecting is the caller's decision (see wattbench_fw.link). The only blocking
steps are the DNS lookup and an optional TLS handshake, both bounded by connect_timeout_ms.

Packet encoding and decoding are pure functions so they can be tested without a socket.
"""

import errno

from wattbench_fw import port

CONNECT = 0x10
CONNACK = 0x20
PUBLISH = 0x30
PUBACK = 0x40
SUBSCRIBE = 0x82
SUBACK = 0x90
PINGREQ = 0xC0
PINGRESP = 0xD0
DISCONNECT = 0xE0

PINGREQ_PACKET = b"\xc0\x00"
DISCONNECT_PACKET = b"\xe0\x00"

CONNACK_ERRORS = {
    1: "unacceptable protocol version",
    2: "client id rejected",
    3: "server unavailable",
    4: "bad user name or password",
    5: "not authorised",
}


class MQTTError(Exception):
    pass


# ---- packets ---------------------------------------------------------------------------------


def remaining_length(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def decode_remaining_length(buf, i=1):
    """(length, index after the length bytes), or None if more bytes are needed."""
    mult = 1
    value = 0
    for k in range(4):
        if i + k >= len(buf):
            return None
        b = buf[i + k]
        value += (b & 0x7F) * mult
        if not b & 0x80:
            return value, i + k + 1
        mult <<= 7
    raise MQTTError("malformed remaining length")


def mqtt_str(s):
    b = s.encode() if isinstance(s, str) else bytes(s)
    if len(b) > 65535:
        raise MQTTError("string too long")
    return bytes((len(b) >> 8, len(b) & 0xFF)) + b


def connect_packet(client_id, keepalive=30, clean=True, will=None, user=None, password=None):
    """will = (topic, payload, qos, retain) or None."""
    flags = 0x02 if clean else 0
    payload = mqtt_str(client_id)
    if will is not None:
        topic, message, qos, retain = will
        flags |= 0x04 | (qos << 3) | (0x20 if retain else 0)
        payload += mqtt_str(topic) + mqtt_str(message)
    if user is not None:
        flags |= 0x80
        payload += mqtt_str(user)
        if password is not None:
            flags |= 0x40
            payload += mqtt_str(password)
    var = b"\x00\x04MQTT\x04" + bytes((flags, keepalive >> 8, keepalive & 0xFF))
    body = var + payload
    return bytes((CONNECT,)) + remaining_length(len(body)) + body


# What one socket read asks for. MicroPython allocates the whole request before the socket says how
# much it has: 4096 for a 4-byte PUBACK was a 4 KB run the esp32 profile's heap often lacked (a
# MemoryError while connecting, under the fixed heap of the unix port). The broker sends this client
# acknowledgements and pings, a few bytes each.
READ_CHUNK = 256


def publish_header(topic, payload_len, qos=0, retain=False, pid=0, dup=False):
    """Fixed and variable header of a PUBLISH; the payload follows unchanged (no copy)."""
    first = PUBLISH | (0x08 if dup else 0) | (qos << 1) | (1 if retain else 0)
    var = mqtt_str(topic)
    if qos:
        var += bytes((pid >> 8, pid & 0xFF))
    return bytes((first,)) + remaining_length(len(var) + payload_len) + var


def puback_packet(pid):
    return bytes((PUBACK, 2, pid >> 8, pid & 0xFF))


def subscribe_packet(pid, topic, qos=1):
    body = bytes((pid >> 8, pid & 0xFF)) + mqtt_str(topic) + bytes((qos,))
    return bytes((SUBSCRIBE,)) + remaining_length(len(body)) + body


def split_packet(buf):
    """(first byte, body bytes, total length) of the first complete packet in buf, or None."""
    if len(buf) < 2:
        return None
    rl = decode_remaining_length(buf, 1)
    if rl is None:
        return None
    length, start = rl
    end = start + length
    if len(buf) < end:
        return None
    return buf[0], bytes(buf[start:end]), end


def parse_publish(first, body):
    """(topic, payload, qos, retain, pid) of a received PUBLISH body."""
    qos = (first >> 1) & 3
    tlen = (body[0] << 8) | body[1]
    topic = bytes(body[2 : 2 + tlen]).decode()
    i = 2 + tlen
    pid = 0
    if qos:
        pid = (body[i] << 8) | body[i + 1]
        i += 2
    return topic, bytes(body[i:]), qos, bool(first & 1), pid


# ---- client ----------------------------------------------------------------------------------

_WOULD_BLOCK = (
    errno.EAGAIN,
    getattr(errno, "EWOULDBLOCK", errno.EAGAIN),
    errno.EINPROGRESS,
    getattr(errno, "EALREADY", errno.EAGAIN),
    -26880,
    -26752,
)  # mbedtls WANT_READ/WRITE


def _would_block(exc):
    if exc.__class__.__name__ in ("SSLWantReadError", "SSLWantWriteError", "BlockingIOError"):
        return True
    code = exc.args[0] if exc.args else None
    return getattr(exc, "errno", code) in _WOULD_BLOCK or code in _WOULD_BLOCK


class MQTTClient:
    IDLE = 0
    CONNECTING = 1  # TCP handshake in progress
    WAIT_CONNACK = 2
    CONNECTED = 3

    def __init__(
        self,
        client_id,
        host,
        port_no=1883,
        user=None,
        password=None,
        keepalive=30,
        ssl_context=None,
        will=None,
        connect_timeout_ms=5000,
        clean=True,
        on_puback=None,
        on_message=None,
        max_out_bytes=65536,
    ):
        self.client_id = client_id
        self.host = host
        self.port_no = port_no
        self.user = user
        self.password = password
        self.keepalive = keepalive
        self.ssl_context = ssl_context
        self.will = will
        self.connect_timeout_ms = connect_timeout_ms
        self.clean = clean
        self.on_puback = on_puback
        self.on_message = on_message
        self.max_out_bytes = max_out_bytes
        self.state = self.IDLE
        self.error = None
        self.inflight = {}  # pid -> ticks_ms when sent
        self._sock = None
        self._poll = None
        self._addr = None
        self._family = 2  # AF_INET; getaddrinfo's answer replaces it
        self._out = []
        self._out_bytes = 0
        self._in = bytearray()
        self._pid = 0
        self._t_start = 0
        self._last_tx = 0
        self._ping_sent = None
        self.bytes_out = 0
        self.packets_out = 0

    # ---- state ----------------------------------------------------------------------------

    @property
    def connected(self):
        return self.state == self.CONNECTED

    @property
    def busy(self):
        return self.state in (self.CONNECTING, self.WAIT_CONNACK)

    def out_bytes(self):
        return self._out_bytes

    def _fail(self, why):
        self.error = why
        self.close()

    def close(self):
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
        self._sock = None
        self._poll = None
        self.state = self.IDLE
        self.inflight = {}
        self._out = []
        self._out_bytes = 0
        self._in = bytearray()
        self._ping_sent = None

    # ---- connecting -----------------------------------------------------------------------

    def start(self):
        """Begin connecting (non-blocking after DNS). Raises OSError if the start itself fails."""
        import select
        import socket

        self.close()
        self.error = None
        if self._addr is None:
            # The family comes with the address: an IPv6 broker (host mode, "[::1]:1883") needs an
            # AF_INET6 socket.
            info = socket.getaddrinfo(self.host, self.port_no, 0, socket.SOCK_STREAM)[0]
            self._family, self._addr = info[0], info[-1]
        sock = socket.socket(self._family, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            sock.connect(self._addr)
        except OSError as exc:
            if not _would_block(exc):
                sock.close()
                self._addr = None  # resolve again next time (DHCP may have moved the broker)
                raise
        self._sock = sock
        self._poll = select.poll()
        self._poll.register(sock, select.POLLOUT | select.POLLIN)
        self.state = self.CONNECTING
        self._t_start = port.ticks_ms()

    def _poll_events(self, timeout_ms=0):
        res = self._poll.poll(timeout_ms)
        ev = 0
        for item in res:
            ev |= item[1]
        return ev

    def _tcp_ready(self):
        import select

        ev = self._poll_events(0)
        if ev & (select.POLLERR | select.POLLHUP):
            self._fail("connection refused")
            return
        if not ev & select.POLLOUT:
            return
        if not port.MICROPYTHON:
            import socket

            err = self._sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                self._fail("connect failed: errno %d" % err)
                return
        if self.ssl_context is not None:
            self._tls_handshake()
            if self._sock is None:
                return
        self._poll.modify(self._sock, select.POLLIN)
        self._queue(
            connect_packet(self.client_id, self.keepalive, self.clean, self.will, self.user, self.password)
        )
        self.state = self.WAIT_CONNACK

    def _tls_handshake(self):
        import select

        raw = self._sock
        try:
            raw.setblocking(True)
            raw.settimeout(self.connect_timeout_ms / 1000)
            sock = self.ssl_context.wrap_socket(raw, server_hostname=self.host)
            sock.setblocking(False)
        except OSError as exc:
            self._fail("TLS handshake failed: %r" % (exc,))
            return
        self._sock = sock
        self._poll = select.poll()
        self._poll.register(sock, select.POLLIN)

    # ---- I/O ------------------------------------------------------------------------------

    def _queue(self, data):
        self._out.append(data)
        self._out_bytes += len(data)
        self._last_tx = port.ticks_ms()
        self.packets_out += 1

    def _write(self, chunk):
        if port.MICROPYTHON:
            return self._sock.write(chunk)
        return self._sock.send(chunk)

    def _flush(self):
        while self._out:
            chunk = self._out[0]
            try:
                n = self._write(chunk)
            except OSError as exc:
                if _would_block(exc):
                    return
                raise
            if not n:
                return
            self.bytes_out += n
            self._out_bytes -= n
            if n >= len(chunk):
                self._out.pop(0)
            else:
                self._out[0] = memoryview(chunk)[n:]
                return

    def _read(self):
        for _ in range(16):  # bounded: a flood of input must not starve the sampler
            try:
                data = self._sock.read(READ_CHUNK) if port.MICROPYTHON else self._sock.recv(READ_CHUNK)
            except OSError as exc:
                if _would_block(exc):
                    return
                raise
            if data is None:
                return
            if not data:
                raise OSError("connection closed by broker")
            self._in.extend(data)
            if len(data) < READ_CHUNK:
                return

    def _handle(self):
        while True:
            pkt = split_packet(self._in)
            if pkt is None:
                return
            first, body, end = pkt
            self._in = self._in[end:]
            kind = first & 0xF0
            if kind == CONNACK:
                if len(body) < 2 or body[1] != 0:
                    code = body[1] if len(body) > 1 else -1
                    raise MQTTError("connection refused: " + CONNACK_ERRORS.get(code, "code %d" % code))
                self.state = self.CONNECTED
            elif kind == PUBACK:
                pid = (body[0] << 8) | body[1]
                if self.inflight.pop(pid, None) is not None and self.on_puback:
                    self.on_puback(pid)
            elif kind == PINGRESP:
                self._ping_sent = None
            elif kind == PUBLISH:
                topic, payload, qos, retain, pid = parse_publish(first, body)
                if qos == 1:
                    self._queue(puback_packet(pid))
                if self.on_message:
                    self.on_message(topic, payload, retain)

    def service(self):
        """Advance connecting, send queued bytes, read replies, keep alive. Never blocks long."""
        if self.state == self.IDLE:
            return
        now = port.ticks_ms()
        try:
            if self.state == self.CONNECTING:
                self._tcp_ready()
                if self.state == self.CONNECTING:
                    if port.ticks_diff(now, self._t_start) > self.connect_timeout_ms:
                        self._fail("connect timeout")
                    return
                if self.state == self.IDLE:
                    return
            self._flush()
            self._read()
            self._handle()
            self._flush()
        except (OSError, MQTTError, IndexError) as exc:
            self._fail(repr(exc))
            return
        if self.state == self.WAIT_CONNACK:
            if port.ticks_diff(now, self._t_start) > self.connect_timeout_ms:
                self._fail("no CONNACK")
            return
        ka = self.keepalive * 1000
        if ka:
            if self._ping_sent is not None and port.ticks_diff(now, self._ping_sent) > ka:
                self._fail("no PINGRESP")
                return
            if self._ping_sent is None and port.ticks_diff(now, self._last_tx) >= ka // 2:
                self._queue(PINGREQ_PACKET)
                self._ping_sent = now
        if self.inflight:
            oldest = max(port.ticks_diff(now, t) for t in self.inflight.values())
            if oldest > max(2 * ka, 30000):
                self._fail("no PUBACK")

    def _next_pid(self):
        for _ in range(65535):
            self._pid = self._pid % 65535 + 1
            if self._pid not in self.inflight:
                return self._pid
        raise MQTTError("no free packet id")

    def publish(self, topic, payload, qos=1, retain=False):
        """Queue a PUBLISH; returns its packet id (0 for QoS 0). Requires a connection. payload: bytes,
        or a list of pieces sent one after another as one payload (a batch rebuilt from flash)."""
        if self.state != self.CONNECTED:
            raise MQTTError("not connected")
        pieces = payload if isinstance(payload, list) else (payload,)
        size = 0
        for piece in pieces:
            size += len(piece)
        pid = self._next_pid() if qos else 0
        self._queue(publish_header(topic, size, qos, retain, pid))
        for piece in pieces:
            if piece:
                # An empty chunk would write 0 bytes, which _flush takes for a full socket: everything
                # queued behind it would wait forever (empty retained payloads delete retained messages).
                self._out.append(piece)
                self._out_bytes += len(piece)
        if qos:
            self.inflight[pid] = port.ticks_ms()
        try:
            self._flush()
        except OSError as exc:
            self._fail(repr(exc))
        return pid

    def subscribe(self, topic, qos=1):
        if self.state != self.CONNECTED:
            raise MQTTError("not connected")
        self._queue(subscribe_packet(self._next_pid(), topic, qos))

    def disconnect(self, linger_ms=500):
        """Send DISCONNECT (so the broker drops the will) and close, waiting at most linger_ms."""
        if self.state == self.CONNECTED:
            self._queue(DISCONNECT_PACKET)
            start = port.ticks_ms()
            try:
                while self._out and port.ticks_diff(port.ticks_ms(), start) < linger_ms:
                    self._flush()
                    if self._out:
                        port.sleep_ms(2)
            except OSError:
                pass
        self.close()

    def wait(self, timeout_ms):
        """Sleep until input arrives or timeout; lets the main loop idle without busy-waiting."""
        if self._poll is None or timeout_ms <= 0:
            port.sleep_ms(timeout_ms)
            return
        import select

        if self._out:
            self._poll.modify(self._sock, select.POLLIN | select.POLLOUT)
            self._poll.poll(timeout_ms)
            self._poll.modify(self._sock, select.POLLIN)
        else:
            self._poll.poll(timeout_ms)
