"""Simulated AC meter whose power follows a model. Needs no bus (pass None).

Models:
- "const": `watts` all the time;
- "steps": cycles through `steps`, a list of [seconds, watts];
- "sine": `watts` + `amp` * sin(2 pi t / `period_s`);
- "cpu": `idle_w` + (`peak_w` - `idle_w`) x this host's CPU utilisation (host mode only; psutil or
  /proc/stat), so a demo shows the real load of the machine.

The energy counter integrates the modelled power and starts at zero on every boot, like a meter
that was power-cycled; the firmware's energy tracker keeps the reported total monotonic.
Faults can be injected for tests: every `missed_every`-th read raises NoReply, every
`crc_every`-th raises CRCError.
"""

import math
import random

from wattbench_fw import port
from wattbench_fw.errors import CRCError, NoReply
from wattbench_fw.meters import integer, number, show

MODELS = ("const", "steps", "sine", "cpu")
MAX_W = 1e7  # the contract's largest W
MAX_STEPS = 1000


class CpuLoad:
    """Host CPU utilisation (0-1), refreshed at most every `refresh_s` so fast sampling stays cheap."""

    def __init__(self, refresh_s=0.1):
        self.refresh_s = refresh_s
        self._last_t = None
        self._value = 0.0
        self._prev = None
        try:
            import psutil

            self._psutil = psutil
            psutil.cpu_percent(interval=None)
        except ImportError:
            self._psutil = None
            self._prev = self._proc_stat()
            if self._prev is None:
                raise ValueError("the cpu model needs psutil or /proc/stat (host mode only)")

    @staticmethod
    def _proc_stat():
        try:
            with open("/proc/stat") as f:
                fields = f.readline().split()
        except OSError:
            return None
        if not fields or fields[0] != "cpu":
            return None
        nums = [int(x) for x in fields[1:]]
        idle = nums[3] + (nums[4] if len(nums) > 4 else 0)
        return sum(nums), idle

    def value(self, now_s):
        if self._last_t is not None and now_s - self._last_t < self.refresh_s:
            return self._value
        self._last_t = now_s
        if self._psutil is not None:
            self._value = self._psutil.cpu_percent(interval=None) / 100.0
        else:
            cur = self._proc_stat()
            if cur and self._prev:
                total = cur[0] - self._prev[0]
                idle = cur[1] - self._prev[1]
                if total > 0:
                    self._value = max(0.0, min(1.0, 1.0 - idle / total))
            self._prev = cur
        return self._value


