"""A host-mode appliance process whose clock can be stepped from outside, like an NTP step.

    python tests/faults/steppable.py --config cfg.json --truth truth.csv --count N --step-ms 2000

SIGUSR1 steps the clock forward by --step-ms, SIGUSR2 steps it back by the same amount; each step
flags the next sample clock_step. SIGTERM (or reaching --count) drains to the broker and stops. The
last stdout line is the appliance's counters as JSON, with every step and the UTC time it was made.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time


def main() -> int:
    from wattbench_fw.host import HostAppliance

    p = argparse.ArgumentParser()
    p.add_argument("--config", required=True)
    p.add_argument("--truth", required=True)
    p.add_argument("--count", type=int, default=None)
    p.add_argument("--step-ms", type=float, default=2000.0)
    args = p.parse_args()
    with open(args.config) as f:
        cfg = json.load(f)
    app = HostAppliance(cfg, truth=args.truth, count=args.count)
    stop = threading.Event()
    steps: list[dict[str, float]] = []

    def step(sign: int) -> None:
        ms = sign * args.step_ms
        app.inject_clock_step(ms)
        steps.append({"ms": ms, "host_ms": time.time() * 1000.0})
        print(json.dumps({"step": ms}), flush=True)

    signal.signal(signal.SIGUSR1, lambda *_: step(+1))
    signal.signal(signal.SIGUSR2, lambda *_: step(-1))
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    app.start()
    print(json.dumps({"started": app.dev}), flush=True)
    while not stop.is_set():
        if args.count is not None and app.wait_done(0.1):
            break
        stop.wait(0.1)
    app.stop(timeout=30.0)
    out = app.counters()
    out["steps"] = steps
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
