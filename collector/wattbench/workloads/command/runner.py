"""Run any command as the sweep's workload.

The command line is a template with placeholders filled in per phase:

    {load}      target load in percent (100 while calibrating, 0 at idle)
    {target}    target load as a fraction
    {rate}      target arrival rate in ops/s (0 while calibrating: run flat out)
    {level}     phase name: cal1, l100 ... l10, idle, c4
    {duration}  seconds the command is expected to run
    {copy} {copies}   in concurrency mode: this copy's number and the copy count

How ops come back (report):
- "stream" (default): the command runs through the whole interval (ramp, window, ramp; {duration} is
  all three) and prints its cumulative op count as it goes, one number per line ("ops=1234", "ops: 1234"
  or a bare "1234"); the driver reads the count at both window edges. With ops_file the count is read
  from that file instead, rewritten by the command.
- "total": the command runs only for the measurement window ({duration} = the window) and reports its
  total once, at exit; the window lasts as long as the command does.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import threading
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from ...core.plan import Phase, Timing
from ..base import UNIT_PATTERN, SettingError, WorkloadDefaults, WorkloadError, check_keys, setting

log = logging.getLogger(__name__)

DEFAULT_PATTERN = r"^\s*(?:ops\s*[=:]\s*)?([0-9]+(?:\.[0-9]+)?)\s*$"
# A line that says it is the op count ("ops=", "ops:"): when the pattern does not read it, the count is
# no number of ops (negative, nan, an exponent, a unit), and skipping it would count the level as 0.
CLAIM = re.compile(r"^\s*ops\s*[=:]", re.IGNORECASE)
PLACEHOLDERS = ("load", "target", "rate", "level", "duration", "copy", "copies")


def fill(template: str, shell: bool, **values: Any) -> list[str] | str:
    """The command line for one phase. Without a shell, the template is split first and each word filled
    in, so a value can never become extra arguments."""
    fmt = {k: _text(v) for k, v in values.items()}
    try:
        if shell:
            return template.format(**{k: shlex.quote(v) for k, v in fmt.items()})
        return [word.format(**fmt) for word in shlex.split(template)]
    except (KeyError, IndexError) as exc:
        raise WorkloadError(
            f"unknown placeholder {exc} in {template!r}; known: {', '.join(PLACEHOLDERS)}"
        ) from None
    except ValueError as exc:
        raise WorkloadError(f"bad command template {template!r}: {exc}") from None


def _text(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}" if not v.is_integer() else str(int(v))
    return str(v)


def read_ops_text(text: str, pattern: re.Pattern[str]) -> float | None:
    """The last op count in a text (a result file, or everything a command printed)."""
    stripped = text.strip()
    if stripped.startswith("{"):
        with contextlib.suppress(ValueError):
            doc = json.loads(stripped)
            if isinstance(doc, dict) and isinstance(doc.get("ops"), int | float):
                return float(doc["ops"])
    found = None
    for line in text.splitlines():
        m = pattern.search(line)
        if m:
            found = float(m.group(1))
    return found


def require_program(template: str, shell: bool, cwd: str | None) -> None:
    """A WorkloadError if the template's program cannot be started, resolved as the shell would resolve
    it (a name is looked up on PATH, a word with a slash is a path from cwd). A shell command line is
    the shell's to resolve and is not checked. The pre-flight of every workload that runs a template."""
    reason = _program_problem(template, shell, cwd)
    if reason:
        raise WorkloadError(reason)


def _program_problem(template: str, shell: bool, cwd: str | None) -> str | None:
    if cwd is not None and not Path(cwd).is_dir():
        return f"its folder (cwd = {cwd!r}) does not exist"
    if shell:
        return None
    argv = fill(template, False, **dict.fromkeys(PLACEHOLDERS, 1))
    prog = argv[0] if isinstance(argv, list) and argv else ""
    if not prog:
        return "the command line is empty"
    if "/" not in prog:
        return None if shutil.which(prog) else f"cannot start {prog!r}: no such program on PATH"
    path = Path(cwd or ".") / prog
    if not path.exists():
        return f"cannot start {prog!r}: no such file"
    if path.is_dir():
        return f"cannot start {prog!r}: a folder, not a program"
    if not os.access(path, os.X_OK):
        return f"cannot start {prog!r}: not executable"
    return None


