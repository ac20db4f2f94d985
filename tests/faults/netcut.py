"""A loopback TCP proxy that can take the network away: the appliance talks to the broker through it,
and cut() closes every connection and refuses new ones until restore().

Refusing (the listening socket is closed, so a connect gets RST) is what a client sees when the
broker's host is up but the path to the port is gone; the appliance then backs off and retries, and
its buffer fills exactly as it would with the cable pulled.
"""

from __future__ import annotations

import contextlib
import socket
import threading

LOOPBACK = "127.0.0.1"


class NetCut:
    def __init__(self, upstream_port: int, upstream_host: str = LOOPBACK, port: int = 0) -> None:
        if upstream_host != LOOPBACK:
            raise ValueError("the proxy only forwards to 127.0.0.1")
        self.upstream = (upstream_host, upstream_port)
        self.port = port
        self.host = LOOPBACK
        self.accepted = 0
        self.cuts = 0
        self.refusing = False
        self._listener: socket.socket | None = None
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False

    @property
    def url(self) -> str:
        return f"{self.host}:{self.port}"

    # ------------------------------------------------------------------ control

    def start(self) -> NetCut:
        self._listen()
        return self

    def cut(self) -> int:
        """Close every connection and stop listening. Returns how many connections were cut."""
        with self._lock:
            self.refusing = True
            self.cuts += 1
            listener, self._listener = self._listener, None
            conns, self._conns = self._conns, set()
        if listener is not None:
            _close(listener)
        for s in conns:
            _close(s)
        return len(conns) // 2

    def restore(self) -> None:
        with self._lock:
            self.refusing = False
        self._listen()

    def close(self) -> None:
        self._closed = True
        self.cut()

    def __enter__(self) -> NetCut:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ plumbing

    def _listen(self) -> None:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((LOOPBACK, self.port))
        s.listen(16)
        self.port = s.getsockname()[1]
        with self._lock:
            self._listener = s
        threading.Thread(target=self._accept, args=(s,), name="netcut-accept", daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # listener closed by cut()
            try:
                server = socket.create_connection(self.upstream, timeout=5)
                server.settimeout(None)
            except OSError:
                _close(client)
                continue
            with self._lock:
                if self.refusing:
                    _close(client)
                    _close(server)
                    continue
                self._conns.update((client, server))
                self.accepted += 1
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), name="netcut-pump", daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with self._lock:
                self._conns.discard(src)
                self._conns.discard(dst)
            _close(src)
            _close(dst)


def _close(s: socket.socket) -> None:
    with contextlib.suppress(OSError):
        s.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        s.close()
