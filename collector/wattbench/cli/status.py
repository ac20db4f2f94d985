"""`wattbench status`: per-device accounting (gaps, duplicates, late samples, clock offset, rate) and
the spool of every collector.

Sources: the status files collectors write into the state directory (same machine), and the store's
wb_health series (any machine that can read the store). With --verify the store also counts, per
device, the stored samples against the span of sequence numbers: the independent answer to "did
every sample arrive, exactly once".

Clock offsets are shown device minus host, as everywhere else in wattbench (report, clock_skew,
--clock-offset, /metrics). The collector stores the opposite (wb_health offset_ms is receive time minus
sample time); core.clocktrack.device_minus_host turns it, for every place that shows one. `--json`
prints the document described by schema/v1/status-report.schema.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any, TypeGuard

from ..config import ConfigError, default_state_dir, load_config, redact_url
from ..core.clocktrack import device_minus_host
from ..exits import Exit
from ..report.terminal import new_table
from ..store import failure_text, open_reader
from .options import (
    add_json_flag,
    add_store_options,
    existing_folder,
    option_values,
    output_console,
    store_said,
)

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state-dir", metavar="DIR", type=existing_folder, help="where collectors write their status files"
    )
    add_store_options(parser)
    parser.add_argument(
        "--config", metavar="FILE", help="collector TOML configuration to take the above from"
    )
    parser.add_argument("--verify", action="store_true", help="count stored samples against sequence numbers")
    add_json_flag(parser)


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
    out = []
    for path in sorted(Path(state_dir).glob("collector-*.json")):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # one being replaced this instant, or a leftover: the next look reads it
        if isinstance(doc, dict):
            out.append(doc)
        else:
            log.warning("skipped %s: not a collector status file", path)
    return out


class StoreUnreachable(Exception):
    """The store named could not be read; `status` says so in one line and exits 3."""


def gather(args: argparse.Namespace) -> dict[str, Any]:
    """The raw sources: status files, wb_health rows, the store's sequence check. Raises ConfigError
    for a bad configuration and StoreUnreachable when the store named cannot be read."""

    overrides, given_as = option_values(args, ["state_dir", "store", "influx_db"])
    cfg = load_config(args.config, overrides=overrides, given_as=given_as)
    cfg_state = cfg.state_dir
    if not cfg_state:
        cfg_state = str(default_state_dir())
    elif not Path(cfg_state).expanduser().is_dir():
        # named by the user (the option checks its own): a folder that is not there is their typo,
        # not a machine without collectors
        raise ConfigError(f"{cfg.named('state_dir')}: {cfg_state}: no such folder")
    out: dict[str, Any] = {
        "state_dir": cfg_state,
        "collectors": read_state_files(cfg_state),
        "health": [],
        "verify": [],
        "store": None,
    }
    spec = cfg.store or None
    if spec is None and not out["collectors"]:
        default_db = Path(cfg_state) / "wattbench.sqlite"
        spec = str(default_db) if default_db.exists() else None
    if spec:
        out["store"] = redact_url(spec)
        # What the configuration says about the store's connection; how much to write at once is not
        # for a reader.
        opts = {k: v for k, v in cfg.resolved().store_options().items() if k != "batch_lines"}
        try:
            # A reader: a store that is not there is reported, never created empty.
            store = open_reader(spec, **opts)
        except ValueError as exc:  # not a store address at all
            raise ConfigError(str(exc)) from None
        except (OSError, RuntimeError) as exc:  # StoreError is a RuntimeError
            raise StoreUnreachable(failure_text(exc, out["store"], store_said(cfg))) from None
        try:
            try:
                out["health"] = store.health()
                newest = store.newest_samples([str(h.get("dev")) for h in out["health"]])
                for h in out["health"]:
                    h["newest_sample_ms"] = newest.get(str(h.get("dev")))
                if args.verify:
                    out["verify"] = store.sequence_check()
            finally:
                store.close()
        except (OSError, RuntimeError, ValueError) as exc:
            # InfluxDB down or refusing the query (StoreUnavailable is a RuntimeError), an unreadable file
            raise StoreUnreachable(failure_text(exc, out["store"], store_said(cfg))) from None
    return out


INT_FIELDS = (
    "received",
    "stored",
    "duplicates",
    "gaps",
    "gaps_open",
    "gaps_filled",
    "missing",
    "unassigned",
    "out_of_order",
    "rejects",
    "t_repeats",
    "reboots",
    "seq_resets",
    "energy_steps",
    "batches",
    "holes",
    "clk_steps",
    "spool_bytes",
)
FLOAT_FIELDS = ("rate_hz", "clk_age", "clk_err", "spool_age")


def _is_num(v: Any) -> TypeGuard[int | float]:
    return isinstance(v, int | float) and not isinstance(v, bool)


def device_entry(dev: str, collector: str, source: str, acct: dict[str, Any]) -> dict[str, Any]:
    """One device as one collector accounts it, in the shape and sign conventions of the schema."""

    out: dict[str, Any] = {"dev": dev, "collector": collector, "source": source}
    # Seen: the last batch the collector received (file), or the device's newest stored sample
    # (store); the newest health point only says the collector was running.
    seen = acct.get("last_seen_ms") if source == "file" else acct.get("newest_sample_ms")
    out["seen_ms"] = int(seen) if _is_num(seen) else None
    for name in INT_FIELDS:
        if _is_num(acct.get(name)):
            out[name] = int(acct[name])
    if "gaps" in out and "gaps_open" not in out and "gaps_filled" in out:
        out["gaps_open"] = max(0, out["gaps"] - out["gaps_filled"])
    for name in FLOAT_FIELDS:
        if _is_num(acct.get(name)):
            out[name] = float(acct[name])
    if _is_num(acct.get("offset_ms")):
        out["clock_offset_ms"] = device_minus_host(acct["offset_ms"])
    for name in ("boot", "last_seq"):
        if name in acct:
            out[name] = int(acct[name]) if _is_num(acct[name]) else None
    if "clk_sync" in acct:
        out["clk_sync"] = acct["clk_sync"] if isinstance(acct["clk_sync"], str) else None
    if isinstance(acct.get("track_gaps"), bool):
        out["track_gaps"] = acct["track_gaps"]
    return out


def devices(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Every (device, collector) once: the status file where there is one (it is the newer), else
    the store's latest wb_health point."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for h in doc["health"]:
        dev, coll = str(h.get("dev", "?")), str(h.get("collector", "?"))
        rows[(dev, coll)] = device_entry(dev, coll, "store", h)
    for c in doc["collectors"]:
        coll = str(c.get("id", "?"))
        for dev, acct in (c.get("accounts") or {}).items():
            if isinstance(acct, dict):
                rows[(dev, coll)] = device_entry(dev, coll, "file", acct)
        plugs = c.get("plugs")
        for dev, plug in (plugs if isinstance(plugs, dict) else {}).items():
            dropped = plug_drops(plug)
            if dropped:
                # A plug whose every message was dropped has no account, yet its drops are the news.
                row = rows.get((dev, coll)) or device_entry(dev, coll, "file", {})
                rows[(dev, coll)] = {**row, "dropped": dropped}
    return [rows[k] for k in sorted(rows)]


DROP_REASONS = ("retained", "stale", "repeat")


def plug_drops(plug: Any) -> dict[str, int]:
    """A bridged plug's dropped messages by reason, from its saved state; only the reasons it had."""
    drops = plug.get("drops") if isinstance(plug, dict) else None
    if not isinstance(drops, dict):
        return {}
    return {r: int(drops[r]) for r in DROP_REASONS if _is_num(drops.get(r)) and drops[r] > 0}


