"""The benchmarks in bench/ import what they share with the tests from the development kit
(wattbench_devkit), never by editing the import path, and say in one line what to install when the
kit is missing."""

from __future__ import annotations

import ast
import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
SCRIPTS = sorted(BENCH.glob("*.py"))
# The benchmarks that use the kit (services, streams, the memory rig, the fuzz targets).
DEVKIT_USERS = [
    "bench_demo_validity.py",
    "bench_firmware_memory.py",
    "bench_influx_write.py",
    "bench_ingest.py",
    "fuzz_all.py",
    "soak.py",
]
MUTATORS = {"insert", "append", "extend", "remove", "pop", "clear", "__setitem__", "__iadd__"}


def _is_sys_path(node: ast.AST, path_names: set[str]) -> bool:
    if isinstance(node, ast.Name):
        return node.id in path_names
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "path"
        and isinstance(node.value, ast.Name)
        and node.value.id == "sys"
    )


def path_edits(source: str) -> list[int]:
    """Line numbers where the code changes its own module search path."""
    tree = ast.parse(source)
    # `from sys import path` makes the bare name an alias of sys.path.
    path_names = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "sys"
        for alias in node.names
        if alias.name == "path"
    }
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete):
            targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
            for t in targets:
                inner = t.value if isinstance(t, ast.Subscript) else t
                if _is_sys_path(inner, path_names):
                    lines.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            f = node.func
            if f.attr in MUTATORS and _is_sys_path(f.value, path_names):
                lines.append(node.lineno)
            elif f.attr == "addsitedir" and isinstance(f.value, ast.Name) and f.value.id == "site":
                lines.append(node.lineno)
    return sorted(lines)


def test_the_check_sees_every_way_of_editing_the_path() -> None:
    source = """
import sys, site
from sys import path as p
sys.path.insert(0, "a")
sys.path[:0] = ["b"]
sys.path += ["c"]
sys.path = ["d"]
p.append("e")
site.addsitedir("f")
env = dict(PYTHONPATH=":".join(sys.path))
"""
    assert path_edits(source) == [4, 5, 6, 7, 8, 9]


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.name for s in SCRIPTS])
def test_no_bench_script_edits_sys_path(script: Path) -> None:
    assert path_edits(script.read_text()) == [], f"{script.name} edits sys.path"


