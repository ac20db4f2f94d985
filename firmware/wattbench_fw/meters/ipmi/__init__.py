"""A server's power as its BMC reports it over IPMI, read by the host-mode appliance through ipmitool.

Two ways to ask, tried in this order by method "auto" at setup():

- DCMI "Get Power Reading" (`ipmitool dcmi power reading`): the BMC's whole-system input power, where
  the BMC implements DCMI. A reading whose state is "deactivated" is no reading.
- Otherwise a full SDR sensor in Watts (`ipmitool -c sdr get NAME`): the one named by `sensor`, or the
  only sensor in Watts the BMC lists. Several sensors in Watts (one per supply, a total) and none named
  is refused with their names: picking one would be a guess about what is summed.

ipmitool does the wire protocol (RMCP+, or the local /dev/ipmi0 when no host is given); the password
reaches it through its environment (-E), never its command line, which any local user can read.
Host mode only; needs no bus (pass None).
"""

from wattbench_fw.errors import NoReply, SensorError
from wattbench_fw.meters import number, show

METHODS = ("auto", "dcmi", "sdr")
INTERFACES = ("lanplus", "lan", "open")
# ipmitool's words for "could not reach or log in to the BMC": no answer, not a bad reading.
UNREACHED = ("Unable to establish", "Error: no response", "Get Auth Capabilities error", "insufficient")


def parse_dcmi(text):
    """Watts from `ipmitool dcmi power reading` output; SensorError when there is no valid reading."""
    watts = None
    state = None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip().lower()
        if key == "instantaneous power reading":
            word = value.split()
            if len(word) != 2 or word[1] != "Watts":
                raise SensorError("DCMI power reading not in Watts: %r" % value.strip()[:40])
            try:
                watts = int(word[0])
            except ValueError:
                raise SensorError("DCMI power reading not a number: %r" % word[0][:20])
        elif key.startswith("power reading state is"):
            state = value.strip()
    if watts is None:
        raise SensorError("no DCMI power reading in ipmitool's answer")
    if state is not None and state != "activated":
        # A BMC with power measurement off still answers, with a number that means nothing.
        raise SensorError("DCMI power reading state is %s" % state[:20])
    return float(watts)


def parse_sdr(text, sensor):
    """Watts from `ipmitool -c sdr get NAME` (CSV: name, reading, units, status, ...)."""
    line = text.strip().splitlines()[-1] if text.strip() else ""
    cells = line.split(",")
    if len(cells) < 4 or cells[0] != sensor:
        raise SensorError("sensor %s: no reading in ipmitool's answer %r" % (sensor, line[:60]))
    reading, units, status = cells[1].strip(), cells[2].strip(), cells[3].strip()
    if not reading or status in ("ns", "na") or reading.lower() in ("na", "disabled"):
        raise SensorError("sensor %s: no reading (status %s)" % (sensor, status or "?"))
    if units != "Watts":
        raise SensorError("sensor %s reads in %s, not Watts" % (sensor, units or "no unit"))
    try:
        return float(reading)
    except ValueError:
        raise SensorError("sensor %s: reading not a number: %r" % (sensor, reading[:20]))


def watt_sensors(text):
    """The names of the sensors in Watts, from `ipmitool -c sdr list full`."""
    out = []
    for line in text.splitlines():
        cells = line.split(",")
        if len(cells) >= 3 and cells[2].strip() == "Watts":
            out.append(cells[0])
    return out


