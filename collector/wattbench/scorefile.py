"""`wattbench score FILE`: score a per-level table, such as a published SPECpower_ssj2008 result.

CSV: a header with the columns target, ops and power, and optionally actual. For several nodes, columns
`power:<node>` and `ops:<node>` are summed per row. Lines starting with '#' are comments; a comment
"published overall ... N" (or "published_overall: N") gives the figure to check against.

    target,actual,ops,power
    100%,99.6%,617957,236
    ...
    Active Idle,,0,72.2

JSON: {"levels": [{"target": "100%" | 1.0 | "idle", "ops": n, "power": W | [W, ...] | {"node": W},
"actual": optional}, ...], "published_overall": optional}. Other keys (system, source) are ignored.

Targets may be written "100%", "1.0", "100" or "Active Idle"/"idle". Numbers may carry thousands
separators ("4,376,919"). With a published figure (or --expect N) the command exits 1 when the computed
metric differs from it by more than the tolerance (0.5 %: published tables print power to three
significant figures).
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_TOLERANCE = 0.005
_IDLE_WORDS = {"idle", "active idle", "active_idle", "activeidle", "0", "0%", "0.0"}
_PUBLISHED_COMMENT = re.compile(
    r"published[ _]overall\b[^\n]*?([0-9][0-9,]*(?:\.[0-9]+)?)\s*$", re.IGNORECASE
)


class TableError(ValueError):
    """The file is not a per-level table this command understands."""


@dataclass
class Row:
    target: float | None  # fraction; None for active idle
    ops: float
    power: float
    actual: float | None = None
    node_power: dict[str, float] = field(default_factory=dict)


@dataclass
class Table:
    rows: list[Row]
    published: float | None = None


def parse_number(value: Any, what: str) -> float:
    if isinstance(value, bool):
        raise TableError(f"{what}: {value!r} is not a number")
    if isinstance(value, int | float):
        x = float(value)
    else:
        text = str(value).strip().replace(",", "").replace("_", "").replace(" ", "")
        try:
            x = float(text)
        except ValueError:
            raise TableError(f"{what}: {value!r} is not a number") from None
    if x != x or x in (float("inf"), float("-inf")):
        raise TableError(f"{what}: {value!r} is not a finite number")
    return x


def parse_load(value: Any, what: str) -> float | None:
    """A load as a fraction: "100%" / "1.0" / "100" -> 1.0; "Active Idle" / "idle" -> None."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _IDLE_WORDS:
            return None
        if text.endswith("%"):
            return parse_number(text[:-1], what) / 100.0
    x = parse_number(value, what)
    if x == 0:
        return None
    return x / 100.0 if x > 1.0 else x


def parse_actual(value: Any, what: str) -> float | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str) and value.strip().endswith("%"):
        return parse_number(value.strip()[:-1], what) / 100.0
    x = parse_number(value, what)
    return x / 100.0 if x > 1.5 else x


def _sum_parts(value: Any, what: str) -> tuple[float, dict[str, float]]:
    """W, [W, ...] or {"node": W} -> total and per-node parts."""
    if isinstance(value, dict):
        parts = {str(k): parse_number(v, f"{what} {k}") for k, v in value.items()}
        return sum(parts.values()), parts
    if isinstance(value, list):
        parts = {f"node{i + 1}": parse_number(v, f"{what} {i + 1}") for i, v in enumerate(value)}
        return sum(parts.values()), parts
    return parse_number(value, what), {}


