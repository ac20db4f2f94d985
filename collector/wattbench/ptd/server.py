"""The daemon's I/O: a TCP listener on loopback that serves one client at a time, a 1 Hz sampler, the
`-l` log file and the console. Every decision is PtdState's (protocol.py); this module only moves lines.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from typing import TextIO

from .protocol import MAX_LINE, Output, PtdState
from .samples import console_line
from .source import Source

# How long a client may send nothing before the daemon stops waiting for it; power-dev is silent
# for up to a few minutes while its workload runs, so this is generous.
IDLE_CLIENT_S = 24 * 3600.0


def now_ms() -> int:
    return int(time.time() * 1000)


class PtdServer:
    def __init__(
        self,
        state: PtdState,
        source: Source,
        port: int,
        log: TextIO,
        console: TextIO,
        host: str = "127.0.0.1",
    ) -> None:
        self.state = state
        self.source = source
        self.log = log
        self.console = console
        self._lock = threading.Lock()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # power-dev stops and starts the daemon on the same port within a second.
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((host, port))
        self._listener.listen(1)
        self._listener.settimeout(0.2)
        self.port = int(self._listener.getsockname()[1])
        self._sampler = threading.Thread(target=self._sample_loop, name="wattbench-ptd-sampler", daemon=True)
        self._stop = threading.Event()
        self._refused = 0

    def say(self, message: str) -> None:
        self._emit(Output(console=[console_line(now_ms(), message)]))

    def _emit(self, out: Output) -> None:
        for line in out.log:
            self.log.write(line + "\n")
        if out.log:
            self.log.flush()
        for line in out.console:
            self.console.write(line + "\n")
        if out.console:
            self.console.flush()

    def serve(self, stop: threading.Event) -> None:
        """Accept clients one after another until `stop` is set."""
        self._sampler.start()
        self.say(f"Establishing the listener on port {self.port}...")
        self.say("Waiting for a connection...")
        try:
            while not stop.is_set():
                try:
                    conn, addr = self._listener.accept()
                except TimeoutError:
                    continue
                self.say(f"Accepted connection from {addr[0]}:{addr[1]}")
                try:
                    self._serve_client(conn, stop)
                finally:
                    conn.close()
                with self._lock:
                    lines = self.state.disconnected(now_ms())
                self._emit(Output(console=lines))
                self.say("Connection closed; waiting for a connection...")
        finally:
            self._stop.set()
            self._listener.close()
            self._sampler.join(2)

    def _serve_client(self, conn: socket.socket, stop: threading.Event) -> None:
        conn.settimeout(0.2)
        buf = b""
        skipping = False  # the rest of an overlong line, up to its end, is dropped
        idle_since = time.monotonic()
        while not stop.is_set():
            try:
                chunk = conn.recv(4096)
            except TimeoutError:
                if time.monotonic() - idle_since > IDLE_CLIENT_S:
                    return
                continue
            except OSError:
                return
            if not chunk:
                return
            idle_since = time.monotonic()
            buf += chunk
            while b"\n" in buf:
                raw, buf = buf.split(b"\n", 1)
                if skipping:
                    skipping = False
                    continue
                if not self._answer(conn, raw.rstrip(b"\r")):
                    return
            if len(buf) > MAX_LINE:
                # No end of line in sight: refuse the line now, and drop the rest of it when it comes.
                buf = b""
                if not skipping and not self._send(
                    conn, [f"Error: command longer than {MAX_LINE} characters"]
                ):
                    return
                skipping = True

    def _answer(self, conn: socket.socket, raw: bytes) -> bool:
        line = raw.decode("utf-8", errors="replace")
        with self._lock:
            running = self.state.running
        if running and line.strip() == "Stop":
            # The seconds up to now close only once their late readings had time to arrive.
            time.sleep(self.state.lag_ms / 1000.0 + 0.05)
        with self._lock:
            out = self.state.handle(line, now_ms(), self.source.silent_s())
        self._emit(out)
        return self._send(conn, out.reply)

    def _send(self, conn: socket.socket, lines: list[str]) -> bool:
        try:
            conn.sendall("".join(f"{line}\r\n" for line in lines).encode())
        except OSError:
            return False
        return True

    def _sample_loop(self) -> None:
        while not self._stop.wait(0.02):
            t = now_ms()
            with self._lock:
                self.state.add(self.source.take())  # kept only while a measurement runs
                refused, self._refused = self.source.refused - self._refused, self.source.refused
                if refused and self.state.running:
                    # A reading the meter flagged, or a message that is not the contract's, never
                    # becomes a sample; the log says so, as PTDaemon logs a bad reading.
                    self._emit(
                        Output(
                            console=[
                                console_line(
                                    t,
                                    f"WARNING: {refused} readings from {self.source.label} refused "
                                    "(flagged by the meter, or not a samples message of the contract)",
                                )
                            ]
                        )
                    )
                if not self.state.due(t):
                    continue
                out = self.state.tick(t)
            with contextlib.suppress(OSError, ValueError):
                self._emit(out)
