"""`wattbench status`: per-device accounting (gaps, duplicates, late samples, clock offset, rate) and
the spool of every collector.

Sources: the status files collectors write into the state directory (same machine), and the store's
wb_health series (any machine that can read the store). With --verify the store also counts, per
device, the stored samples against the span of sequence numbers: the independent answer to "did
every sample arrive, exactly once".
"""

from __future__ import annotations

import argparse
from typing import Any


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from .cli.options import add_output_options, add_store_options

    parser.add_argument("--state-dir", metavar="DIR", help="where collectors write their status files")
    add_store_options(parser)
    parser.add_argument(
        "--config", metavar="FILE", help="collector TOML configuration to take the above from"
    )
    parser.add_argument("--verify", action="store_true", help="count stored samples against sequence numbers")
    add_output_options(parser, html=False, json_stdout=True)


def _fmt(value: Any, digits: int = 0) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _age(ms: Any, now: int) -> str:
    if not isinstance(ms, int | float):
        return "-"
    s = max(0.0, (now - ms) / 1000)
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


def _bytes(n: Any) -> str:
    if not isinstance(n, int | float):
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return "-"


def read_state_files(state_dir: str) -> list[dict[str, Any]]:
    import json
    from pathlib import Path

    out = []
    for path in sorted(Path(state_dir).glob("collector-*.json")):
        try:
            out.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return out


def gather(args: argparse.Namespace) -> dict[str, Any]:
    from .config import load_config

    cfg = load_config(
        args.config,
        overrides={
            "state_dir": args.state_dir,
            "store": args.influx or args.store,
            "influx_db": args.db,
        },
    )
    cfg_state = cfg.state_dir
    if not cfg_state:
        from .config import default_state_dir

        cfg_state = str(default_state_dir())
    out: dict[str, Any] = {
        "state_dir": cfg_state,
        "collectors": read_state_files(cfg_state),
        "health": [],
        "verify": [],
        "store": None,
        "store_error": None,
    }
    spec = cfg.store or None
    if spec is None and not out["collectors"]:
        from pathlib import Path

        default_db = Path(cfg_state) / "wattbench.sqlite"
        spec = str(default_db) if default_db.exists() else None
    if spec:
        from .config import redact_url
        from .store import open_store

        out["store"] = redact_url(spec)
        try:
            opts: dict[str, Any] = {}
            if spec.startswith(("http://", "https://")):
                opts = {k: v for k, v in cfg.resolved().store_options().items() if k != "batch_lines"}
            # A reader: a store that is not there is reported, never created empty.
            store = open_store(spec, must_exist=True, **opts)
            try:
                out["health"] = store.health() if hasattr(store, "health") else []
                if args.verify and hasattr(store, "sequence_check"):
                    out["verify"] = store.sequence_check()
            finally:
                store.close()
        except Exception as exc:
            out["store_error"] = str(exc)
    return out


def render(doc: dict[str, Any]) -> None:
    import time

    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not console.is_terminal:  # piped or logged: do not squeeze the tables into 80 columns
        console = Console(width=160)
    now = int(time.time() * 1000)
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for h in doc["health"]:
        rows[(h.get("dev", "?"), h.get("collector", "?"))] = dict(h, _src="store", _t=h.get("t"))
    for c in doc["collectors"]:
        for dev, acct in (c.get("accounts") or {}).items():
            rows[(dev, c.get("id", "?"))] = dict(acct, _src="file", _t=acct.get("last_seen_ms"))

    table = Table(title="Devices", title_justify="left")
    for col in (
        "device",
        "collector",
        "received",
        "stored",
        "dupl.",
        "gaps",
        "missing",
        "late",
        "rejects",
        "same ms",
        "offset ms",
        "rate Hz",
        "clock",
        "seen",
    ):
        table.add_column(col, justify="left" if col in ("device", "collector", "clock") else "right")
    for (dev, coll), r in sorted(rows.items()):
        clock = r.get("clk_sync") or "-"
        if r.get("clk_err") is not None:
            clock += f" ±{r['clk_err']:.0f} ms"
        if r.get("clk_steps"):
            clock += f", {r['clk_steps']} step{'s' if r['clk_steps'] != 1 else ''}"
        gaps_known = r.get("track_gaps", True) and r.get("gaps") is not None
        table.add_row(
            dev,
            coll,
            _fmt(r.get("received")),
            _fmt(r.get("stored")),
            _fmt(r.get("duplicates")),
            _fmt(r.get("gaps")) if gaps_known else "shared",
            _fmt(r.get("missing")) if gaps_known else "-",
            _fmt(r.get("out_of_order")),
            _fmt(r.get("rejects")),
            _fmt(r.get("t_repeats")),
            _fmt(r.get("offset_ms")),
            _fmt(r.get("rate_hz"), 1),
            clock,
            _age(r.get("_t"), now),
        )
    if rows:
        console.print(table)
    else:
        console.print(
            "[yellow]no device accounting found[/yellow] "
            f"(state dir {doc['state_dir']}, store {doc['store'] or 'none'})"
        )

    if doc["collectors"]:
        ct = Table(title="Collectors", title_justify="left")
        for col in (
            "collector",
            "broker",
            "store",
            "updated",
            "messages",
            "rejected",
            "spool",
            "spool age",
            "store state",
        ):
            ct.add_column(col)
        for c in doc["collectors"]:
            counters = c.get("counters", {})
            spool = c.get("spool", {})
            state = "[red]down: spooling[/red]" if c.get("store_down") else "ok"
            ct.add_row(
                c.get("id", "?"),
                c.get("config", {}).get("broker", "-"),
                c.get("config", {}).get("store", "-"),
                _age(c.get("written_ms"), now),
                _fmt(counters.get("messages")),
                _fmt(counters.get("rejected")),
                _bytes(spool.get("bytes")),
                f"{spool.get('age_s', 0):.0f} s",
                state,
            )
        console.print(ct)
        for c in doc["collectors"]:
            for r in c.get("rejects", [])[-5:]:
                console.print(
                    f"  [dim]{c.get('id')}[/dim] rejected {r.get('topic')}: "
                    f"[bold]{r.get('reason')}[/bold] {r.get('detail')}"
                )
    if doc["verify"]:
        vt = Table(title="Store check (sequence numbers)", title_justify="left")
        for col in ("device", "stored", "first s", "last s", "missing"):
            vt.add_column(col, justify="left" if col == "device" else "right")
        for v in doc["verify"]:
            vt.add_row(v["dev"], _fmt(v["count"]), _fmt(v["first"]), _fmt(v["last"]), _fmt(v["missing"]))
        console.print(vt)


def run(args: argparse.Namespace) -> int:
    import json
    import logging

    from .config import ConfigError

    try:
        doc = gather(args)
    except ConfigError as exc:
        logging.getLogger("wattbench.status").error("configuration: %s", exc)
        return 2
    if args.json:
        for c in doc["collectors"]:
            for acct in (c.get("accounts") or {}).values():
                acct.pop("seq", None)
                acct.pop("channels", None)
        print(json.dumps(doc, indent=1, default=str))
    else:
        render(doc)
    if doc["store_error"]:
        import sys

        from .cli.options import EXIT_UNREACHABLE

        print(f"wattbench status: store {doc['store']}: {doc['store_error']}", file=sys.stderr)
        return EXIT_UNREACHABLE
    return 0 if (doc["collectors"] or doc["health"]) else 1
