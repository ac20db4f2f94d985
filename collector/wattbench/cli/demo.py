"""`wattbench demo`: the whole chain on one machine, with nothing else installed.

An embedded MQTT broker (unless --broker), a host-mode appliance whose simulated meter follows this
machine's real CPU use, the collector writing into the embedded store (or --influx), and a short sweep
of the built-in workload through all 14 phases, seconds each; then the score table, an HTML report and
one line saying whether the run is valid and, if not, which checks failed. About three minutes.

The workload shares the machine with the broker, the collector and the appliance, so its workers run at
a lower priority (--nice): what the others need comes out of the workload's capacity evenly in every
phase, calibration included, instead of the workload starving them or a burst of theirs taking a few
seconds of one level. The windows are 10 s because a level's count of Poisson arrivals varies by
1/sqrt(count): at 10 % load a 5 s window holds too few transactions on a small machine to be within
±2 % reliably.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..argtypes import whole, worker_count
from ..broker import EmbeddedBroker
from ..config import CollectorConfig
from ..core.plan import Timing, calibration_spread, specpower_plan
from ..exits import Exit
from ..mqttconn import CONNECT_TIMEOUT_S, BrokerError, Settings, open_client
from ..report.measured import badge_text
from ..report.outputs import RunResult, SuiteResult, write_outputs
from ..sweep.channels import ChannelError
from ..sweep.cpuuse import other_cpu_use, steal_s
from ..sweep.progress import LogDisplay, RichDisplay
from ..sweep.scoring import ScoringOptions
from ..workloads import DEFAULT, make_workload
from . import suite as suite_cli
from . import sweep as sweep_cli
from .options import (
    add_output_options,
    add_store_options,
    as_given,
    broker_address,
    number,
    open_store_from_args,
    output_console,
    outputs_from_args,
    store_spec,
)

if TYPE_CHECKING:
    from contextlib import ExitStack

    from wattbench_fw.host import HostAppliance

    from ..core.plan import Plan
    from ..ingest.collector import Collector
    from ..store.base import Store
    from ..sweep.session import SweepSetup
    from ..sweep.suite import Suite

# Niceness of the demo's workers: the broker, collector and appliance in this process come first.
DEMO_NICE = 10


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--broker",
        metavar="HOST:PORT",
        type=broker_address,
        help="use this MQTT broker instead of the embedded one",
    )
    add_store_options(parser, purpose="write", default_help="a new temporary file")
    add_output_options(parser, RunResult, SuiteResult, stdout=False, defaults={"html": "wattbench-demo.html"})
    parser.add_argument(
        "--measure", type=number(above=0), default=10.0, metavar="S", help="measurement window (10)"
    )
    parser.add_argument("--pre", type=number(at_least=0), default=1.5, metavar="S", help="ramp-up (1.5)")
    parser.add_argument("--post", type=number(at_least=0), default=0.5, metavar="S", help="ramp-down (0.5)")
    parser.add_argument(
        "--gap", type=number(at_least=0), default=0.3, metavar="S", help="pause between phases (0.3)"
    )
    parser.add_argument("--workers", type=worker_count, metavar="N", help="workload processes (one per core)")
    parser.add_argument(
        "--nice",
        type=whole(at_least=0, at_most=19),
        default=DEMO_NICE,
        metavar="N",
        help="niceness of the workload processes, 0 to 19 (%(default)s: the broker, collector and appliance come first)",
    )
    parser.add_argument(
        "--suite",
        action="store_true",
        help="a short worklet suite instead of the transaction mix: sha256, flood and random reads, "
        "100 %% and 50 %% each, one active idle, and the SERT-style suite score (about 3.5 minutes)",
    )
    parser.add_argument("--quiet", action="store_true", help="no live display")


def run(args: argparse.Namespace) -> int:
    workdir = Path(tempfile.mkdtemp(prefix="wattbench-demo-"))
    keep: list[Path] = []  # what the demo's last lines point to
    try:
        return _run(args, workdir, keep)
    finally:
        # The collector's state and spool and the appliance's flash go; the store stays only when the
        # re-render command printed at the end names it.
        for entry in workdir.iterdir() if workdir.is_dir() else ():
            if any(entry.name.startswith(k.name) for k in keep):
                continue  # the store and its journal files
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)


def _run(args: argparse.Namespace, workdir: Path, keep: list[Path]) -> int:
    from ..ingest.collector import CollectorError  # late: start-up
    from ..sweep.session import NothingMeasured  # late: start-up

    console = output_console()
    outputs = outputs_from_args(args, SuiteResult if args.suite else RunResult, console)
    # The plan's limits, as the sweep states them, before a service is started for it.
    timing = as_given(sweep_cli.PLAN_OPTIONS, lambda: Timing(args.pre, args.measure, args.post, args.gap))
    t_start = time.monotonic()
    with contextlib.ExitStack() as stack:  # what was started, stopped last started first
        try:
            broker, protocol = start_broker(args, console, stack)
            store, spec, collector = start_store(args, workdir, broker, protocol, console, stack)
            if start_appliance(workdir, broker, collector, console, stack) is None:
                console.print("[red]the simulated appliance could not reach the broker[/]")
                return Exit.UNREACHABLE
            plan = plan_demo(args, timing, workdir, console)
            setup = sweep_setup(args, store, broker, plan, console)
            steal0, t0 = steal_s(), time.monotonic()
            done = measure(setup, plan, console)
            steal = (steal_s() - steal0) / max(time.monotonic() - t0, 1e-3)
        except KeyboardInterrupt:
            console.print("[yellow]demo interrupted[/]")
            return Exit.INTERRUPTED
        except CollectorError as exc:
            print(f"wattbench demo: {exc}", file=sys.stderr)  # one line, as every command says it
            return exc.exit_code
        except BrokerError as exc:
            print(f"wattbench demo: {exc}", file=sys.stderr)
            return Exit.BROKER
        except ChannelError as exc:
            print(f"wattbench demo: {exc}", file=sys.stderr)
            return Exit.CONFIG
        except NothingMeasured as exc:
            console.print(f"[yellow]demo[/]: {exc} ({sweep_cli.NOTHING_STORED})", soft_wrap=True)
            return sweep_cli.ended_early_code(exc.record.interrupted)
        write_outputs(
            SuiteResult(done.document) if args.suite else RunResult(done.evaluation, store.series), outputs
        )
    took = time.monotonic() - t_start
    if args.suite:
        print_line(console, f"demo result: {suite_verdict(done.document)}")
        print_line(console, f"demo finished in {took:.0f} s")
        return suite_cli.exit_code(done)
    # One line, never wrapped, so that a script (bench/bench_demo_validity.py) can read it too.
    print_line(console, f"demo result: {verdict(done.evaluation, steal=steal)}")
    rerender = f"; re-render with: wattbench report {done.evaluation.run} --store {spec}"
    # a command to copy: one line, whatever the width
    print_line(console, f"demo finished in {took:.0f} s{'' if args.influx else rerender}")
    if not args.influx and not args.store:
        keep.append(workdir / "demo.sqlite")
    return sweep_cli.exit_code(done)


def print_line(console: Any, line: str) -> None:
    """A line as it is, never wrapped or styled."""
    console.print(line, soft_wrap=True, markup=False, highlight=False)


def _stopping(name: str, stop: Callable[[], Any]) -> Callable[[], None]:
    """stop(), whose failure is a warning: the demo's outcome is said whatever one part does at exit."""

    def quietly() -> None:
        try:
            stop()
        except Exception as exc:
            logging.getLogger("wattbench.cli.demo").warning("stopping %s: %s", name, exc)

    return quietly


