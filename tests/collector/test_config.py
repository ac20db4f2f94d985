"""Collector configuration: file < environment < options, clear errors, secrets kept out of sight."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from wattbench.config import CollectorConfig, ConfigError, load_config

TOML = b"""
[mqtt]
broker = "broker.lab:1884"
user = "wattbench-collector"
share = "wb"

[influx]
db = "lab"

[collector]
id = "collector-a"
health_period_s = 2
store = "http://influx.lab:8086"
"""


def test_file_then_environment_then_options(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_bytes(TOML)
    cfg = load_config(path, env={}).resolved()
    assert (cfg.broker, cfg.mqtt_user, cfg.share, cfg.influx_db, cfg.id) == (
        "broker.lab:1884",
        "wattbench-collector",
        "wb",
        "lab",
        "collector-a",
    )
    assert cfg.health_period_s == 2.0 and cfg.is_influx
    env = {"WATTBENCH_BROKER": "other:1883", "WATTBENCH_INFLUX_DB": "envdb", "WATTBENCH_MQTT_PASSWORD": "pw"}
    cfg = load_config(path, env=env, overrides={"id": "from-cli", "influx_db": None}).resolved()
    assert (cfg.broker, cfg.influx_db, cfg.id, cfg.mqtt_password) == ("other:1883", "envdb", "from-cli", "pw")


def test_secrets_never_in_repr_or_description(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("hunter2\n")
    env = {
        "WATTBENCH_MQTT_USER": "bench",
        "WATTBENCH_MQTT_PASSWORD_FILE": str(secret),
        "WATTBENCH_INFLUX_TOKEN": "tok-123",
        "WATTBENCH_INFLUX_URL": "http://u:p4ss@influx:8086",
    }
    cfg = load_config(None, env=env).resolved()
    assert cfg.mqtt_password == "hunter2" and cfg.influx_token == "tok-123"
    for text in (repr(cfg), str(cfg.describe())):
        assert "hunter2" not in text and "tok-123" not in text and "p4ss" not in text


def test_defaults_are_usable(tmp_path: Path) -> None:
    cfg = CollectorConfig(state_dir=str(tmp_path)).resolved()
    assert cfg.protocol == "5" and cfg.client_id == f"wattbench-{cfg.id}"
    assert cfg.store_spec().endswith("wattbench.sqlite") and not cfg.is_influx
    assert Path(cfg.spool_dir).parent.parent == tmp_path


@pytest.mark.parametrize(
    "changes,words",
    [
        ({"id": "Bad Id"}, "collector id"),
        ({"protocol": "4"}, "protocol"),
        ({"share": "a/b"}, "share group"),
        ({"share": "wb", "protocol": "3.1.1"}, "MQTT 5"),
        ({"broker": "host:port"}, "not a number"),
        ({"health_period_s": 0.0}, "health_period_s must be a number of seconds above 0"),
        ({"receive_maximum": 0}, "receive_maximum"),
    ],
)
def test_bad_settings_name_the_setting(tmp_path: Path, changes: dict[str, object], words: str) -> None:
    cfg = CollectorConfig(state_dir=str(tmp_path), **changes)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=words):
        cfg.resolved()


def test_unknown_keys_and_bad_types_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[mqtt]\nbrokr = 'x'\n")
    with pytest.raises(ConfigError, match="brokr"):
        load_config(path, env={})
    path.write_text("keepalive_s = 'soon'\n")
    with pytest.raises(ConfigError, match="keepalive_s"):
        load_config(path, env={})
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.toml", env={})


@pytest.mark.parametrize(
    "line,name",
    [
        ("broker = 5", "broker"),
        ("broker = true", "broker"),
        ("[mqtt]\nuser = 7", "[mqtt] user"),
        ("publish_rejects = 5", "publish_rejects"),
        ("publish_rejects = 'maybe'", "publish_rejects"),
        ("max_batch_samples = 5.7", "max_batch_samples"),
        ("max_batch_samples = true", "max_batch_samples"),
        ("retry_s = false", "retry_s"),
    ],
)
def test_a_value_of_the_wrong_type_in_the_file_is_refused(tmp_path: Path, line: str, name: str) -> None:
    """TOML keeps types apart: a number where a broker's address goes, or 5 for true or false, is a
    mistake in the file, not a value to turn into "5:1883" or True. The message names the key as the
    file has it, and the file."""
    path = tmp_path / "c.toml"
    path.write_text(line + "\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path, env={})
    assert str(caught.value).startswith(f"{name} in {path}: "), caught.value


def test_a_wrong_value_in_the_file_is_refused_even_where_the_environment_overrides_it(tmp_path: Path) -> None:
    """With WATTBENCH_STATE_DIR set, `state_dir = 5` in the file passed unchecked (status exit 0, collect
    went on): the file is wrong whoever overrides it, and the next run without the variable reads it."""
    path = tmp_path / "c.toml"
    path.write_text("state_dir = 5\n")
    with pytest.raises(ConfigError, match=rf"^state_dir in {path}: "):
        load_config(path, env={"WATTBENCH_STATE_DIR": str(tmp_path)})


def test_a_setting_is_named_as_it_was_given(tmp_path: Path) -> None:
    """An unknown key in a [table] is a wrong setting, not a file that is not TOML; each mistake names
    the setting where it was given: the key in the file, the variable, the option."""
    path = tmp_path / "c.toml"
    path.write_text("[mqtt]\nbrokr = 'x'\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path, env={})
    assert str(caught.value) == f"unknown setting [mqtt] brokr in {path} (did you mean broker?)"
    path.write_text("[collector]\nhealth_period_s = 0\n")
    with pytest.raises(ConfigError, match=rf"^\[collector\] health_period_s in {re.escape(str(path))} must"):
        load_config(path, env={}).resolved()
    cfg = load_config(None, env={}, overrides={"health_period_s": -1.0}, given_as={"health_period_s": "--x"})
    with pytest.raises(ConfigError, match=r"^--x must be a number of seconds above 0"):
        cfg.resolved()
    with pytest.raises(ConfigError, match=r"^WATTBENCH_COLLECTOR_ID 'Bad' must match"):
        load_config(None, env={"WATTBENCH_COLLECTOR_ID": "Bad"}).resolved()
    # a config built in code names its fields
    with pytest.raises(ConfigError, match=r"^health_period_s must be"):
        CollectorConfig(health_period_s=0.0).resolved()


def test_the_file_may_write_a_number_of_seconds_or_samples_as_either_kind(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("retry_s = 3\nmax_batch_samples = 4e4\npublish_rejects = false\n")
    cfg = load_config(path, env={})
    assert (cfg.retry_s, cfg.max_batch_samples, cfg.publish_rejects) == (3.0, 40_000, False)
    assert type(cfg.max_batch_samples) is int


@pytest.mark.parametrize(
    "text,value", [("1", True), ("TRUE", True), ("yes", True), ("off", False), ("0", False)]
)
def test_the_environment_says_true_or_false_in_words_or_digits(text: str, value: bool) -> None:
    assert load_config(None, env={"WATTBENCH_HMAC_REQUIRE": text}).hmac_require is value


def test_the_environment_saying_neither_true_nor_false_is_refused() -> None:
    with pytest.raises(ConfigError, match="WATTBENCH_HMAC_REQUIRE"):
        load_config(None, env={"WATTBENCH_HMAC_REQUIRE": "maybe"})
