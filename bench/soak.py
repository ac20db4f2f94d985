"""Soak: many host-mode appliances through one collector into a real InfluxDB for a long time.

    python bench/soak.py                      # 50 appliances x 4 channels x 10 Hz for 10 minutes
    python bench/soak.py --duration 120       # a shorter look
    python bench/soak.py --duration 120 --rounds 3   # both profiles three times, alternating
    python bench/soak.py --appliances 256 --collectors 2 --duration 120   # a cluster's nodes, two collectors

With --collectors N, N collectors split the stream in one MQTT 5 shared-subscription group; the
memory figures are then the largest collector's and the CPU is theirs together.

Prints the collector's memory growth and CPU, end-to-end latency (sample timestamp to the moment the
sample is visible in InfluxDB) at p50/p99, and loss counted by sequence number against what every
appliance says it produced. Real Mosquitto and InfluxDB are started on free loopback ports
(scripts/provision.sh installs them). The appliances run the real firmware in a few worker
processes, ten per process, so that their Python threads do not share one interpreter lock.

The collector's CPU share moves with the machine's load, which drifts over minutes, so the ratio of
the two profiles' CPU is best read from --rounds N: the profiles run N times in alternating order and
the median of the per-round ratios is printed.

Latency is measured on a subset of probe devices (the first --probes appliances), by polling InfluxDB
for rows newer than the last poll; its resolution is the poll interval.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

try:
    from wattbench_devkit import services
    from wattbench_devkit.benchrun import run_main, start_on
except ImportError as exc:  # a hint on one line, not a traceback
    print(
        f"soak: {exc}. Install the development kit (in the checkout): python -m pip install -e . -e ./devkit",
        file=sys.stderr,
    )
    sys.exit(2)


# What each profile changes: the appliance's batch interval and the collector's command-line options.
# The low-latency profile is documented in docs/collector.md ("Latency").
PROFILES: dict[str, dict[str, Any]] = {
    "default": {"batch_ms": 1000, "collect": []},
    "low-latency": {"batch_ms": 100, "collect": ["--profile", "low-latency"]},
}


def run_group(args: argparse.Namespace) -> int:
    """Worker mode: run some appliances until SIGTERM, then drain and print their counters as JSON."""
    from wattbench_fw.host import HostAppliance, sim_config

    stop = False

    def on_term(*_: Any) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    apps = []
    for dev in args.group.split(","):
        cfg = sim_config(
            dev=dev,
            broker=args.broker,
            channels=args.channels,
            hz=args.hz,
            model="sine",
            spool_dir=Path(args.work) / dev,
            status_s=30,
            batch_ms=args.batch_ms,
        )
        apps.append(HostAppliance(cfg).start())
    while not stop:
        time.sleep(0.2)
    for app in apps:
        app.stop(timeout=60, drain=True)
    print(json.dumps({app.dev: app.counters() for app in apps}, default=str))
    return 0


def influx_rows(url: str, db: str, q: str) -> list[list[Any]]:
    body = urllib.parse.urlencode({"q": q, "db": db, "epoch": "ms"}).encode()
    with urllib.request.urlopen(urllib.request.Request(f"{url}/query", data=body), timeout=30) as r:
        out = json.loads(r.read())
    rows = []
    for result in out.get("results", []):
        for series in result.get("series", []):
            tags = series.get("tags", {})
            for values in series.get("values", []):
                rows.append([tags, *values])
    return rows


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(q * (len(s) - 1) + 0.5))]


def soak(args: argparse.Namespace, profile: str) -> dict[str, Any]:
    """One soak of args.duration seconds with the given profile; its figures."""
    # Broker, InfluxDB, collectors and appliance groups are stopped on any way out, Ctrl-C included.
    with contextlib.ExitStack() as started:
        return _soak(args, profile, started)


def _soak(args: argparse.Namespace, profile: str, started: contextlib.ExitStack) -> dict[str, Any]:
    import psutil

    prof = PROFILES[profile]
    work = Path(tempfile.mkdtemp(prefix=f"wattbench-soak-{profile}-"))
    broker = start_on(started, services.Mosquitto(work / "mosquitto"))
    influx = start_on(started, services.InfluxDB(work / "influx"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    collectors: list[subprocess.Popen[bytes]] = []
    for k in range(args.collectors):
        share = ["--share", args.share] if args.collectors > 1 else []
        with open(work / f"collector{k}.log", "wb") as col_log:
            collectors.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "wattbench.cli",
                        "collect",
                        "--broker",
                        broker.url,
                        "--influx",
                        influx.url,
                        "--id",
                        f"soak{k}",
                        "--state-dir",
                        str(work / f"collector{k}"),
                        "--spool",
                        str(work / f"spool{k}"),
                        *share,
                        *prof["collect"],
                    ],
                    stdout=col_log,
                    stderr=subprocess.STDOUT,
                    env=env,
                )
            )
            started.callback(services.stop_process, collectors[-1], timeout=120)
    cprocs = [psutil.Process(c.pid) for c in collectors]
    devs = [f"soak-{i:03d}" for i in range(args.appliances)]
    groups = [devs[i : i + args.per_process] for i in range(0, len(devs), args.per_process)]
    time.sleep(3.0)
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--group",
                ",".join(g),
                "--broker",
                broker.url,
                "--work",
                str(work / "dev"),
                "--channels",
                str(args.channels),
                "--hz",
                str(args.hz),
                "--batch-ms",
                str(prof["batch_ms"]),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            text=True,
        )
        for g in groups
    ]
    for w in workers:
        started.callback(services.stop_process, w, timeout=60)
    rate = args.appliances * args.channels * args.hz
    print(
        f"soak [{profile}]: {args.appliances} appliances x {args.channels} channels x {args.hz:g} Hz = "
        f"{rate:.0f} samples/s for {args.duration:.0f} s, appliance batches of {prof['batch_ms']} ms; "
        f"work dir {work}",
        flush=True,
    )

    probes = devs[: args.probes]
    probe_rx = "|".join(probes)
    cursor = int(time.time() * 1000) - 1000
    seen: set[tuple[str, str, int]] = set()
    latencies: list[float] = []
    rss: list[tuple[float, int]] = []  # the largest collector's RSS at each look
    cpu0 = sum(services.tree_cpu_s(c.pid) for c in cprocs)
    t_start = time.monotonic()
    next_mem = t_start
    asked_ms = time.time() * 1000
    gaps: list[float] = []
    while time.monotonic() - t_start < args.duration:
        time.sleep(args.poll)
        # A row first seen now became visible after the previous query started and before this one
        # did: its latency is counted at the middle of that span, which is the resolution.
        before_ms, asked_ms = asked_ms, time.time() * 1000
        gaps.append(asked_ms - before_ms)
        rows = influx_rows(
            influx.url,
            influx.db,
            f'SELECT "s" FROM wb_sample WHERE time > {cursor - 5000}ms AND dev =~ /^({probe_rx})$/ '
            'GROUP BY "dev","ch"',
        )
        newest = cursor
        for tags, t, _s in rows:
            key = (tags["dev"], tags["ch"], t)
            if key not in seen:
                seen.add(key)
                latencies.append((before_ms + asked_ms) / 2 - t)
            newest = max(newest, t)
        cursor = newest
        if len(seen) > 200_000:
            seen = {k for k in seen if k[2] > cursor - 10_000}
        if time.monotonic() >= next_mem:
            rss.append((time.monotonic() - t_start, max(c.memory_info().rss for c in cprocs)))
            next_mem += 5.0
    wall = time.monotonic() - t_start
    cpu1 = sum(services.tree_cpu_s(c.pid) for c in cprocs)

    for w in workers:
        w.send_signal(signal.SIGTERM)
    produced: dict[str, dict[str, Any]] = {}
    for w in workers:
        out, _ = w.communicate(timeout=180)
        produced.update(json.loads(out.strip().splitlines()[-1]))
    # let the collector store the tail, then count by sequence number
    expected = {d: int(c["samples"]) for d, c in produced.items()}
    deadline = time.monotonic() + 120
    stored: dict[str, tuple[int, int]] = {}
    while time.monotonic() < deadline:
        stored = {
            tags["dev"]: (int(cnt), int(distinct))
            for tags, _t, cnt, distinct in influx_rows(
                influx.url, influx.db, 'SELECT count("s"), count(distinct("s")) FROM wb_sample GROUP BY "dev"'
            )
        }
        if all(stored.get(d, (0, 0))[1] >= n for d, n in expected.items()):
            break
        time.sleep(2)
    # The collectors, InfluxDB and the broker are stopped on the way out (soak()).

    sent = sum(expected.values())
    distinct = sum(stored.get(d, (0, 0))[1] for d in expected)
    rows_total = sum(stored.get(d, (0, 0))[0] for d in expected)
    dropped = sum(int(c.get("dropped", 0)) for c in produced.values())
    warm = [r for t, r in rss if t >= 30.0] or [r for _, r in rss]
    return {
        "profile": profile,
        "appliances": args.appliances,
        "collectors": args.collectors,
        "channels": args.channels,
        "hz": args.hz,
        "appliance_batch_ms": prof["batch_ms"],
        "duration_s": round(wall, 1),
        "samples_sent": sent,
        "samples_stored": distinct,
        "lost": sent - distinct,
        "duplicated": rows_total - distinct,
        "dropped_on_devices": dropped,
        "collector_cpu_percent": round(100 * (cpu1 - cpu0) / wall, 1),
        "collector_rss_mb_after_warmup": round(warm[0] / 2**20, 1),
        "collector_rss_mb_end": round(warm[-1] / 2**20, 1),
        "collector_rss_growth_mb": round((warm[-1] - warm[0]) / 2**20, 1),
        "collector_rss_mb_max": round(max(r for _, r in rss) / 2**20, 1),
        "latency_samples": len(latencies),
        "latency_p50_ms": round(percentile(latencies, 0.50)),
        "latency_p99_ms": round(percentile(latencies, 0.99)),
        "latency_max_ms": round(max(latencies)) if latencies else None,
        "latency_resolution_ms": round(percentile(gaps, 0.50)),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def main() -> int:
    from wattbench.argtypes import number, whole
    from wattbench.cli.parser import Parser

    ap = Parser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--appliances", type=whole(at_least=1), default=50)
    ap.add_argument("--channels", type=whole(at_least=1, at_most=16), default=4)
    ap.add_argument("--hz", type=number(above=0, at_most=10000), default=10.0)
    ap.add_argument(
        "--duration", type=number(above=0), default=600.0, help="seconds of load per profile (default 600)"
    )
    ap.add_argument("--per-process", type=whole(at_least=1), default=10)
    ap.add_argument("--probes", type=whole(at_least=1), default=5, help="devices whose latency is measured")
    ap.add_argument(
        "--poll", type=number(above=0), default=0.05, help="latency poll interval, s (default 0.05)"
    )
    ap.add_argument(
        "--profiles",
        default="default,low-latency",
        help=f"comma-separated, run one after the other: {', '.join(PROFILES)} (default both)",
    )
    ap.add_argument(
        "--rounds",
        type=whole(at_least=1),
        default=1,
        help="run the profiles this many times, in alternating order; the CPU ratio is the median",
    )
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument(
        "--collectors",
        type=whole(at_least=1),
        default=1,
        help="collectors sharing the load in one MQTT 5 shared-subscription group",
    )
    ap.add_argument("--share", default="soak", help="the share group's name (with --collectors 2 or more)")
    ap.add_argument("--group", help=argparse.SUPPRESS)
    ap.add_argument("--broker", help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    ap.add_argument(
        "--batch-ms", type=whole(at_least=10, at_most=600000), default=1000, help=argparse.SUPPRESS
    )
    args = ap.parse_args()
    if args.group:
        return run_group(args)
    profiles = [p.strip() for p in args.profiles.split(",") if p.strip()]
    unknown = [p for p in profiles if p not in PROFILES]
    if args.rounds < 1 or args.duration <= 0:
        print("soak: --rounds must be 1 or more and --duration above 0", file=sys.stderr)
        return 2
    if unknown or not profiles:
        print(
            f"soak: unknown profile {', '.join(unknown) or '(none)'}; choose from {', '.join(PROFILES)}",
            file=sys.stderr,
        )
        return 2

    runs: list[dict[str, Any]] = []
    for r in range(args.rounds):
        # Alternate the order, so that neither profile always runs on the warmer (or busier) machine.
        for p in profiles if r % 2 == 0 else profiles[::-1]:
            runs.append({"round": r + 1, **soak(args, p)})
    runs.sort(key=lambda x: (x["round"], profiles.index(x["profile"])))
    table(runs)
    if len(profiles) == 2:
        a, b = profiles
        cpu = {p: [x["collector_cpu_percent"] for x in runs if x["profile"] == p] for p in profiles}
        ratios = [hi / lo for lo, hi in zip(cpu[a], cpu[b], strict=True) if lo]
        if ratios:
            per_round = ", ".join(f"{x:.2f}" for x in ratios)
            p99 = {p: max(x["latency_p99_ms"] for x in runs if x["profile"] == p) for p in profiles}
            print(
                f"\n{b}/{a}: collector CPU x{statistics.median(ratios):.2f}"
                + (f" (median of {len(ratios)} rounds: {per_round})" if len(ratios) > 1 else "")
                + f", latency p99 {p99[a]} -> {p99[b]} ms"
                + (" (the worst round of each)" if len(ratios) > 1 else "")
            )
    if args.json:
        args.json.write_text(json.dumps(runs if len(runs) > 1 else runs[0], indent=1) + "\n")
    return 0 if all(r["lost"] == 0 and r["duplicated"] == 0 for r in runs) else 1


def table(runs: list[dict[str, Any]]) -> None:
    """The figures side by side, a column per run."""
    rounds = len({x["round"] for x in runs}) > 1
    heads = [f"{x['profile']} r{x['round']}" if rounds else x["profile"] for x in runs]
    keys = [k for k in runs[0] if k not in ("profile", "round")]
    width = max(len(k) for k in keys)
    col = max(16, *(len(h) for h in heads))
    print()
    print(f"{'':<{width}}  " + "  ".join(f"{h:>{col}}" for h in heads))
    for k in keys:
        print(f"{k:<{width}}  " + "  ".join(f"{r[k]!s:>{col}}" for r in runs))


if __name__ == "__main__":
    run_main("soak", main)