def start_broker(args: argparse.Namespace, console: Any, stack: ExitStack) -> tuple[str, str]:
    """The broker the demo uses, --broker or the embedded one: its address and MQTT version."""
    if args.broker:
        # A broker given to the demo is up already: asked once, as the sweep asks one, before anything
        # is started or printed (the collector would wait out its timeout as for one still starting).
        client = open_client(Settings.parse(args.broker), f"wattbench-demo-{os.getpid()}")
        client.disconnect()
        client.loop_stop()
        console.print(f"[bold]broker[/]: {args.broker}")
        return args.broker, "5"

    broker = EmbeddedBroker(port=0).start()
    stack.callback(_stopping("broker", broker.stop))
    console.print(f"[bold]broker[/]: embedded MQTT {broker.protocol} on {broker.url}")
    return broker.url, broker.protocol


def start_store(
    args: argparse.Namespace, workdir: Path, broker: str, protocol: str, console: Any, stack: ExitStack
) -> tuple[Store, str, Collector]:
    """The store, opened as every command opens it, and the collector writing into it: the store, how
    it is named, and the collector. InfluxDB must answer now: the collector would spool what it cannot
    store and the sweep would run its minutes only to find nothing to read (StoreUnavailable: exit 3,
    at once)."""
    from ..ingest.collector import Collector  # late: start-up

    spec = store_spec(args, default=str(workdir / "demo.sqlite"))
    store = open_store_from_args(args, must_exist=bool(args.influx), default=spec)
    stack.callback(_stopping("store", store.close))
    collector = Collector(
        CollectorConfig(
            broker=broker,
            protocol=protocol,
            store=spec,
            influx_db=args.db or "",
            id="demo",
            state_dir=str(workdir / "collector"),
            spool_dir=str(workdir / "spool"),
            validate_workers=0,  # the cores belong to the workload
            health_period_s=2.0,
            # A broker given to the demo is up already: asked as the sweep asks one, not waited for.
            connect_timeout_s=CONNECT_TIMEOUT_S,
        )
    )
    collector.start()  # a CollectorError ends the demo with its exit code
    stack.callback(_stopping("collector", collector.stop))
    console.print(f"[bold]collector[/]: into {spec}")
    return store, spec, collector


