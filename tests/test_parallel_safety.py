"""What keeps the suite safe to run in parallel (scripts/test.sh runs it under pytest-xdist): ports from a
band of the worker's own, wattbench's state away from the user's and from other workers, a module's
module-scoped fixtures made once, on one worker, and no test that binds a fixed port on its own."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from wattbench_devkit import services

REPO = Path(__file__).resolve().parents[1]


def _ports_of(worker: str, n: int, udp: bool = False) -> list[int]:
    code = (
        "from wattbench_devkit import services as s\n"
        f"f = s.free_udp_port if {udp} else s.free_port\n"
        f"print(' '.join(str(f()) for _ in range({n})))"
    )
    env = dict(os.environ, PYTEST_XDIST_WORKER=worker)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return [int(p) for p in out.stdout.split()]


def test_each_worker_takes_its_ports_from_a_band_of_its_own_below_the_ephemeral_range() -> None:
    ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    seen: dict[str, set[int]] = {}
    for worker in ("gw0", "gw1", "gw3"):
        ports = _ports_of(worker, 50)
        band = services.port_band(int(worker[2:]))
        assert all(p in band for p in ports), (worker, ports)
        assert all(p < ephemeral for p in ports)  # never a port the kernel hands an outgoing connection
        assert len(set(ports)) == len(ports), "a port handed out twice in one worker"
        seen[worker] = set(ports)
    assert not (seen["gw0"] & seen["gw1"]) and not (seen["gw1"] & seen["gw3"])
    udp = _ports_of("gw2", 5, udp=True)
    assert all(p in services.port_band(2) for p in udp)


def test_a_port_taken_by_someone_else_is_passed_over() -> None:
    import socket

    band = services.port_band(5)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", band.start))
        taken.listen()
        assert band.start not in _ports_of("gw5", 3)


def test_outside_a_parallel_run_ports_come_from_the_kernel() -> None:
    code = "from wattbench_devkit import services as s; print(s.worker_index(), s.free_port())"
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_XDIST_WORKER"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    worker, port = out.stdout.split()
    assert worker == "None" and int(port) > 0


def test_wattbench_state_is_kept_apart_from_the_users_and_other_workers() -> None:
    state = os.environ["XDG_STATE_HOME"]
    assert Path(state).is_dir()
    assert not Path(state).resolve().is_relative_to(Path.home().resolve() / ".local")
    assert "wattbench-test-state-" in state


PROJECT_CONFTEST = """
from wattbench_devkit import parallel

def pytest_xdist_make_scheduler(config, log):
    return parallel.make_scheduler(config, log)
"""

MODULE_FIXTURE = """
import os, pytest

@pytest.fixture(scope="module")
def made(tmp_path_factory):
    with open(os.environ["LOG"], "a") as f:
        f.write("made\\n")

@pytest.mark.parametrize("k", range(12))
def test_uses(made, k):
    with open(os.environ["LOG"], "a") as f:
        f.write("ran " + os.environ["PYTEST_XDIST_WORKER"] + "\\n")
"""

NAMED = """
import os, pytest

@pytest.mark.xdist_group("port-123")
@pytest.mark.parametrize("k", range(6))
def test_named(k):
    with open(os.environ["LOG"], "a") as f:
        f.write("{name} " + os.environ["PYTEST_XDIST_WORKER"] + "\\n")
"""


def test_modules_with_module_fixtures_and_named_groups_stay_on_one_worker(tmp_path: Path) -> None:
    """A real parallel run of a small project with the suite's scheduler: the module-scoped fixture is
    made once and every test of its module ran on one worker; two modules naming one group ran on
    one worker; the tests that need neither were spread out."""
    (tmp_path / "conftest.py").write_text(PROJECT_CONFTEST)
    (tmp_path / "test_fixture.py").write_text(MODULE_FIXTURE)
    (tmp_path / "test_named_a.py").write_text(NAMED.format(name="a"))
    (tmp_path / "test_named_b.py").write_text(NAMED.format(name="b"))
    (tmp_path / "test_free.py").write_text(
        "import os, time\nimport pytest\n@pytest.mark.parametrize('k', range(40))\n"
        "def test_free(k):\n    time.sleep(0.05)\n"
        "    open(os.environ['LOG'], 'a').write('free ' + os.environ['PYTEST_XDIST_WORKER'] + '\\n')\n"
    )
    log = tmp_path / "log"
    env = dict(os.environ, LOG=str(log))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "-n",
            "3",
            "--rootdir",
            str(tmp_path),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    rows = [line.split() for line in log.read_text().splitlines()]
    assert rows.count(["made"]) == 1
    assert len({w for kind, *w in rows if kind == "ran" for w in w}) == 1
    assert len({w for kind, *w in rows if kind in ("a", "b") for w in w}) == 1
    assert len({w for kind, *w in rows if kind == "free" for w in w}) > 1


def test_the_scheduler_reads_the_groups_from_the_source() -> None:
    from wattbench_devkit import parallel

    assert parallel.split_scope(REPO, "tests/test_packaging.py::test_wheel") == "tests/test_packaging.py"
    assert parallel.split_scope(REPO, "tests/ptd/test_power_dev_e2e.py::t") == "group:ntp-port-123"
    plain = "tests/test_cli.py::test_something"
    assert parallel.split_scope(REPO, plain) == plain


def _fixed_binds(path: Path) -> list[str]:
    """Calls like sock.bind(("127.0.0.1", 8883)): a literal port that two workers would both take."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "bind"
            and node.args
            and isinstance(node.args[0], ast.Tuple)
            and len(node.args[0].elts) == 2
            and isinstance(node.args[0].elts[1], ast.Constant)
            and node.args[0].elts[1].value != 0
        ):
            found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    return found


def test_no_test_binds_a_fixed_port() -> None:
    files = [*(REPO / "tests").rglob("*.py"), *(REPO / "devkit").rglob("*.py")]
    assert [hit for f in files for hit in _fixed_binds(f)] == []


def test_slurm_sockets_fit_however_deep_the_test_folder(tmp_path: Path) -> None:
    """A Unix socket's path is at most 107 bytes. Slurm's job-step sockets and munged's used to sit
    under the test's folder, which a parallel run makes deeper (…/popen-gw2/…): every job failed."""
    from wattbench_devkit.slurm import SlurmCluster

    deep = tmp_path / ("d" * 60) / ("e" * 60)
    try:
        cluster = SlurmCluster(deep, ["wbn1", "wbn2"])
    except services.ServiceUnavailable as exc:
        pytest.skip(str(exc))
    try:
        assert all(len(str(p).encode()) <= 107 for p in cluster.socket_paths()), cluster.socket_paths()
    finally:
        cluster.stop()
    assert not cluster.sockdir.exists()


def test_a_port_still_in_time_wait_is_not_handed_out() -> None:
    """A service that binds without SO_REUSEADDR (ipmi_sim's console) cannot take a port whose earlier
    connections are in TIME_WAIT; the check that said such a port was free made the fourth ipmi_sim of
    a worker fail with "bind to console socket: Address already in use"."""
    import socket

    with socket.socket() as server:
        # as Python's HTTP servers (the Redfish stand-in) bind: with SO_REUSEADDR
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        conn, _ = server.accept()
        conn.close()  # the server's side closes first: its port holds the TIME_WAIT
        client.close()
    assert not services._bindable(port, socket.SOCK_STREAM)