def read_json(text: str) -> Table:
    import json

    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TableError(f"not valid JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("levels"), list):
        raise TableError('JSON must be an object with a "levels" list')
    rows = []
    for i, lv in enumerate(doc["levels"]):
        where = f"level {i + 1}"
        if not isinstance(lv, dict) or "target" not in lv or "ops" not in lv or "power" not in lv:
            raise TableError(f"{where}: needs target, ops and power")
        power, parts = _sum_parts(lv["power"], f"{where} power")
        ops, _ = _sum_parts(lv["ops"], f"{where} ops")
        rows.append(
            Row(
                parse_load(lv["target"], f"{where} target"),
                ops,
                power,
                parse_actual(lv.get("actual"), where),
                parts,
            )
        )
    published = doc.get("published_overall")
    return Table(rows, parse_number(published, "published_overall") if published is not None else None)


def read_csv(text: str) -> Table:
    import csv
    import io

    published = None
    lines = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            m = _PUBLISHED_COMMENT.search(stripped)
            if m:
                published = parse_number(m.group(1), "published overall comment")
            continue
        if stripped:
            lines.append(line)
    if not lines:
        raise TableError("no table rows")
    reader = csv.DictReader(io.StringIO("\n".join(lines)))
    header = [h.strip() for h in (reader.fieldnames or [])]
    reader.fieldnames = header
    power_cols = [h for h in header if h == "power" or h.startswith("power:")]
    ops_cols = [h for h in header if h == "ops" or h.startswith("ops:")]
    if "target" not in header or not power_cols or not ops_cols:
        raise TableError(
            f"CSV header needs target, ops (or ops:<node>) and power (or power:<node>); got {header}"
        )
    rows = []
    for i, rec in enumerate(reader):
        where = f"row {i + 2}"
        if None in rec:
            raise TableError(f"{where}: more fields than the header has")
        parts = {
            (h.split(":", 1)[1] if ":" in h else h): parse_number(rec[h], f"{where} {h}")
            for h in power_cols
            if (rec.get(h) or "").strip()
        }
        if not parts:
            raise TableError(f"{where}: no power value")
        ops = sum(parse_number(rec[h], f"{where} {h}") for h in ops_cols if (rec.get(h) or "").strip())
        node_parts = parts if any(":" in h for h in power_cols) else {}
        rows.append(
            Row(
                parse_load(rec["target"], f"{where} target"),
                ops,
                sum(parts.values()),
                parse_actual(rec.get("actual"), where),
                node_parts,
            )
        )
    return Table(rows, published)


def read_table(path: Path) -> Table:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise TableError(f"cannot read {path}: {exc.strerror or exc}") from None
    table = (
        read_json(text) if path.suffix.lower() == ".json" or text.lstrip().startswith("{") else read_csv(text)
    )
    if not table.rows:
        raise TableError("the table has no levels")
    if not any(r.target is not None for r in table.rows):
        raise TableError("the table has no target load rows")
    for r in table.rows:
        if r.power <= 0:
            raise TableError(f"power must be positive (row {'idle' if r.target is None else r.target})")
        if r.ops < 0:
            raise TableError("ops must be >= 0")
    return table


def to_levels(table: Table) -> list[Any]:
    from .score import LevelScore
    from .sweep.plan import level_name

    out = []
    for r in table.rows:
        idle = r.target is None
        out.append(
            LevelScore(
                phase="idle" if idle else level_name(min(r.target, 1.0)),  # type: ignore[arg-type]
                kind="idle" if idle else "target",
                target=0.0 if idle else r.target,
                ops=r.ops,
                W=r.power,
                actual=r.actual,
                node_W=dict(r.node_power),
            )
        )
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, help="per-level table, CSV or JSON")
    parser.add_argument(
        "--json", action="store_true", help='print {"overall": N, "levels": [...]} instead of the table'
    )
    parser.add_argument("--expect", type=float, metavar="N", help="published overall to check against")
    parser.add_argument(
        "--tolerance",
        type=float,
        default=DEFAULT_TOLERANCE,
        help="relative difference allowed (default 0.005)",
    )
    parser.add_argument("--ops-label", default="ssj_ops", help='name of the ops column (default "ssj_ops")')


def run(args: argparse.Namespace) -> int:
    import json
    import sys

    from .score import overall

    try:
        table = read_table(args.file)
    except TableError as exc:
        print(f"wattbench score: {args.file}: {exc}", file=sys.stderr)
        return 2
    levels = to_levels(table)
    value = overall(levels)
    expected = args.expect if args.expect is not None else table.published
    diff = (value - expected) / expected if expected else None
    mismatch = diff is not None and abs(diff) > args.tolerance
    has_idle = any(lv.kind == "idle" for lv in levels)

    if args.json:
        doc: dict[str, Any] = {
            "overall": value,
            "levels": [
                {
                    "target": "idle" if lv.kind == "idle" else lv.target,
                    "actual": lv.actual,
                    "ops": lv.ops,
                    "power": lv.W,
                    "ratio": 0.0 if lv.kind == "idle" else lv.ratio,
                    **({"node_power": lv.node_W} if lv.node_W else {}),
                }
                for lv in levels
            ],
        }
        if expected is not None:
            doc["published_overall"] = expected
            doc["difference"] = diff
            doc["match"] = not mismatch
        print(json.dumps(doc, indent=2))
    else:
        from rich.console import Console

        from .report.table import print_report

        console = Console()
        print_report(console, levels, value, ops_label=args.ops_label, title=str(args.file.name))
        if not has_idle:
            console.print("note: no Active Idle row, so the denominator has the target loads only")
    if expected is not None:
        verdict = "differs from" if mismatch else "matches"
        line = f"computed {value:,.2f} {verdict} published {expected:,.2f} ({diff * 100:+.3f}%, tolerance ±{args.tolerance * 100:g}%)"  # type: ignore[operator]
        print(line, file=sys.stderr if args.json else sys.stdout)
    return 1 if mismatch else 0