# The demo's meter runs on the machine it measures, as no real meter does: when the host stalls this
# process (a hypervisor taking the core for a fifth of a second), a reading whose slot has passed is
# missed, and the run fails no_gaps. Twice a second, twice PTDaemon's rate, a slot rides out a stall
# of half a second.
DEMO_METER_HZ = 2.0


def appliance_config(workdir: Path, broker: str) -> dict[str, Any]:
    """The demo appliance: one simulated meter following this machine's CPU use."""
    from wattbench_fw.host import sim_config  # late: start-up

    cfg: dict[str, Any] = sim_config(
        dev="demo-sim", broker=broker, hz=DEMO_METER_HZ, model="cpu", idle_w=60.0, peak_w=250.0
    )
    cfg["flash_dir"] = str(workdir / "appliance")
    return cfg


def start_appliance(
    workdir: Path, broker: str, collector: Collector, console: Any, stack: ExitStack
) -> HostAppliance | None:
    """The host-mode appliance with a meter that follows this machine's CPU use; None when it could
    not reach the broker. Returns once the collector has its first samples (or after 15 s)."""
    from wattbench_fw.host import HostAppliance  # late: start-up

    cfg = appliance_config(workdir, broker)
    appliance = HostAppliance(cfg).start()
    stack.callback(_stopping("appliance", lambda: appliance.stop(timeout=5)))
    if not appliance.wait_connected(20):
        return None
    console.print(
        f"[bold]appliance[/]: demo-sim/sim, simulated meter at {DEMO_METER_HZ:g} Hz, 60 W idle to 250 W "
        "at full CPU"
    )
    collector.wait_for(lambda c: c.get("stored_samples", 0) > 0 or c.get("samples", 0) > 0, timeout=15)
    return appliance


