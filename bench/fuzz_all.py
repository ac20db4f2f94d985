"""The scheduled fuzz run: every parser's fuzz target for at least 100 000 generated inputs.

    python bench/fuzz_all.py                      # 100 000 inputs per parser, seeded mutator
    python bench/fuzz_all.py --inputs 2000        # a quick look
    python bench/fuzz_all.py --only modbus.reply --replay 4711   # one input again, with its traceback
    python bench/fuzz_all.py --engine atheris     # coverage-guided (libFuzzer), if atheris is installed

The targets and their input generators live in wattbench_devkit.fuzz.targets and are the same ones the
hypothesis tests drive. Here they run in a plain loop: input i of a parser comes from a Random
seeded with (seed, parser, i), so any input can be regenerated from its index. Each parser runs in
its own process. Hangs are caught twice: a per-input SIGALRM timer interrupts Python code, and the
parent kills a child whose input counter stops moving (a hang in C code the timer cannot
interrupt), records the hang and resumes after that input.

The table gives, per parser: inputs tried, accepted/decoded, rejects by reason (the documented
errors), crashes (escaped exceptions and broken properties; those already reported are listed as
known), hangs and elapsed time. The exit status is 1 when any crash or hang was seen.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing as mp
import os
import random
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

PARSER_MODULES = (
    "wattbench_schema",
    "wattbench.config",
    "wattbench.ingest.auth",
    "wattbench.ingest.validate",
    "wattbench.ingest.pipeline",
    "wattbench.ingest.records",
    "wattbench.store.influx.lineproto",
    "wattbench.store.layout",
    "wattbench_fw.config",
    "wattbench_fw.modbus",
    "wattbench_fw.persist",
    "wattbench_fw.sampler",
    "wattbench_fw.meters.pzem004t",
    "wattbench_fw.meters.wt300",
    "wattbench_fw.meters.ina226",
    "wattbench_fw.meters.ina228",
    "wattbench_fw.sensors.sht3x",
    "wattbench_fw.sensors.ds18b20",
)

if "--atheris-child" in sys.argv:
    # Coverage instrumentation applies to modules imported inside this block, so the parsers must be
    # imported here, before the fuzz targets pull them in uninstrumented.
    import importlib

    import atheris

    with atheris.instrument_imports(include=["wattbench", "wattbench_fw", "wattbench_schema"]):
        for _module in PARSER_MODULES:
            importlib.import_module(_module)

try:
    from wattbench_devkit.fuzz import crashes
    from wattbench_devkit.fuzz.mutate import RandomSource
    from wattbench_devkit.fuzz.targets import TARGETS, remove_scratch
except ImportError as exc:  # a hint on one line, not a traceback
    print(
        f"fuzz_all: {exc}. Install the development kit (in the checkout): python -m pip install -e . -e ./devkit",
        file=sys.stderr,
    )
    sys.exit(2)

DEFAULT_INPUTS = 100_000
OK_PREFIXES = ("reject:", "error:")


class InputTimeout(BaseException):
    """Raised by the per-input timer. A BaseException, so that no `except Exception` in a parser hides it."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise InputTimeout


def input_seed(seed: int, name: str, index: int) -> int:
    digest = hashlib.sha256(f"{seed}:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big") * 1_000_003 + index


def make_input(name: str, seed: int, index: int, rng: random.Random | None = None) -> Any:
    rng = rng or random.Random()
    rng.seed(input_seed(seed, name, index))
    return TARGETS[name].generate(RandomSource(rng))


def show(value: Any, limit: int = 600) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} chars)"


# ---------------------------------------------------------------- the seeded mutator engine


