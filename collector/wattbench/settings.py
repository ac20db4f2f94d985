"""The settings table and its one resolver.

Each setting is one field of a dataclass declared with `setting(...)`: its name and kind are the
field's, and its row says the rest (default, range or choices, environment variables, command-line
options, TOML table, whether it is a secret, help). Everything else is made from the rows: the
environment map, the secret files (`*_FILE`), the TOML tables, the simple range checks, the argparse
options and the reference table in docs/collector.md. One precedence holds for every command:
defaults < file < environment < command line."""

from __future__ import annotations

import argparse
import difflib
import math
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any

from .forms import ConfigError, expand, file_problem


@dataclass(frozen=True)
class Range:
    """Bounds a number must keep; low_open: it must be above low, not equal to it."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    unit: str = ""

    def holds(self, value: float) -> bool:
        if isinstance(value, float) and not math.isfinite(value):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or value <= self.high

    def refusal(self, said: str, value: Any) -> str:
        if self.unit:
            above = "above" if self.low_open else "at least"
            return (
                f"{said} must be a number of {self.unit} {above} {_num(self.low)} and at most "
                f"{_num(self.high)}, not {value!r}"
            )
        if self.high is None and self.low == 1:
            return f"{said} must be positive, not {value}"
        return f"{said} must be {_num(self.low)}..{_num(self.high)}, not {value}"


def _num(x: Any) -> str:
    return str(int(x)) if isinstance(x, float) and x.is_integer() else str(x)


@dataclass(frozen=True)
class Flag:
    """A command-line option that gives a setting. check: the name of the argparse type the command
    line checks the value with (cli/options.py holds them); file: the option names the file a secret
    is read from; group: the shared option group it belongs to ("broker", "store"), else the command's
    own. help may hold {names} a group fills in for each command."""

    option: str
    help: str
    metavar: str | None = None
    check: str = ""
    group: str = ""
    file: bool = False


@dataclass(frozen=True)
class Setting:
    """One row of the table. name and kind come from the dataclass field."""

    name: str
    kind: str  # "str", "int", "float", "bool"
    default: Any
    help: str
    env: tuple[str, ...] = ()
    flags: tuple[Flag, ...] = ()
    section: str = "collector"
    secret: bool = False
    range: Range | None = None
    choices: tuple[str, ...] = ()
    # How the docs state the default, where the value in the field is not what the user gets.
    shown_default: str | None = None
    # The form a text must have wherever it is given (file, environment, option): why it has not, or
    # None. The command line checks its options as argparse reads them; this is what makes a variable
    # or a key in the file the same mistake, with the same exit, as the option.
    form: Callable[[str], str | None] | None = None
    # A variable that names one kind of value (WATTBENCH_INFLUX_URL: an InfluxDB address) has the
    # form of that kind instead: (variable, form) pairs.
    env_forms: tuple[tuple[str, Callable[[str], str | None]], ...] = ()

    def form_for(self, said: str | None) -> Callable[[str], str | None] | None:
        """The form of a value given as `said` (a variable of env_forms, else any)."""
        return dict(self.env_forms).get(said or "", self.form)

    @property
    def key(self) -> str:
        """The key inside its [table] of the TOML file."""
        return self.name.removeprefix(f"{self.section}_")

    @property
    def file_name(self) -> str:
        """The setting that names the file a secret is read from ("" for other settings)."""
        return f"{self.name}_file" if self.secret else ""

    @property
    def file_env(self) -> tuple[str, ...]:
        return tuple(f"{var}_FILE" for var in self.env) if self.secret else ()


def setting(
    default: Any,
    help: str,
    *,
    env: str | tuple[str, ...] = (),
    flags: Flag | tuple[Flag, ...] = (),
    section: str = "collector",
    secret: bool = False,
    range: Range | None = None,
    choices: tuple[str, ...] = (),
    shown_default: str | None = None,
    form: Callable[[str], str | None] | None = None,
    env_forms: Mapping[str, Callable[[str], str | None]] | None = None,
) -> Any:
    """A dataclass field that is a setting (typed Any so that a field of any kind may take it)."""
    row = {
        "default": default,
        "help": help,
        "env": (env,) if isinstance(env, str) else env,
        "flags": (flags,) if isinstance(flags, Flag) else flags,
        "section": section,
        "secret": secret,
        "range": range,
        "choices": choices,
        "shown_default": shown_default,
        "form": form,
        "env_forms": tuple((env_forms or {}).items()),
    }
    return field(default=default, repr=not secret, metadata={"setting": row})


def table(cls: type) -> tuple[Setting, ...]:
    """The rows of a dataclass declared with setting(), in its order."""
    rows = []
    for f in fields(cls):
        row = f.metadata.get("setting")
        if row is None:
            continue
        kind = f.type if isinstance(f.type, str) else f.type.__name__
        if kind not in _WANT:
            raise TypeError(f"setting {f.name}: kind {kind} is not one of {', '.join(_WANT)}")
        assert f.default is not MISSING
        rows.append(Setting(name=f.name, kind=kind, **row))
    return tuple(rows)


# ---------------------------------------------------------------------------- reading


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
# What a file's (TOML's) value may be for each kind of setting other than true/false.
_FILE_KINDS: dict[str, tuple[type, ...]] = {"int": (int, float), "float": (int, float), "str": (str,)}
_WANT = {"bool": "true or false", "int": "whole number", "float": "number", "str": "text"}


class Table:
    """The rows of one settings dataclass and what is made from them."""

    def __init__(self, rows: Iterable[Setting]) -> None:
        self.rows = tuple(rows)
        self.by_name = {s.name: s for s in self.rows}
        # Secret files are settings of the file (and the environment, and options) too: their path.
        self.files = {s.file_name: s.name for s in self.rows if s.secret}
        self.env: dict[str, str] = {var: s.name for s in self.rows for var in s.env}
        self.file_env: dict[str, str] = {var: s.file_name for s in self.rows for var in s.file_env}
        self.sections = {s.section for s in self.rows}
        # A table whose settings are all named after it may leave that prefix out ([mqtt] user).
        self.prefixes = {
            sec: f"{sec}_" if any(s.name.startswith(f"{sec}_") for s in self.rows if s.section == sec) else ""
            for sec in sorted(self.sections)
        }

    def names(self) -> list[str]:
        return [*self.by_name, *self.files]

    def close_to(self, name: str, prefix: str = "") -> str:
        """A hint for a misspelt setting, spelt as it would be written where it was (in a [table] whose
        prefix may be left out)."""
        names = self.names()
        if prefix:
            names += [n.removeprefix(prefix) for n in names if n.startswith(prefix)]
        near = difflib.get_close_matches(name, names, n=1)
        return f" (did you mean {near[0]}?)" if near else ""

    def coerce(self, name: str, value: Any, typed: bool = False, said: str | None = None) -> Any:
        """value as the setting's kind. typed: it comes from the file, where TOML keeps kinds apart, so
        it must already be of the setting's kind (an integer passes for a number, an integral number
        for an integer); a number is no broker address and 5 is not true. Text (the environment) is
        read. said: the setting as the user gave it, for the message."""
        said = said or repr(name)
        row = self.by_name.get(name)
        if row is None and name not in self.files:
            raise ConfigError(f"unknown setting {said}{self.close_to(name)}")
        kind = row.kind if row else "str"
        try:
            if isinstance(value, list | dict):
                raise TypeError(value)
            if kind == "bool":
                if isinstance(value, str) and not typed:
                    word = value.strip().lower()
                    if word in _TRUE + _FALSE:
                        return word in _TRUE
                    raise ValueError(value)
                if typed and not isinstance(value, bool):
                    raise TypeError(value)
                return bool(value)
            if typed and (isinstance(value, bool) or not isinstance(value, _FILE_KINDS[kind])):
                raise TypeError(value)
            if kind == "int":
                if isinstance(value, float) and not value.is_integer():
                    raise ValueError(value)
                return int(value)
            if kind == "float":
                out = float(value)
                if not math.isfinite(out):
                    raise ValueError(value)
                return out
            text = str(value)
        except (TypeError, ValueError, OverflowError):
            shown = (
                repr(value)
                if isinstance(value, str | int | float) and len(repr(value)) < 40
                else "this value"
            )
            if name in self.files and typed:
                raise ConfigError(f"{said}: a path to a file is text, not {value!r}") from None
            if kind == "str" and isinstance(value, int | float | bool):
                # TOML keeps 1883 and "1883" apart; a number where text goes only lacks its quotes
                raise ConfigError(f"{said}: {shown} is not text: put it in quotes") from None
            raise ConfigError(f"{said}: {shown} is not a valid {_WANT[kind]}") from None
        form = row.form_for(said) if row is not None else None
        if form is not None and typed and not text.strip():
            # An empty path or address in a file read as not given, and the default was used unseen:
            # `store = ""` wrote into the state folder's store.
            raise ConfigError(f"{said}: empty: give a value, or leave the key out for the default")
        reason = form(text) if form is not None and text else None
        if reason:
            raise ConfigError(f"{said}: {reason}")
        return text

    def flatten(self, doc: dict[str, Any], where: str) -> tuple[dict[str, Any], dict[str, str]]:
        """The file may group settings in [tables] (the sections of the rows). Also how each setting
        was written there ("[mqtt] user in FILE"), for messages."""
        out: dict[str, Any] = {}
        said: dict[str, str] = {}
        names = set(self.names())
        for key, value in doc.items():
            if isinstance(value, dict) and key in self.prefixes:
                prefix = self.prefixes[key]
                for k, v in value.items():
                    for candidate in (prefix + k, k):
                        if candidate in names:
                            out[candidate] = v
                            said[candidate] = f"[{key}] {k} in {where}"
                            break
                    else:
                        raise ConfigError(f"unknown setting [{key}] {k} in {where}{self.close_to(k, prefix)}")
            elif isinstance(value, dict) and key not in names:
                near = difflib.get_close_matches(key, list(self.prefixes), n=1)
                hint = f" (did you mean [{near[0]}]?)" if near else f" (tables: {', '.join(self.prefixes)})"
                raise ConfigError(f"unknown table [{key}] in {where}{hint}")
            else:
                out[key] = value
                said[key] = f"{key} in {where}"
        return out, said

    def read(
        self,
        path: str | Path | None,
        env: Mapping[str, str],
        overrides: Mapping[str, Any] | None = None,
        given_as: Mapping[str, str] | None = None,
        only: Iterable[str] | None = None,
    ) -> tuple[dict[str, Any], dict[str, str]]:
        """The settings given (name -> value of its kind) and how each was given, from the file, the
        environment and the overrides (None values are ignored), each level over the one before. A
        secret and the file it is read from are one setting: whichever a later level gives wins, and
        within one level the file. only: read just these settings (and their files)."""
        wanted = None if only is None else set(only) | {self.by_name[n].file_name for n in only}
        values: dict[str, Any] = {}
        said: dict[str, str] = {}
        typed: set[str] = set()  # the keys whose value is still the file's

        def give(name: str, value: Any, how: str, from_file: bool = False) -> None:
            if wanted is not None and name not in wanted:
                return
            values[name] = value
            said[name] = how
            (typed.add if from_file else typed.discard)(name)
            # the other half of a secret, given at an earlier level, no longer counts
            other = self.files.get(name) or self.by_name.get(name, _NO_ROW).file_name
            if other and other in values:
                del values[other]
                typed.discard(other)

        if path:
            try:
                with open(Path(path).expanduser(), "rb") as f:
                    doc = tomllib.load(f)
            except OSError as exc:
                raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
            except (tomllib.TOMLDecodeError, UnicodeDecodeError, ValueError, RecursionError) as exc:
                raise ConfigError(f"config file {path} is not valid TOML: {str(exc)[:200]}") from None
            # Outside the parse: a setting the file names wrongly is not a file that is not TOML.
            flat, how = self.flatten(doc, str(path))
            for key, value in flat.items():
                # checked here, not only if it is still the one that counts: an environment that
                # overrides it today does not make the file right for the next run
                if wanted is None or key in wanted:
                    self.coerce(key, value, typed=True, said=how[key])
                give(key, value, how[key], from_file=True)
        for var_map in (self.env, self.file_env):
            for var, name in var_map.items():
                if env.get(var):
                    give(name, env[var], var)
        for key, value in (overrides or {}).items():
            if value is not None:
                give(key, value, (given_as or {}).get(key, key))
        out: dict[str, Any] = {}
        for key, value in values.items():
            out[key] = self.coerce(key, value, typed=key in typed, said=said.get(key))
        for file_key, name in self.files.items():
            secret_path = out.pop(file_key, None)
            if secret_path:
                problem = file_problem(str(secret_path))
                if problem:
                    raise ConfigError(f"{said[file_key]}: {problem}")
                out[name] = read_secret(str(secret_path))
                said[name] = said[file_key]
        return out, said

    def check_ranges(self, obj: Any, said: Callable[[str], str]) -> None:
        """The checks each setting's row declares on its own; raises ConfigError."""
        for row in self.rows:
            if row.range is not None:
                value = getattr(obj, row.name)
                if not row.range.holds(value):
                    raise ConfigError(row.range.refusal(said(row.name), value))

    # ------------------------------------------------------------------------ the command line

    def options(self, group: str) -> dict[str, str]:
        """setting -> the option that gives it, of one option group ("" for a command's own)."""
        return {
            (row.file_name if f.file else row.name): f.option
            for row in self.rows
            for f in row.flags
            if f.group == group
        }

    def add_arguments(
        self,
        parser: argparse.ArgumentParser | argparse._ArgumentGroup,
        group: str,
        checks: Mapping[str, Callable[[str], Any]],
        **help_fields: str,
    ) -> None:
        """The options of one group, made from the rows. checks: argparse types by the name a row's
        flag gives; help_fields: what a flag's help leaves for each command to say."""
        for row in self.rows:
            flags = [f for f in row.flags if f.group == group]
            # Two options of one setting (--store FILE, --influx URL) given together contradict each
            # other: argparse refuses the pair, rather than one of them being dropped unseen.
            into = parser.add_mutually_exclusive_group() if len(flags) > 1 else parser
            for f in flags:
                text = f.help
                for name, value in help_fields.items():
                    text = text.replace("{" + name + "}", value)
                kwargs: dict[str, Any] = {"dest": f.option[2:].replace("-", "_"), "help": text}
                if row.kind == "bool" and not f.file:
                    kwargs.update(action="store_true", default=None)
                else:
                    kwargs["metavar"] = f.metavar
                    if row.choices and not f.file:
                        kwargs.update(choices=list(row.choices), metavar=None)
                    if f.check:
                        kwargs["type"] = checks[f.check]
                into.add_argument(f.option, **kwargs)

    # ------------------------------------------------------------------------ the docs

    def reference(self) -> str:
        """The Markdown table of docs/collector.md's configuration reference."""
        lines = ["| setting | file | env | option | default | |", "|---|---|---|---|---|---|"]
        for row in self.rows:
            key = f"`[{row.section}] {row.key}`"
            env = ", ".join(f"`{v}`" for v in row.env)
            opts = ", ".join(f"`{f.option}`" for f in row.flags)
            if row.secret:
                key += f", `{row.key}_file`"
                env += "".join(f", `{v}`" for v in row.file_env)
            if row.shown_default is not None:
                default = row.shown_default
            elif row.default in ("", None):
                default = "none"
            elif isinstance(row.default, bool):
                default = str(row.default).lower()
            else:
                default = f"`{_num(row.default)}`"
            text = row.help + ("; a secret, never shown" if row.secret else "")
            lines.append(f"| `{row.name}` | {key} | {env} | {opts} | {default} | {text} |")
        return "\n".join(lines)


_NO_ROW = Setting(name="", kind="str", default="", help="")


def read_secret(path: str) -> str:
    try:
        return expand(path).read_text().strip()
    except OSError as exc:
        raise ConfigError(f"cannot read secret file {path}: {exc.strerror}") from None
    except (UnicodeDecodeError, ValueError):  # binary content, NUL in the path
        raise ConfigError(f"secret file {path!r} is not a readable text file") from None