@dataclass(frozen=True)
class DemoPlan:
    """The transaction mix's plan, or, with --suite, the suite and each worklet's plan."""

    plan: Plan
    suite: Suite | None = None
    plans: dict[str, Plan] = field(default_factory=dict)


def plan_demo(args: argparse.Namespace, timing: Timing, workdir: Path, console: Any) -> DemoPlan:
    """The demo's plan, said in one line: phases of seconds each."""

    plan = specpower_plan(timing=timing)
    if not args.suite:
        console.print(
            f"[bold]sweep[/]: {len(plan.phases)} phases (3 calibration, 100%…10%, active idle), "
            f"{args.measure:g} s windows, about {plan.duration_s():.0f} s"
        )
        return DemoPlan(plan)
    suite = demo_suite(workdir, args.workers, args.nice)
    plans = {e.name: specpower_plan(3, (1.0, 0.5), i == 0, timing) for i, e in enumerate(suite.entries)}
    phases = sum(len(p.phases) for p in plans.values())
    total = sum(p.duration_s() for p in plans.values())
    console.print(
        f"[bold]suite[/]: {', '.join(e.name for e in suite.entries)}; each 3 calibration, 100%, 50%; "
        f"active idle once; {phases} phases, {args.measure:g} s windows, about {total:.0f} s"
    )
    return DemoPlan(plan, suite, plans)


def sweep_setup(
    args: argparse.Namespace, store: Store, broker: str, plan: DemoPlan, console: Any
) -> SweepSetup:
    """The SweepSetup `wattbench sweep --no-inlet-required` would make for the built-in workload, after
    saying what the reader should know before the run."""

    from ..sweep.driver import new_run_id  # late: start-up
    from ..sweep.session import MqttSettings, SweepSetup  # late: start-up

    console.print("no inlet probe in the demo: the inlet temperature check is not applied")
    note = machine_note()
    if note:
        console.print(f"[yellow]{note}[/]")
    return SweepSetup(
        run=new_run_id(),
        plan=plan.plan,
        workload=make_workload(
            DEFAULT, {"nice": args.nice, **({"workers": args.workers} if args.workers else {})}
        ),
        store=store,
        mqtt=MqttSettings(broker),
        scoring=ScoringOptions(no_inlet_required=True),
        display=LogDisplay() if args.quiet or not sys.stderr.isatty() else RichDisplay(),
        wait_data_s=15.0,
        announce=lambda line: console.print(f"[bold]sweep[/]: {line}"),
    )


def measure(setup: SweepSetup, plan: DemoPlan, console: Any) -> Any:
    """The run, as `wattbench sweep` or, with --suite, `wattbench suite` runs it: its outcome."""
    from ..sweep.session import run_sweep  # late: start-up
    from ..sweep.suite import run_suite  # late: start-up

    if plan.suite is None:
        return run_sweep(setup)
    return run_suite(
        plan.suite,
        setup.run,
        setup,
        lambda entry, _first: plan.plans[entry.name],
        announce=lambda line: console.print(f"[bold]suite[/]: {line}"),
    )


def suite_verdict(doc: Mapping[str, Any]) -> str:
    score = doc.get("score")
    figure = (
        f"suite score {score['value']:.4f} (SERT-style, relative to itself)" if score else "no suite score"
    )
    return f"{'VALID' if doc['valid'] else 'NOT VALID'}, {figure}"


def demo_suite(workdir: Any, workers: int | None, nice: int) -> Any:
    """One worklet of each group. The storage worklet reads a 64 MiB file in the demo's folder,
    directly where that filesystem allows it and through the page cache (said so) where it does not."""

    from ..sweep.suite import parse_suite  # late: start-up

    path = str(workdir / "worklet.dat")
    probe = workdir / "direct.probe"
    probe.write_bytes(bytes(4096))
    try:
        os.close(os.open(str(probe), os.O_RDONLY | getattr(os, "O_DIRECT", 0)))
        direct = True
    except OSError:  # tmpfs and some others have no direct I/O
        direct = False
    finally:
        probe.unlink()
    common: dict[str, Any] = {"nice": nice, **({"workers": workers} if workers else {})}
    return parse_suite(
        {
            "name": "demo",
            "worklet": [
                {"worklet": "sha256", **common},
                {"worklet": "flood", **common},
                {"worklet": "random", **common, "options": {"file": path, "size_mb": 64, "direct": direct}},
            ],
        },
        "demo suite",
    )


