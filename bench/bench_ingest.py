"""Ingest rate: the wattbench collector against Telegraf, same stream, same broker, same InfluxDB.

The stream is simulated appliances' sample batches (contract-valid, 2 channels at 1 kHz per
appliance, 200 rows per batch). For each consumer in turn, and in alternating order over several
rounds:

1. the consumer starts once so that the broker holds its persistent session, and stops;
2. the whole stream is published to Mosquitto (deploy/mosquitto.conf), which queues it for the session;
3. the consumer starts again and drains the backlog into its own database of one InfluxDB 1.8.

The sustained rate is the samples stored between the first and the last poll of the database, over
that time; it excludes process start-up (also printed, as "from start"). Polls read InfluxDB's own
write counters, which cost it about 0.5 ms of CPU each; a count query at each poll would scan every
point stored so far on the same cores (about 0.07 s of CPU at 2 million points) and slow what it
measures. As the end nears, at the pace seen so far, the polls come closer (down to 20 ms apart), so
the end is seen within about 20 ms of when it comes rather than up to a whole --poll later.
The last poll is confirmed with a count, whose time and CPU are left out of the figures. Zero loss is checked for
both: per device, every sequence number stored exactly once. The collector runs as `wattbench
collect`, Telegraf with the shipped deploy/telegraf.conf.

    python bench/bench_ingest.py [--samples 1000000] [--rounds 3] [--devices 10]

Each round also measures the database's ceiling: the same points, formatted as the collector formats
them, written straight to InfluxDB as line protocol over as many connections as the collector uses,
at the collector's batch size and at other sizes (--ceiling-batches); the best is the ceiling.

--variant FILE (repeatable) adds a collector run with `--config FILE` to every round, beside the
default one, and prints its rate and CPU against the default's: a setting is judged side by side,
on the same stream and the same machine minutes, never against a figure from another run.

Needs the services of scripts/provision.sh. Prints the figures, the ratios collector/Telegraf and
collector/ceiling; exits 1 if any consumer or ceiling pass lost or duplicated anything.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

try:
    from wattbench_devkit import services
    from wattbench_devkit.benchrun import run_main, start_on
    from wattbench_devkit.streams import Publisher, Stream
except ImportError as exc:  # a hint on one line, not a traceback
    print(
        f"bench_ingest: {exc}. Install the development kit (in the checkout): python -m pip install -e . -e ./devkit",
        file=sys.stderr,
    )
    sys.exit(2)

REPO = Path(__file__).resolve().parent.parent


class CollectorRun:
    def __init__(
        self,
        work: Path,
        mosquitto: services.Mosquitto,
        influx: services.InfluxDB,
        db: str,
        cid: str,
        config: str | None = None,
    ) -> None:
        self.work = work
        self.log = work / f"{cid}.log"
        self.argv = [
            sys.executable,
            "-m",
            "wattbench.cli",
            "collect",
            "--broker",
            mosquitto.url,
            "--influx",
            influx.url,
            "--db",
            db,
            "--id",
            cid,
            "--state-dir",
            str(work / cid),
        ] + (["--config", config] if config else [])
        self.env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        offset = self.log.stat().st_size if self.log.exists() else 0
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, env=self.env)
        deadline = time.monotonic() + 60
        while "subscribed" not in self.log.read_text(errors="replace")[offset:]:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"collector did not start:\n{self.log.read_text()[-2000:]}")
            time.sleep(0.05)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self) -> None:
        if self.proc is not None:
            services.stop_process(self.proc, timeout=120)


class TelegrafRun:
    def __init__(
        self, work: Path, mosquitto: services.Mosquitto, influx: services.InfluxDB, db: str, cid: str
    ) -> None:
        env = services.telegraf_env(mosquitto, influx, db, cid)
        self.tg = services.Telegraf(work / cid, REPO / "deploy" / "telegraf.conf", env)

    def start(self) -> None:
        self.tg.start()
        deadline = time.monotonic() + 60
        while "Connected" not in self.tg.log_tail(200):
            if not self.tg.running or time.monotonic() > deadline:
                raise RuntimeError(f"telegraf did not connect:\n{self.tg.log_tail()}")
            time.sleep(0.05)

    @property
    def pid(self) -> int:
        assert self.tg.proc is not None
        return self.tg.proc.pid

    def stop(self) -> None:
        self.tg.stop()


def count(influx: services.InfluxDB, db: str) -> int:
    rows = influx.query('SELECT count("s") FROM "wb_sample"', db=db)
    return int(rows[0]["count"]) if rows else 0


def verify(influx: services.InfluxDB, db: str, stream: Stream) -> list[str]:
    """Problems found; empty when every device has every sequence number exactly once."""
    got = {
        r["dev"]: r
        for r in influx.query('SELECT count("s"), min("s"), max("s") FROM "wb_sample" GROUP BY "dev"', db=db)
    }
    distinct = {
        r["dev"]: r["count"]
        for r in influx.query('SELECT count(distinct("s")) FROM "wb_sample" GROUP BY "dev"', db=db)
    }
    problems = []
    for i in range(stream.devices):
        dev = stream.dev(i)
        r = got.get(dev)
        n = stream.samples_per_device
        if r is None:
            problems.append(f"{dev}: nothing stored")
        elif (r["count"], r["min"], r["max"], distinct.get(dev)) != (n, 0, n - 1, n):
            problems.append(
                f"{dev}: {r['count']} stored, s {r['min']}..{r['max']}, {distinct.get(dev)} distinct"
            )
    return problems


def less_startup(now: tuple[float, float], startup: tuple[float, float]) -> tuple[float, float]:
    """The main process's and its children's CPU less what each spent starting, never below zero: a
    start that cost more the first time (cold page cache, first imports) would otherwise make a part
    negative, and the whole smaller than the children's share of it."""
    return max(0.0, now[0] - startup[0]), max(0.0, now[1] - startup[1])


