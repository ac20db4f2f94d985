"""A server's power as its BMC reports it over Redfish (DMTF DSP0266), read by the host-mode appliance.

Newer BMCs give a chassis an EnvironmentMetrics resource (PowerWatts.Reading); older ones a Power
resource (PowerControl[0].PowerConsumedWatts, deprecated since schema 2020.4 but still the common
one). setup() reads the chassis and takes the first of the two it links to. Sessions (POST to
SessionService/Sessions, then X-Auth-Token, logging in again once on 401) or HTTP Basic auth.

A BMC's reading is its own average over a period it chooses, refreshed every second or slower: the
channel declares that period (upd) and an accuracy class (acc), both assumptions a user should replace
with the vendor's figures. Host mode only; needs no bus (pass None).
"""

import json

from wattbench_fw.errors import NoReply, SensorError
from wattbench_fw.meters import number, show

AUTHS = ("session", "basic", "none")
MAX_BODY = 1 << 20  # a Power resource is a few KB; anything near this is not one


class Redfish:
    KIND = "redfish"
    QUANTITIES = ("W",)
    HOST_ONLY = True

    def __init__(
        self,
        bus=None,
        url=None,
        chassis=None,
        user=None,
        password=None,
        password_env=None,
        auth="session",
        ca=None,
        insecure=False,
        timeout_s=3.0,
        acc=0.05,
        upd=1.0,
        max_w=100000.0,
    ):
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError("url must be the BMC's http:// or https:// address, got %s" % show(url))
        if chassis is not None and (not isinstance(chassis, str) or not chassis or "/" in chassis):
            raise ValueError("chassis must be a chassis id such as 1, got %s" % show(chassis))
        if auth not in AUTHS:
            raise ValueError("auth must be one of %s, got %s" % (", ".join(AUTHS), show(auth)))
        if auth != "none" and not isinstance(user, str):
            raise ValueError("auth %s needs user" % auth)
        if password is not None and password_env is not None:
            raise ValueError("give password or password_env, not both")
        for name, v in (("password", password), ("password_env", password_env), ("ca", ca)):
            if v is not None and not isinstance(v, str):
                raise ValueError("%s must be a string, got %s" % (name, show(v)))
        if insecure not in (True, False):
            raise ValueError("insecure must be true or false, got %s" % show(insecure))
        self.url = url.rstrip("/")
        self.chassis = chassis
        self.user = user
        self.password = password
        self.password_env = password_env
        self.auth = auth
        self.ca = ca
        self.insecure = insecure
        self.timeout_s = float(number("timeout_s", timeout_s, 0, 60, lo_open=True))
        self.acc = None if acc is None else number("acc", acc, 0, 1)
        self.upd = None if upd is None else number("upd", upd, 0, 86400, lo_open=True)
        self.max_w = float(number("max_w", max_w, 0, 1e7, lo_open=True))
        self.token = None
        self.session = None  # the session's URI, deleted by close()
        self.path = None  # the resource read, and how: ("env", path) or ("power", path)
        self.model = None
        self._ssl = None

    # ---- HTTP ----------------------------------------------------------------------------------

    def _secret(self):
        if self.password_env is None:
            return self.password or ""
        import os

        value = os.environ.get(self.password_env)
        if value is None:
            raise SensorError("environment variable %s (password_env) is not set" % self.password_env)
        return value

    def _context(self):
        if self._ssl is None and self.url.startswith("https://"):
            import ssl

            ctx = ssl.create_default_context(cafile=self.ca)
            if self.insecure:
                # Many BMCs ship a self-signed certificate; the user said to accept it.
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            self._ssl = ctx
        return self._ssl

    def _request(self, method, path, body=None, retry=True):
        import socket
        import urllib.error
        import urllib.request

        headers = {"Accept": "application/json", "OData-Version": "4.0"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if self.auth == "basic":
            import base64

            pair = ("%s:%s" % (self.user, self._secret())).encode()
            headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
        elif self.auth == "session" and self.token and not path.endswith("/Sessions"):
            headers["X-Auth-Token"] = self.token
        req = urllib.request.Request(self.url + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s, context=self._context()) as resp:
                raw = resp.read(MAX_BODY + 1)
                return resp.status, resp.headers, raw
        except urllib.error.HTTPError as exc:
            if exc.code == 401 and retry and self.auth == "session" and not path.endswith("/Sessions"):
                self.token = None  # the session expired or the BMC restarted: log in again, once
                self._login()
                return self._request(method, path, body, retry=False)
            raise SensorError("%s %s: HTTP %d %s" % (method, path, exc.code, exc.reason))
        except (socket.timeout, TimeoutError):
            raise NoReply("%s %s: no answer within %g s" % (method, path, self.timeout_s))
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, (socket.timeout, TimeoutError)):
                raise NoReply("%s %s: no answer within %g s" % (method, path, self.timeout_s))
            raise NoReply("%s %s: %s" % (method, path, exc.reason))
        except OSError as exc:
            raise NoReply("%s %s: %s" % (method, path, exc))

    def _get(self, path):
        _, _, raw = self._request("GET", path)
        if len(raw) > MAX_BODY:
            raise SensorError("GET %s: a body over %d bytes" % (path, MAX_BODY))
        try:
            doc = json.loads(raw)
        except ValueError:
            raise SensorError("GET %s: not JSON: %r" % (path, raw[:40]))
        if not isinstance(doc, dict):
            raise SensorError("GET %s: not a Redfish resource" % path)
        return doc

    def _login(self):
        status, headers, raw = self._request(
            "POST",
            "/redfish/v1/SessionService/Sessions",
            {"UserName": self.user, "Password": self._secret()},
        )
        token = headers.get("X-Auth-Token")
        if not token:
            raise SensorError("the BMC opened a session but sent no X-Auth-Token")
        self.token = token
        self.session = headers.get("Location")

    # ---- the meter -----------------------------------------------------------------------------

    def setup(self):
        if self.auth == "session" and self.token is None:
            self._login()
        chassis = self.chassis
        if chassis is None:
            members = self._get("/redfish/v1/Chassis").get("Members") or []
            ids = [m.get("@odata.id") for m in members if isinstance(m, dict)]
            ids = [i for i in ids if isinstance(i, str)]
            if not ids:
                raise SensorError("the BMC lists no chassis")
            path = ids[0]
        else:
            path = "/redfish/v1/Chassis/" + chassis
        doc = self._get(path)
        self.model = doc.get("Model") if isinstance(doc.get("Model"), str) else None
        for key, how in (("EnvironmentMetrics", "env"), ("Power", "power")):
            link = doc.get(key)
            if isinstance(link, dict) and isinstance(link.get("@odata.id"), str):
                self.path = (how, link["@odata.id"])
                return
        raise SensorError("chassis %s links no EnvironmentMetrics or Power resource" % path)

    def close(self):
        if self.session:
            try:
                self._request("DELETE", self.session, retry=False)
            except Exception:  # noqa: BLE001 - the BMC drops stale sessions itself
                pass
            self.session = None
            self.token = None

    def info(self):
        out = {"model": ("Redfish " + self.model) if self.model else "Redfish BMC"}
        if self.acc is not None:
            out["acc"] = self.acc
        if self.upd is not None:
            out["upd"] = self.upd
        return out

    def read(self):
        if self.path is None:
            self.setup()
        how, path = self.path
        doc = self._get(path)
        if how == "env":
            watts = (
                (doc.get("PowerWatts") or {}).get("Reading")
                if isinstance(doc.get("PowerWatts"), dict)
                else None
            )
        else:
            controls = doc.get("PowerControl")
            first = controls[0] if isinstance(controls, list) and controls else None
            watts = first.get("PowerConsumedWatts") if isinstance(first, dict) else None
        # A BMC that has no reading yet sends null: that is no reading, never 0 W.
        if isinstance(watts, bool) or not isinstance(watts, (int, float)) or watts != watts:
            raise SensorError("%s: no power reading (%s)" % (path, show(watts)))
        if watts < 0 or watts > self.max_w:
            raise SensorError("%s: %s W is outside 0 to max_w %g W" % (path, show(watts), self.max_w))
        vals = {"W": float(watts)}
        if self.acc is not None:
            vals["u"] = self.acc
        return vals, 0
