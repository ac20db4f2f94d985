"""Slurm's own commands, as the cluster sweep uses them: sinfo for the partition's nodes, sbatch to
submit, scontrol (or sacct, where accounting is enabled) for what became of each job, scancel to stop.

The parsers are pure functions over the commands' text, so they are tested on real output; `Slurm`
runs the commands. Every failure of a command becomes a SlurmError with its own words: a sweep that
cannot reach the controller stops before its first phase, not an hour in.
"""

from __future__ import annotations

import calendar
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

# Slurm's states for a job that will not change again; "COMPLETED" is the only successful one.
FINISHED = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
        "REVOKED",
    }
)


class SlurmError(RuntimeError):
    """A Slurm command failed or answered something this code cannot read."""


@dataclass(frozen=True)
class Node:
    name: str
    cpus: int
    state: str


@dataclass(frozen=True)
class JobRecord:
    """One job as Slurm accounted it. start and end are UTC seconds (Slurm's resolution is one second),
    None while unknown; nodes is the expanded node list."""

    id: str
    state: str
    exit_code: int | None = None
    nodes: tuple[str, ...] = ()
    start: float | None = None
    end: float | None = None
    ops: int | None = None  # what the job's tasks reported ("ops=N"), summed; None when they did not

    @property
    def finished(self) -> bool:
        return self.state.split()[0] in FINISHED

    @property
    def ok(self) -> bool:
        return self.state == "COMPLETED" and self.exit_code == 0

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"id": self.id, "state": self.state, "nodes": list(self.nodes)}
        if self.exit_code is not None:
            out["exit"] = self.exit_code
        if self.start is not None:
            out["start"] = int(self.start * 1000)
        if self.end is not None:
            out["end"] = int(self.end * 1000)
        if self.ops is not None:
            out["ops"] = self.ops
        return out


# ---------------------------------------------------------------------------- parsing (pure)


def parse_sinfo(text: str) -> list[Node]:
    """`sinfo -h -N -o '%N|%c|%t'`: one line per node and partition (a node in two partitions shows
    twice; the first line counts)."""
    nodes: dict[str, Node] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.strip().split("|")
        if len(parts) != 3 or not parts[1].isdigit():
            raise SlurmError(f"sinfo printed a line this code cannot read: {line.strip()[:120]!r}")
        name, cpus, st = parts
        nodes.setdefault(name, Node(name, int(cpus), st.rstrip("*~#!%$@^-")))
    return list(nodes.values())


def parse_fields(line: str) -> dict[str, str]:
    """`scontrol show job -o`: space-separated Key=Value pairs on one line. A value may contain spaces
    only in the last keys Slurm prints (Command, WorkDir, StdOut...), which this code never reads."""
    out: dict[str, str] = {}
    for word in line.split():
        key, eq, value = word.partition("=")
        if eq and key and key not in out:
            out[key] = value
    return out