# How long the demo looks at the machine before the run, and how much of it other processes may keep
# busy before it warns: a tenth of the cores takes that much from the niced workers, and whatever of it
# comes and goes between calibration and a level moves that level by as much.
BUSY_WINDOW_S = 2.0
BUSY_SHARE = 0.1


def machine_note() -> str | None:
    """The busy-machine warning, judged from what other processes do as the run begins."""

    return busy_note(other_cpu_use(BUSY_WINDOW_S), os.cpu_count() or 1)


def busy_note(others: float, cores: int) -> str | None:
    """A warning before the run when other processes already keep the machine busy: `others` is the
    cores they used just now (other_cpu_use)."""
    if others <= max(0.2, BUSY_SHARE * cores):
        return None
    return (
        f"this machine is busy (other processes keep {others:.1f} of its {cores} cores busy): they take "
        "cores from the workload, so the run may well be INVALID"
    )


def _where(phase: str | None, levels: dict[str, Any]) -> str:
    lv = levels.get(phase or "")
    if lv is not None and lv.kind == "target" and lv.target is not None:
        return f"{lv.target * 100:g} %"
    if lv is not None and lv.kind == "idle":
        return "active idle"
    return phase or "the run"


# Steal, in cores, from which a missed load names it: below it the time taken is within what the
# levels' tolerance absorbs on a 2-core guest.
STEAL_NOTE = 0.05


def verdict(evaluation: Any, load_tolerance: float = 0.02, steal: float = 0.0) -> str:
    """The demo's verdict on one line: VALID as the standard its measurement meets, or INVALID and every
    failed check, where and by how much, and, when a load was missed, what moved the machine's own
    speed: calibration intervals further apart than the tolerance, and the cores a hypervisor gave to
    others during the run (steal, in cores on average)."""
    if evaluation.valid:
        return badge_text(True, evaluation.checks, evaluation.result)

    levels = {lv.phase: lv for lv in evaluation.levels}
    parts = []
    for c in evaluation.checks:
        if c.ok:
            continue
        lv = levels.get(c.phase or "")
        if c.name.startswith("load_within") and lv is not None and lv.actual is not None:
            share = lv.behind_share
            behind = (
                f", {share * 100:.1f} % of its arrivals not served: the machine fell behind" if share else ""
            )
            parts.append(
                f"{c.name} failed at {_where(c.phase, levels)} ({lv.actual * 100:.1f} % of calibrated{behind})"
            )
        elif c.phase:
            parts.append(
                f"{c.name} failed at {_where(c.phase, levels)} ({c.reason})"
                if c.reason
                else f"{c.name} failed at {_where(c.phase, levels)}"
            )
        else:
            parts.append(f"{c.name} failed ({c.reason})" if c.reason else f"{c.name} failed")
    spread = calibration_spread([r for _, r in evaluation.calibration])
    load_missed = any(not c.ok and c.name.startswith("load_within") for c in evaluation.checks)
    if load_missed and spread is not None and spread > load_tolerance:
        parts.append(
            f"this machine's throughput differed by {spread * 100:.1f} % between the calibration "
            f"intervals used, so its levels cannot be held within ±{load_tolerance * 100:g} % reliably"
        )
    if load_missed and steal >= STEAL_NOTE:
        parts.append(
            f"the hypervisor gave {steal:.2f} of this virtual machine's cores to others on average during "
            "the run (steal), so its speed was not its own"
        )
    text = "; ".join(parts) or "the result is marked invalid"
    return "INVALID: " + " ".join(text.split())