def child_loop(
    name: str, seed: int, start: int, stop: int, timeout_s: float, progress: Any, out: Any
) -> None:
    """Run inputs [start, stop) of one parser; send the tallies back through `out`."""
    signal.signal(signal.SIGALRM, _on_alarm)
    target = TARGETS[name]
    rng = random.Random()
    labels: Counter[str] = Counter()
    crash_count: Counter[str] = Counter()
    examples: dict[str, dict[str, Any]] = {}
    hangs: list[dict[str, Any]] = []
    for i in range(start, stop):
        progress.value = i
        try:
            inp = make_input(name, seed, i, rng)
        except Exception as exc:  # a bug in the generator, not in the parser: report it as such
            sig = "generator: " + crashes.signature(exc)
            crash_count[sig] += 1
            examples.setdefault(
                sig,
                {
                    "index": i,
                    "size": 0,
                    "input": "(generator failed)",
                    "traceback": "".join(traceback.format_exception(exc))[-2500:],
                },
            )
            continue
        signal.setitimer(signal.ITIMER_REAL, timeout_s)
        try:
            labels[target.run(inp)] += 1
        except InputTimeout:
            hangs.append({"index": i, "input": show(inp), "kind": "timer"})
        except Exception as exc:
            sig = crashes.signature(exc)
            crash_count[sig] += 1
            size = len(repr(inp))
            if sig not in examples or size < examples[sig]["size"]:
                examples[sig] = {
                    "index": i,
                    "size": size,
                    "input": show(inp),
                    "traceback": "".join(traceback.format_exception(exc))[-2500:],
                }
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    progress.value = stop
    remove_scratch()
    out.send({"labels": dict(labels), "crashes": dict(crash_count), "examples": examples, "hangs": hangs})
    out.close()


def run_target(name: str, inputs: int, seed: int, timeout_s: float, stall_s: float) -> dict[str, Any]:
    """All inputs of one parser in child processes, restarting past any input that hangs the child."""
    ctx = mp.get_context("fork")
    total: dict[str, Any] = {"labels": Counter(), "crashes": Counter(), "examples": {}, "hangs": []}
    started = time.perf_counter()
    start = 0
    while start < inputs:
        progress = ctx.Value("q", start, lock=False)
        recv, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(
            target=child_loop, args=(name, seed, start, inputs, timeout_s, progress, send), daemon=True
        )
        proc.start()
        send.close()
        last, last_move = progress.value, time.monotonic()
        result = None
        while True:
            if recv.poll(0.5):
                try:
                    result = recv.recv()
                except EOFError:
                    result = None
                break
            if not proc.is_alive():
                break
            now = time.monotonic()
            if progress.value != last:
                last, last_move = progress.value, now
            elif now - last_move > stall_s:
                proc.kill()
                break
        proc.join(5)
        if result is not None:
            _merge(total, result)
            break
        # The child died or stalled on input `last`: count it, then go on after it.
        stuck = progress.value
        total["hangs"].append(
            {
                "index": stuck,
                "input": show(make_input(name, seed, stuck)),
                "kind": "stalled"
                if proc.exitcode in (None, -signal.SIGKILL)
                else f"child exit {proc.exitcode}",
            }
        )
        start = stuck + 1
    total["elapsed_s"] = time.perf_counter() - started
    total["inputs"] = inputs
    return total


def _merge(total: dict[str, Any], part: dict[str, Any]) -> None:
    total["labels"].update(part["labels"])
    total["crashes"].update(part["crashes"])
    for sig, ex in part["examples"].items():
        if sig not in total["examples"] or ex["size"] < total["examples"][sig]["size"]:
            total["examples"][sig] = ex
    total["hangs"].extend(part["hangs"])


# ---------------------------------------------------------------- the atheris engine


class BytesSource:
    """A Source fed by libFuzzer's input bytes, so coverage guidance steers every choice."""

    def __init__(self, fdp: Any) -> None:
        self.fdp = fdp

    def below(self, n: int) -> int:
        return self.fdp.ConsumeIntInRange(0, n - 1) if n > 1 else 0

    def blob(self, max_len: int) -> bytes:
        return bytes(self.fdp.ConsumeBytes(self.fdp.ConsumeIntInRange(0, max_len)))


def atheris_child(name: str, inputs: int, seed: int, timeout_s: float, stats_path: str, workdir: str) -> None:
    import atheris

    target = TARGETS[name]
    labels: Counter[str] = Counter()
    state = {"n": 0}

    def flush(extra: dict[str, Any] | None = None) -> None:
        doc = {"inputs": state["n"], "labels": dict(labels), **(extra or {})}
        tmp = stats_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f)
        os.replace(tmp, stats_path)

    def one_input(data: bytes) -> None:
        state["n"] += 1
        inp = target.generate(BytesSource(atheris.FuzzedDataProvider(data)))
        try:
            labels[crashes.tolerate(target.run, inp)] += 1
        except Exception as exc:
            flush(
                {
                    "crash": {
                        "signature": crashes.signature(exc),
                        "input": show(inp),
                        "traceback": "".join(traceback.format_exception(exc))[-2500:],
                    }
                }
            )
            raise
        if state["n"] % 1000 == 0 or state["n"] >= inputs:
            flush()
        if state["n"] >= inputs:
            remove_scratch()  # libFuzzer ends the process without running atexit

    os.chdir(workdir)
    atheris.Setup(
        [
            sys.argv[0],
            f"-runs={inputs}",
            f"-seed={seed}",
            f"-timeout={max(1, int(timeout_s))}",
            f"-artifact_prefix={workdir}/",
            "-print_final_stats=0",
            "-rss_limit_mb=4096",
            "-max_len=8192",
        ],
        one_input,
    )
    atheris.Fuzz()