def measure(
    name: str,
    consumer: Any,
    influx: services.InfluxDB,
    db: str,
    stream: Stream,
    messages: list[tuple[str, bytes]],
    mosquitto: services.Mosquitto,
    poll_s: float,
) -> dict[str, Any]:
    influx.create_database(db)
    consumer.start()  # creates the persistent session and its subscription
    # What starting costs with nothing queued: imports, checking processes, connecting. The measured
    # run's CPU is its whole CPU less this. A baseline read once the consumer reports itself ready
    # would miss the start of the drain: the broker sends a resumed session's queue right after the
    # connection is accepted, before the consumer has said anything.
    startup_cpu = services.tree_cpu_split(consumer.pid)
    consumer.stop()
    pub = Publisher(mosquitto.host, mosquitto.port, client_id=f"bench-pub-{db}")
    pub.publish_all(messages)
    pub.close()
    total = stream.total
    assert influx.proc is not None
    db_cpu0 = services.tree_cpu_s(influx.proc.pid)
    t0 = time.monotonic()
    consumer.start()
    first: tuple[float, int] | None = None
    last = (t0, 0)
    deadline = t0 + 900
    cpu = (0.0, 0.0, 0.0)
    while time.monotonic() < deadline:
        # Progress from the server's counters; a count query would scan what is stored, on the cores
        # the consumer is measured on. Only the end is confirmed by counting.
        n = influx.points_written(db)
        now = time.monotonic()
        cpu = (
            *less_startup(services.tree_cpu_split(consumer.pid), startup_cpu),
            services.tree_cpu_s(influx.proc.pid) - db_cpu0,
        )
        if n >= total:
            # The drain ends here, at the poll that saw the last point: the count that confirms it
            # scans every point stored, and neither its time nor its CPU is the consumer's (the
            # ceiling's figures hold no such query either).
            n = count(influx, db)
        if n and first is None:
            first = (now, n)
        last = (now, n)
        if n >= total:
            break
        time.sleep(next_poll_in(poll_s, total, n, now, first, t0))
    consumer.stop()
    problems = verify(influx, db, stream)
    influx.drop_database(db)
    if first is None or last[1] < total:
        return {
            "name": name,
            "rate": 0.0,
            "from_start": 0.0,
            "cpu_us": 0.0,
            "children_cpu_us": 0.0,
            "db_cpu_us": 0.0,
            "problems": problems or ["timed out"],
        }
    span = last[0] - first[0]
    rate = (total - first[1]) / span if span > 0 else float("inf")
    return {
        "name": name,
        "rate": rate,
        # The window the rate is taken over (monotonic seconds, points seen at its start), for a
        # check against the writer's own clock.
        "window": (first[0], first[1], last[0]),
        "from_start": total / (last[0] - t0),
        # CPU per stored sample for the whole drain, less the consumer's start-up: unlike the rates,
        # hardly moved by other work on the machine.
        "cpu_us": (cpu[0] + cpu[1]) / total * 1e6,
        # of which its child processes' (the collector's checking processes)
        "children_cpu_us": cpu[1] / total * 1e6,
        "db_cpu_us": cpu[2] / total * 1e6,
        "problems": problems,
    }