class CommandProcess:
    """One running command, with its stdout parsed for op counts and its stderr kept for errors."""

    def __init__(
        self, argv: list[str] | str, shell: bool, pattern: re.Pattern[str], increment: bool, cwd: str | None
    ) -> None:
        self.pattern = pattern
        self.increment = increment
        self.ops = 0.0
        self.seen = False
        self.bad: str | None = None  # the first line that claims to be the count and is none
        # The first fall of a running total (before, after): a program printing per-interval counts.
        self.fell: tuple[float, float] | None = None
        self.stderr_tail: deque[str] = deque(maxlen=20)
        # Everything printed, for a parser of the whole output (a tool's closing report); bounded, as a
        # chatty command must not fill the driver's memory.
        self.output: deque[str] = deque(maxlen=20_000)
        self._lock = threading.Lock()
        try:
            self.proc = subprocess.Popen(
                argv,
                shell=shell,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                bufsize=1,
                start_new_session=True,  # Ctrl-C goes to the driver, which stops the command itself
            )
        except OSError as exc:
            raise WorkloadError(f"cannot start {argv!r}: {exc.strerror or exc}") from None
        self._threads = [
            threading.Thread(target=self._read_out, args=(self.proc.stdout,), daemon=True),
            threading.Thread(target=self._read_err, args=(self.proc.stderr,), daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _read_out(self, stream: IO[str]) -> None:
        for line in stream:
            self.output.append(line)
            m = self.pattern.search(line)
            if not m:
                # Only the documented forms claim to be the count; a pattern of the user's own decides.
                if self.bad is None and self.pattern.pattern == DEFAULT_PATTERN and CLAIM.match(line):
                    self.bad = line.strip()
                continue
            value = float(m.group(1))
            with self._lock:
                if not self.increment and self.seen and value < self.ops and self.fell is None:
                    self.fell = (self.ops, value)
                self.ops = self.ops + value if self.increment else value
                self.seen = True

    def _read_err(self, stream: IO[str]) -> None:
        for line in stream:
            self.stderr_tail.append(line.rstrip())

    def count(self) -> float:
        with self._lock:
            return self.ops

    @property
    def running(self) -> bool:
        return self.proc.poll() is None

    def wait_output(self, timeout: float = 5.0) -> None:
        """After exit, let the readers drain what the command printed last."""
        for t in self._threads:
            t.join(timeout)

    def stop(self, grace: float = 5.0) -> int | None:
        if self.running:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        self.wait_output(2)
        return self.proc.returncode

    def describe_failure(self) -> str:
        tail = " | ".join(list(self.stderr_tail)[-3:])
        return f"exit code {self.proc.returncode}" + (f": {tail}" if tail else "")


# In total mode a command told to run for the window needs a moment more to start and print its
# report, and one stopped before its report has nothing to count.
REPORT_OVERRUN_S = 5.0
# A program that needs longer than this to stop after SIGTERM is hung; the grace is a wait at every
# level's end, so a typo in it (minutes for seconds) would stretch the whole run.
MAX_STOP_GRACE_S = 600.0


class CommandWorkload(WorkloadDefaults):
    """A command per phase (see the module docstring)."""

    name = "command"
    calibrates = True
    overrun_s = 0.0
    ops_unit = "ops"

    def __init__(
        self,
        run: str,
        report: str = "stream",
        shell: bool = False,
        ops_file: str | None = None,
        ops_pattern: str = DEFAULT_PATTERN,
        increment: bool = False,
        cwd: str | None = None,
        stop_grace_s: float = 5.0,
        parse: Callable[[str], float] | None = None,
        unit: str | None = None,
    ) -> None:
        """parse, with report "total": reads the op count from everything the command printed (a
        tool's closing report, such as fio's JSON) and raises WorkloadError when it is not there."""
        if not run or not run.strip():
            raise WorkloadError("the command workload needs a command (run = ...)")
        if report not in ("stream", "total"):
            raise SettingError("report", f"{report!r}: use 'stream' or 'total'")
        if unit is not None:
            if not re.fullmatch(UNIT_PATTERN, unit):
                raise WorkloadError(f"unit {unit!r}: 1 to 32 letters, digits, spaces, '_', '.' or '-'")
            self.ops_unit = unit
        self.template = run
        self.report = report
        self.window = "fixed" if report == "stream" else "until_done"
        self.overrun_s = 0.0 if report == "stream" else REPORT_OVERRUN_S
        self.shell = shell
        self.ops_file = ops_file
        try:
            self.pattern = re.compile(ops_pattern, re.IGNORECASE)
        except re.error as exc:
            raise WorkloadError(f"bad ops_pattern: {exc}") from None
        if self.pattern.groups < 1:
            raise WorkloadError("ops_pattern needs one group capturing the number")
        self.increment = increment
        self.parse = parse
        self.cwd = cwd
        if not (math.isfinite(stop_grace_s) and 0 <= stop_grace_s <= MAX_STOP_GRACE_S):
            raise SettingError(
                "stop_grace_s", f"must be 0 to {MAX_STOP_GRACE_S:g} seconds, not {stop_grace_s:g}"
            )
        self.stop_grace_s = stop_grace_s
        self._proc: CommandProcess | None = None
        self._phase: Phase | None = None
        self._rate: float | None = None
        self._mark = 0.0
        self._done_before = 0.0  # ops of finished phases, for the live rate
        self._stopping = False
        # Placeholders are checked once up front so a typo fails before the first phase, not an hour in.
        try:
            fill(self.template, self.shell, **dict.fromkeys(PLACEHOLDERS, 1))
        except WorkloadError as exc:
            raise SettingError("run", str(exc)) from None

    SETTINGS = (
        "run",
        "report",
        "shell",
        "ops_file",
        "ops_pattern",
        "increment",
        "cwd",
        "stop_grace_s",
        "unit",
    )

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> CommandWorkload:
        check_keys(cls.name, config, cls.SETTINGS, required=("run",))
        text, flag, number = (str,), (bool,), (float,)
        kinds = {"run": text, "report": text, "shell": flag, "ops_file": text, "ops_pattern": text}
        kinds.update(increment=flag, cwd=text, stop_grace_s=number, unit=text)
        given = {key: setting(cls.name, config, key, kinds[key], None) for key in config}
        return cls(**given)

    # -- helpers
    def _values(self, phase: Phase, rate: float | None, duration: float) -> dict[str, Any]:
        target = 1.0 if rate is None else (phase.target or 0.0)
        return {
            "load": round(target * 100, 6),
            "target": target,
            "rate": 0 if rate is None else round(rate, 6),
            "level": phase.name,
            "duration": round(duration, 3),
            "copy": 1,
            "copies": 1,
        }

    def _launch(self, phase: Phase, rate: float | None, duration: float) -> None:
        values = self._values(phase, rate, duration)
        argv = fill(self.template, self.shell, **values)
        log.info("phase %s: %s", phase.name, argv)
        path = self._ops_file_path(values)
        if path is not None:
            with contextlib.suppress(OSError):
                path.unlink()  # a count left from an earlier run must not be read as this one's
        self._stopping = False
        self._proc = CommandProcess(argv, self.shell, self.pattern, self.increment, self.cwd)

    def command_line(self) -> str | None:
        return self.template

    def failure(self) -> str | None:
        """Why this phase's command failed, once it has exited non-zero on its own (a command stopped
        by us at the window's end has not failed)."""
        p = self._proc
        if p is None or self._stopping or p.running or not p.proc.returncode:
            return None
        p.wait_output(1)
        tail = " | ".join(list(p.stderr_tail)[-3:])
        return f"the command exited with status {p.proc.returncode}" + (f": {tail}" if tail else "")

    def _ops_file_path(self, values: dict[str, Any] | None = None) -> Path | None:
        if not self.ops_file or self._phase is None:
            return None
        values = values or self._values(self._phase, self._rate, 0)
        try:
            return Path(self.ops_file.format(**{k: _text(v) for k, v in values.items()}))
        except (KeyError, IndexError, ValueError) as exc:
            raise WorkloadError(f"bad ops_file template {self.ops_file!r}: {exc}") from None

    def _current(self) -> float:
        """The command's cumulative count right now."""
        path = self._ops_file_path()
        if path is not None:
            try:
                value = read_ops_text(path.read_text(), self.pattern)
            except OSError:
                value = None
            return value or 0.0
        return self._proc.count() if self._proc else 0.0

    # -- Workload protocol
    def preflight(self) -> None:
        require_program(self.template, self.shell, self.cwd)
        if self.ops_file:
            # filled as at a phase's start: a name it does not know would otherwise end the run in cal1
            values = self._values(Phase("cal1", "calibration", Timing()), None, 0)
            try:
                first = Path(self.ops_file.format(**{k: _text(v) for k, v in values.items()}))
            except (KeyError, IndexError, ValueError) as exc:
                raise SettingError("ops_file", f"bad template {self.ops_file!r}: {exc}") from None
            # The sweep reads the file the command writes; a folder that is not there would show as
            # a calibration with no ops, after the run has been announced and stored.
            if first.is_dir():
                raise SettingError("ops_file", f"{first} is a folder, not a file")
            folder = first.parent
            if not folder.is_dir():
                raise SettingError("ops_file", f"folder {str(folder)!r} does not exist")

    def open(self) -> None:
        # Also here for whoever drives the workload without the sweep's pre-flight.
        self.preflight()

    def start_phase(self, phase: Phase, rate: float | None) -> None:
        self._phase = phase
        self._rate = rate
        if self.report == "stream" and not (rate is not None and rate <= 0):
            self._launch(phase, rate, phase.timing.interval_s)

    def start_measure(self) -> None:
        if self.report == "total":
            if self._phase is None:
                raise WorkloadError("start_measure before start_phase")
            if self._rate is not None and self._rate <= 0:
                self._proc = None  # idle: nothing runs
            else:
                self._launch(self._phase, self._rate, self._phase.timing.measure_s)
            self._mark = 0.0
        else:
            self._mark = self._current()

    def measure_done(self) -> bool:
        if self.report != "total":
            return False
        return self._proc is None or not self._proc.running

    def _check_count(self, phase: str) -> None:
        """A line that claims to be the op count and is none fails the level: its count is not known."""
        bad = self._proc.bad if self._proc is not None else None
        if bad is not None:
            raise WorkloadError(
                f"phase {phase}: the command printed {bad!r}, which is no op count "
                "(ops=N with N a whole or decimal number of ops, at least 0)"
            )
        fell = self._proc.fell if self._proc is not None else None
        if fell is not None:
            raise WorkloadError(
                f"phase {phase}: the command's running total went down (ops {fell[0]:g}, then {fell[1]:g}): "
                "if it prints the ops of each interval, set increment = true in its workload file (--workload-config)"
            )

    def end_measure(self) -> int:
        phase = self._phase.name if self._phase is not None else "?"
        if self.report == "total":
            if self._proc is None:
                return 0
            if self._proc.running:
                log.warning("phase %s: command still running at the window's end; stopping it", phase)
                self._stopping = True
                self._proc.stop(self.stop_grace_s)
            self._proc.wait_output()
            # A failed command's count is not the level's throughput: the level cannot be scored.
            reason = self.failure()
            if reason:
                raise WorkloadError(reason)
            self._check_count(phase)
            if self.parse is not None:
                if self._stopping:
                    raise WorkloadError(
                        f"phase {phase}: the command outlasted its window and was stopped, "
                        "so it printed no report to count"
                    )
                ops = self.parse("".join(self._proc.output))
            else:
                ops = self._current()
            self._done_before += ops
            return max(0, round(ops))
        reason = self.failure()
        if reason:
            raise WorkloadError(reason)
        self._check_count(phase)
        return max(0, round(self._current() - self._mark))

    def end_phase(self) -> None:
        if self._proc is not None:
            self._stopping = True
            if self.report == "stream":
                self._done_before += self._current()
            self._proc.stop(self.stop_grace_s)
            self._proc = None

    def completed(self) -> int:
        live = self._current() if (self._proc is not None and self.report == "stream") else 0.0
        return round(self._done_before + live)

    def close(self) -> None:
        if self._proc is not None:
            self._stopping = True
            self._proc.stop(self.stop_grace_s)
            self._proc = None
