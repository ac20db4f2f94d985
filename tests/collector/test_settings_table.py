"""The settings table: each collector setting declared once, in CollectorConfig, and the environment,
the file's tables, the secret files, the range checks, the command line and the docs made from it,
with one precedence (defaults < file < environment < command line) for every command."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from wattbench.cli.collect import add_arguments as collect_arguments
from wattbench.cli.options import (
    add_broker_options,
    add_store_options,
    default_store,
    mqtt_password,
    mqtt_user,
    option_values,
)
from wattbench.cli.parser import Parser
from wattbench.config import ENV, SECRET_FILES, SETTINGS, CollectorConfig, ConfigError, load_config

REPO = Path(__file__).resolve().parents[2]
CLI = REPO / "collector" / "wattbench" / "cli"


def _collect(argv: list[str]) -> argparse.Namespace:
    parser = Parser(prog="wattbench collect")
    collect_arguments(parser)
    return parser.parse_args(argv)


def test_every_field_is_a_row_or_marked_internal() -> None:
    from dataclasses import fields

    rows = {row.name for row in SETTINGS.rows}
    internal = {f.name for f in fields(CollectorConfig) if f.metadata.get("internal")}
    assert rows | internal == {f.name for f in fields(CollectorConfig)}
    assert internal == {"protocol_fallback", "said"}


def test_the_environment_map_and_the_secret_files_are_the_table_s() -> None:
    assert ENV["WATTBENCH_INFLUX_URL"] == "store" and ENV["WATTBENCH_COLLECTOR_ID"] == "id"
    assert SECRET_FILES == {
        "mqtt_password_file": "mqtt_password",
        "influx_token_file": "influx_token",
        "influx_password_file": "influx_password",
    }
    assert set(SETTINGS.file_env) == {
        "WATTBENCH_MQTT_PASSWORD_FILE",
        "WATTBENCH_INFLUX_TOKEN_FILE",
        "WATTBENCH_INFLUX_PASSWORD_FILE",
    }


def test_every_option_of_collect_gives_its_setting(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("from-the-file\n")
    keys, plugs = tmp_path / "k.json", tmp_path / "p.toml"
    keys.write_text("{}")
    plugs.write_text("")
    args = _collect(
        [
            *("--broker", "b.lab:1999", "--mqtt-user", "u", "--mqtt-password-file", str(secret)),
            *("--influx", "http://influx:8086", "--db", "lab", "--id", "c1", "--share", "wb"),
            *("--spool", "/s", "--state-dir", "/st", "--protocol", "5", "--hmac-keys", str(keys)),
            *("--require-signatures", "--profile", "low-latency", "--health-period", "3"),
            *("--plugs", str(plugs), "--metrics", ":9464"),
        ]
    )
    values, given_as = option_values(args)
    cfg = load_config(None, env={}, overrides=values, given_as=given_as)
    assert (cfg.broker, cfg.mqtt_user, cfg.mqtt_password) == ("b.lab:1999", "u", "from-the-file")
    assert (cfg.store, cfg.influx_db, cfg.id, cfg.share) == ("http://influx:8086", "lab", "c1", "wb")
    assert (cfg.spool_dir, cfg.state_dir, cfg.protocol, cfg.hmac_keys) == ("/s", "/st", "5", str(keys))
    assert cfg.hmac_require is True and cfg.profile == "low-latency" and cfg.health_period_s == 3.0
    assert (cfg.plugs, cfg.metrics) == (str(plugs), ":9464")
    assert given_as["store"] == "--influx" and given_as["mqtt_password_file"] == "--mqtt-password-file"
    # an option not given gives nothing, so the environment and the file still count
    assert option_values(_collect([])) == ({}, {})


def test_store_and_influx_together_on_the_command_line_are_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--influx won over --store, silently: the store the user named was not the one read or written."""
    with pytest.raises(SystemExit) as stop:
        _collect(["--store", "/x.sqlite", "--influx", "http://i:8086"])
    assert stop.value.code == 2
    assert "argument --influx: not allowed with argument --store" in capsys.readouterr().err
    values, given_as = option_values(_collect(["--influx", "http://i:8086"]))
    assert values["store"] == "http://i:8086" and given_as["store"] == "--influx"


