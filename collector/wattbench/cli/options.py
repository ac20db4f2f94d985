"""Options several subcommands share, declared once so each means the same everywhere: the store
(--store/--influx/--db, one default path), the broker and its credentials, output files, and -v.

Values are checked while the command line is parsed, so a wrong path or id is a usage error (exit 2)
before anything runs."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import wattbench_schema

from ..argtypes import given, number
from ..config import SETTINGS, ConfigError, default_state_dir, load_config, redact_url
from ..core import FieldError
from ..exits import Exit
from ..forms import (
    ca_problem,
    file_problem,
    folder_problem,
    http_address_problem,
    in_the_way,
    lone_password_problem,
    store_folder_problem,
    writable_file_problem,
)
from ..mqttconn import AddressError, parse_broker
from ..report.outputs import TERMINAL, Outputs, renderers
from ..store import known_spec, missing_folder, open_store
from ..store.base import StoreError

if TYPE_CHECKING:
    from rich.console import Console

    from ..store import Store

T = TypeVar("T")


class CliError(Exception):
    """A failure the user can act on: shown as one line, the process exits with `code`."""

    def __init__(self, message: str, code: int = Exit.USAGE) -> None:
        super().__init__(message)
        self.code = code


# ---------------------------------------------------------------------------- output


@cache
def _console_class() -> type[Console]:
    from rich.console import Console  # late: start-up

    class CommandConsole(Console):
        def on_broken_pipe(self) -> None:
            # rich's own answer is a silent SystemExit(1); main() turns this into 141, as for print().
            self.quiet = True
            raise BrokenPipeError

    return CommandConsole


def output_console(**options: Any) -> Console:
    """The rich Console every command prints its output on (options as rich's Console takes them). A
    reader that went away (`| head -1`) ends the command with exit 141 whether it printed a table
    through rich or JSON through print()."""
    return _console_class()(**options)


# ---------------------------------------------------------------------------- -v


def add_verbose(parser: argparse.ArgumentParser) -> None:
    """-v on a subcommand counts on top of -v given before it (`wattbench -v sweep -v` is -vv)."""
    parser.add_argument(
        "-v",
        "--verbose",
        dest="_verbose_sub",
        action="count",
        default=0,
        help="more log output (-vv for debug and tracebacks)",
    )


def verbosity(args: argparse.Namespace) -> int:
    return int(getattr(args, "verbose", 0) or 0) + int(getattr(args, "_verbose_sub", 0) or 0)


# ---------------------------------------------------------------------------- checked values


def checked_by_problem(
    problem_of: Callable[[str], str | None], empty: str | None = "empty path"
) -> Callable[[str], str]:
    """An argparse type from a function that says why a text will not do (wattbench.forms). empty:
    what an empty text is told (an empty path never does), or None to leave it to problem_of."""

    def check(text: str) -> str:
        try:
            problem = problem_of(text) if text or empty is None else empty
        except ValueError as exc:  # a path argparse would call an "invalid check value" (~nosuchuser)
            problem = str(exc)
        if problem:
            raise argparse.ArgumentTypeError(problem)
        return text

    return check


# An output file whose folder exists and can be written, checked before any work is done.
writable_file = checked_by_problem(writable_file_problem, empty=None)

# A folder a command keeps its state in (wattbench.forms.folder_problem).
state_folder = checked_by_problem(folder_problem)


def existing_folder(text: str) -> str:
    if not text.strip():  # Path("") is the working folder: an empty value would read another state
        raise argparse.ArgumentTypeError("must not be empty")
    path = Path(text).expanduser()
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: a file, not a folder")
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: no such folder")
    return text


readable_file = checked_by_problem(file_problem, empty=None)


@cache
def _run_id_pattern() -> re.Pattern[str]:
    return re.compile(wattbench_schema.load_schema("common")["$defs"]["run_id"]["pattern"])


def run_id(text: str) -> str:
    """A run id as the contract allows it (it becomes an MQTT topic level and a store tag)."""
    if not _run_id_pattern().match(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a valid run id: 1 to 64 of A-Z a-z 0-9 _ . -, starting with a letter or digit"
        )
    return text


def fresh_run_id(text: str) -> str:
    """The id of a run about to be made: a valid run id that is not a word the readers take for another
    run ("latest" is the newest run in report and compare, so a run of that name could never be shown)."""
    run_id(text)
    if text == "latest":
        raise argparse.ArgumentTypeError(
            "'latest' names the newest run in report and compare: give this run another id"
        )
    return text


def stored_run_id(store: Store, text: str) -> str:
    """A run id as the readers take it: "latest" is the newest run in the store (report, compare,
    compare-estimate alike)."""
    if text != "latest":
        return text
    runs = store.runs()
    if not runs:
        raise CliError("the store holds no runs")
    return str(runs[0])


# A CA certificate file TLS can load: a wrong file fails here, not at the first connect.
ca_file = checked_by_problem(ca_problem, empty=None)


def broker_address(text: str) -> str:
    """A broker address that follows the rules in wattbench.mqttconn (docs/guide.md)."""

    try:
        parse_broker(text)
    except AddressError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def tcp_port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port {port} is outside 0..65535")
    return port


def store_path(text: str) -> str:
    if not text:
        raise argparse.ArgumentTypeError("empty path")

    if not known_spec(text):
        raise argparse.ArgumentTypeError(
            f"{text!r}: give a file path or sqlite:///path (InfluxDB: --influx http(s)://host:port)"
        )
    if problem := store_folder_problem(text):
        raise argparse.ArgumentTypeError(problem)
    return text


def new_store_path(text: str) -> str:
    """A store a command may create: its folder must be there already."""
    text = store_path(text)
    folder = missing_folder(text)
    if folder is not None:
        raise argparse.ArgumentTypeError(f"{text!r}: no folder {folder} (nothing was created)")
    return text


influx_url = checked_by_problem(http_address_problem, empty=None)


# ---------------------------------------------------------------------------- store and broker
# The options are made from the settings table (wattbench.config.CollectorConfig), and their values
# go through its one resolver: defaults < file < environment < command line, as for `collect`.

# argparse checks, by the name a setting's option gives (wattbench.settings.Flag.check)
CHECKS: dict[str, Callable[[str], Any]] = {
    "broker": broker_address,
    "readable": readable_file,
    "ca": ca_file,
    "store": store_path,
    "influx": influx_url,
    "number": number(),
    "given": given,
    "folder": state_folder,
    "spool": checked_by_problem(in_the_way),
}


def option_values(
    args: argparse.Namespace, names: Iterable[str] | None = None
) -> tuple[dict[str, Any], dict[str, str]]:
    """The settings the command line gives (of those named; all by default), and the option each
    came from, as the resolver takes them. An option this command does not have gives nothing."""

    wanted = None if names is None else set(names)
    values: dict[str, Any] = {}
    given_as: dict[str, str] = {}
    for row in SETTINGS.rows:
        if wanted is not None and row.name not in wanted:
            continue
        for flag in row.flags:
            value = vars(args).get(flag.option[2:].replace("-", "_"))
            name = row.file_name if flag.file else row.name
            # of two options for one setting the later wins (--influx over --store, as ever)
            if value is not None:
                values[name], given_as[name] = value, flag.option
    return values, given_as


def resolve(args: argparse.Namespace, names: Iterable[str], path: str | None = None) -> Any:
    """The settings named, from the command line over the environment over the file (path) over the
    defaults: the CollectorConfig with those filled in (not resolved(): a reader needs no collector id).
    Raises ConfigError, exit 2."""

    names = list(names)
    values, given_as = option_values(args, names)
    return load_config(path, overrides=values, given_as=given_as, only=names)


DEFAULT_STORE_HELP = (
    "$WATTBENCH_STORE, else wattbench.sqlite in the state folder, where `wattbench collect` writes"
)


def add_store_options(
    parser: argparse.ArgumentParser, *, purpose: str = "read", default_help: str = DEFAULT_STORE_HELP
) -> Any:
    """purpose "read": the store must already exist; "write": a missing SQLite file is created."""

    g = parser.add_argument_group("store")
    where = "must exist, never created" if purpose == "read" else "created if missing, in an existing folder"
    checks = CHECKS if purpose == "read" else {**CHECKS, "store": new_store_path}
    SETTINGS.add_arguments(g, "store", checks, where=where, default=default_help)
    return g


def state_dir() -> Path:
    """The state folder of every command that keeps state: WATTBENCH_STATE_DIR, else the default."""
    given = resolve(argparse.Namespace(), ["state_dir"]).state_dir
    return Path(given).expanduser() if given else default_state_dir()


def default_store() -> str:
    """The store every command uses when none is given: WATTBENCH_INFLUX_URL or WATTBENCH_STORE, else
    wattbench.sqlite in the state folder, where `wattbench collect` writes by default."""

    cfg = resolve(argparse.Namespace(), ["store"])
    return str(cfg.store) if cfg.store else str(state_dir() / "wattbench.sqlite")


def store_given(args: argparse.Namespace) -> bool:
    """A store named on the command line (not by the environment)."""
    return bool(getattr(args, "influx", None) or getattr(args, "store", None))


def store_spec(args: argparse.Namespace, default: str | None = None) -> str:
    """The store the options name; given none, default, else the one `wattbench collect` writes."""
    return getattr(args, "influx", None) or getattr(args, "store", None) or default or default_store()


def store_name(args: argparse.Namespace, default: str | None = None) -> str:
    """The store the options name, for a message: "the store PATH", an InfluxDB URL without its
    credentials."""
    return f"the store {redact_url(store_spec(args, default))}"


# the store's own options, from the settings of the same names
_INFLUX = ("db", "rp", "bucket", "org", "user", "token", "password")


def open_store_from_args(
    args: argparse.Namespace, *, must_exist: bool = True, default: str | None = None, **options: Any
) -> Any:
    """Open the store the options name (or default, see store_spec). must_exist (for every reader,
    and for the sweep, which needs the collector's store) refuses a missing file instead of creating an
    empty one and checks that InfluxDB answers; failures raise StoreError (exit 3)."""

    spec = store_spec(args, default)
    if spec.startswith(("http://", "https://")):
        cfg = resolve(args, [f"influx_{name}" for name in _INFLUX])
        for name in _INFLUX:
            if getattr(cfg, f"influx_{name}"):
                options.setdefault(name, getattr(cfg, f"influx_{name}"))
    try:
        return open_store(spec, must_exist=must_exist, **options)
    except StoreError as exc:
        if not (store_given(args) or default):
            exc.said = store_said(resolve(args, ["store"]))
        raise


def store_said(cfg: Any) -> str:
    """The variable or file key that named cfg's store, "" for an option or the default: what a
    message about that store puts first."""
    said = cfg.said.get("store", "")
    return "" if said.startswith("-") else said


def by_name(option: str, pairs: Iterable[tuple[str, float]]) -> dict[str, float]:
    """NAME=NUMBER options as a mapping; a name given twice is refused (the last silently won)."""
    out: dict[str, float] = {}
    for name, x in pairs:
        if name in out:
            raise CliError(f"{option} {name} is given twice ({out[name]:g} and {x:g})")
        out[name] = x
    return out


def add_broker_options(
    parser: argparse.ArgumentParser, *, help_broker: str = "MQTT broker (default 127.0.0.1:1883)"
) -> None:
    g = parser.add_argument_group("broker")
    SETTINGS.add_arguments(g, "broker", CHECKS, broker_help=help_broker)


def broker_given(args: argparse.Namespace) -> str | None:
    """The broker a run publishes to: --broker, else WATTBENCH_BROKER; None when neither is given (the
    default address is the collector's, not a reason to publish). A user who exported the variable for
    `collect` means the same broker for the sweep that feeds it."""
    # The environment's value is checked as it is read (the setting's form), as the option's is.
    cfg = resolve(args, ["broker"])
    return str(cfg.broker) if "broker" in cfg.said else None


def publish_settings(args: argparse.Namespace) -> Any:
    """The MqttSettings a sweep or suite publishes with (broker_given and its credentials), or None."""
    from ..sweep.session import MqttSettings  # late: start-up

    broker = broker_given(args)
    if broker is None:
        return None
    return MqttSettings(broker, mqtt_user(args), mqtt_password(args), mqtt_ca(args))


def mqtt_user(args: argparse.Namespace) -> str | None:
    return resolve(args, ["mqtt_user"]).mqtt_user or None


def mqtt_password(args: argparse.Namespace) -> str | None:
    cfg = resolve(args, ["mqtt_user", "mqtt_password"])
    if problem := lone_password_problem(cfg.mqtt_user, cfg.mqtt_password, cfg.named("mqtt_password")):
        raise ConfigError(problem)
    return cfg.mqtt_password or None


def mqtt_ca(args: argparse.Namespace) -> str | None:
    """--mqtt-ca, else WATTBENCH_MQTT_CA: as `collect` reads it, so the sweep feeding it speaks TLS too."""
    return resolve(args, ["tls_ca"]).tls_ca or None


# ---------------------------------------------------------------------------- outputs


def add_output_options(
    parser: argparse.ArgumentParser,
    *kinds: type,
    stdout: bool = True,
    defaults: Mapping[str, str] | None = None,
) -> None:
    """The output options of a command whose result is one of kinds (report/outputs.py): each file
    rendering of the registry as --NAME FILE, checked writable as the command line is read so a long
    run never ends on a path it cannot write, and, with stdout, each stdout rendering as a flag
    (--json). defaults: a file rendering's path when its option is not given (the demo's page)."""

    g = parser.add_argument_group("output")
    parser.set_defaults(_file_outputs=[r.name for r in renderers(kinds) if r.where == "file"])
    for r in renderers(kinds):
        if r.where == "file":
            default = (defaults or {}).get(r.name)
            g.add_argument(
                f"--{r.name}",
                metavar="FILE",
                type=writable_file,
                default=default,
                help=f"{r.help} ({default})" if default else r.help,
            )
        elif r.where == "stdout" and stdout:
            g.add_argument(f"--{r.name}", action="store_true", help=r.help)


def outputs_from_args(args: argparse.Namespace, kind: type, console: Console | None = None) -> Outputs:
    """The Outputs (report/outputs.py) the options of add_output_options chose for a result of kind,
    shown on console (default: the command's console on stdout)."""

    given = vars(args)
    chosen = [r for r in renderers([kind]) if given.get(r.name.replace("-", "_"))]
    shown = next((r.name for r in chosen if r.where == "stdout"), TERMINAL)
    files = {r.name: given[r.name.replace("-", "_")] for r in chosen if r.where == "file"}
    return Outputs(shown, files, console or output_console())


def side_console(outputs: Outputs) -> Console:
    """The console for a command's own lines beside its result (what it is doing): with the tables on
    stdout, and on stderr while stdout carries JSON for a program."""
    if outputs.machine_readable or outputs.console is None:
        return output_console(stderr=True)
    return outputs.console


def add_json_flag(parser: argparse.ArgumentParser, help: str = "print JSON instead of tables") -> None:
    """--json for a command whose JSON is not one of the rendered results (status)."""
    parser.add_argument_group("output").add_argument("--json", action="store_true", help=help)


def as_given(options: Mapping[str, str], build: Callable[[], T]) -> T:
    """build(), with a value the core refuses named by the option it came from (options: the core's
    field -> the option), so the one line points at what the user typed, not at a field name."""

    try:
        return build()
    except FieldError as exc:
        if exc.field not in options:
            raise
        raise CliError(f"{options[exc.field]}: {exc.reason}") from None