def run_atheris(name: str, inputs: int, seed: int, timeout_s: float) -> dict[str, Any]:
    import subprocess

    workdir = tempfile.mkdtemp(prefix=f"wattbench-atheris-{name}-")
    stats = os.path.join(workdir, "stats.json")
    started = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            __file__,
            "--atheris-child",
            name,
            "--inputs",
            str(inputs),
            "--seed",
            str(seed),
            "--timeout",
            str(timeout_s),
            "--stats",
            stats,
            "--workdir",
            workdir,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    doc: dict[str, Any] = {}
    if os.path.exists(stats):
        with open(stats) as f:
            doc = json.load(f)
    labels = Counter(doc.get("labels", {}))
    known = Counter({k: v for k, v in labels.items() if k.startswith("known:")})
    result: dict[str, Any] = {
        "labels": labels,
        "crashes": Counter(),
        "examples": {},
        "hangs": [],
        "inputs": doc.get("inputs", 0),
        "elapsed_s": time.perf_counter() - started,
    }
    for label, count in known.items():
        result["crashes"][f"known {label[6:]}"] += count
    if "crash" in doc:
        sig = doc["crash"]["signature"]
        result["crashes"][sig] += 1
        result["examples"][sig] = {
            "index": -1,
            "size": 0,
            "input": doc["crash"]["input"],
            "traceback": doc["crash"]["traceback"],
        }
    elif "ERROR: libFuzzer: timeout" in proc.stderr:
        result["hangs"].append(
            {"index": -1, "input": f"libFuzzer timeout, artifacts in {workdir}", "kind": "timeout"}
        )
    elif proc.returncode != 0:
        result["hangs"].append({"index": -1, "input": proc.stderr[-800:], "kind": f"exit {proc.returncode}"})
    if not result["hangs"] and "crash" not in doc:
        shutil.rmtree(workdir, ignore_errors=True)  # keep libFuzzer's artifacts only when they matter
    return result


# ---------------------------------------------------------------- report


def rejects_text(labels: Counter[str]) -> str:
    parts = [(k.split(":", 1)[1], v) for k, v in labels.items() if k.startswith(OK_PREFIXES)]
    return ", ".join(f"{k} {v}" for k, v in sorted(parts, key=lambda kv: -kv[1])) or "-"


def accepted(labels: Counter[str]) -> int:
    return sum(v for k, v in labels.items() if not k.startswith((*OK_PREFIXES, "known:")))


def crash_split(result: dict[str, Any]) -> tuple[int, int, dict[str, tuple[int, str]]]:
    """(all crashes, known ones, signature -> (count, known id or 'NEW'))."""
    rows: dict[str, tuple[int, str]] = {}
    total = known_total = 0
    for sig, count in result["crashes"].items():
        if sig.startswith("known "):
            kid = sig[6:]
        else:
            k = next((k for k in crashes.KNOWN if k.matches(sig)), None)
            kid = k.id if k else "NEW"
        rows[sig] = (count, kid)
        total += count
        if kid != "NEW":
            known_total += count
    return total, known_total, rows


