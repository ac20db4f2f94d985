"""A BMC's Redfish service on loopback, answering with resources shaped like DMTF's published mockups
(public-rackmount1: a Chassis linking Power with PowerControl[0].PowerConsumedWatts, or a newer
EnvironmentMetrics with PowerWatts.Reading). No emulator available here serves power (sushy-tools
2.2 has no Power resource), so this stands in for the BMC's HTTP side; the driver under test is real.

The service runs in a process of its own (`python -m wattbench_devkit.redfish_bmc --port N`), as a
real BMC does: served from a thread of the test's process, its answers waited for the test's own work
and the GIL, and an appliance polling it on a loaded machine missed sample periods. `BMC` starts that
process, waits for it to say it is ready, and stops it when the `with` block ends, however it ends; the
process also exits when its standard input closes, so it never outlives the process that started it.

Tests set `watts`, and `fault` to make the next answers fail: "500", "timeout", "garbage", "null",
"negative"; `expire()` drops every session, as a BMC restart does. They read `tokens`, `logins`,
`deleted` and `requests`. Those go through a control path, `/_bmc/...`, on the same port: outside
`/redfish/v1`, so the Redfish client never asks for it, and not counted in `requests`."""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import secrets
import select
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .services import free_port, stop_process

USER, PASSWORD = "admin", "s3cret-bmc"
CHASSIS = "/redfish/v1/Chassis/1U"
CONTROL = "/_bmc"
FAULTS = ("500", "timeout", "garbage", "null", "negative")
READY = b"ready\n"
# Generous: a Python process starting on a machine whose cores are all busy.
START_TIMEOUT_S = 60.0
CONTROL_TIMEOUT_S = 30.0


