"""A Slurm cluster on this machine for the cluster-sweep tests and benches: munged, slurmctld and one
slurmd per node name, all from Debian's packages (slurm-wlm 22.05, munge), started from a generated
slurm.conf in a temporary directory on free loopback ports.

Debian builds Slurm with --enable-multiple-slurmd, so each node name runs its own slurmd (`-N name`)
on its own port. The nodes share this machine's cores: each declares the CPUs it is given here, and
slurmd is told to trust the configuration (SlurmdParameters=config_overrides) rather than the
hardware. proctrack/linuxproc and task/none keep it free of cgroups. There is no accounting database
(slurmdbd): sacct does not answer, and job records come from scontrol, which keeps a finished job for
MinJobAge seconds.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from .services import Process, find_binary, free_port


class SlurmCluster:
    """slurmctld plus a slurmd for each of `nodes` (names), each declaring `cpus` CPUs, one partition
    `batch` with all of them. env is what a Slurm client command needs (SLURM_CONF)."""

    def __init__(self, workdir: Path, nodes: list[str], cpus: int = 2) -> None:
        # Missing packages show here (ServiceUnavailable), before anything starts.
        for name in ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel", "sinfo"):
            find_binary(name)
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.nodes = list(nodes)
        self.cpus = cpus
        self.host = socket.gethostname().split(".")[0]
        self.conf = workdir / "slurm.conf"
        # Unix sockets live in a short folder of their own: slurmstepd makes one per job step in the
        # spool (<spool>/<node>_<job>.<step>), munged its socket, and a socket's path may be at most 107
        # bytes. Under a parallel test run's basetemp (…/pytest-102/popen-gw2/<test name>0/slurm0/…)
        # the workdir alone came close, and every job then failed with "Unix socket name exceeded
        # maximum length".
        self.sockdir = Path(tempfile.mkdtemp(prefix="wbslurm-", dir="/tmp"))
        self.munge_dir = self.sockdir / "munge"
        self.socket = self.munge_dir / "munge.socket.2"
        self.ctld_port = free_port()
        self.node_ports = {n: free_port() for n in self.nodes}
        self.munged = Process("munged", workdir)
        self.ctld = Process("slurmctld", workdir)
        self.slurmds = {n: Process(f"slurmd-{n}", workdir) for n in self.nodes}
        self.env = {"SLURM_CONF": str(self.conf)}

    # ------------------------------------------------------------------ configuration
    def _write_conf(self) -> None:
        w = self.workdir
        lines = [
            "ClusterName=wattbench",
            f"SlurmctldHost={self.host}(127.0.0.1)",
            f"SlurmctldPort={self.ctld_port}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.socket}",
            f"StateSaveLocation={w / 'state'}",
            f"SlurmdSpoolDir={self.sockdir / 'spool'}/%n",
            f"SlurmctldPidFile={w / 'slurmctld.pid'}",
            f"SlurmdPidFile={self.sockdir / 'spool'}/slurmd-%n.pid",
            f"SlurmctldLogFile={w / 'slurmctld.log'}",
            f"SlurmdLogFile={w / 'slurmd'}-%n.log",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "MpiDefault=none",
            "SchedulerType=sched/backfill",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "SlurmdParameters=config_overrides",
            "ReturnToService=2",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "MinJobAge=600",
            "KillWait=5",
            "SlurmctldTimeout=30",
            "SlurmdTimeout=30",
            "InactiveLimit=0",
            "SchedulerParameters=sched_interval=1,batch_sched_delay=0",
        ]
        for n in self.nodes:
            lines.append(
                f"NodeName={n} NodeHostname={self.host} NodeAddr=127.0.0.1 Port={self.node_ports[n]} "
                f"CPUs={self.cpus} RealMemory=1000 State=UNKNOWN"
            )
        lines.append("PartitionName=batch Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
        self.conf.write_text("\n".join(lines) + "\n")
        (w / "state").mkdir(exist_ok=True)
        for n in self.nodes:
            (self.sockdir / "spool" / n).mkdir(parents=True, exist_ok=True)

    def _start_munge(self) -> None:
        self.munge_dir.mkdir(mode=0o700, exist_ok=True)
        key = self.munge_dir / "munge.key"
        if not key.exists():
            key.write_bytes(os.urandom(1024))
            key.chmod(0o400)
        self.munged._spawn(
            [
                find_binary("munged"),
                "--foreground",
                "--force",  # root may run it here: the key and socket are in a private folder
                f"--key-file={key}",
                f"--socket={self.socket}",
                f"--pid-file={self.munge_dir / 'munged.pid'}",
                f"--log-file={self.workdir / 'munge.log'}",
                f"--seed-file={self.munge_dir / 'munged.seed'}",
            ]
        )
        deadline = time.monotonic() + 15
        while not self.socket.exists():
            if time.monotonic() > deadline or not self.munged.running:
                raise RuntimeError(f"munged did not start: {self.munged.log_tail()}")
            time.sleep(0.05)

    # ------------------------------------------------------------------ life
    def start(self, timeout: float = 60.0) -> SlurmCluster:
        self._write_conf()
        self._start_munge()
        env = {**os.environ, **self.env}
        self.ctld._spawn([find_binary("slurmctld"), "-D", "-i", "-f", str(self.conf)], env=env)
        for n, proc in self.slurmds.items():
            proc._spawn([find_binary("slurmd"), "-D", "-N", n, "-f", str(self.conf)], env=env)
        deadline = time.monotonic() + timeout
        while True:
            idle = self.idle_nodes()
            if set(idle) >= set(self.nodes):
                return self
            dead = [p.name for p in (self.ctld, *self.slurmds.values()) if not p.running]
            if dead or time.monotonic() > deadline:
                tails = "\n".join(
                    f"--- {p.name}\n{p.log_tail(15)}" for p in (self.ctld, *self.slurmds.values())
                )
                self.stop()
                raise RuntimeError(f"Slurm did not come up (exited: {dead or 'none'}; idle: {idle})\n{tails}")
            time.sleep(0.3)

    def command(self, *argv: str, check: bool = True, timeout: float = 30.0) -> str:
        done = subprocess.run(
            [find_binary(argv[0]), *argv[1:]],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **self.env},
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip() or done.stdout.strip()}")
        return done.stdout

    def idle_nodes(self) -> list[str]:
        try:
            out = self.command("sinfo", "-h", "-N", "-o", "%N %t", check=False, timeout=10)
        except (subprocess.TimeoutExpired, OSError):
            return []
        return [ln.split()[0] for ln in out.splitlines() if len(ln.split()) == 2 and ln.split()[1] == "idle"]

    def queue(self) -> list[str]:
        """Every job id squeue lists (pending, running, completing)."""
        return self.command("squeue", "-h", "-o", "%i").split()

    def stop(self) -> None:
        for p in (*self.slurmds.values(), self.ctld, self.munged):
            p.stop()
        shutil.rmtree(self.sockdir, ignore_errors=True)

    def socket_paths(self) -> list[Path]:
        """The longest socket paths this cluster makes: munged's, and a job step's in each spool."""
        return [self.socket] + [self.sockdir / "spool" / n / f"{n}_4294967294.4294967294" for n in self.nodes]
