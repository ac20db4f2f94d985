"""A BMC's power over Redfish: the older Power resource and the newer EnvironmentMetrics, session and
Basic auth, logging in again when the BMC forgets the session, and every bad answer (HTTP 500, a
timeout, garbage, a null or negative reading, no such BMC) a flagged sample with its reason, never a
number. Against a loopback service shaped like DMTF's mockups (devkit/wattbench_devkit/redfish_bmc.py)."""

from __future__ import annotations

from typing import Any

import pytest

from wattbench_devkit.redfish_bmc import BMC, PASSWORD, USER
from wattbench_fw import config
from wattbench_fw.contract import FLAG_MISSED, FLAG_SENSOR_ERROR
from wattbench_fw.errors import ConfigError, NoReply, SensorError
from wattbench_fw.meters.redfish import Redfish
from wattbench_fw.sampler import Channel

from .test_table import outside_its_plugin

KIND = "redfish"


def meter(bmc: BMC, **opts: Any) -> Redfish:
    base: dict[str, Any] = {"url": bmc.url, "user": USER, "password": PASSWORD, "timeout_s": 0.5}
    base.update(opts)
    return Redfish(None, **base)


def test_power_control_through_a_session() -> None:
    with BMC(watts=344) as bmc:
        m = meter(bmc)
        m.setup()
        assert m.path == ("power", "/redfish/v1/Chassis/1U/Power")
        assert m.read() == ({"W": 344.0, "u": 0.05}, 0)
        bmc.watts = 401.5
        assert m.read()[0]["W"] == 401.5
        assert bmc.logins == 1
        assert m.info() == {"model": "Redfish WB-1U", "acc": 0.05, "upd": 1.0}
        m.close()
        assert bmc.deleted == 1 and not bmc.tokens  # the session is not left open on the BMC


def test_environment_metrics_preferred_where_the_chassis_has_it() -> None:
    with BMC(watts=290, environment=True) as bmc:
        m = meter(bmc, chassis="1U")
        m.setup()
        assert m.path == ("env", "/redfish/v1/Chassis/1U/EnvironmentMetrics")
        assert m.read()[0]["W"] == 290.0


def test_basic_auth() -> None:
    with BMC(watts=120, basic=True) as bmc:
        m = meter(bmc, auth="basic")
        m.setup()
        assert m.read()[0]["W"] == 120.0
        assert bmc.logins == 0


def test_password_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    with BMC(watts=100) as bmc:
        monkeypatch.setenv("BMC_PASS", PASSWORD)
        m = Redfish(None, url=bmc.url, user=USER, password_env="BMC_PASS")
        m.setup()
        assert m.read()[0]["W"] == 100.0
        monkeypatch.delenv("BMC_PASS")
        with pytest.raises(SensorError, match=r"BMC_PASS .* is not set"):
            Redfish(None, url=bmc.url, user=USER, password_env="BMC_PASS").setup()


def test_a_forgotten_session_logs_in_again_once() -> None:
    with BMC(watts=344) as bmc:
        m = meter(bmc)
        m.setup()
        bmc.expire()  # the BMC restarted
        assert m.read()[0]["W"] == 344.0
        assert bmc.logins == 2


def test_wrong_credentials_are_a_sensor_error_naming_the_status() -> None:
    with BMC() as bmc, pytest.raises(SensorError, match="HTTP 401"):
        meter(bmc, password="wrong").setup()


@pytest.mark.parametrize(
    ("fault", "error", "why"),
    [
        ("500", SensorError, "HTTP 500"),
        ("timeout", NoReply, "no answer within 0.5 s"),
        ("garbage", SensorError, "not JSON"),
        ("null", SensorError, "no power reading"),
        ("negative", SensorError, "outside 0 to max_w"),
    ],
)
def test_a_bad_answer_is_refused_with_its_reason(fault: str, error: type[Exception], why: str) -> None:
    with BMC(watts=344) as bmc:
        m = meter(bmc)
        m.setup()
        bmc.fault = fault
        with pytest.raises(error, match=why):
            m.read()
        bmc.fault = None
        assert m.read()[0]["W"] == 344.0  # and the next good answer is read again


def test_bad_answers_become_flagged_samples_never_zero() -> None:
    with BMC(watts=344) as bmc:
        ch = Channel("bmc", meter(bmc), 1)
        assert ch.setup()
        bmc.fault = "null"
        assert ch.read() == ({}, FLAG_SENSOR_ERROR)
        bmc.fault = "timeout"
        assert ch.read() == ({}, FLAG_MISSED)
        assert "no answer" in (ch.last_error or "")


def test_no_bmc_at_the_address_is_no_reply() -> None:
    m = Redfish(None, url="http://127.0.0.1:9", user=USER, password=PASSWORD, timeout_s=0.5)
    with pytest.raises(NoReply):
        m.setup()


@pytest.mark.parametrize(
    ("opts", "why"),
    [
        ({"url": "ftp://bmc"}, "url must be"),
        ({"url": "http://bmc", "chassis": "../x"}, "chassis must be"),
        ({"url": "http://bmc", "auth": "kerberos"}, "auth must be one of"),
        ({"url": "http://bmc"}, "auth session needs user"),
        ({"url": "http://bmc", "user": "a", "password": "p", "password_env": "E"}, "not both"),
        ({"url": "http://bmc", "user": "a", "timeout_s": 0}, "timeout_s must be"),
        ({"url": "http://bmc", "user": "a", "upd": -1}, "upd must be"),
        ({"url": "http://bmc", "user": "a", "insecure": "yes"}, "insecure must be"),
    ],
)
def test_options_are_checked(opts: dict[str, Any], why: str) -> None:
    with pytest.raises(ValueError, match=why):
        Redfish(None, **opts)


def test_a_board_configuration_naming_it_is_refused() -> None:
    cfg = {
        "dev": "srv1",
        "board": "esp32",
        "broker": {"host": "127.0.0.1", "port": 1883},
        "wifi": {"ssid": "lab", "password": "secret"},
        "channels": [{"c": "bmc", "meter": KIND, "hz": 1, "opts": {"url": "http://10.0.0.2", "user": "a"}}],
    }
    with pytest.raises(ConfigError, match="redfish reads this host's own interfaces and needs board host"):
        config.load(cfg)


def test_added_as_its_folder_and_one_table_row_only() -> None:
    # No firmware, collector or contract file names it (the word was in the docs, the provisioning
    # script and Telegraf's sample config before the meter existed).
    assert [p for p in outside_its_plugin(KIND) if p.startswith(("firmware/", "collector/", "schema/"))] == []