class Service:
    """The BMC's state and resources, in the BMC's own process."""

    def __init__(self, watts: float | None, environment: bool, basic: bool) -> None:
        self.watts = watts
        self.environment = environment
        self.basic = basic
        self.fault: str | None = None
        self.tokens: set[str] = set()
        self.logins = 0
        self.deleted = 0
        self.requests = 0
        # Handler threads answer at once; a login and a logout must not lose each other's update.
        self.lock = threading.Lock()

    def reading(self) -> Any:
        if self.fault == "null":
            return None
        if self.fault == "negative":
            return -12
        return self.watts

    def resource(self, path: str) -> dict[str, Any] | None:
        if path == "/redfish/v1/Chassis":
            return {"Members": [{"@odata.id": CHASSIS}], "Members@odata.count": 1}
        if path == CHASSIS:
            doc: dict[str, Any] = {
                "@odata.id": CHASSIS,
                "Id": "1U",
                "ChassisType": "RackMount",
                "Model": "WB-1U",
            }
            doc["Power"] = {"@odata.id": CHASSIS + "/Power"}
            if self.environment:
                doc["EnvironmentMetrics"] = {"@odata.id": CHASSIS + "/EnvironmentMetrics"}
            return doc
        if path == CHASSIS + "/Power":
            return {
                "@odata.type": "#Power.v1_7_1.Power",
                "Id": "Power",
                "PowerControl": [
                    {
                        "@odata.id": CHASSIS + "/Power#/PowerControl/0",
                        "MemberId": "0",
                        "Name": "Server Power Control",
                        "PowerConsumedWatts": self.reading(),
                        "PowerCapacityWatts": 1000,
                        "PowerMetrics": {
                            "IntervalInMin": 30,
                            "MinConsumedWatts": 271,
                            "MaxConsumedWatts": 489,
                        },
                    }
                ],
            }
        if path == CHASSIS + "/EnvironmentMetrics" and self.environment:
            return {
                "@odata.type": "#EnvironmentMetrics.v1_3_0.EnvironmentMetrics",
                "Id": "EnvironmentMetrics",
                "PowerWatts": {
                    "DataSourceUri": CHASSIS + "/Sensors/PowerConsumption",
                    "Reading": self.reading(),
                },
            }
        return None

    def state(self) -> dict[str, Any]:
        with self.lock:
            return {
                "watts": self.watts,
                "fault": self.fault,
                "tokens": sorted(self.tokens),
                "logins": self.logins,
                "deleted": self.deleted,
                "requests": self.requests,
            }

    def change(self, doc: dict[str, Any]) -> str | None:
        """Apply a control request's {"watts": ..., "fault": ...}; the reason it was refused, if it was."""
        if set(doc) - {"watts", "fault"}:
            return f"unknown keys {sorted(set(doc) - {'watts', 'fault'})}"
        if "fault" in doc and doc["fault"] is not None and doc["fault"] not in FAULTS:
            return f"fault must be one of {FAULTS} or null"
        with self.lock:
            if "watts" in doc:
                self.watts = doc["watts"]
            if "fault" in doc:
                self.fault = doc["fault"]
        return None

    def handler(self) -> type[BaseHTTPRequestHandler]:
        bmc = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, doc: Any = None, headers: dict[str, str] | None = None) -> None:
                body = b"" if doc is None else (doc if isinstance(doc, bytes) else json.dumps(doc).encode())
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting (the timeout fault): nothing to answer

            def _body(self) -> Any:
                n = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(n) or b"{}")

            def _authorised(self) -> bool:
                if bmc.basic:
                    want = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
                    return self.headers.get("Authorization") == want
                with bmc.lock:
                    return self.headers.get("X-Auth-Token") in bmc.tokens

            def _control(self) -> None:
                if self.command == "GET" and self.path == CONTROL + "/state":
                    self._send(200, bmc.state())
                elif self.command == "POST" and self.path == CONTROL + "/state":
                    refused = bmc.change(self._body())
                    if refused:
                        self._send(400, {"error": refused})
                    else:
                        self._send(204)
                elif self.command == "POST" and self.path == CONTROL + "/expire":
                    with bmc.lock:
                        bmc.tokens.clear()
                    self._send(204)
                else:
                    self._send(404)

            def do_POST(self) -> None:
                if self.path.startswith(CONTROL + "/"):
                    self._control()
                    return
                with bmc.lock:
                    bmc.requests += 1
                body = self._body()
                if self.path != "/redfish/v1/SessionService/Sessions":
                    self._send(405)
                elif body.get("UserName") != USER or body.get("Password") != PASSWORD:
                    self._send(401, {"error": {"code": "Base.1.8.GeneralError"}})
                else:
                    token = secrets.token_hex(16)
                    with bmc.lock:
                        bmc.tokens.add(token)
                        bmc.logins += 1
                        n = bmc.logins
                    uri = f"/redfish/v1/SessionService/Sessions/{n}"
                    self._send(
                        201, {"Id": str(n), "UserName": USER}, {"X-Auth-Token": token, "Location": uri}
                    )

            def do_DELETE(self) -> None:
                with bmc.lock:
                    bmc.requests += 1
                if not self._authorised():
                    self._send(401)
                    return
                with bmc.lock:
                    bmc.deleted += 1
                    bmc.tokens.discard(self.headers.get("X-Auth-Token") or "")
                self._send(204)

            def do_GET(self) -> None:
                if self.path.startswith(CONTROL + "/"):
                    self._control()
                    return
                with bmc.lock:
                    bmc.requests += 1
                if self.path.rstrip("/") == "/redfish/v1":
                    self._send(200, {"@odata.id": "/redfish/v1", "RedfishVersion": "1.15.0"})
                    return
                if not self._authorised():
                    self._send(401, {"error": {"code": "Base.1.8.NoValidSession"}})
                    return
                with bmc.lock:
                    doc = bmc.resource(self.path)
                    fault = bmc.fault if self.path.endswith(("/Power", "/EnvironmentMetrics")) else None
                if doc is None:
                    self._send(404)
                elif fault == "500":
                    self._send(500, {"error": {"code": "Base.1.8.InternalError"}})
                elif fault == "timeout":
                    time.sleep(2.0)
                    self._send(200, doc)
                elif fault == "garbage":
                    self._send(200, b"\x00\xffPowerConsumedWatts: lots")
                else:
                    self._send(200, doc)

        return Handler