def print_report(results: dict[str, dict[str, Any]], engine: str, seed: int) -> bool:
    print(f"\nwattbench fuzz run: engine {engine}, seed {seed}\n")
    head = f"{'parser':<18} {'inputs':>8} {'accepted':>9} {'crashes':>8} {'(known)':>8} {'hangs':>6} {'elapsed':>8}  rejects by reason"
    print(head)
    print("-" * len(head))
    bad = False
    for name, r in results.items():
        total, known_total, _ = crash_split(r)
        hangs = len(r["hangs"])
        bad = bad or total > 0 or hangs > 0
        print(
            f"{name:<18} {r['inputs']:>8} {accepted(r['labels']):>9} {total:>8} {known_total:>8} {hangs:>6} "
            f"{r['elapsed_s']:>7.1f}s  {rejects_text(r['labels'])}"
        )
    inputs = sum(r["inputs"] for r in results.values())
    crashes_all = sum(crash_split(r)[0] for r in results.values())
    hangs_all = sum(len(r["hangs"]) for r in results.values())
    print("-" * len(head))
    print(f"{'total':<18} {inputs:>8} {'':>9} {crashes_all:>8} {'':>8} {hangs_all:>6}")
    for name, r in results.items():
        _, _, rows = crash_split(r)
        for sig, (count, kid) in sorted(rows.items(), key=lambda kv: -kv[1][0]):
            ex = r["examples"].get(sig)
            print(f"\n[{name}] {count} x {sig}  ({'new' if kid == 'NEW' else 'known: ' + kid})")
            if ex:
                where = (
                    f" (replay: --only {name} --replay {ex['index']} --seed {seed})"
                    if ex["index"] >= 0
                    else ""
                )
                print(f"  smallest input{where}: {ex['input']}")
        for h in r["hangs"]:
            print(f"\n[{name}] hang ({h['kind']}) at input {h['index']}: {h['input']}")
    return bad


def replay(name: str, seed: int, index: int) -> int:
    inp = make_input(name, seed, index)
    print(f"{name} input {index} (seed {seed}):\n{show(inp, 5000)}\n")
    try:
        print("outcome:", TARGETS[name].run(inp))
    except Exception as exc:
        traceback.print_exception(exc)
        print("signature:", crashes.signature(exc))
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    from wattbench.argtypes import number, whole
    from wattbench.cli.parser import Parser

    ap = Parser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--inputs", type=whole(at_least=1), default=DEFAULT_INPUTS, help="generated inputs per parser"
    )
    ap.add_argument("--seed", type=whole(), default=1)
    ap.add_argument("--only", nargs="*", choices=sorted(TARGETS), help="parsers to run (default: all)")
    ap.add_argument(
        "--timeout",
        type=number(above=0),
        default=2.0,
        help="seconds one input may take before it counts as a hang",
    )
    ap.add_argument(
        "--stall",
        type=number(above=0),
        default=30.0,
        help="seconds without progress before a child is killed (hangs the timer cannot interrupt)",
    )
    ap.add_argument("--jobs", type=whole(at_least=1), default=1, help="parsers run in parallel")
    ap.add_argument("--engine", choices=("random", "atheris"), default="random")
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument(
        "--replay", type=whole(at_least=0), metavar="INDEX", help="run one input of --only PARSER again"
    )
    ap.add_argument("--atheris-child", help=argparse.SUPPRESS)
    ap.add_argument("--stats", help=argparse.SUPPRESS)
    ap.add_argument("--workdir", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.atheris_child:
        atheris_child(args.atheris_child, args.inputs, args.seed, args.timeout, args.stats, args.workdir)
        return 0
    names = args.only or list(TARGETS)
    if args.replay is not None:
        if len(names) != 1:
            ap.error("--replay needs exactly one parser in --only")
        return replay(names[0], args.seed, args.replay)

    def one(name: str) -> tuple[str, dict[str, Any]]:
        if args.engine == "atheris":
            return name, run_atheris(name, args.inputs, args.seed, args.timeout)
        return name, run_target(name, args.inputs, args.seed, args.timeout, args.stall)

    results: dict[str, dict[str, Any]] = {}
    if args.jobs > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(args.jobs) as pool:
            for name, r in pool.map(one, names):
                results[name] = r
                print(f"  {name}: {r['inputs']} inputs in {r['elapsed_s']:.1f}s", file=sys.stderr, flush=True)
    else:
        for name in names:
            print(f"  {name} ...", file=sys.stderr, flush=True)
            results[name] = one(name)[1]
    bad = print_report(results, args.engine, args.seed)
    if args.json:
        doc = {
            "engine": args.engine,
            "seed": args.seed,
            "parsers": {
                name: {
                    "parser": TARGETS[name].parser,
                    "inputs": r["inputs"],
                    "accepted": accepted(r["labels"]),
                    "outcomes": dict(r["labels"]),
                    "crashes": {
                        sig: {"count": c, "known": kid} for sig, (c, kid) in crash_split(r)[2].items()
                    },
                    "hangs": r["hangs"],
                    "elapsed_s": round(r["elapsed_s"], 2),
                }
                for name, r in results.items()
            },
        }
        Path(args.json).write_text(json.dumps(doc, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
