"""Write docs/reliability.md from the figures the fault suite recorded.

    python tests/faults/report.py FIGURES.json --junit JUNIT.xml --out docs/reliability.md

scripts/faults.sh runs the suite and then this; nothing in the page is typed by hand except the
explanations below, so the table always shows what the last run measured.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

ORDER = [
    "broker_restart",
    "collector_sigkill",
    "influxdb_down",
    "network_loss",
    "appliance_reboot",
    "clock_step",
    "spool_disk_full",
]

EXPLAIN = {
    "broker_restart": (
        "Broker restarts during a sweep",
        "A real `wattbench sweep` (builtin workload, one worker, seconds-long phases) runs while "
        "Mosquitto is stopped and started twice. Mosquitto keeps sessions and queued messages across "
        "the restart (persistence, as `deploy/mosquitto.conf` ships). The appliance buffers while the "
        "broker is away and backfills; the collector resumes its persistent session; the sweep queues "
        "its phase events. The run is scored from complete data: every window is scored with all the "
        "samples the appliance sent inside it, and every phase event is stored.",
    ),
    "collector_sigkill": (
        "Collector killed with SIGKILL",
        "The collector acknowledges an MQTT message only once its samples are in InfluxDB or in its "
        "fsync'd spool. Killed at any instant, it leaves the rest unacknowledged; the broker delivers "
        "those again to the restarted collector, and the idempotent point keys absorb anything written "
        "twice.",
    ),
    "influxdb_down": (
        "InfluxDB down",
        "While InfluxDB is stopped the collector appends each batch to its local spool before "
        "acknowledging it, then replays the spool in order when the database answers again.",
    ),
    "network_loss": (
        "Appliance loses the network",
        "The appliance reaches the broker through a loopback proxy (`tests/faults/netcut.py`) that "
        "cuts every connection and refuses new ones for the whole outage. Its RAM buffer is set to "
        "4 KiB so it spills to flash within seconds; the spill is checked in the appliance's counters, "
        "in the segment files of its flash directory and in the status it publishes on reconnect. "
        "After the outage it backfills flash first, then RAM, in sequence order.",
    ),
    "appliance_reboot": (
        "Appliance reboots mid-run",
        "The appliance process is killed with SIGKILL (a power cut) and started again on the same "
        "state and flash directory. Each boot gets a new boot number, its sequence numbers start above "
        "every number used before, and its energy total never goes below what was already reported. "
        "What only lived in RAM at the cut (the batch being filled and batches not yet acknowledged) "
        "goes with the power, as on a real board; so here *sent* is what the broker accepted, recorded "
        "by an independent subscriber, and all of it must be stored once. The skipped numbers show as "
        "a jump in the numbering, never as reuse.",
    ),
    "clock_step": (
        "Appliance clock steps +2 s and -2 s",
        "The appliance's clock is stepped forward 2 s and later back 2 s, like an NTP step. Its meter "
        "draws a square wave on the appliance's monotonic clock, so which power belongs to which host "
        "instant is known exactly. The first sample after the forward step, and every sample the step "
        "back stamps with a time its channel already used, must carry the `clock_step` flag; the "
        "collector must measure the offset; nothing may be lost or doubled; and scoring must report "
        "the step and still give each window the power really drawn in it: every plateau window that "
        "does not hold a step is scored, those inside the step back's overlap included.",
    ),
    "spool_disk_full": (
        "Collector spool fills its disk",
        "The collector's spool sits on a 256 KiB tmpfs and InfluxDB is stopped. When a spool write "
        "fails with ENOSPC the collector logs it, acknowledges nothing more and exits with status 4; "
        "the broker keeps the unacknowledged messages (its message store grows). Once InfluxDB and "
        "disk space are back, the restarted collector replays its spool and ingests what the broker "
        "kept.",
    ),
}


def load_junit(path: Path | None) -> tuple[dict[str, float], list[dict[str, str]], dict[str, str]]:
    """Per-test seconds, expected failures with their reasons, and every outcome by test id."""
    times: dict[str, float] = {}
    xfails: list[dict[str, str]] = []
    outcomes: dict[str, str] = {}
    if path is None or not path.exists():
        return times, xfails, outcomes
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        times[name] = float(case.get("time") or 0.0)
        skipped = case.find("skipped")
        failure = case.find("failure")
        error = case.find("error")
        if skipped is not None and skipped.get("type") == "pytest.xfail":
            reason = skipped.get("message", "")
            xfails.append({"test": name, "reason": reason.removeprefix("xfail").strip(": ").strip()})
            outcomes[name] = "xfailed"
        elif skipped is not None:
            outcomes[name] = "skipped"
        elif failure is not None or error is not None:
            outcomes[name] = "failed"
        else:
            outcomes[name] = "passed"
    return times, xfails, outcomes


def _scoring(sc: dict[str, Any] | None) -> str:
    if not sc:
        return ""
    checks = "; ".join(sc["clock_checks_failed"]) or "none"
    stretches = sc.get("stretches")
    if stretches:
        used = ", ".join(f"{dev}: {text}" for dev, text in stretches.items())
        moved = sc.get("window_offsets_ms", {})
        uncertain = len(sc.get("uncertain", []))
        how = (
            f"; scoring read the clock as {used} and moved each of {len(moved)} windows by its own "
            f"stretch's offset ({uncertain} window/channels next to an unplaced step)"
        )
    else:
        offsets = ", ".join(f"{dev} {ms:+.0f} ms" for dev, ms in sc["offsets_ms"].items()) or "none"
        how = f"; scoring used the clock offset {offsets}"
    return (
        f"{how}, failed clock checks: {checks}; "
        f"{len(sc['misaligned'])} of {sc['window_channels']} window/channel means were not the power "
        "drawn in the window" + (f" (e.g. {'; '.join(sc['misaligned'][:2])})" if sc["misaligned"] else "")
    )


def fmt_details(scenario: str, d: dict[str, Any]) -> str:
    """The figures that show the fault really happened, in a sentence."""
    if scenario == "broker_restart":
        return (
            f"broker down {' s and '.join(str(x) for x in d.get('broker_down_s', []))} s; the appliance saw "
            f"{d.get('appliance_saw_broker_down')} outages; the sweep exited with {d.get('sweep_exit')} "
            f"(failed checks: {', '.join(d.get('failed_checks') or []) or 'none'}), "
            f"{d.get('levels_scored')} levels scored with "
            + ", ".join(
                f"{p}: {a} of {b}" for p, (a, b) in (d.get("window_samples_scored_vs_sent") or {}).items()
            )
            + f" samples sent in the window; {d.get('phase_events_stored')} phase events stored"
        )
    if scenario == "collector_sigkill":
        return (
            f"{d.get('kills')} kills, collector down {d.get('collector_down_s')} s in all, "
            f"{d.get('redelivered_dropped')} redelivered samples recognised as already stored; {d.get('rate')}"
        )
    if scenario == "influxdb_down":
        return (
            f"outage {d.get('outage_s')} s (stop to answering again); {d.get('spooled_samples')} samples "
            f"spooled ({d.get('spool_peak_bytes')} bytes at the end of the outage) and "
            f"{d.get('replayed_samples')} replayed; {d.get('store_errors')} failed writes"
        )
    if scenario == "network_loss":
        return (
            f"cut {d.get('outage_s')} s; flash held up to {d.get('flash_peak_samples')} samples in "
            f"{d.get('flash_segments_peak')} segment files while RAM held at most "
            f"{d.get('ram_peak_samples')}; reconnect status reported {d.get('status_buf_flash_max')} "
            f"samples in flash; dropped {d.get('dropped')}; out of order at the collector "
            f"{d.get('out_of_order_at_collector')}"
        )
    if scenario == "appliance_reboot":
        jumps = ", ".join(
            f"boot {j['boot']}: {j['last_seq_before']} → {j['first_seq_after']}"
            for j in d.get("sequence_jumps", [])
        )
        return (
            f"{d.get('reboots')} power cut{'' if d.get('reboots') == 1 else 's'}, boots {d.get('boots')}; "
            f"sequence continues ({jumps}); "
            f"energy went backwards {d.get('energy_backwards_published')} times (published) and "
            f"{d.get('energy_backwards_stored')} times (stored); at least "
            f"{d.get('lost_in_ram_at_power_cut_at_least')} samples were only in RAM at the cuts"
        )
    if scenario == "clock_step":
        return (
            f"steps {d.get('steps_ms')} ms; {d.get('flagged_clock_step')} samples flagged clock_step; "
            f"collector offset estimate ranged {d.get('collector_offset_ms_range')} ms; the collector "
            f"wrote {d.get('collector_wrote')} samples"
            + (f"; lost sequence ranges {d['lost_ranges']}" if d.get("lost_ranges") else "")
            + _scoring(d.get("scoring"))
        )
    if scenario == "spool_disk_full":
        return (
            f"spool full {d.get('spool_full_after_s')} s after InfluxDB stopped, exit status "
            f"{d.get('collector_exit_status')}; broker message store {d.get('broker_store_before')} → "
            f"{d.get('broker_store_while_down')} while nothing was acknowledged; restarted with InfluxDB "
            "back and the disk still full, the collector "
            + (
                "kept running"
                if d.get("restart_with_full_disk_exit") is None
                else f"exited with {d.get('restart_with_full_disk_exit')} until the disk was grown"
            )
            + f"; {d.get('replayed_samples')} samples replayed from the spool"
        )
    return json.dumps(d, default=str)


def render(
    doc: dict[str, Any],
    junit: Path | None,
    command: str,
    elapsed_s: float | None,
    measured: str = "",
    finished: dt.datetime | None = None,
) -> str:
    finished = finished or dt.datetime.now(dt.UTC)
    times, xfails, outcomes = load_junit(junit)
    scenarios = sorted(
        doc.get("scenarios", []),
        key=lambda e: (ORDER.index(e["scenario"]) if e["scenario"] in ORDER else 99, e["variant"] != "ci"),
    )
    ran = {name: t for name, t in times.items() if outcomes.get(name) != "skipped"}
    ci_s = sum(t for name, t in ran.items() if "[full]" not in name)
    full_s = sum(t for name, t in ran.items() if "[full]" in name)
    failed = sorted(name for name, o in outcomes.items() if o == "failed")
    altered = sum(int(e.get("altered", 0)) for e in scenarios)
    invented = sum(int(e.get("invented", 0)) for e in scenarios)
    lines = [
        "# Reliability: the fault suite and its figures",
        "",
        "Every figure on this page was measured by the fault suite (`tests/faults/`) and written here by",
        f"`{command}`; do not edit it by hand. The suite runs the real programs: the host-mode appliance",
        "and the collector as their own processes (`wattbench appliance`, `wattbench collect`, so a SIGKILL",
        "is a real one), Mosquitto and InfluxDB 1.8 as real servers on loopback ports.",
        "",
        "How each scenario counts:",
        "",
        "- **sent**: samples the appliance produced, from its own counters and its ground-truth CSV",
        "  (sequence number, time, channel and W of every published power sample); for the reboot",
        "  scenario, the samples the broker accepted (see below);",
        "- **stored**: distinct sequence numbers of that appliance in `wb_sample`, read back with InfluxQL;",
        "- **lost**: sent samples whose sequence number is not stored;",
        "- **duplicated**: stored rows beyond one per sequence number;",
        "- **gaps**: runs of consecutive lost samples;",
        "- besides these, every stored sample is compared with the ground truth (same time, channel",
        f"  and W): {altered} stored samples differed from what was sent, and {invented} were stored",
        "  that the appliance never sent, over all the runs below.",
        "",
        f"Run finished {finished.strftime('%Y-%m-%d %H:%M UTC')}"
        + (f" against the {measured}" if measured else "")
        + f", {platform.system()} {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}.",
        "",
        "| scenario | run | fault | sent | stored | lost | duplicated | gaps | duration |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for e in scenarios:
        name = EXPLAIN.get(e["scenario"], (e["scenario"], ""))[0]
        lost = f"**{e['lost']}**" if e["lost"] else "0"
        dup = f"**{e['duplicated']}**" if e["duplicated"] else "0"
        lines.append(
            f"| {name} | {e['variant']} | {e['title']} | {e['sent']} | {e['stored']} | {lost} | {dup} | "
            f"{e['gaps']} | {e['duration_s']:.0f} s |"
        )
    lines += [
        "",
        "*run*: `ci` is the shortened version every `pytest` run executes; `full` is the long version",
        "(marked slow, run with `WATTBENCH_FAULTS=full`, as `scripts/faults.sh` does). *duration* is the",
        "scenario itself, from the first sample to the last check, without starting the servers.",
        "",
    ]
    if times:
        text = f"Time as pytest measured it, servers included: the CI subset {ci_s / 60:.1f} min"
        if full_s:
            text += f", the long versions {full_s / 60:.1f} min"
        if elapsed_s:
            text += f"; the whole run {elapsed_s / 60:.1f} min"
        lines += [text + ".", ""]
    bad = [e for e in scenarios if not e.get("clean")]
    if xfails or bad or failed:
        lines += ["## Defects the suite found", ""]
        if bad:
            lines.append(
                "Rows with a non-zero **lost** or **duplicated** figure are real defects, kept in the suite "
                "as expected failures until they are fixed (a fix makes the suite fail until the mark is "
                "removed):"
            )
            lines.append("")
        for x in xfails:
            lines.append(f"- `{x['test']}`: {x['reason']}")
        for name in failed:
            lines.append(f"- `{name}` **failed** in this run (see the pytest log).")
        lines.append("")
    lines += [
        "Found by this suite and fixed since (the scenarios above now prove the fixes):",
        "",
        "- a backward clock step made the appliance stamp samples with times its channel had already",
        "  used, and InfluxDB, which keys a point by tags and time, overwrote the earlier samples",
        "  (23 to 38 of 784 lost per CI run); fixed in the storage layout (commit ff16477);",
        "- a collector restarted with a full spool disk appended new batches to the spool before",
        "  replaying it, so it exited with ENOSPC again although InfluxDB was back (8 of 8 restarts);",
        "  fixed in the collector (commit 74ade5b);",
        "- the collector's validation worker and its multiprocessing resource tracker outlived a",
        "  SIGKILLed collector, two leaked processes per crash; workers now watch their parent and",
        "  exit with it (commit e046224);",
        "- scoring applied one clock offset per device for the whole run, so after a ±2 s clock step the",
        "  windows on one side of it were moved 2 s the wrong way (12 of 20 window/channel means wrong in",
        "  the CI run, 34 of 78 in the long one). The collector now restarts its offset estimate at a",
        "  step and counts steps in wb_health (clk_steps); scoring splits the run's offsets into",
        "  stretches between steps, places each step at its first flagged reading, moves every window",
        "  by its own stretch's offset and keeps only that stretch's readings by sequence number",
        "  (commits c973198, 22459bd).",
        "",
        "## The scenarios",
        "",
    ]
    for key in dict.fromkeys(e["scenario"] for e in scenarios):
        title, text = EXPLAIN.get(key, (key, ""))
        lines += [f"### {title}", "", text, ""]
        for e in (e for e in scenarios if e["scenario"] == key):
            lines.append(f"- *{e['variant']}* ({e['title']}): {fmt_details(key, e.get('details', {}))}.")
        lines.append("")
    lines += [
        "## Running it",
        "",
        "<!-- docs-test: covered-by scripts/faults.sh -->",
        "```sh",
        "scripts/faults.sh            # every scenario, long versions included; rewrites this page",
        "python -m pytest tests/faults  # the short versions only (what CI runs)",
        "```",
        "",
        "The figures of any run are also written as JSON: to `$WATTBENCH_FAULT_REPORT` when set, else to",
        "`faults.json` in pytest's temporary directory.",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("figures", type=Path)
    p.add_argument("--junit", type=Path)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--command", default="scripts/faults.sh")
    p.add_argument("--elapsed", type=float, help="seconds the whole run took")
    p.add_argument("--measured", default="", help="what was measured, e.g. 'commit abc1234'")
    args = p.parse_args()
    doc = json.loads(args.figures.read_text())
    args.out.write_text(
        render(
            doc,
            args.junit,
            args.command,
            args.elapsed,
            args.measured,
            dt.datetime.fromtimestamp(args.figures.stat().st_mtime, dt.UTC),
        )
    )
    print(f"wrote {args.out} ({len(doc.get('scenarios', []))} scenario runs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
