"""The `mmlog` subcommands, one module each (see `mmlog/cli/main.py` for the registry).

A subcommand module has a docstring (its `--help` description), `add_arguments(parser)`
and `run(args) -> int`. It imports what it needs inside `run` or at its own top level,
never from the other subcommands, so `mmlog --help` and each command load only their
own dependencies (numba alone takes half a second to import).

Options that several commands take (`--bootstrap`, `--timeout`, `--command-config`:
the client's security settings, read by `client_security`) are defined once here,
as `Option`s. A command family with sub-subcommands (`topics create|list|...`) gets
them through `add_subcommands`, which accepts each one both before and after the
sub-subcommand's name, as kafka-topics.sh and rpk users type them.

Expected failures (a missing file, a corrupt segment, a bad option value) raise
`CommandError`; the CLI prints its message as one `mmlog: error: ...` line and exits
with its `status`. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import os
from typing import Any, Callable, Sequence


class CommandError(Exception):
    """An expected failure of a subcommand: one line on stderr, exit status `status`."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


class Option:
    """One command-line option, defined once and attached to every parser that takes it.

    `default` is a value or a function of no arguments, called when a parser is built
    (so an environment variable is read per run); `help` may name it as `{default}`.
    """

    def __init__(self, *flags: str, default: Any = None, help: str, **kwargs: Any) -> None:
        self.flags, self.default, self.help, self.kwargs = flags, default, help, kwargs

    def add(self, parser: argparse.ArgumentParser, *, suppress: bool = False) -> None:
        """Attach the option; with `suppress`, an absent option sets nothing (see `add_subcommands`)."""
        default = self.default() if callable(self.default) else self.default
        parser.add_argument(*self.flags, default=argparse.SUPPRESS if suppress else default,
                            help=self.help.format(default=default), **self.kwargs)


DEFAULT_BOOTSTRAP = "127.0.0.1:9092"

BOOTSTRAP = Option("--bootstrap", "--bootstrap-server", metavar="HOST:PORT",
                   default=lambda: os.environ.get("MMLOG_BOOTSTRAP", DEFAULT_BOOTSTRAP),
                   help="a broker to start from (default {default}, or $MMLOG_BOOTSTRAP)")
TIMEOUT = Option("--timeout", type=float, default=10.0, metavar="S",
                 help="seconds to wait for a broker (default {default:g})")


COMMAND_CONFIG = Option("--command-config", metavar="FILE", help="client security properties in Kafka's names: "
                        "security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.location, ...")


def client_security(args: argparse.Namespace) -> dict:
    """The client keywords (security_protocol=..., ...) that --command-config's properties file gives."""
    path = getattr(args, "command_config", None)
    if not path:
        return {}
    from pathlib import Path

    from mmlog.config.settings import parse_properties
    from mmlog.security.client import options_from_properties

    try:
        return options_from_properties(parse_properties(Path(path).read_text()))
    except OSError as exc:
        raise CommandError(f"--command-config {path}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise CommandError(f"--command-config {path}: {exc}") from exc


def add_subcommands(parser: argparse.ArgumentParser, common: Sequence[Option],
                    **kwargs: Any) -> Callable[..., argparse.ArgumentParser]:
    """Give `parser` sub-subcommands that take every `common` option before or after their name.

    Returns `add(name, **kwargs) -> parser`, argparse's `add_parser` for this family.
    `kwargs` go to argparse's `add_subparsers`. The options' defaults live at
    `parser`'s level only: a sub-parser copies every attribute of its namespace over
    the parent's, so there an absent option must set nothing, or its default would
    overwrite a value typed before the sub-subcommand.
    """
    shared = argparse.ArgumentParser(add_help=False)
    for option in common:
        option.add(parser)
        option.add(shared, suppress=True)
    subparsers = parser.add_subparsers(**kwargs)

    def add(name: str, **parser_kwargs: Any) -> argparse.ArgumentParser:
        return subparsers.add_parser(name, parents=[shared], **parser_kwargs)

    return add


def key_values(items: Sequence[str], flag: str) -> dict[str, str]:
    """KEY=VALUE arguments of a repeated option as a dict; CommandError naming `flag` for one without '='."""
    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise CommandError(f"{flag} wants KEY=VALUE, got {item!r}", 2)
        out[key.strip()] = value.strip()
    return out
