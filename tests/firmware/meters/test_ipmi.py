"""A BMC's power over IPMI through ipmitool, against OpenIPMI's simulator (ipmi_sim) on loopback: the
SDR power sensor found on its own, the reading following the sensor, a sensor without a reading a
flagged sample and never a number, no BMC at the address no reply. ipmi_sim does not implement DCMI,
so auto mode is seen falling back from it for real; the DCMI answer itself is parsed from ipmitool's
output as printed by a BMC that has it (recorded, below), through the meter's `ipmitool` option."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest

from wattbench_devkit.services import IpmiSim
from wattbench_fw import config
from wattbench_fw.contract import FLAG_MISSED, FLAG_SENSOR_ERROR
from wattbench_fw.errors import ConfigError, NoReply, SensorError
from wattbench_fw.meters.ipmi import IPMI, parse_dcmi, parse_sdr, watt_sensors
from wattbench_fw.sampler import Channel

from .test_table import outside_its_plugin

KIND = "ipmi"

# `ipmitool dcmi power reading` on a BMC with DCMI (ipmitool 1.8.19's layout).
DCMI_ACTIVE = """
    Instantaneous power reading:                   238 Watts
    Minimum during sampling period:                 36 Watts
    Maximum during sampling period:                412 Watts
    Average power reading over sample period:      231 Watts
    IPMI timestamp:                           Wed Nov 25 10:00:00 2026
    Sampling period:                          00000001 Seconds.
    Power reading state is:                   activated