class BMC:
    """The BMC's process, seen from the test: a context manager with `url`, the settable `watts` and
    `fault`, `expire()`, and the counters read back from the process."""

    def __init__(
        self, watts: float = 344.0, environment: bool = False, basic: bool = False, port: int | None = None
    ) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.argv = [sys.executable, "-m", "wattbench_devkit.redfish_bmc", "--port", str(self.port)]
        self.argv += ["--watts", repr(float(watts))]
        self.argv += ["--environment"] if environment else []
        self.argv += ["--basic"] if basic else []
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> BMC:
        # stdin stays open for the process's life: its end is the process's signal to exit.
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            self._wait_ready(self.proc)
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def _wait_ready(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], START_TIMEOUT_S)
        if not ready:
            raise TimeoutError(f"the BMC on port {self.port} was not ready after {START_TIMEOUT_S} s")
        line = proc.stdout.readline()
        if line != READY:
            code = proc.wait(10)
            raise RuntimeError(f"the BMC on port {self.port} exited with {code} before it was ready")

    def stop(self) -> None:
        if self.proc is None:
            return
        stop_process(self.proc, timeout=5)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()

    def _call(self, method: str, path: str, doc: dict[str, Any] | None = None) -> Any:
        # http.client, not urllib: a proxy named in the environment must not see loopback calls.
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=CONTROL_TIMEOUT_S)
        try:
            body = None if doc is None else json.dumps(doc).encode()
            conn.request(method, CONTROL + path, body, {"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = resp.read()
        finally:
            conn.close()
        if resp.status >= 300:
            raise ValueError(f"the BMC refused {method} {CONTROL + path}: HTTP {resp.status} {data!r}")
        return json.loads(data) if data else None

    def _state(self) -> dict[str, Any]:
        state: dict[str, Any] = self._call("GET", "/state")
        return state

    @property
    def watts(self) -> float | None:
        watts: float | None = self._state()["watts"]
        return watts

    @watts.setter
    def watts(self, value: float | None) -> None:
        self._call("POST", "/state", {"watts": value})

    @property
    def fault(self) -> str | None:
        fault: str | None = self._state()["fault"]
        return fault

    @fault.setter
    def fault(self, value: str | None) -> None:
        self._call("POST", "/state", {"fault": value})

    @property
    def tokens(self) -> set[str]:
        return set(self._state()["tokens"])

    @property
    def logins(self) -> int:
        return int(self._state()["logins"])

    @property
    def deleted(self) -> int:
        return int(self._state()["deleted"])

    @property
    def requests(self) -> int:
        return int(self._state()["requests"])

    def expire(self) -> None:
        self._call("POST", "/expire")


def _exit_when_stdin_closes(server: ThreadingHTTPServer) -> None:
    # The starting process closes the pipe when it stops us, and the kernel closes it when that
    # process dies without stopping us (SIGKILL, a crash): either way this BMC has no one left.
    sys.stdin.buffer.read()
    server.shutdown()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wattbench_devkit.redfish_bmc", description=__doc__)
    parser.add_argument("--port", type=int, required=True, help="TCP port on 127.0.0.1")
    parser.add_argument("--watts", type=float, default=344.0, help="the power reading (W)")
    parser.add_argument("--environment", action="store_true", help="also serve EnvironmentMetrics")
    parser.add_argument("--basic", action="store_true", help="Basic auth instead of sessions")
    args = parser.parse_args(argv)
    service = Service(args.watts, args.environment, args.basic)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), service.handler())
    server.daemon_threads = True
    threading.Thread(target=_exit_when_stdin_closes, args=(server,), daemon=True).start()
    # Listening from here on: the bind above is done, so a connection now waits in the backlog.
    sys.stdout.buffer.write(READY)
    sys.stdout.buffer.flush()
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
