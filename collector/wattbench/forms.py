"""The forms a setting's value must have, whatever gave it (an option, the environment, a file):
paths of folders and files, certificates, and network addresses. Each `*_problem` says why a text
is not of its form, or None; the settings table applies them (Setting.form) and the options'
argparse types say the same words.
"""

from __future__ import annotations

import errno
import os
import re
import ssl
import tempfile
import urllib.parse
from pathlib import Path


class ConfigError(ValueError):
    """The configuration cannot work; the message says which setting and why."""


def expand(path: str) -> Path:
    try:
        return Path(path).expanduser()
    except RuntimeError:  # ~user that does not exist
        raise ConfigError(f"path {path!r}: unknown home directory") from None


def as_written(value: object) -> str:
    """A value from a settings file said back as TOML spells it (true, "text"), not as Python does
    (True, 'text'), cut at 40 characters."""
    import json  # late: start-up

    if isinstance(value, bool | int | float | str | list | dict):
        try:
            shown = json.dumps(value, ensure_ascii=False, allow_nan=False)
        except ValueError:  # nan, inf: TOML writes them so
            shown = str(value)
    else:
        shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."


# ---------------------------------------------------------------------------- forms of paths


def in_the_way(text: str) -> str | None:
    """Why text cannot be a folder because something else is there, or None."""
    path = expand(text)
    if path.exists() and not path.is_dir():
        return f"{text} is a file, not a folder"
    return None


def folder_problem(text: str, made_with: Path | None = None) -> str | None:
    """Why text cannot be a folder a command keeps its state in, or None. A missing folder is made,
    but only inside one that is there (or inside made_with, a folder made first): a typo above it would
    leave the state, and what it has not sent yet, where nobody looks."""
    path = expand(text)
    if path.exists():
        return in_the_way(text)
    above = next(p for p in path.parents if p.exists())
    if not above.is_dir():
        return f"{text}: {above} is a file, not a folder"
    if above != path.parent and not (made_with is not None and path.is_relative_to(made_with)):
        return f"{text}: no folder {path.parent} (nothing was created)"
    return None


def file_problem(text: str) -> str | None:
    """Why text cannot name a file to read, or None."""
    path = expand(text)
    if path.is_dir():
        return f"{text} is a folder, not a file"
    if not path.is_file():
        return f"{text}: no such file"
    if not os.access(path, os.R_OK):
        return f"{text}: permission denied"
    return None


def store_folder_problem(spec: str) -> str | None:
    """A store file given as a folder that is there (a path or sqlite://path): no SQLite file can be
    opened in its place, known before anything is started for it."""
    if "://" in spec and not spec.startswith("sqlite://"):
        return None
    path = spec.removeprefix("sqlite://")
    if not path or path == ":memory:" or not expand(path).is_dir():
        return None
    return f"{path} is a folder, not a SQLite file"


def lone_password_problem(user: str | None, password: str | None, said: str) -> str | None:
    """A password with no user name: MQTT 3.1.1 has no password without one (MQTT-3.1.2-22), and no
    connection of ours sends it alone, so it would go unused without a word. said: how it was given."""
    if password and not user:
        return f"{said}: a password needs a user name (--mqtt-user or WATTBENCH_MQTT_USER); without one it is not sent"
    return None


def writable_file_problem(text: str) -> str | None:
    """Why text cannot name a file this process writes (an output, a workload's data file), or None:
    its folder is there and takes a new file, or the file is there and can be written."""
    if not text:
        return "empty path"
    path = expand(text)
    if path.is_dir():
        return f"{text} is a folder, not a file"
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        return f"folder {str(parent)!r} does not exist"
    if path.exists():
        return None if os.access(path, os.W_OK) else f"{text} cannot be written (permission denied)"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"folder {str(parent)!r} cannot be written (permission denied)"
    # access() answers yes to root for /proc and /sys; making a file is the only sure test.
    try:
        with tempfile.NamedTemporaryFile(dir=parent, prefix=".wattbench-probe-"):
            pass
    except OSError as exc:
        # A folder that is there and refuses a new file as if it were not (/proc): ENOENT's own words
        # would say the folder is missing.
        why = "it takes no new files" if exc.errno == errno.ENOENT else exc.strerror or exc
        return f"folder {str(parent)!r} cannot be written ({why})"
    return None


def ca_problem(text: str) -> str | None:
    """Why text cannot name a CA certificate TLS can load, or None: a wrong file is found when the
    setting is read, not at the first connect."""
    problem = file_problem(text)
    if problem:
        return problem
    try:
        ssl.create_default_context(cafile=str(expand(text)))
    except (ssl.SSLError, ValueError, OSError) as exc:
        return f"{text}: not a PEM CA certificate ({exc})"
    return None


# ---------------------------------------------------------------------------- forms of addresses


def shown_url(url: str) -> str:
    """An address as it may be printed: credentials in it replaced by ***."""
    return re.sub(r"//[^/@]*@", "//***@", url)


def http_address_problem(text: str, credentials: bool = True) -> str | None:
    """Why text is not an http(s)://host[:port] address, or None. A port above 65535 would be wrapped
    by the resolver (99999 is 34463) and another server asked. credentials: whether user:password@
    may stand in it (never shown)."""
    shown = shown_url(text)
    try:
        parts = urllib.parse.urlsplit(text)
    except ValueError as exc:
        return f"{shown}: {exc}"
    if parts.scheme not in ("http", "https") or "://" not in text:
        return f"{shown}: not an http:// or https:// address"
    if not parts.hostname:
        return f"{shown}: no host"
    if "@" in parts.netloc and not credentials:
        return f"{shown}: credentials in the address are not supported"
    port = parts.netloc.rpartition("@")[2].rpartition("]")[2].partition(":")[2]
    if port and (not port.isascii() or not port.isdigit() or not 1 <= int(port) <= 65535):
        return f"{shown}: port {port} is outside 1..65535"
    return None


def metrics_address(text: str, said: str = "metrics address") -> str:
    """HOST:PORT (or :PORT for every interface) for the /metrics endpoint; ConfigError otherwise."""
    host, sep, port = str(text).rpartition(":")
    if not sep or not port.isascii() or not port.isdigit():
        raise ConfigError(f"{said} {text!r}: use HOST:PORT, for example 127.0.0.1:9464")
    if not 0 < int(port) < 65536:
        raise ConfigError(f"{said} {text!r}: port {port} is outside 1..65535")
    host = host.strip("[]")
    if any(ch.isspace() or ch in "/\0" for ch in host):
        raise ConfigError(f"{said} {text!r}: {host!r} is not a host")
    return f"{host}:{int(port)}"


def split_metrics_address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host.strip("[]") or "0.0.0.0", int(port)