FINE_POLL_S = 0.02


def next_poll_in(
    poll_s: float, total: int, n: int, now: float, first: tuple[float, int] | None, t0: float
) -> float:
    """Seconds to the next poll of a drain that has stored n of total points: poll_s while the end is
    far, then half the time the end is still away at the pace seen since the first poll that saw
    progress (or since the consumer started), never less than FINE_POLL_S. A drain's end seen a whole
    poll late made its rate up to poll_s / span low."""
    if first is not None and now > first[0] and n > first[1]:
        rate = (n - first[1]) / (now - first[0])
    elif n and now > t0:
        rate = n / (now - t0)
    else:
        return poll_s
    return min(poll_s, max(FINE_POLL_S, (total - n) / rate / 2))


def _batch_sizes(text: str) -> list[int]:
    """--ceiling-batches: comma-separated whole numbers of lines, each at least 1."""
    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of whole numbers") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: each size must be a whole number >= 1")
    return sizes


def _split(cpu_us: float, children_us: float) -> str:
    """Where a consumer's CPU went, when it has child processes (the collector's checking ones)."""
    if children_us <= 0.005:
        return ""
    return f" (main process {cpu_us - children_us:.2f}, checking processes {children_us:.2f})"


def stream_lines(messages: list[tuple[str, bytes]]) -> list[str]:
    """The wb_sample lines the collector writes for these messages, formatted by its own code: the
    one-pass way of its checking processes, else row by row."""
    import orjson

    from wattbench.ingest.validate import Validator
    from wattbench.store.influx.lineproto import LineEncoder, sample_lines

    validator = Validator(encoder=LineEncoder())
    recv_ms = int(time.time() * 1000)
    out: list[str] = []
    for topic, raw in messages:
        one = validator.encoded(topic, raw, recv_ms)
        if one is not None:
            out.extend(one[0].decode().split("\n"))
            continue
        doc = orjson.loads(raw)
        sample_lines(doc["dev"], doc["samples"], out)
    return out


def ceiling(
    influx: services.InfluxDB, db: str, lines: list[str], batch: int, connections: int
) -> dict[str, Any]:
    """The database's own limit: the same points written straight as line protocol, `batch` lines per
    request over `connections` parallel HTTP connections, with the bodies built before the clock starts."""
    import http.client
    import threading
    from urllib.parse import urlparse

    influx.create_database(db)
    bodies = ["\n".join(lines[i : i + batch]).encode() for i in range(0, len(lines), batch)]
    url = urlparse(influx.url)
    errors: list[str] = []
    lock = threading.Lock()
    next_body = iter(bodies)

    def writer() -> None:
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=120)
        while True:
            with lock:
                body = next(next_body, None)
            if body is None:
                break
            try:
                conn.request("POST", f"/write?db={db}&precision=u", body=body)
                resp = conn.getresponse()
                resp.read()
            except OSError as exc:  # InfluxDB gone (stopped after Ctrl-C): a problem, not a traceback
                errors.append(f"{exc.__class__.__name__}: {exc}")
                break
            if resp.status != 204:
                errors.append(f"HTTP {resp.status}")
        conn.close()

    # Daemons: after Ctrl-C the main thread stops InfluxDB and leaves without waiting for them.
    threads = [threading.Thread(target=writer, daemon=True) for _ in range(connections)]
    assert influx.proc is not None
    db_cpu0 = services.tree_cpu_s(influx.proc.pid)
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    db_cpu = services.tree_cpu_s(influx.proc.pid) - db_cpu0
    stored = count(influx, db)
    influx.drop_database(db)
    problems = errors[:3] + ([f"{stored} of {len(lines)} stored"] if stored != len(lines) else [])
    return {
        "batch": batch,
        "rate": len(lines) / elapsed,
        "db_cpu_us": db_cpu / len(lines) * 1e6,
        "problems": problems,
    }


