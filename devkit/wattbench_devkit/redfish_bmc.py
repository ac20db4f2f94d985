"""A BMC's Redfish service on loopback, answering with resources shaped like DMTF's published mockups
(public-rackmount1: a Chassis linking Power with PowerControl[0].PowerConsumedWatts, or a newer
EnvironmentMetrics with PowerWatts.Reading). No emulator available here serves power (sushy-tools
2.2 has no Power resource), so this stands in for the BMC's HTTP side; the driver under test is real.

Tests set `watts`, and `fault` to make the next answers fail: "500", "timeout", "garbage", "null",
"negative"; `expire()` drops every session, as a BMC restart does."""

from __future__ import annotations

import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

USER, PASSWORD = "admin", "s3cret-bmc"
CHASSIS = "/redfish/v1/Chassis/1U"


class BMC:
    def __init__(self, watts: float = 344.0, environment: bool = False, basic: bool = False) -> None:
        self.watts: float | None = watts
        self.environment = environment
        self.basic = basic
        self.fault: str | None = None
        self.tokens: set[str] = set()
        self.logins = 0
        self.deleted = 0
        self.requests = 0
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

            def _authorised(self) -> bool:
                if bmc.basic:
                    import base64

                    want = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
                    return self.headers.get("Authorization") == want
                return self.headers.get("X-Auth-Token") in bmc.tokens

            def do_POST(self) -> None:
                bmc.requests += 1
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n) or b"{}")
                if self.path != "/redfish/v1/SessionService/Sessions":
                    self._send(405)
                elif body.get("UserName") != USER or body.get("Password") != PASSWORD:
                    self._send(401, {"error": {"code": "Base.1.8.GeneralError"}})
                else:
                    token = secrets.token_hex(16)
                    bmc.tokens.add(token)
                    bmc.logins += 1
                    uri = f"/redfish/v1/SessionService/Sessions/{bmc.logins}"
                    self._send(
                        201,
                        {"Id": str(bmc.logins), "UserName": USER},
                        {"X-Auth-Token": token, "Location": uri},
                    )

            def do_DELETE(self) -> None:
                bmc.requests += 1
                if not self._authorised():
                    self._send(401)
                    return
                bmc.deleted += 1
                bmc.tokens.discard(self.headers.get("X-Auth-Token") or "")
                self._send(204)

            def do_GET(self) -> None:
                bmc.requests += 1
                if self.path.rstrip("/") == "/redfish/v1":
                    self._send(200, {"@odata.id": "/redfish/v1", "RedfishVersion": "1.15.0"})
                    return
                if not self._authorised():
                    self._send(401, {"error": {"code": "Base.1.8.NoValidSession"}})
                    return
                doc = bmc.resource(self.path)
                if doc is None:
                    self._send(404)
                    return
                fault = bmc.fault if self.path.endswith(("/Power", "/EnvironmentMetrics")) else None
                if fault == "500":
                    self._send(500, {"error": {"code": "Base.1.8.InternalError"}})
                elif fault == "timeout":
                    time.sleep(2.0)
                    self._send(200, doc)
                elif fault == "garbage":
                    self._send(200, b"\x00\xffPowerConsumedWatts: lots")
                else:
                    self._send(200, doc)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

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

    def expire(self) -> None:
        self.tokens.clear()

    def __enter__(self) -> BMC:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
