"""The firmware on MicroPython 1.27.0's unix port: the real interpreter, built 32-bit, with a fixed heap.

scripts/provision.sh builds the interpreter from ../shared/micropython-1.27.0 (unmodified sources, see
their PROVENANCE.md) into the services cache; `interpreter()` finds it and `unix_available()` says why
it cannot be used here. `UnixAppliance` runs the firmware's own board entry (`wattbench_fw.device`)
under it, as `.mpy` files made by `mpy-cross -O3` like `wattbench flash` deploys them, with only
`machine` and `network` from the port shim in `unixport/`: simulated meters, the firmware's MQTT
client over real TCP, its clock and SNTP client, its buffer and flash spool in a real directory.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from . import REPO
from .services import SERVICES, Process, ServiceUnavailable

VERSION = "1.27.0"
# Where the sources sit beside a clone (CI has ../shared next to it); WATTBENCH_MICROPYTHON_SRC moves it.
SOURCE = Path(os.environ.get("WATTBENCH_MICROPYTHON_SRC", REPO.parent / "shared" / f"micropython-{VERSION}"))
# scripts/provision.sh writes the binary and its marker here; the marker names the version and the
# build's options, so a changed pin or option rebuilds it.
BUILD_DIR = SERVICES / f"micropython-{VERSION}-unix"
BINARY = BUILD_DIR / "micropython"
MARKER = BUILD_DIR / ".built-32bit"
SHIM = Path(__file__).resolve().parent / "unixport"

KB = 1024
# Free GC heap a generic ESP32 on MicroPython 1.27 boots with (micropython issue #18859), less the
# 40 KB docs/firmware.md keeps for Wi-Fi, TLS and fragmentation: the heap the firmware may fill.
ESP32_BOOT_FREE = 134544
ESP32_HEAP = ESP32_BOOT_FREE - 40 * KB
# The Pico W's budget (docs/firmware.md, "RAM budget"): about 150 KB free assumed, 50 KB kept free.
PICOW_HEAP = 100 * KB
HEAPS = {"esp32": ESP32_HEAP, "picow": PICOW_HEAP}


def unix_available() -> str | None:
    """None if the unix-port interpreter can run here, else the reason it cannot."""
    if BINARY.is_file() and MARKER.is_file():
        return None
    if not (SOURCE / "ports" / "unix" / "Makefile").is_file():
        return f"MicroPython {VERSION} sources not found at {SOURCE} (../shared/micropython-{VERSION}; set WATTBENCH_MICROPYTHON_SRC)"
    return f"MicroPython {VERSION} unix port not built at {BINARY}: run scripts/provision.sh"


def interpreter() -> Path:
    reason = unix_available()
    if reason:
        raise ServiceUnavailable(reason)
    return BINARY


def board_config(
    profile: str,
    dev: str,
    broker_port: int,
    flash_dir: Path,
    channels: int = 1,
    hz: float = 10.0,
    ntp: dict[str, Any] | None = None,
    **sim: Any,
) -> dict[str, Any]:
    """A board configuration (`profile`'s buffers and batches) whose channels are simulated meters,
    named as host mode names them (sim, or sim1..simN)."""
    names = ["sim"] if channels == 1 else [f"sim{i + 1}" for i in range(channels)]
    opts = {"model": "sine", "watts": 150.0, "amp": 50.0, "period_s": 60.0}
    opts.update(sim)
    return {
        "dev": dev,
        "board": profile,
        "wifi": {"ssid": "loopback"},
        "broker": {"host": "127.0.0.1", "port": broker_port, "keepalive": 10},
        "ntp": {"host": "127.0.0.1", **(ntp or {})},
        "flash_dir": str(flash_dir),
        "backoff": {"min_ms": 250, "max_ms": 4000},
        "status_s": 5,
        "channels": [
            {
                "c": name,
                "meter": "sim",
                "hz": hz,
                "role": "power",
                "node": "node1",
                "opts": {**opts, "seed": i},
            }
            for i, name in enumerate(names)
        ],
    }


class UnixAppliance(Process):
    """The appliance as its own process under the unix port: start() boots it (again, with the same
    flash directory: a reboot), kill() is a power cut, stop() lets it drain and stop cleanly."""

    def __init__(
        self,
        workdir: Path,
        lib: Path,
        config: dict[str, Any],
        heapsize: int,
        count: int | None = None,
        report_s: float = 0.5,
        collect: bool = False,
    ) -> None:
        super().__init__(f"upy-{config['dev']}", workdir)
        from .memory_rig import board_profile

        self.binary = interpreter()
        self.config = config
        self.dev = config["dev"]
        self.heapsize = heapsize
        self.lib = lib
        self.count = count
        self.report_s = report_s
        self.collect = collect
        self.config_path = workdir / f"{self.dev}.json"
        self.config_path.write_text(json.dumps(config))
        self.board_path = workdir / f"{self.dev}-board.json"
        self.board_path.write_text(json.dumps(board_profile(config["board"])))
        self.stop_file = workdir / f"{self.dev}.stop"
        self.truths: list[Path] = []
        self._log_start = 0

    def start(self) -> UnixAppliance:
        self.stop_file.unlink(missing_ok=True)
        truth = self.workdir / f"{self.dev}-truth{len(self.truths) + 1}.csv"
        self.truths.append(truth)
        job = {
            "config": str(self.config_path),
            "board": str(self.board_path),
            "truth": str(truth),
            "count": self.count,
            "report_s": self.report_s,
            "stop_file": str(self.stop_file),
            "collect": self.collect,
        }
        job_path = self.workdir / f"{self.dev}-job.json"
        job_path.write_text(json.dumps(job))
        self._log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        argv = [str(self.binary), "-X", f"heapsize={self.heapsize}", "-m", "unix_run", str(job_path)]
        self._spawn(argv, env={**os.environ, "MICROPYPATH": str(self.lib)})
        return self

    def output(self) -> list[str]:
        """This start's lines."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._log_start)
                return f.read().decode(errors="replace").splitlines()
        except OSError:
            return []

    def _last(self, what: str) -> dict[str, Any] | None:
        for line in reversed(self.output()):
            if line.startswith(what + " "):
                try:
                    return dict(json.loads(line[len(what) + 1 :]))
                except ValueError:  # a line cut short by a SIGKILL
                    continue
        return None

    def counters(self) -> dict[str, Any] | None:
        """The last COUNTERS line of this start."""
        return self._last("COUNTERS")

    def wait_for(self, what: str, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            doc = self._last(what)
            if doc is not None:
                return doc
            if not self.running:
                break
            time.sleep(0.05)
        raise AssertionError(f"{self.name}: no {what} line\n{self.log_tail()}")

    def wait_counters(self, predicate: Any, timeout: float, what: str = "") -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            c = self.counters()
            if c is not None and predicate(c):
                return c
            if not self.running:
                break
            time.sleep(0.1)
        raise AssertionError(
            f"{self.name}: {what or 'condition'} not reached: {self.counters()}\n{self.log_tail()}"
        )

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> None:
        """Stop sampling, drain to the broker, stop cleanly; a signal only if that takes too long."""
        if self.running and sig == signal.SIGTERM:
            self.stop_file.write_text("stop\n")
            assert self.proc is not None
            try:
                self.proc.wait(timeout)
                return
            except Exception:
                pass
        super().stop(sig, 5.0)

    def exit_code(self) -> int | None:
        return None if self.proc is None else self.proc.poll()


def compile_lib(dest: Path) -> Path:
    """The firmware compiled as `wattbench flash` deploys it (wattbench_fw/ as .mpy files) with the
    port shim beside it, compiled the same way: dest is the interpreter's MICROPYPATH."""
    from .memory_rig import compile_firmware, mpy_cross

    compile_firmware(dest)
    for src in SHIM.glob("*.py"):
        mpy_cross(src, dest / (src.stem + ".mpy"))
    return dest