def collector_entry(c: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"id": str(c.get("id", "?"))}
    for name in ("written_ms", "started_ms"):
        if name in c:
            out[name] = int(c[name]) if _is_num(c[name]) else None
    for name in ("connected", "store_down"):
        if isinstance(c.get(name), bool):
            out[name] = c[name]
    if isinstance(c.get("config"), dict):
        out["config"] = {str(k): (None if v is None else str(v)) for k, v in c["config"].items()}
    spool = c.get("spool")
    if isinstance(spool, dict):
        out["spool"] = {
            "dir": spool.get("dir") if isinstance(spool.get("dir"), str) else None,
            "bytes": int(spool.get("bytes") or 0),
            "age_s": float(spool.get("age_s") or 0.0),
        }
    if isinstance(c.get("counters"), dict):
        out["counters"] = {k: v for k, v in c["counters"].items() if _is_num(v) or isinstance(v, bool | dict)}
    if isinstance(c.get("rejects"), list):
        out["rejects"] = [r for r in c["rejects"] if isinstance(r, dict)]
    return out


def report(doc: dict[str, Any]) -> dict[str, Any]:
    """The document `status --json` prints (schema/v1/status-report.schema.json)."""
    return {
        "v": 1,
        "state_dir": str(doc["state_dir"]),
        "store": doc["store"],
        "devices": devices(doc),
        "collectors": [collector_entry(c) for c in doc["collectors"]],
        "verify": doc["verify"],
    }


