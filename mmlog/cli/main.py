"""The `mmlog` command line: a registry of subcommands, each a module of its own.

    mmlog [--version] COMMAND [options] ...

Adding a subcommand is one module with `add_arguments(parser)` and `run(args) -> int`
(see `mmlog/cli/__init__.py`) and one line in `COMMANDS`. Only the chosen command's
module is imported, so `mmlog --help` does not pay for numba.

Errors the user can do something about (bad arguments, a missing file, a corrupt
segment, a Kafka error from the log) print exactly one line, `mmlog: error: ...`, on
stderr and exit non-zero: 2 for usage errors (as argparse does), 1 otherwise. A
traceback means a bug.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from types import ModuleType
from typing import Sequence

import mmlog

# name -> (module, one-line help). Keep the help here so that listing commands imports nothing.
COMMANDS: dict[str, tuple[str, str]] = {
    "broker": ("mmlog.cli.broker", "run a broker (Kafka wire protocol) on this machine"),
    "demo": ("mmlog.cli.demo", "start a broker, produce and consume a round trip, check every byte, stop"),
    "topics": ("mmlog.cli.topics", "create, list, describe and delete topics"),
    "produce": ("mmlog.cli.produce", "send the lines of stdin to a topic, one record per line"),
    "consume": ("mmlog.cli.consume", "print the records of a topic as they arrive, one value per line"),
    "groups": ("mmlog.cli.groups", "list consumer groups; describe one (members, committed offsets, lag)"),
    "quotas": ("mmlog.cli.quotas", "describe and alter client quotas and dynamic broker configs"),
    "reassign": ("mmlog.cli.reassign", "move partitions' replicas between brokers (propose, execute, verify)"),
    "elect-leaders": ("mmlog.cli.elect_leaders", "preferred or unclean leader elections"),
    "perf": ("mmlog.cli.perf", "measure a broker: produce or consume load with live progress and a summary"),
    "dump-log": ("mmlog.cli.dump_log", "print and check the batches of segment files or partition directories"),
    "users": ("mmlog.cli.users", "set, describe and delete SCRAM users (through a broker, or its store directly)"),
    "acls": ("mmlog.cli.acls", "add, list and remove ACLs (kafka-acls.sh's options)"),
    "schemas": ("mmlog.cli.schemas", "register, list, get, check and delete schemas; set compatibility"),
}

USAGE_ERROR = 2


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error message (no usage block) that returns instead of exiting."""

    def error(self, message: str):  # type: ignore[override]
        raise _UsageError(f"{message} (see '{self.prog} --help')")

    def exit(self, status: int = 0, message: str | None = None):  # type: ignore[override]
        if message:
            sys.stderr.write(message)
        raise _Exit(status)


class _UsageError(Exception):
    """A command line that does not parse."""


class _Exit(Exception):
    """--help or --version has been answered; main returns `status`."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def _top_parser() -> _Parser:
    listing = "\n".join(f"  {name:<12} {doc}" for name, (_, doc) in COMMANDS.items())
    parser = _Parser(
        prog="mmlog",
        description="mmlog: a Kafka-style partitioned, persistent log.",
        epilog=f"commands:\n{listing}\n\nRun 'mmlog COMMAND --help' for a command's options.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="mmlog [-h] [--version] COMMAND [options] ...",
    )
    parser.add_argument("--version", action="version", version=f"mmlog {mmlog.__version__}")
    return parser


def load_command(name: str) -> tuple[ModuleType, argparse.ArgumentParser]:
    """Command `name`'s module (imported only now) and its argument parser."""
    module = importlib.import_module(COMMANDS[name][0])
    parser = _Parser(
        prog=f"mmlog {name}",
        description=(module.__doc__ or "").strip(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    module.add_arguments(parser)
    return module, parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return its exit status (the console script exits with it)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return _dispatch(argv)
    except _UsageError as exc:
        return _fail(str(exc), USAGE_ERROR)
    except _Exit as exc:
        return exc.status
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `mmlog dump-log ... | head`: stop quietly, and keep Python from complaining
        # again when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _dispatch(argv: list[str]) -> int:
    from mmlog.config.settings import ConfigError
    from mmlog.errors import KafkaError
    from mmlog.cli import CommandError

    # Options before the command are mmlog's own; the command and the rest are the command's.
    at = next((i for i, arg in enumerate(argv) if not arg.startswith("-")), len(argv))
    top = _top_parser()
    top.parse_args(argv[:at])  # --help and --version end here, with _Exit
    if at == len(argv):
        top.error("missing command")
    name = argv[at]
    if name not in COMMANDS:
        top.error(f"unknown command {name!r} (choose from {', '.join(COMMANDS)})")
    module, parser = load_command(name)
    args = parser.parse_args(argv[at + 1 :])
    try:
        return int(module.run(args) or 0)
    except CommandError as exc:
        return _fail(str(exc), exc.status)
    except (KafkaError, ConfigError) as exc:
        return _fail(f"{type(exc).__name__}: {exc}", 1)
    except OSError as exc:
        if isinstance(exc, BrokenPipeError):
            raise
        where = f"{exc.filename}: " if exc.filename is not None else ""
        return _fail(f"{where}{exc.strerror or exc}", 1)


def _fail(message: str, status: int) -> int:
    try:
        sys.stdout.flush()  # whatever was printed before the error comes first
    except (BrokenPipeError, ValueError):
        pass
    line = " ".join(message.split())  # one line, whatever the message held
    print(f"mmlog: error: {line}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