class SimMeter:
    KIND = "sim"
    QUANTITIES = ("W", "V", "A", "PF", "Hz", "Wh")
    HOST_ONLY = ("model", "cpu")
    HOST_CLOCK = True

    def __init__(
        self,
        bus=None,
        model="const",
        watts=100.0,
        amp=20.0,
        period_s=60.0,
        steps=None,
        idle_w=60.0,
        peak_w=250.0,
        volts=230.0,
        pf=0.95,
        hz=50.0,
        noise_w=0.0,
        seed=0,
        acc=0.005,
        missed_every=0,
        crc_every=0,
        fail_from_s=None,
        fail_for_s=0,
        clock=None,
    ):
        if not isinstance(model, str) or model not in MODELS:
            raise ValueError("model must be one of %s, got %s" % (", ".join(MODELS), show(model)))
        if model == "steps" and not steps:
            raise ValueError("the steps model needs steps=[[seconds, watts], ...]")
        self.model = model
        # Every number is checked here: W, A = W / (V x PF) and the sine's period feed divisions and
        # samples, so a zero, a NaN or a huge value must stop the configuration, not a later read.
        self.watts = float(number("watts", watts, 0, MAX_W))
        self.amp = float(number("amp", amp, -MAX_W, MAX_W))
        self.period_s = float(number("period_s", period_s, 0.001, 1e9))
        self.steps = self._check_steps(steps)
        self.cycle_s = sum(d for d, _ in self.steps)
        self.idle_w = float(number("idle_w", idle_w, 0, MAX_W))
        self.peak_w = float(number("peak_w", peak_w, 0, MAX_W))
        if model == "cpu" and self.peak_w < self.idle_w:
            raise ValueError("peak_w must be at least idle_w (%s), got %s" % (self.idle_w, self.peak_w))
        self.volts = float(number("volts", volts, 1, 100000))
        self.pf = float(number("pf", pf, 0.01, 1))
        self.hz = float(number("hz", hz, 0, 1000000))
        self.noise_w = float(number("noise_w", noise_w, 0, MAX_W))
        seed = integer("seed", seed, 0, 4294967295)
        self.rng = random.Random(seed) if hasattr(random, "Random") else None
        if self.rng is None:
            random.seed(seed)
        self.acc = number("acc", acc, 0, 1)
        self.missed_every = integer("missed_every", missed_every, 0, 1000000000)
        self.crc_every = integer("crc_every", crc_every, 0, 1000000000)
        # An outage: every read from fail_from_s for fail_for_s seconds (meter clock) times out.
        self.fail_from_s = None if fail_from_s is None else float(number("fail_from_s", fail_from_s, 0, 1e9))
        self.fail_for_s = float(number("fail_for_s", fail_for_s, 0, 1e9))
        if clock is not None and not callable(clock):
            raise ValueError("clock must be a function returning seconds")
        if clock is None:
            mono = port.Mono()
            clock = lambda: mono.now() / 1e6  # noqa: E731
        self.clock = clock
        self.cpu = CpuLoad() if model == "cpu" else None
        self.reads = 0
        self._wh = 0.0
        self._last = None  # (t, W) of the previous good read, for the energy integral

    @staticmethod
    def _check_steps(steps):
        if steps is None:
            return []
        if not isinstance(steps, (list, tuple)) or len(steps) > MAX_STEPS:
            raise ValueError("steps must be a list of at most %d [seconds, watts] pairs" % MAX_STEPS)
        out = []
        for i, step in enumerate(steps):
            if not isinstance(step, (list, tuple)) or len(step) != 2:
                raise ValueError("steps[%d] must be a [seconds, watts] pair, got %s" % (i, show(step)))
            d = number("steps[%d] seconds" % i, step[0], 0.001, 1e9)
            w = number("steps[%d] watts" % i, step[1], 0, MAX_W)
            out.append((float(d), float(w)))
        return out

    def setup(self):
        pass

    def info(self):
        return {"model": "sim-" + self.model, "acc": self.acc}

    def power_at(self, t):
        """Modelled power at t seconds (deterministic for every model but cpu), before noise."""
        if self.model == "const":
            return self.watts
        if self.model == "sine":
            return self.watts + self.amp * math.sin(2 * math.pi * t / self.period_s)
        if self.model == "steps":
            x = t % self.cycle_s
            for dur, w in self.steps:
                if x < dur:
                    return w
                x -= dur
            return self.steps[-1][1]
        return self.idle_w + (self.peak_w - self.idle_w) * self.cpu.value(t)

    def _noise(self):
        if not self.noise_w:
            return 0.0
        r = self.rng.random() if self.rng else random.random()
        return (2 * r - 1) * self.noise_w

    def read(self):
        self.reads += 1
        if self.missed_every and self.reads % self.missed_every == 0:
            raise NoReply("simulated timeout")
        if self.crc_every and self.reads % self.crc_every == 0:
            raise CRCError("simulated CRC error")
        t = self.clock()
        if self.fail_from_s is not None and self.fail_from_s <= t < self.fail_from_s + self.fail_for_s:
            raise NoReply("simulated outage")
        w = max(0.0, self.power_at(t) + self._noise())
        if self._last is not None:
            self._wh += self._last[1] * (t - self._last[0]) / 3600.0
        self._last = (t, w)
        return {
            "W": w,
            "V": self.volts,
            "A": w / (self.volts * self.pf),
            "PF": self.pf,
            "Hz": self.hz,
            "Wh": self._wh,
            "u": self.acc,
        }, 0