"""
# `ipmitool -c sdr list full` on a server with a sensor per supply and a total.
SDR_THREE = """PS1 Input Power,180,Watts,ok
PS2 Input Power,176,Watts,ok
Pwr Consumption,356,Watts,ok
Inlet Temp,23,degrees C,ok
"""


def meter(sim: IpmiSim, **opts: Any) -> IPMI:
    base: dict[str, Any] = {
        "host": "127.0.0.1",
        "port": sim.port,
        "user": sim.USER,
        "password": sim.PASSWORD,
        "cipher": 3,
        "timeout_s": 2,
    }
    base.update(opts)
    return IPMI(None, **base)


def fake_ipmitool(tmp_path: Path, dcmi: str, rc: int = 0) -> str:
    """A stand-in for ipmitool that prints a recorded DCMI answer (no DCMI BMC is available here)."""
    (tmp_path / "dcmi.txt").write_text(dcmi)
    script = tmp_path / "ipmitool"
    script.write_text(f'#!/bin/sh\ncat "{tmp_path}/dcmi.txt"\nexit {rc}\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_the_only_watt_sensor_is_found_and_read(ipmi_sim: IpmiSim) -> None:
    m = meter(ipmi_sim)
    m.setup()
    assert (m.how, m.sensor) == ("sdr", "Pwr Consumption")  # DCMI answered "Invalid command"
    assert m.read() == ({"W": 344.0, "u": 0.05}, 0)
    ipmi_sim.set_watts(150)
    assert m.read()[0]["W"] == 150.0
    assert m.info() == {"model": "IPMI sensor Pwr Consumption", "acc": 0.05, "upd": 1.0}


def test_forcing_dcmi_on_a_bmc_without_it_says_so(ipmi_sim: IpmiSim) -> None:
    with pytest.raises(SensorError, match="Invalid command"):
        meter(ipmi_sim, method="dcmi").setup()


def test_the_password_from_the_environment_never_on_the_command_line(
    ipmi_sim: IpmiSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BMC_PASS", ipmi_sim.PASSWORD)
    m = meter(ipmi_sim, password=None, password_env="BMC_PASS", sensor="Pwr Consumption")
    assert ipmi_sim.PASSWORD not in " ".join(m._argv(["sdr"]))
    assert m.read()[0]["W"] == 344.0
    monkeypatch.delenv("BMC_PASS")
    with pytest.raises(SensorError, match=r"BMC_PASS .* is not set"):
        m.read()


def test_a_sensor_without_a_reading_is_a_flagged_sample_never_zero(ipmi_sim: IpmiSim) -> None:
    ch = Channel("bmc", meter(ipmi_sim), 1)
    assert ch.setup()
    ipmi_sim.set_scanning(False)  # ipmitool prints an empty reading and status "ns", and exits 0
    assert ch.read() == ({}, FLAG_SENSOR_ERROR)
    assert "no reading (status ns)" in (ch.last_error or "")
    ipmi_sim.set_scanning(True)
    assert ch.read()[0]["W"] == 344.0


def test_wrong_password_and_no_bmc_are_no_reply(ipmi_sim: IpmiSim) -> None:
    with pytest.raises(NoReply, match="Unable to establish"):
        meter(ipmi_sim, password="wrong").setup()
    ch = Channel("bmc", meter(ipmi_sim, port=9, sensor="Pwr Consumption", timeout_s=1), 1)
    assert ch.read() == ({}, FLAG_MISSED)


def test_a_named_sensor_that_does_not_exist_is_refused(ipmi_sim: IpmiSim) -> None:
    with pytest.raises(SensorError, match="Nope"):
        meter(ipmi_sim, sensor="Nope").read()


def test_dcmi_as_a_bmc_with_it_answers(tmp_path: Path) -> None:
    m = IPMI(None, host="10.0.0.2", user="a", password="p", ipmitool=fake_ipmitool(tmp_path, DCMI_ACTIVE))
    m.setup()
    assert m.how == "dcmi" and m.read() == ({"W": 238.0, "u": 0.05}, 0)
    assert m.info()["model"] == "IPMI DCMI power reading"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (DCMI_ACTIVE.replace("activated", "deactivated"), "state is deactivated"),
        (DCMI_ACTIVE.replace("238 Watts", "two Watts"), "not a number"),
        (DCMI_ACTIVE.replace("238 Watts", "238 mW"), "not in Watts"),
        ("\n    DCMI request failed because: Invalid command (c1)\n", "no DCMI power reading"),
        ("", "no DCMI power reading"),
    ],
)
def test_a_bad_dcmi_answer_is_refused_with_its_reason(text: str, why: str) -> None:
    with pytest.raises(SensorError, match=why):
        parse_dcmi(text)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("Pwr Consumption,,,ns,7.1,System Board", "no reading"),
        ("Pwr Consumption,12.5,Amps,ok", "reads in Amps, not Watts"),
        ("Pwr Consumption,lots,Watts,ok", "not a number"),
        ("garbage", "no reading in ipmitool's answer"),
        ("Other Sensor,300,Watts,ok", "no reading in ipmitool's answer"),
    ],
)
def test_a_bad_sensor_answer_is_refused_with_its_reason(text: str, why: str) -> None:
    with pytest.raises(SensorError, match=why):
        parse_sdr(text, "Pwr Consumption")


def test_several_watt_sensors_and_none_named_is_refused_not_guessed(tmp_path: Path) -> None:
    assert watt_sensors(SDR_THREE) == ["PS1 Input Power", "PS2 Input Power", "Pwr Consumption"]
    script = tmp_path / "ipmitool"
    script.write_text(
        '#!/bin/sh\ncase "$*" in *dcmi*) echo "DCMI request failed because: Invalid command (c1)"; exit 1;; esac\n'
        f"cat <<'EOF'\n{SDR_THREE}EOF\n"
    )
    script.chmod(0o755)
    m = IPMI(None, host="10.0.0.2", user="a", password="p", ipmitool=str(script))
    with pytest.raises(SensorError, match=r"several sensors in Watts .*PS1 Input Power.*: name the one"):
        m.setup()


def test_a_reading_above_max_w_is_refused(ipmi_sim: IpmiSim) -> None:
    with pytest.raises(SensorError, match="outside 0 to max_w"):
        meter(ipmi_sim, max_w=300).read()


def test_no_ipmitool_is_a_reason_not_a_crash() -> None:
    m = IPMI(None, host="10.0.0.2", user="a", password="p", ipmitool="/nonexistent/ipmitool")
    with pytest.raises(SensorError, match="not found: install ipmitool"):
        m.setup()


@pytest.mark.parametrize(
    ("opts", "why"),
    [
        ({"host": "-H"}, "host must be"),
        ({"host": "bmc"}, "needs user"),
        ({"host": "bmc", "user": "a", "interface": "serial"}, "interface must be one of"),
        ({"host": "bmc", "user": "a", "interface": "open"}, "leave host out"),
        ({"host": "bmc", "user": "a", "password": "p", "password_env": "E"}, "not both"),
        ({"host": "bmc", "user": "a", "method": "guess"}, "method must be one of"),
        ({"host": "bmc", "user": "a", "method": "dcmi", "sensor": "X"}, "sensor is for"),
        ({"host": "bmc", "user": "a", "sensor": "a,b"}, "sensor must be"),
        ({"host": "bmc", "user": "a", "port": 70000}, "port must be"),
        ({"host": "bmc", "user": "a", "timeout_s": 0}, "timeout_s must be"),
    ],
)
def test_options_are_checked(opts: dict[str, Any], why: str) -> None:
    with pytest.raises(ValueError, match=why):
        IPMI(None, **opts)


def test_the_local_bmc_needs_no_credentials() -> None:
    m = IPMI(None)
    assert m._argv(["dcmi", "power", "reading"]) == ["ipmitool", "-I", "open", "dcmi", "power", "reading"]


def test_a_board_configuration_naming_it_is_refused() -> None:
    cfg = {
        "dev": "srv1",
        "board": "esp32",
        "broker": {"host": "127.0.0.1", "port": 1883},
        "wifi": {"ssid": "lab", "password": "secret"},
        "channels": [{"c": "bmc", "meter": KIND, "hz": 1, "opts": {"host": "10.0.0.2", "user": "a"}}],
    }
    with pytest.raises(ConfigError, match="ipmi reads this host's own interfaces and needs board host"):
        config.load(cfg)


def test_added_as_its_folder_and_one_table_row_only() -> None:
    assert [p for p in outside_its_plugin(KIND) if p.startswith(("firmware/", "collector/", "schema/"))] == []
