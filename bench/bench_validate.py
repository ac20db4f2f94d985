"""The collector's check of one sample batch, per sample: the library choices side by side.

    python bench/bench_validate.py [--samples 200000] [--batch 200] [--repeat 7]

Each row is a way to decode a batch and check it against schema/v1/samples.schema.json; every row
accepts the same batches. The collector reads a batch with msgspec against TypedDicts derived from
the schema in one pass (core/fastcheck.py); a batch that pass cannot vouch for is decoded strictly
with orjson and checked against msgspec Structs, and fastjsonschema decides and words any refusal.
The best of --repeat passes is printed, with each row's time as a ratio to the first.

A second table is the work of a checking process when the store is InfluxDB: the whole check and
the batch's line protocol, row by row after the check (lineproto.sample_block) against the one pass
of store/influx/fastlines.py (the InfluxDB store's encoder), which decodes, checks and writes the lines in one go.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import fastjsonschema
import msgspec
import orjson

import wattbench_schema as contract
from wattbench.core.fastcheck import compile_fast, compile_fast_decode
from wattbench.ingest.validate import Accepted, Validator
from wattbench.store.influx.lineproto import LineEncoder, sample_block


def batches(samples: int, batch: int) -> list[tuple[str, bytes]]:
    dev = "bench-a"
    topic = contract.topic_for("samples", dev=dev)
    t0 = int(time.time() * 1000) - samples - 60_000
    out = []
    for start in range(0, samples, batch):
        rows = [
            {
                "s": s,
                "t": t0 + s,
                "c": f"psu{s % 2 + 1}",
                "W": 100.0 + (s % 97) * 0.25,
                "V": 230.1,
                "Wh": s * 0.001,
            }
            for s in range(start, min(samples, start + batch))
        ]
        doc = {"v": 1, "dev": dev, "boot": 1, "clk": {"sync": "ntp", "err": 2.0}, "samples": rows}
        out.append((topic, json.dumps(doc, separators=(",", ":")).encode()))
    return out


def main() -> int:
    from wattbench.argtypes import whole
    from wattbench.cli.parser import Parser

    ap = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=whole(at_least=1), default=200_000)
    ap.add_argument(
        "--batch", type=whole(at_least=1, at_most=500), default=200, help="rows per message (default 200)"
    )
    ap.add_argument("--repeat", type=whole(at_least=1), default=7)
    args = ap.parse_args()
    if args.samples < 1 or not 1 <= args.batch <= 500 or args.repeat < 1:
        print("bench_validate: --samples and --repeat must be positive, --batch 1..500", file=sys.stderr)
        return 2

    msgs = batches(args.samples, args.batch)
    schema = contract.inline_refs("samples")
    reference = fastjsonschema.compile(schema)
    fast = compile_fast(schema)
    fast_decode = compile_fast_decode(schema)
    assert fast is not None and fast_decode is not None
    validator = Validator(encoder=LineEncoder())
    now = int(time.time() * 1000)

    def json_fjs(raw: bytes) -> Any:
        return reference(json.loads(raw))

    def orjson_fjs(raw: bytes) -> Any:
        return reference(orjson.loads(raw))

    def orjson_msgspec(raw: bytes) -> Any:
        doc = orjson.loads(raw)
        if not fast(raw, doc):
            raise AssertionError("refused")
        return doc

    def msgspec_one_pass(raw: bytes) -> Any:
        doc = fast_decode(raw)
        if doc is None:
            raise AssertionError("refused")
        return doc

    ways: list[tuple[str, Callable[[bytes], Any]]] = [
        ("json + fastjsonschema", json_fjs),
        ("orjson + fastjsonschema", orjson_fjs),
        ("orjson + msgspec Structs (schema-derived), two passes", orjson_msgspec),
        ("msgspec TypedDicts (schema-derived), one pass", msgspec_one_pass),
        ("msgspec decode only, no check", msgspec.json.decode),
    ]

    def check(topic: str, raw: bytes) -> Any:
        res = validator.check(topic, raw, now)
        if not isinstance(res, Accepted):
            raise AssertionError("the collector refused a valid batch")
        return res

    def check_then_rows(topic: str, raw: bytes) -> Any:
        res = check(topic, raw)
        return sample_block(res.payload["dev"], res.payload["samples"])

    def one_pass_lines(topic: str, raw: bytes) -> Any:
        one = validator.encoded(topic, raw, now)
        if one is None:
            raise AssertionError("the one-pass way left a valid batch to the complete check")
        return one

    tables: list[list[tuple[str, Callable[[str, bytes], Any]]]] = [
        [(name, lambda _topic, raw, fn=fn: fn(raw)) for name, fn in ways]
        + [("Validator.check (the collector's whole stateless check)", check)],
        [
            ("Validator.check, then lines row by row", check_then_rows),
            ("Validator.encoded, one pass (store/influx/fastlines.py)", one_pass_lines),
        ],
    ]
    best: dict[str, float] = {}
    for _ in range(args.repeat):
        for table in tables:
            for name, fn in table:
                t0 = time.perf_counter()
                for topic, raw in msgs:
                    fn(topic, raw)
                best[name] = min(best.get(name, float("inf")), time.perf_counter() - t0)
    width = max(len(k) for k in best)
    print(f"{args.samples:,} samples in messages of {args.batch} rows, best of {args.repeat}:")
    for i, table in enumerate(tables):
        if i:
            print("check and InfluxDB line protocol, as in a checking process:")
        base = best[table[0][0]]
        for name, _fn in table:
            secs = best[name]
            print(f"  {name:<{width}}  {secs / args.samples * 1e6:6.2f} us/sample  x{secs / base:.2f}")
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