class IPMI:
    KIND = "ipmi"
    QUANTITIES = ("W",)
    HOST_ONLY = True

    def __init__(
        self,
        bus=None,
        host=None,
        port=623,
        user=None,
        password=None,
        password_env=None,
        interface="lanplus",
        cipher=None,
        method="auto",
        sensor=None,
        ipmitool="ipmitool",
        timeout_s=5.0,
        acc=0.05,
        upd=1.0,
        max_w=100000.0,
    ):
        if host is not None and (not isinstance(host, str) or not host or host.startswith("-")):
            raise ValueError("host must be the BMC's address, got %s" % show(host))
        if interface not in INTERFACES:
            raise ValueError("interface must be one of %s, got %s" % (", ".join(INTERFACES), show(interface)))
        if host is None:
            interface = "open"  # the local BMC, through the kernel's IPMI driver
        elif interface == "open":
            raise ValueError("interface open reads the local BMC: leave host out")
        if interface != "open" and not isinstance(user, str):
            raise ValueError("a BMC over the network needs user")
        if password is not None and password_env is not None:
            raise ValueError("give password or password_env, not both")
        for name, v in (("password", password), ("password_env", password_env), ("ipmitool", ipmitool)):
            if v is not None and not isinstance(v, str):
                raise ValueError("%s must be a string, got %s" % (name, show(v)))
        if method not in METHODS:
            raise ValueError("method must be one of %s, got %s" % (", ".join(METHODS), show(method)))
        if sensor is not None and (not isinstance(sensor, str) or not sensor or "," in sensor):
            raise ValueError("sensor must be an SDR sensor name, got %s" % show(sensor))
        if method == "dcmi" and sensor is not None:
            raise ValueError("sensor is for method sdr or auto")
        self.host = host
        self.port = int(number("port", port, 1, 65535))
        self.user = user
        self.password = password
        self.password_env = password_env
        self.interface = interface
        self.cipher = None if cipher is None else int(number("cipher", cipher, 0, 17))
        self.method = method
        self.sensor = sensor
        self.ipmitool = ipmitool
        self.timeout_s = float(number("timeout_s", timeout_s, 0, 60, lo_open=True))
        self.acc = None if acc is None else number("acc", acc, 0, 1)
        self.upd = None if upd is None else number("upd", upd, 0, 86400, lo_open=True)
        self.max_w = float(number("max_w", max_w, 0, 1e7, lo_open=True))
        self.how = None  # "dcmi" or "sdr", once setup() has found which the BMC answers

    # ---- ipmitool ------------------------------------------------------------------------------

    def _argv(self, words):
        argv = [self.ipmitool, "-I", self.interface]
        if self.interface != "open":
            # -N/-R: ipmitool's own timeout and retries, so that a silent BMC costs about timeout_s.
            argv += ["-H", self.host, "-p", str(self.port), "-U", self.user, "-E"]
            argv += ["-N", str(max(1, int(self.timeout_s // 2))), "-R", "1"]
            if self.cipher is not None:
                argv += ["-C", str(self.cipher)]
        return argv + list(words)

    def _env(self):
        import os

        env = dict(os.environ)
        if self.password_env is not None:
            value = os.environ.get(self.password_env)
            if value is None:
                raise SensorError("environment variable %s (password_env) is not set" % self.password_env)
            env["IPMI_PASSWORD"] = value
        else:
            env["IPMI_PASSWORD"] = self.password or ""
        return env

    def _run(self, *words):
        """ipmitool's output; NoReply when the BMC cannot be reached, SensorError when it answers no."""
        import subprocess

        env = self._env()
        try:
            p = subprocess.run(
                self._argv(words),
                capture_output=True,
                text=True,
                env=env,
                timeout=self.timeout_s + 2,
                errors="replace",
            )
        except FileNotFoundError:
            raise SensorError("%s not found: install ipmitool" % self.ipmitool)
        except subprocess.TimeoutExpired:
            raise NoReply("ipmitool %s: no answer within %g s" % (words[0], self.timeout_s))
        text = p.stdout + p.stderr
        if any(w in text for w in UNREACHED):
            raise NoReply("ipmitool %s: %s" % (words[0], _first_error(text)))
        if p.returncode != 0:
            raise SensorError("ipmitool %s: %s" % (" ".join(words[:2]), _first_error(text)))
        return p.stdout, p.stderr

    # ---- the meter -----------------------------------------------------------------------------

    def setup(self):
        if self.method != "sdr" and self.sensor is None:
            try:
                out, _ = self._run("dcmi", "power", "reading")
                parse_dcmi(out)
                self.how = "dcmi"
                return
            except SensorError:
                # The BMC answered, but gave no valid DCMI reading (it does not implement DCMI, or its
                # power measurement is off): auto mode asks its sensors instead. No answer at all
                # (NoReply) is not a reason to switch, and goes up as it is.
                if self.method == "dcmi":
                    raise
        if self.sensor is None:
            out, _ = self._run("-c", "sdr", "list", "full")
            names = watt_sensors(out)
            if not names:
                raise SensorError("the BMC answers no DCMI power reading and lists no sensor in Watts")
            if len(names) > 1:
                raise SensorError(
                    "the BMC lists several sensors in Watts (%s): name the one to read as sensor"
                    % ", ".join(names[:8])
                )
            self.sensor = names[0]
        self.how = "sdr"

    def info(self):
        if self.how == "dcmi":
            model = "IPMI DCMI power reading"
        elif self.sensor:
            model = "IPMI sensor " + self.sensor
        else:
            model = "IPMI BMC"
        out = {"model": model[:32]}
        if self.acc is not None:
            out["acc"] = self.acc
        if self.upd is not None:
            out["upd"] = self.upd
        return out

    def read(self):
        if self.how is None:
            self.setup()
        if self.how == "dcmi":
            out, _ = self._run("dcmi", "power", "reading")
            watts = parse_dcmi(out)
        else:
            out, _ = self._run("-c", "sdr", "get", self.sensor)
            watts = parse_sdr(out, self.sensor)
        if watts != watts or watts < 0 or watts > self.max_w:
            raise SensorError("%s W is outside 0 to max_w %g W" % (show(watts), self.max_w))
        vals = {"W": watts}
        if self.acc is not None:
            vals["u"] = self.acc
        return vals, 0


def _first_error(text):
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("Unable to Get Channel Cipher Suites"):
            return line[:120]
    return "no output"
