"""Bounded-time request/reply over a byte stream (machine.UART or a pyserial-like object).

The bus needs write(bytes), read(n) -> bytes or None, and any() -> bytes waiting. Every wait here
ends after timeout_ms so a silent meter can never stall the sampler or the watchdog.
"""

from wattbench_fw import port
from wattbench_fw.errors import NoReply


def drain(bus):
    """Throw away stale bytes (a late reply to an earlier request would shift every frame)."""
    n = 0
    while bus.any():
        chunk = bus.read(bus.any())
        if not chunk:
            break
        n += len(chunk)
    return n


def transact(bus, request, complete, timeout_ms):
    """Send `request`, collect bytes until complete(buf) or timeout; returns the bytes."""
    drain(bus)
    bus.write(request)
    buf = b""
    start = port.ticks_ms()
    while True:
        waiting = bus.any()
        if waiting:
            chunk = bus.read(waiting)
            if chunk:
                buf += chunk
                if complete(buf):
                    return buf
        if port.ticks_diff(port.ticks_ms(), start) >= timeout_ms:
            if buf:
                return buf  # partial frame: the caller's parser reports it as corrupt
            raise NoReply("no reply within %d ms" % timeout_ms)
        if not waiting:
            port.sleep_ms(1)


def query_line(bus, command, timeout_ms, eol=b"\n"):
    """Send one text command and return the reply line without its terminator."""

    def complete(buf):
        return buf.endswith(eol)

    raw = transact(bus, command, complete, timeout_ms)
    if not raw.endswith(eol):
        from wattbench_fw.errors import FrameError

        raise FrameError("reply not terminated")
    return raw.rstrip(b"\r\n")