def render(doc: dict[str, Any]) -> None:
    """The tables, from the report document."""

    console = output_console()
    if not console.is_terminal:  # piped or logged: do not squeeze the tables into 80 columns
        console = output_console(width=170)
    now = int(time.time() * 1000)

    table = new_table(title="Devices", title_justify="left")
    for col in (
        "device",
        "collector",
        "received",
        "stored",
        "dupl.",
        "gaps open",
        "gaps filled",
        "missing",
        "skipped",
        "late",
        "rejects",
        "same ms",
        "offset ms",
        "rate Hz",
        "clock",
        "seen",
    ):
        table.add_column(col, justify="left" if col in ("device", "collector", "clock") else "right")
    for r in doc["devices"]:
        clock = r.get("clk_sync") or "-"
        if r.get("clk_err") is not None:
            clock += f" ±{r['clk_err']:.0f} ms"
        if r.get("clk_steps"):
            clock += f", {r['clk_steps']} step{'s' if r['clk_steps'] != 1 else ''}"
        gaps_known = r.get("track_gaps", True) and r.get("gaps") is not None
        if not gaps_known:
            open_, filled, missing = "shared", "-", "-"
        elif r.get("gaps_open") is None:  # a store written before filled gaps were counted
            open_, filled, missing = f"{_fmt(r['gaps'])} (all)", "?", _fmt(r.get("missing"))
        else:
            open_, filled, missing = _fmt(r["gaps_open"]), _fmt(r.get("gaps_filled")), _fmt(r.get("missing"))
        table.add_row(
            r["dev"],
            r["collector"],
            _fmt(r.get("received")),
            _fmt(r.get("stored")),
            _fmt(r.get("duplicates")),
            open_,
            filled,
            missing,
            _fmt(r.get("unassigned")),
            _fmt(r.get("out_of_order")),
            _fmt(r.get("rejects")),
            _fmt(r.get("t_repeats")),
            _fmt(r.get("clock_offset_ms")),
            _fmt(r.get("rate_hz"), 1),
            clock,
            _age(r.get("seen_ms"), now),
        )
    if doc["devices"]:
        console.print(table)
        console.print(
            "[dim]offset: device clock minus host clock. skipped: sequence numbers a clean restart "
            "never handed out (not lost).[/dim]"
        )
        for r in doc["devices"]:
            if r.get("dropped"):
                why = ", ".join(f"{n} {reason}" for reason, n in r["dropped"].items())
                console.print(f"  {r['dev']} dropped plug messages (no sample): {why}")
    else:
        console.print(
            "[yellow]no device accounting found[/yellow] "
            f"(state dir {doc['state_dir']}, store {doc['store'] or 'none'})",
            soft_wrap=True,  # one line: wrapped at 80 columns in a pipe, a script's grep missed the path
        )

    if doc["collectors"]:
        ct = new_table(title="Collectors", title_justify="left")
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
                c["id"],
                c.get("config", {}).get("broker") or "-",
                c.get("config", {}).get("store") or "-",
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
                    f"  [dim]{c['id']}[/dim] rejected {r.get('topic')}: "
                    f"[bold]{r.get('reason')}[/bold] {r.get('detail')}"
                )
    if doc["verify"]:
        vt = new_table(title="Store check (sequence numbers)", title_justify="left")
        for col in ("device", "stored", "first s", "last s", "missing"):
            vt.add_column(col, justify="left" if col == "device" else "right")
        for v in doc["verify"]:
            vt.add_row(v["dev"], _fmt(v["count"]), _fmt(v["first"]), _fmt(v["last"]), _fmt(v["missing"]))
        console.print(vt)
        console.print(
            "[dim]the store check counts numbers skipped at restarts as missing: it cannot tell.[/dim]"
        )


def run(args: argparse.Namespace) -> int:
    try:
        doc = report(gather(args))
    except ConfigError as exc:
        print(f"wattbench status: {exc}", file=sys.stderr)
        return Exit.CONFIG
    except StoreUnreachable as exc:
        # the same one-line form as every other command's store error
        print(f"wattbench status: {exc}", file=sys.stderr)
        return Exit.UNREACHABLE
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        render(doc)
    return Exit.OK if (doc["collectors"] or doc["devices"]) else Exit.INVALID
