"""The parser every command and subcommand is made from: one-line usage errors that point to the
command's own --help, no abbreviated options, and no option that takes one value given twice."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from itertools import pairwise
from typing import Any, NoReturn

from ..exits import Exit
from .textout import shortened


class Parser(argparse.ArgumentParser):
    """A usage error is one line naming the option, not the whole synopsis; --help has that.

    Every command and subcommand is made from this class. An option is never taken for another by its
    first letters (argparse's allow_abbrev): `sweep --json` would be --json-out, and a new option could
    silently change what an old abbreviation means. An option a subcommand does not know is that
    subcommand's error, pointing to its own --help."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self.words: list[str] = []  # the command line being parsed, set by the top parser

    def error(self, message: str) -> NoReturn:
        unknown = self.unknown_options(self.words)
        if unknown and not message.startswith("unrecognized arguments"):
            # An unknown option's value was taken for what came next (`suite --workers 1 FILE` read 1
            # as the file): the option is the mistake to name.
            message = f"unrecognized arguments: {' '.join(unknown)}{self.meant(unknown, self.words)}"
        flag, sep, value = message.partition(": ignored explicit argument ")
        if sep:
            # argparse's words read as if the value had been dropped and the run gone on without it.
            message = f"{flag}: takes no value (given {value})"
        self.exit(Exit.USAGE, f"{self.prog}: {shortened(message)} (see {self.prog} --help)\n")

    def _get_value(self, action: argparse.Action, arg_string: str) -> Any:
        # A type that looks at the file system (a store, a folder, an output) may meet a path the
        # system refuses to look up (a name over 255 bytes): that is the option's error, like any other.
        try:
            return super()._get_value(action, arg_string)
        except OSError as exc:
            raise argparse.ArgumentError(action, f"{arg_string!r}: {exc.strerror or exc}") from None

    def unknown_options(self, words: Sequence[str]) -> list[str]:
        """The --options after this (sub)command's name on the command line that it does not know."""
        name = self.prog.split()[-1]
        start = words.index(name) + 1 if name in words and " " in self.prog else 0
        tail = list(words[start:])
        tail = tail[: tail.index("--")] if "--" in tail else tail
        return [
            w for w in tail if w.startswith("--") and w.partition("=")[0] not in self._option_string_actions
        ]

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:  # type: ignore[override]
        words = list(sys.argv[1:] if args is None else args)
        for each in self.family():
            each.words = words
        parsed, extras = self.parse_known_args(args, namespace)
        parser = self.chosen(parsed)
        if extras:
            # argparse leaves these to the top parser, whose --help does not list them.
            parser.error(f"unrecognized arguments: {' '.join(extras)}{parser.meant(extras, words)}")
        parser.given_once(words)
        return parsed

    def given_once(self, words: Sequence[str]) -> None:
        """An option that takes one value, given twice, is a usage error: argparse keeps the last
        without a word, so `--levels 100 --levels 50` ran 50 % alone."""
        seen: dict[str, tuple[str, str]] = {}
        i = 0
        while i < len(words):
            word = words[i]
            if word == "--":
                break
            option, eq, inline = word.partition("=")
            action = self._option_string_actions.get(option) if option.startswith("-") else None
            if isinstance(action, argparse._StoreAction) and action.nargs is None:
                value = inline if eq else (words[i + 1] if i + 1 < len(words) else "")
                if action.dest in seen:
                    first, before = seen[action.dest]
                    self.error(
                        f"argument {option}: given twice ({first} {before}, then {option} {value}): give it once"
                    )
                seen[action.dest] = (option, value)
                i += 0 if eq else 1
            i += 1

    def family(self) -> list[Parser]:
        """This parser and every subcommand parser below it."""
        out = [self]
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    if isinstance(sub, Parser) and sub not in out:
                        out += sub.family()
        return out

    def chosen(self, parsed: argparse.Namespace) -> Parser:
        """The (sub)command parser the command line chose."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                sub = action.choices.get(getattr(parsed, action.dest, None) or "")
                if isinstance(sub, Parser):
                    return sub.chosen(parsed)
        return self

    def meant(self, extras: list[str], words: Sequence[str] = ()) -> str:
        """The options an abbreviation would once have been taken for, as a hint; and for a file
        after a flag that prints to stdout (--json FILE), the option that writes it (--json-out FILE)."""
        known = [o for o in self._option_string_actions if o.startswith("--")]
        hints = {o for x in extras if x.startswith("--") for o in known if o.startswith(x.split("=")[0])}
        hints |= {
            f"{flag}-out {word}"
            for flag, word in pairwise(words)
            if word in extras and f"{flag}-out" in known
        }
        return f" (did you mean {' or '.join(sorted(hints))}?)" if hints else ""