def slurm_time(text: str | None, utc_offset_s: float = 0.0) -> float | None:
    """A Slurm timestamp (`2026-11-25T21:04:05`, in the controller's local time) as UTC seconds;
    None for Unknown, None or an empty field."""
    if not text or text in ("Unknown", "None", "N/A"):
        return None
    try:
        tm = time.strptime(text, "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        return None
    return calendar.timegm(tm) - utc_offset_s


def exit_code(text: str | None) -> int | None:
    """Slurm's ExitCode `status:signal`: the status, or 128 + the signal when a signal ended it."""
    if not text:
        return None
    status, _, sig = text.partition(":")
    if not status.isdigit():
        return None
    if sig.isdigit() and int(sig):
        return 128 + int(sig)
    return int(status)


def parse_scontrol_jobs(
    text: str, expand: Mapping[str, tuple[str, ...]] | None = None, utc_offset_s: float = 0.0
) -> dict[str, JobRecord]:
    """`scontrol show job -o` (one job per line). expand maps a compressed node list (`n[1-3]`) to its
    names; a list not in it is kept as one name."""
    jobs: dict[str, JobRecord] = {}
    for line in text.splitlines():
        f = parse_fields(line)
        if "JobId" not in f or "JobState" not in f:
            continue
        nodelist = f.get("NodeList", "")
        nodes = () if nodelist in ("", "(null)") else (expand or {}).get(nodelist, (nodelist,))
        jobs[f["JobId"]] = JobRecord(
            id=f["JobId"],
            state=f["JobState"],
            exit_code=exit_code(f.get("ExitCode")),
            nodes=tuple(nodes),
            start=slurm_time(f.get("StartTime"), utc_offset_s),
            end=slurm_time(f.get("EndTime"), utc_offset_s),
        )
    return jobs


_LABELLED = re.compile(r"^\s*(\d+):\s*(?:ops\s*[=:]\s*)?([0-9]+)\s*$", re.IGNORECASE)


def task_ops(text: str) -> int | None:
    """The ops a job's tasks reported, from its output with srun's task labels ("3: ops=1200"): each
    task's last count, summed. None when no task printed a count."""
    last: dict[str, int] = {}
    for line in text.splitlines():
        m = _LABELLED.match(line)
        if m:
            last[m.group(1)] = int(m.group(2))
    return sum(last.values()) if last else None


SACCT_FORMAT = "JobIDRaw,State,ExitCode,NodeList,Start,End"


def parse_sacct(
    text: str, expand: Mapping[str, tuple[str, ...]] | None = None, utc_offset_s: float = 0.0
) -> dict[str, JobRecord]:
    """`sacct -X -n -P -o JobIDRaw,State,ExitCode,NodeList,Start,End`: one allocation per line, fields
    separated by '|'. A cancelled job's state reads "CANCELLED by 0": the first word is the state."""
    jobs: dict[str, JobRecord] = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 6 or not parts[0]:
            continue
        jid, st, code, nodelist, start, end = parts[:6]
        nodes = () if nodelist in ("", "None assigned") else (expand or {}).get(nodelist, (nodelist,))
        jobs[jid] = JobRecord(
            id=jid,
            state=st.split()[0] if st else "UNKNOWN",
            exit_code=exit_code(code),
            nodes=tuple(nodes),
            start=slurm_time(start, utc_offset_s),
            end=slurm_time(end, utc_offset_s),
        )
    return jobs


def accounting_enabled(config_text: str) -> bool:
    """From `scontrol show config`: is a job accounting store configured (so sacct answers)?"""
    for line in config_text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "AccountingStorageType":
            return value.strip() not in ("", "accounting_storage/none", "(null)")
    return False


# ---------------------------------------------------------------------------- the commands


@dataclass
class Slurm:
    """Runs Slurm's client commands. env adds to the environment (SLURM_CONF for a cluster of one's
    own); timeout_s bounds every command, so a controller that hangs is an error, not a stuck sweep."""

    env: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = 30.0
    bin_dir: str | None = None

    def _run(self, argv: Sequence[str], check: bool = True) -> str:
        exe = shutil.which(argv[0], path=self.bin_dir) if self.bin_dir else shutil.which(argv[0])
        if exe is None:
            raise SlurmError(f"{argv[0]} not found: install Slurm's client commands (Debian: slurm-client)")
        try:
            done = subprocess.run(
                [exe, *argv[1:]],
                capture_output=True,
                text=True,
                timeout=self.timeout_s,
                env={**os.environ, **self.env},
            )
        except subprocess.TimeoutExpired:
            raise SlurmError(f"{argv[0]} did not answer within {self.timeout_s:g} s") from None
        if check and done.returncode != 0:
            said = (done.stderr or done.stdout).strip().splitlines()
            raise SlurmError(f"{argv[0]} failed: {said[-1] if said else f'exit {done.returncode}'}")
        return done.stdout

    def nodes(self, partition: str | None = None) -> list[Node]:
        argv = ["sinfo", "-h", "-N", "-o", "%N|%c|%t"]
        if partition:
            argv += ["-p", partition]
        found = parse_sinfo(self._run(argv))
        if not found:
            raise SlurmError(f"no nodes in partition {partition!r}" if partition else "Slurm lists no nodes")
        return found

    def accounting(self) -> bool:
        return accounting_enabled(self._run(["scontrol", "show", "config"]))

    def submit(self, args: Sequence[str]) -> str:
        out = self._run(["sbatch", "--parsable", *args]).strip()
        jid = out.split(";")[0]
        if not jid.isdigit():
            raise SlurmError(f"sbatch answered {out[:80]!r}, not a job id")
        return jid

    def expand(self, nodelists: Iterable[str]) -> dict[str, tuple[str, ...]]:
        """Each compressed node list as its names, by Slurm's own `scontrol show hostnames`."""
        out: dict[str, tuple[str, ...]] = {}
        for nl in set(nodelists):
            if not nl or nl in ("(null)", "None assigned"):
                continue
            if "[" not in nl and "," not in nl:
                out[nl] = (nl,)
                continue
            out[nl] = tuple(self._run(["scontrol", "show", "hostnames", nl]).split())
        return out

    def jobs(self, ids: Sequence[str], use_sacct: bool = False) -> dict[str, JobRecord]:
        """What became of the jobs: sacct where accounting is enabled, else scontrol (which knows a
        finished job for MinJobAge, 300 s by default)."""
        if not ids:
            return {}
        offset = _utc_offset()
        if use_sacct:
            text = self._run(["sacct", "-X", "-n", "-P", "-o", SACCT_FORMAT, "-j", ",".join(ids)])
            lists = [line.split("|")[3] for line in text.splitlines() if line.count("|") >= 5]
            return parse_sacct(text, self.expand(lists), offset)
        text = self._run(["scontrol", "show", "job", "-o", *([] if len(ids) > 1 else list(ids))], check=False)
        wanted = set(ids)
        lines = [ln for ln in text.splitlines() if parse_fields(ln).get("JobId") in wanted]
        lists = [parse_fields(ln).get("NodeList", "") for ln in lines]
        return parse_scontrol_jobs("\n".join(lines), self.expand(lists), offset)

    def queued(self, ids: Sequence[str]) -> list[str]:
        """The jobs among ids still pending or running (squeue)."""
        if not ids:
            return []
        text = self._run(["squeue", "-h", "-o", "%i|%T", "-j", ",".join(ids)], check=False)
        return [ln.split("|")[0] for ln in text.splitlines() if "|" in ln and ln.split("|")[0] in set(ids)]

    def cancel(self, ids: Sequence[str]) -> None:
        if ids:
            self._run(["scancel", *ids], check=False)


def _utc_offset() -> float:
    """The local time zone's offset from UTC now, in seconds (Slurm prints local time)."""
    now = time.time()
    return calendar.timegm(time.localtime(now)) - now