def test_the_environment_gives_a_secret_over_the_file_s_secret_file(tmp_path: Path) -> None:
    """A password in the environment used to lose to a password_file in the TOML file: the secret file
    was read last, whatever level gave it, against defaults < file < environment < command line."""
    secret = tmp_path / "pw"
    secret.write_text("from-the-toml-file\n")
    path = tmp_path / "c.toml"
    path.write_text(f"[mqtt]\npassword_file = {str(secret)!r}\n")
    assert load_config(path, env={}).mqtt_password == "from-the-toml-file"
    cfg = load_config(path, env={"WATTBENCH_MQTT_PASSWORD": "from-env"})
    assert cfg.mqtt_password == "from-env" and cfg.said["mqtt_password"] == "WATTBENCH_MQTT_PASSWORD"
    # within one level the file wins, as before
    both = {"WATTBENCH_MQTT_PASSWORD": "from-env", "WATTBENCH_MQTT_PASSWORD_FILE": str(secret)}
    assert load_config(None, env=both).mqtt_password == "from-the-toml-file"


def test_a_range_check_is_made_from_the_row() -> None:
    with pytest.raises(ConfigError, match=r"^keepalive_s must be 1\.\.65535, not 0$"):
        CollectorConfig(keepalive_s=0).resolved()
    with pytest.raises(ConfigError, match=r"^influx_batch_lines must be positive, not 0$"):
        CollectorConfig(influx_batch_lines=0).resolved()
    with pytest.raises(ConfigError, match=r"^ack_interval_ms must be 0\.\.60000, not 60001$"):
        CollectorConfig(ack_interval_ms=60_001).resolved()
    with pytest.raises(ConfigError, match=r"^retry_s must be a number of seconds above 0 and at most 86400"):
        CollectorConfig(retry_s=float("nan")).resolved()


def test_the_shared_options_read_the_environment_through_the_resolver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sweep, suite and report take the MQTT credentials and the default store from the same resolver
    as collect: the *_FILE form of the password used to be read by collect only."""
    parser = Parser(prog="wattbench sweep")
    add_broker_options(parser)
    add_store_options(parser)
    secret = tmp_path / "pw"
    secret.write_text("s3cret\n")
    for var in (*ENV, *SETTINGS.file_env):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("WATTBENCH_MQTT_USER", "env-user")
    monkeypatch.setenv("WATTBENCH_MQTT_PASSWORD_FILE", str(secret))
    args = parser.parse_args([])
    assert (mqtt_user(args), mqtt_password(args)) == ("env-user", "s3cret")
    assert mqtt_user(parser.parse_args(["--mqtt-user", "cli-user"])) == "cli-user"
    monkeypatch.setenv("WATTBENCH_STATE_DIR", str(tmp_path))
    assert default_store() == str(tmp_path / "wattbench.sqlite")
    monkeypatch.setenv("WATTBENCH_STORE", str(tmp_path / "s.sqlite"))
    monkeypatch.setenv("WATTBENCH_INFLUX_URL", "http://influx:8086")
    assert default_store() == "http://influx:8086"
    # a mistake in a setting this command does not read is not its error
    monkeypatch.setenv("WATTBENCH_HMAC_REQUIRE", "maybe")
    assert mqtt_user(args) == "env-user"


def test_the_commands_do_not_read_the_environment_themselves() -> None:
    offenders = [
        p.name for p in sorted(CLI.glob("*.py")) if "os.environ" in p.read_text() or "getenv" in p.read_text()
    ]
    assert offenders == []


def test_the_docs_reference_is_the_table() -> None:
    text = (REPO / "docs" / "collector.md").read_text()
    assert SETTINGS.reference() in text, (
        "docs/collector.md, Configuration reference: paste wattbench.config.SETTINGS.reference()"
    )