def main() -> int:
    from wattbench.argtypes import number, whole
    from wattbench.cli.parser import Parser

    ap = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--samples", type=whole(at_least=1), default=1_000_000, help="samples per run (default 1 000 000)"
    )
    ap.add_argument("--devices", type=whole(at_least=1), default=10)
    ap.add_argument("--batch", type=whole(at_least=1, at_most=500), default=200, help="rows per MQTT message")
    ap.add_argument("--rounds", type=whole(at_least=1), default=3)
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="FILE",
        help="also run the collector with --config FILE in every round, beside the default (repeatable)",
    )
    ap.add_argument("--poll", type=number(above=0), default=0.25, help="seconds between database counts")
    ap.add_argument(
        "--ceiling-batches",
        default="1000,5000,10000,20000,50000",
        type=_batch_sizes,
        help="line-protocol batch sizes tried for the ceiling (the collector's own is always among them)",
    )
    args = ap.parse_args()
    if args.samples < args.devices:
        ap.error(f"--samples {args.samples}: at least one per device (--devices {args.devices})")
    from wattbench.config import CollectorConfig, ConfigError, load_config

    for variant in args.variant:
        # Read now, as the collector will read it: a wrong file ends the run before it starts.
        try:
            load_config(variant, env={}).resolved()
        except ConfigError as exc:
            ap.error(f"--variant: {exc}")
    from wattbench.store.influx import InfluxStore

    collector_batch = CollectorConfig().influx_batch_lines
    connections = InfluxStore("http://127.0.0.1:1").http.parallel_writes
    sizes = sorted({collector_batch, *args.ceiling_batches})

    stream = Stream(
        devices=args.devices,
        channels=2,
        rate_hz=1000,
        batch=args.batch,
        samples_per_device=args.samples // args.devices,
    )
    messages = stream.messages()
    print(
        f"stream: {stream.total:,} samples, {len(messages):,} messages of {args.batch} rows, "
        f"{sum(len(m[1]) for m in messages) / 1e6:.1f} MB, {args.devices} devices"
    )
    variants = {f"collector+{Path(v).name}": str(Path(v).resolve()) for v in args.variant}
    results: dict[str, list[dict[str, Any]]] = {"collector": [], "telegraf": [], **{v: [] for v in variants}}
    ceilings: dict[int, list[dict[str, Any]]] = {b: [] for b in sizes}
    work = Path(tempfile.mkdtemp(prefix="wattbench-bench-ingest-"))
    # Services and the consumer being measured are stopped on any way out, Ctrl-C included.
    with contextlib.ExitStack() as started:
        started.callback(shutil.rmtree, work, ignore_errors=True)
        mosquitto = start_on(started, services.Mosquitto(work / "mosquitto"))
        influx = start_on(started, services.InfluxDB(work / "influxdb"))
        lines = stream_lines(messages)
        for r in range(args.rounds):
            for b in sizes:
                res = ceiling(influx, f"bench_ceiling_{b}_{r}", lines, b, connections)
                ceilings[b].append(res)
                status = "no loss" if not res["problems"] else "; ".join(res["problems"])
                print(
                    f"round {r + 1} ceiling  : {res['rate']:>10,.0f} samples/s, {b:>6} lines per write, "
                    f"{connections} connections, InfluxDB CPU {res['db_cpu_us']:.2f} us/sample  [{status}]",
                    flush=True,
                )
            order = ["collector", *variants, "telegraf"]
            if r % 2:
                order.reverse()
            for k, name in enumerate(order):
                db = f"bench_{name[0]}{k}_{r}"
                cid = f"bench-{name[0]}{k}{r}"
                consumer: Any = (
                    TelegrafRun(work, mosquitto, influx, db, cid)
                    if name == "telegraf"
                    else CollectorRun(work, mosquitto, influx, db, cid, variants.get(name))
                )
                try:
                    res = measure(name, consumer, influx, db, stream, messages, mosquitto, args.poll)
                finally:
                    consumer.stop()  # already stopped by measure() unless it was cut short
                results[name].append(res)
                status = "no loss, no duplicates" if not res["problems"] else "; ".join(res["problems"][:3])
                print(
                    f"round {r + 1} {name:9s}: {res['rate']:>10,.0f} samples/s sustained, "
                    f"{res['from_start']:>10,.0f} from start, CPU {res['cpu_us']:.2f} us/sample"
                    f"{_split(res['cpu_us'], res['children_cpu_us'])} (InfluxDB {res['db_cpu_us']:.2f})  [{status}]",
                    flush=True,
                )

    med = {k: statistics.median(x["rate"] for x in v) for k, v in results.items()}
    med_start = {k: statistics.median(x["from_start"] for x in v) for k, v in results.items()}
    med_cpu = {k: statistics.median(x["cpu_us"] for x in v) for k, v in results.items()}
    med_kids = {k: statistics.median(x["children_cpu_us"] for x in v) for k, v in results.items()}
    lossless = all(not x["problems"] for v in [*results.values(), *ceilings.values()] for x in v)
    ceil = {b: statistics.median(x["rate"] for x in v) for b, v in ceilings.items()}
    best = max(ceil, key=lambda b: ceil[b])
    print()
    print(
        f"collector: {med['collector']:>10,.0f} samples/s sustained (median of {args.rounds}), "
        f"{med_start['collector']:,.0f} from start, CPU {med_cpu['collector']:.2f} us/sample"
        f"{_split(med_cpu['collector'], med_kids['collector'])}"
    )
    print(
        f"telegraf:  {med['telegraf']:>10,.0f} samples/s sustained (median of {args.rounds}), "
        f"{med_start['telegraf']:,.0f} from start, CPU {med_cpu['telegraf']:.2f} us/sample"
    )
    print(
        f"ceiling:   {ceil[collector_batch]:>10,.0f} samples/s at the collector's {collector_batch} lines per write; "
        f"best {ceil[best]:,.0f} at {best}"
    )
    for name in variants:
        ratio = med[name] / med["collector"] if med["collector"] > 0 else 0.0
        print(
            f"{name}: {med[name]:>10,.0f} samples/s sustained (median of {args.rounds}), "
            f"{med_start[name]:,.0f} from start, CPU {med_cpu[name]:.2f} us/sample"
            f"{_split(med_cpu[name], med_kids[name])}; "
            f"{ratio:.2f}x the default collector's rate, {med_cpu[name] - med_cpu['collector']:+.2f} us/sample CPU"
        )
    if med["telegraf"] > 0:
        print(
            f"ratio collector/telegraf: {med['collector'] / med['telegraf']:.2f} sustained, "
            f"{med_start['collector'] / med_start['telegraf']:.2f} from start (goal >= 2)"
        )
    print(
        f"ratio collector/ceiling: {med['collector'] / ceil[best]:.2f} of the best, "
        f"{med['collector'] / ceil[collector_batch]:.2f} of the collector's batch size (goal >= 0.60)"
    )
    # When the ceiling keeps InfluxDB busy on every core, the same cores must also carry the consumer,
    # so CPU per sample bounds the ratio: rate <= cores / (consumer + InfluxDB under it), ceiling =
    # cores / InfluxDB at the ceiling.
    db_ceil = statistics.median(x["db_cpu_us"] for x in ceilings[best])
    db_under = statistics.median(x["db_cpu_us"] for x in results["collector"])
    cores = os.cpu_count() or 1
    if med_cpu["collector"] > 0 and db_ceil > 0:
        print(
            f"CPU: the best ceiling kept InfluxDB at {ceil[best] * db_ceil / 1e6:.2f} of {cores} CPUs "
            f"({db_ceil:.2f} us/sample); under the collector InfluxDB took {db_under:.2f} and the collector "
            f"{med_cpu['collector']:.2f} us/sample, which bounds collector/ceiling at "
            f"{db_ceil / (med_cpu['collector'] + db_under):.2f} on shared cores; 0.60 needs the collector at "
            f"{max(0.0, db_ceil / 0.6 - db_under):.2f} us/sample or less"
        )
    print("zero loss: " + ("yes, for all" if lossless else "NO"))
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end")
    return 0 if lossless else 1


if __name__ == "__main__":
    run_main("bench_ingest", main)
