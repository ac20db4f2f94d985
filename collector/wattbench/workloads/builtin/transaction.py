"""One transaction of the built-in workload: real mixed work on a generated order.

Per transaction: generate an order, JSON-encode it, compress it, hash the compressed bytes, decompress
and decode it again, sort its lines by value and total them. The mix touches the allocator, the
integer and string paths of the interpreter and C code in zlib and hashlib, so power follows load the
way it does for ordinary server software rather than for a tight arithmetic loop.
"""

from __future__ import annotations

import hashlib
import json
import random
import zlib
from collections.abc import Callable
from typing import Any

_WORDS = (
    "alpha bravo cable drill epoxy fender gasket hinge insert joint knob lever mount nozzle "
    "o-ring panel quartz rivet spring toggle valve washer xenon yoke zinc"
).split()
_REGIONS = ("north", "south", "east", "west", "central")


class OrderGenerator:
    """Deterministic stream of orders for one worker (seeded, so runs are repeatable)."""

    def __init__(self, seed: int, min_lines: int = 5, max_lines: int = 25) -> None:
        self.rng = random.Random(seed)
        self.min_lines = min_lines
        self.max_lines = max_lines
        self.next_id = seed * 1_000_000_000

    def order(self) -> dict[str, Any]:
        rng = self.rng
        self.next_id += 1
        lines = []
        for _ in range(rng.randint(self.min_lines, self.max_lines)):
            w1, w2 = rng.choice(_WORDS), rng.choice(_WORDS)
            lines.append(
                {
                    "sku": f"{w1[:3].upper()}-{rng.randrange(100000):05d}",
                    "desc": f"{w1} {w2} {rng.randrange(1, 99)}mm",
                    "qty": rng.randint(1, 40),
                    "price": round(rng.uniform(0.5, 500.0), 2),
                }
            )
        return {
            "id": self.next_id,
            "customer": {"id": rng.randrange(1, 50000), "region": rng.choice(_REGIONS)},
            "lines": lines,
            "note": " ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 12))),
        }


def process(order: dict[str, Any]) -> int:
    """Do the transaction's work; returns a small checksum so nothing is optimised away."""
    raw = json.dumps(order, sort_keys=True, separators=(",", ":")).encode()
    packed = zlib.compress(raw, 6)
    digest = hashlib.sha256(packed).digest()
    back = json.loads(zlib.decompress(packed))
    lines = sorted(back["lines"], key=lambda ln: (-ln["qty"] * ln["price"], ln["sku"]))
    total = sum(ln["qty"] * ln["price"] for ln in lines)
    return (digest[0] + len(lines) + int(total)) & 0xFFFF


def transaction(gen: OrderGenerator) -> int:
    return process(gen.order())


def make_unit(seed: int, min_lines: int = 5, max_lines: int = 25) -> Callable[[], int]:
    """One worker's transaction: a generator of orders seeded for the worker, and the work on each."""
    gen = OrderGenerator(seed, min_lines, max_lines)
    return lambda: transaction(gen)