@pytest.mark.parametrize("name", DEVKIT_USERS)
def test_bench_script_runs_with_the_kit(name: str, tmp_path: Path) -> None:
    # From another folder, so nothing comes from the working directory.
    res = subprocess.run(
        [sys.executable, str(BENCH / name), "--help"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("usage:")


@pytest.mark.parametrize("name", DEVKIT_USERS)
def test_bench_script_without_the_kit_says_what_to_install(name: str) -> None:
    # None in sys.modules makes every import of the kit fail as if it were not installed.
    code = (
        "import runpy, sys\n"
        "sys.modules['wattbench_devkit'] = None\n"
        f"sys.argv = [{str(BENCH / name)!r}, '--help']\n"
        f"runpy.run_path({str(BENCH / name)!r}, run_name='__main__')\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2
    assert res.stdout == ""
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    assert "wattbench_devkit" in lines[0]
    assert "pip install -e . -e ./devkit" in lines[0]


def test_the_ingest_progress_poll_counts_what_a_query_counts(influxdb: Any) -> None:
    """bench_ingest polls InfluxDB's write counters rather than a count query (which would scan the
    database on the cores being measured): they must say the same, per database."""
    import urllib.request

    def write(db: str, lines: list[str]) -> None:
        req = urllib.request.Request(
            f"{influxdb.url}/write?db={db}&precision=ms", data="\n".join(lines).encode()
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            assert resp.status == 204

    influxdb.create_database("other")
    assert influxdb.points_written(influxdb.db) == 0
    t0 = 1_763_709_600_000
    write(influxdb.db, [f"wb_sample,ch=psu1,dev=a s={i}i {t0 + i}" for i in range(1500)])
    write("other", [f"wb_sample,ch=psu1,dev=b s={i}i {t0 + i}" for i in range(7)])
    # a point in another week's shard counts as well
    write(influxdb.db, [f"wb_sample,ch=psu1,dev=a s=9999i {t0 + 30 * 86_400_000}"])
    stored = influxdb.query('SELECT count("s") FROM "wb_sample"')[0]["count"]
    assert influxdb.points_written(influxdb.db) == stored == 1501
    assert influxdb.points_written("other") == 7


def _bench_module(name: str) -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Spends `burn` seconds of its own CPU, stores the lines read from stdin, says "ready" and waits: a
# consumer that drains its queue before it reports itself ready, as the collector does when the broker
# resumes its session.
_EAGER = """
import subprocess, sys, time, urllib.request
url, burn, where = sys.argv[1], float(sys.argv[2]), sys.argv[3]
body = sys.stdin.buffer.read()
spin = "import time\\nstart = time.process_time()\\nwhile time.process_time() - start < %r: pass" % burn
if where == "child":  # as the collector's checking process does its work, and lives on
    child = subprocess.Popen([sys.executable, "-c", spin + "\\nprint(flush=True)\\ntime.sleep(600)"],
                             stdout=subprocess.PIPE)
    child.stdout.readline()
else:
    exec(spin)
if body:
    urllib.request.urlopen(urllib.request.Request(url, data=body), timeout=60).read()
print("ready", flush=True)
time.sleep(600)
"""


class _EagerConsumer:
    def __init__(self, url: str, body: bytes, burn_s: float, where: str = "self") -> None:
        self.url, self.body, self.burn_s, self.where = url, body, burn_s, where
        self.starts = 0
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.starts += 1
        # The first start only opens the session: nothing is queued yet, nothing to drain.
        body, burn = (self.body, self.burn_s) if self.starts > 1 else (b"", 0.0)
        self._spawn([sys.executable, "-c", _EAGER, self.url, str(burn), self.where], body)

    def _spawn(self, argv: list[str], body: bytes) -> None:
        # A session of its own: stop() ends its child with it.
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(body)
        self.proc.stdin.close()
        assert self.proc.stdout.readline() == b"ready\n"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self) -> None:
        import os
        import signal

        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


def test_the_ingest_cpu_figure_counts_a_drain_done_before_the_consumer_is_ready(
    mosquitto: Any, influxdb: Any
) -> None:
    """The CPU per sample of bench_ingest is the consumer's whole CPU less its start-up. A baseline read
    once the consumer says it is ready missed what it drained before that, and flattered it."""
    from wattbench_devkit.streams import Stream

    bench = _bench_module("bench_ingest")
    stream = Stream(devices=2, channels=2, rate_hz=1000, batch=200, samples_per_device=800)
    messages = stream.messages()
    body = "\n".join(bench.stream_lines(messages)).encode()
    burn_s = 0.5
    consumer = _EagerConsumer(f"{influxdb.url}/write?db=eager&precision=u", body, burn_s)
    res = bench.measure("eager", consumer, influxdb, "eager", stream, messages, mosquitto, 0.05)
    assert res["problems"] == []
    assert res["cpu_us"] * stream.total / 1e6 >= 0.9 * burn_s


def test_the_ingest_cpu_figure_says_how_much_the_child_processes_spent(mosquitto: Any, influxdb: Any) -> None:
    """The collector's checking processes are children of it: their CPU is in its figure and also
    printed apart, which says where the collector's CPU goes without a profiler. A child that had
    already exited when the figure was read would not count; the collector's live as long as it does."""
    from wattbench_devkit.streams import Stream

    bench = _bench_module("bench_ingest")
    stream = Stream(devices=2, channels=2, rate_hz=1000, batch=200, samples_per_device=800)
    messages = stream.messages()
    body = "\n".join(bench.stream_lines(messages)).encode()
    burn_s = 0.5
    spent = {}
    for where in ("self", "child"):
        url = f"{influxdb.url}/write?db={where}&precision=u"
        consumer = _EagerConsumer(url, body, burn_s, where=where)
        try:
            res = bench.measure(where, consumer, influxdb, where, stream, messages, mosquitto, 0.05)
        finally:
            consumer.stop()
        assert res["problems"] == []
        spent[where] = (res["cpu_us"] * stream.total / 1e6, res["children_cpu_us"] * stream.total / 1e6)
    assert spent["self"][1] < 0.1 * burn_s <= 0.9 * burn_s <= spent["self"][0]
    assert 0.9 * burn_s <= spent["child"][1] <= spent["child"][0]
    assert bench._split(2.0, 0.0) == ""
    assert bench._split(2.0, 1.5) == " (main process 0.50, checking processes 1.50)"


def test_the_ingest_cpu_parts_never_go_below_zero() -> None:
    """A consumer whose main process started dearer the first time (cold caches) than in the measured
    run made the main part negative, so the whole came out below the children's share (0.49 of 0.50 s)."""
    bench = _bench_module("bench_ingest")
    own, kids = bench.less_startup((0.11, 0.62), (0.12, 0.12))
    assert (own, kids) == (0.0, 0.5)
    assert kids <= own + kids
    assert bench.less_startup((0.5, 0.3), (0.1, 0.1)) == (0.4, 0.19999999999999998)


# Stores the first half of the lines, says "ready", and stores the rest `gap` seconds later.
_TWO_STEP = """
import sys, time, urllib.request
url, gap = sys.argv[1], float(sys.argv[2])
lines = sys.stdin.buffer.read().split(b"\\n")
half = len(lines) // 2
def store(part):
    if part:
        urllib.request.urlopen(urllib.request.Request(url, data=b"\\n".join(part)), timeout=60).read()
store(lines[:half])
print("ready", flush=True)
time.sleep(gap)
store(lines[half:])
time.sleep(600)
"""


class _TwoStepConsumer(_EagerConsumer):
    def start(self) -> None:
        self.starts += 1
        body = self.body if self.starts > 1 else b""
        self._spawn([sys.executable, "-c", _TWO_STEP, self.url, str(self.burn_s)], body)


def test_the_ingest_rate_ends_when_the_last_sample_is_stored_not_when_the_count_confirms_it(
    mosquitto: Any, influxdb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The count that confirms the last poll scans every point stored (about 30 ms and 0.05 s of
    InfluxDB's CPU at a million); the ceiling's figures hold no such query, so a consumer's must not
    either. Its time was counted in the consumer's span and its CPU in InfluxDB's under the consumer."""
    from wattbench_devkit.streams import Stream

    bench = _bench_module("bench_ingest")
    stream = Stream(devices=2, channels=2, rate_hz=1000, batch=200, samples_per_device=800)
    messages = stream.messages()
    body = "\n".join(bench.stream_lines(messages)).encode()
    gap_s, count_s = 1.0, 1.5
    real_count = bench.count

    def slow_count(influx: Any, db: str) -> int:
        time.sleep(count_s)
        return int(real_count(influx, db))

    monkeypatch.setattr(bench, "count", slow_count)
    consumer = _TwoStepConsumer(f"{influxdb.url}/write?db=twostep&precision=u", body, gap_s)
    try:
        res = bench.measure("two-step", consumer, influxdb, "twostep", stream, messages, mosquitto, 0.05)
    finally:
        consumer.stop()
    assert res["problems"] == []
    rest = stream.total - stream.total // 2
    # The span runs from the poll that saw the first half to the one that saw the rest: about gap_s.
    assert rest / (gap_s + 0.4) < res["rate"] < rest / (gap_s - 0.2)


# Says "ready", then stores its lines in `pieces` equal parts, one every `step` seconds: a consumer
# draining at a steady pace.
_STEADY = """
import sys, time, urllib.request
url, pieces, step, log = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
lines = sys.stdin.buffer.read().split(b"\\n")
print("ready", flush=True)
size = -(-len(lines) // pieces)
start, stored = time.monotonic(), 0
with open(log, "w") as out:
    for k in range(pieces):
        part = lines[k * size : (k + 1) * size]
        if part:
            urllib.request.urlopen(urllib.request.Request(url, data=b"\\n".join(part)), timeout=60).read()
            stored += len(part)
            out.write(f"{time.monotonic()} {stored}\\n")
            out.flush()
        time.sleep(max(0.0, start + (k + 1) * step - time.monotonic()))
time.sleep(600)
"""


class _SteadyConsumer(_EagerConsumer):
    """Writes its points in pieces at a steady pace and logs, on the machine's monotonic clock, when
    each piece was stored: the truth the bench's drain is checked against, whatever the pace this
    machine's load allowed."""

    def __init__(self, url: str, body: bytes, pieces: int, step_s: float, log: Path) -> None:
        super().__init__(url, body, 0.0)
        self.pieces, self.step_s, self.log = pieces, step_s, log

    def start(self) -> None:
        self.starts += 1
        body = self.body if self.starts > 1 else b""
        argv = [sys.executable, "-c", _STEADY, self.url, str(self.pieces), str(self.step_s), str(self.log)]
        self._spawn(argv, body)

    def stored_at(self, n: int) -> float:
        """When the writer had stored n points."""
        for line in self.log.read_text().splitlines():
            t, stored = line.split()
            if int(stored) >= n:
                return float(t)
        raise AssertionError(f"the writer never stored {n} points")


def test_the_ingest_rate_finds_the_end_of_a_drain_closer_than_the_poll_interval(
    mosquitto: Any, influxdb: Any, tmp_path: Path
) -> None:
    """The drain's end was the first poll that saw every point, up to a whole poll interval after the
    last one was stored: at the default 0.25 s and a drain of 2.5 s, rates came out up to 10 % low
    (5 % on average), and more or less so from run to run. Near the end the polls come closer.

    The rate is checked against the writer's own log of when each piece was stored, over the same
    window, not against the pace it was asked for: on a loaded machine the writer falls behind its
    pace, and that is no fault of the bench."""
    from wattbench_devkit.streams import Stream

    bench = _bench_module("bench_ingest")
    stream = Stream(devices=2, channels=2, rate_hz=1000, batch=200, samples_per_device=2000)
    messages = stream.messages()
    body = "\n".join(bench.stream_lines(messages)).encode()
    pieces, step_s = 40, 0.05
    consumer = _SteadyConsumer(
        f"{influxdb.url}/write?db=steady&precision=u", body, pieces, step_s, tmp_path / "stored.log"
    )
    try:
        res = bench.measure("steady", consumer, influxdb, "steady", stream, messages, mosquitto, 0.6)
    finally:
        consumer.stop()
    assert res["problems"] == []
    first_s, first_n, _ = res["window"]
    truth = (stream.total - first_n) / (consumer.stored_at(stream.total) - first_s)
    # Before: the end found at the next 0.6 s poll, up to 0.6 s late on a window of about 1.4 s.
    assert 0.9 * truth < res["rate"] < 1.1 * truth, (res["rate"], truth)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("validate_workrs = 0\n", "unknown setting validate_workrs in"),
        ("validate_workrs = 0\n", "(did you mean validate_workers?)"),
        ("x = [\n", "not valid TOML"),
    ],
)
def test_a_wrong_ingest_variant_ends_the_run_before_it_starts(tmp_path: Path, text: str, says: str) -> None:
    variant = tmp_path / "variant.toml"
    variant.write_text(text)
    run = subprocess.run(
        [sys.executable, str(BENCH / "bench_ingest.py"), "--variant", str(variant)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2
    assert run.stdout == ""
    assert says in run.stderr.strip().splitlines()[-1]
    assert "Traceback" not in run.stderr


BAD_ARGUMENTS = [
    ("bench_ingest", ["--devices", "0"], "--devices"),
    ("bench_ingest", ["--rounds", "0"], "--rounds"),
    ("bench_ingest", ["--samples", "5"], "--samples"),
    ("bench_ingest", ["--ceiling-batches", "0,10000"], "--ceiling-batches"),
    ("bench_align_score", ["--channels", "0"], "--channels"),
    ("bench_validate", ["--batch", "600"], "--batch"),
    ("bench_influx_write", ["--repeat", "0"], "--repeat"),
    ("bench_sampler_drift", ["--hz", "nan"], "--hz"),
    ("bench_workload_pacing", ["--measure", "-1"], "--measure"),
    ("bench_demo_validity", ["--runs", "0"], "--runs"),
    ("bench_demo_validity", ["--probe", "0", "--measure", "-5"], "--measure"),
    ("soak", ["--appliances", "0"], "--appliances"),
    ("fuzz_all", ["--jobs", "0"], "--jobs"),
]


@pytest.mark.parametrize(("name", "argv", "option"), BAD_ARGUMENTS, ids=lambda v: str(v))
def test_a_bench_refuses_a_wrong_number_in_one_line_before_it_starts(
    name: str, argv: list[str], option: str, tmp_path: Path
) -> None:
    """A bench's numbers are checked as its command line is read, as the wattbench command's are
    (wattbench.argtypes): `bench_ingest --devices 0` and `bench_align_score --channels 0`
    ended in a traceback, `--rounds 0` after starting InfluxDB."""
    res = subprocess.run(
        [sys.executable, str(BENCH / f"{name}.py"), *argv],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert res.returncode == 2, res.stderr
    assert res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and option in lines[0], res.stderr


def test_every_bench_reads_its_numbers_with_the_checked_types() -> None:
    """The same rule as tests/test_cli.py's for the command: no bare int or float type, and the
    one-line parser of the command (cli/parser.py)."""
    bare = []
    for script in sorted(BENCH.glob("*.py")):
        tree = ast.parse(script.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg == "type":
                if isinstance(node.value, ast.Name) and node.value.id in ("int", "float"):
                    bare.append(f"{script.name}:{node.value.lineno} type={node.value.id}")
            if isinstance(node, ast.Attribute) and node.attr == "ArgumentParser":
                bare.append(f"{script.name}:{node.lineno} argparse.ArgumentParser")
    assert bare == []


CTRL_C_CASES = {
    # bench, its arguments, and what must be running when Ctrl-C comes
    "bench_ingest in the ceiling": ("bench_ingest", ["--samples", "2000000", "--rounds", "1"], ["influxd"]),
    "bench_ingest in a consumer": (
        "bench_ingest",
        ["--samples", "2000000", "--rounds", "1"],
        ["wattbench.cli collect"],
    ),
    "bench_influx_write in its writes": ("bench_influx_write", ["--repeat", "50"], ["influxd"]),
    "bench_demo_validity in a demo": (
        "bench_demo_validity",
        ["--runs", "1", "--probe", "0", "--measure", "5"],
        ["wattbench.cli demo"],
    ),
    "soak under load": (
        "soak",
        ["--duration", "120", "--appliances", "4", "--per-process", "2", "--profiles", "default"],
        ["wattbench.cli collect", "--group"],
    ),
}


@pytest.mark.parametrize("case", list(CTRL_C_CASES))
def test_ctrl_c_on_a_bench_stops_what_it_started(case: str) -> None:
    """Ctrl-C (SIGINT to the whole foreground group, as a terminal sends it) ends a benchmark with one
    line and exit 130, and leaves no consumer or service running. bench_ingest used to print a
    traceback and leave the collector it was measuring, or the broker and InfluxDB, running; soak left
    everything it had started; bench_influx_write printed a traceback."""
    import os
    import signal
    import time

    import psutil

    name, args, wanted = CTRL_C_CASES[case]
    argv = [sys.executable, str(BENCH / f"{name}.py"), *args]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    me = psutil.Process(proc.pid)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        names = " ".join(" ".join(p.cmdline()) for p in me.children(recursive=True) if p.is_running())
        if all(w in names for w in wanted):
            break
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail(f"{name} never had {wanted} running")
    # into the work: the ceiling's writes, the consumer's drain, the soak's load. The consumer drains
    # its 2,000,000 samples in seconds on a quiet day, and once had finished 3 s after it started.
    time.sleep(1 if "consumer" in case else 3)
    family = me.children(recursive=True)
    os.killpg(proc.pid, signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == f"{name}: interrupted; no figures"
    time.sleep(1)
    left = [p for p in family if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert left == [], [p.cmdline() for p in left]


@pytest.mark.timeout(300)
def test_the_demo_validity_bench_prints_each_runs_calibration_levels_and_load(tmp_path: Path) -> None:
    """One demo with windows of a fraction of a second, after a probe of two seconds: the run's
    verdict, the load at its start, its calibration intervals with their spread and each level's actual load against its target, then the
    count of VALID runs."""
    pytest.importorskip("wattbench_fw.host")
    res = subprocess.run(
        [
            sys.executable, str(BENCH / "bench_demo_validity.py"), "--runs", "1", "--probe", "2",
            "--probe-cores", "0", "--measure", "0.5", "--pre", "0.3", "--post", "0.1", "--gap", "0.1",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=280,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    out = res.stdout.splitlines()
    assert out[0].startswith("start: load average ")
    # the probe on every core at once, as the workers run: the interpreter's speed and a hash in C
    cores = os.cpu_count() or 1
    where = "one core" if cores == 1 else f"{cores} cores, their counts added,"
    assert out[1].startswith(f"{where} flat out for 2 s, a second of each in turn: transaction "), out[1]
    assert "; hash in C " in out[1] and out[1].count("variation") == 2, out[1]
    run = out.index(next(ln for ln in out if ln.startswith("run 1/1: ")))
    assert out[run].split(": ", 1)[1].startswith(("VALID", "INVALID")), out[run]
    assert out[run + 1].startswith("  start: load average ") and "other processes" in out[run + 1]
    cal = out[run + 2]
    assert cal.startswith("  calibration: ") and cal.count(" / ") == 2 and "spread" in cal, cal
    levels = out[run + 3]
    assert levels.startswith("  actual load: 100 %: ") and "10 %: " in levels, levels
    assert levels.count("%: ") == 10, levels
    assert out[run + 4].startswith("  CPU, cores (10 s means): workers "), out[run + 4]
    assert "demo process" in out[run + 4] and "other processes" in out[run + 4] and "steal" in out[run + 4]
    assert out[-3] in ("1 of 1 VALID", "0 of 1 VALID")
    assert out[-1].startswith("end: load average ")
