"""Where this machine's CPU time goes while a run is measured: all of it busy, the share a hypervisor
gave to other guests (steal), and this process tree's own. The demo judges from them whether other
processes take cores from its workers, and names the steal in its verdict."""

from __future__ import annotations

import time


def machine_busy_s() -> float:
    """CPU seconds the whole machine has spent busy since boot, all cores together."""
    import psutil  # late: start-up

    t = psutil.cpu_times()._asdict()
    # guest time is already in user and nice; iowait is a core idle while a disk works.
    return sum(v for k, v in t.items() if k not in ("idle", "iowait", "guest", "guest_nice"))


def steal_s() -> float:
    """CPU seconds a hypervisor has given this virtual machine's cores to others since boot (0 where
    the system does not count it)."""
    import psutil  # late: start-up

    return float(psutil.cpu_times()._asdict().get("steal", 0.0))


def tree_cpu_s() -> float:
    """CPU seconds used by this process and its children, those already ended included."""
    import psutil  # late: start-up

    me = psutil.Process()
    total = 0.0
    for p in (me, *me.children(recursive=True)):
        try:
            t = p.cpu_times()
        except psutil.Error:  # a child that ended in between: its time moves to its parent's children_*
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def other_cpu_use(window_s: float) -> float:
    """How many cores processes other than this one and its children kept busy over the next window_s
    seconds: the machine's busy CPU time less this process tree's. A 1-minute load average still
    carries a run that ended a minute ago (a demo just after another read as a busy machine) and counts
    this process's own broker, collector and appliance; CPU time over the window counts what the others
    do now, a process that starts or ends inside it included."""

    m0, o0, t0 = machine_busy_s(), tree_cpu_s(), time.monotonic()
    time.sleep(window_s)
    m1, o1, t1 = machine_busy_s(), tree_cpu_s(), time.monotonic()
    return max(0.0, ((m1 - m0) - (o1 - o0)) / max(t1 - t0, 1e-3))
