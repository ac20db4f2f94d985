"""One InfluxDB write request, made two ways side by side: influxdb-client's write API and a plain
urllib3 POST to the same /api/v2/write endpoint with the same headers. The collector's InfluxStore
uses the second (its request method, `_post`, which flush() calls once per body); influxdb-client does
the same request with more Python around it. Both are handed the same ready body, as the collector's
flush() has it, so only the request is timed.

    python bench/bench_influx_write.py [--requests 400] [--lines 100,1000,10000] [--repeat 3]

For each body size it prints the writing process's CPU time per request (client side only: InfluxDB's
own work is the same for both) and the ratio, best of --repeat passes. Every pass writes distinct
points, and the bench counts them back: a way that lost a point would fail it. Needs the InfluxDB of
scripts/provision.sh.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

try:
    from wattbench_devkit import services
    from wattbench_devkit.benchrun import run_main, start_on
except ImportError as exc:  # a hint on one line, not a traceback
    print(
        f"bench_influx_write: {exc}. Install the development kit (in the checkout): python -m pip install -e . -e ./devkit",
        file=sys.stderr,
    )
    sys.exit(2)

from wattbench.store.influx import InfluxStore

T0_US = 1_700_000_000_000_000


def bodies(first: int, requests: int, lines: int) -> list[str]:
    return [
        "\n".join(
            f"wb_sample,ch=psu1,dev=bench-w s={n}i,W={100.0 + n % 7!r} {T0_US + n}"
            for n in range(first + r * lines, first + (r + 1) * lines)
        )
        for r in range(requests)
    ]


def main() -> int:
    from wattbench.argtypes import whole
    from wattbench.cli.parser import Parser

    ap = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--requests",
        type=whole(at_least=1),
        default=400,
        help="requests per pass at 100 lines (fewer for bigger bodies)",
    )
    ap.add_argument("--lines", default="100,1000,10000", help="lines per request")
    ap.add_argument("--repeat", type=whole(at_least=1), default=3)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="wattbench-bench-write-"))
    failed = False
    with contextlib.ExitStack() as started:  # InfluxDB stopped on any way out, Ctrl-C included
        started.callback(shutil.rmtree, work, ignore_errors=True)
        influx = start_on(started, services.InfluxDB(work / "influxdb"))
        from influxdb_client import InfluxDBClient, WritePrecision
        from influxdb_client.client.write_api import SYNCHRONOUS

        store = InfluxStore(influx.url, db="bench_write")
        store.write_lines([f"wb_sample,ch=psu1,dev=bench-w s=0i,W=1.0 {T0_US - 1}"])
        store.flush()  # learns the version and creates the database
        client = InfluxDBClient(url=influx.url, token=None, org="-")  # type: ignore[arg-type]
        client_post = client.write_api(write_options=SYNCHRONOUS).write
        bucket = store.http.bucket

        def with_client(body: str) -> None:
            client_post(bucket, None, body, write_precision=WritePrecision.US)

        ways: dict[str, Callable[[str], None]] = {
            "influxdb-client write API": with_client,
            "urllib3 POST (InfluxStore)": store.http._post,
        }
        first = 0  # the point written above is at T0_US - 1, not counted
        print(
            f"InfluxDB {store.version} on 127.0.0.1; machine: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}"
        )
        for size in (int(x) for x in args.lines.split(",")):
            requests = max(10, args.requests * 100 // size)
            best: dict[str, float] = {}
            for _ in range(args.repeat):
                for name, post in ways.items():
                    work_bodies = bodies(first, requests, size)
                    first += requests * size
                    c0 = time.process_time()
                    for body in work_bodies:
                        post(body)
                    cpu = (time.process_time() - c0) / requests
                    best[name] = min(best.get(name, cpu), cpu)
            base = best["influxdb-client write API"]
            for name, cpu in best.items():
                print(
                    f"{size:>6} lines per request  {name:28s} {cpu * 1e6:9.0f} us CPU per request  x{cpu / base:.2f}"
                )
        client.close()
        rows = influx.query(f'SELECT count("s") FROM "wb_sample" WHERE time >= {T0_US}u', db="bench_write")
        stored = int(rows[0]["count"]) if rows else 0
        print(f"points written {first}, stored {stored}: {'none lost' if stored == first else 'LOST SOME'}")
        failed = stored != first
    return 1 if failed else 0


if __name__ == "__main__":
    run_main("bench_influx_write", main)
