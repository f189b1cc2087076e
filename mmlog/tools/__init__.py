"""The `mmlog` subcommands, one module each (see `mmlog/cli.py` for the registry).

A subcommand module has a docstring (its `--help` description), `add_arguments(parser)`
and `run(args) -> int`. It imports what it needs inside `run` or at its own top level,
never from the other subcommands, so `mmlog --help` and each command load only their
own dependencies (numba alone takes half a second to import).

Expected failures (a missing file, a corrupt segment, a bad option value) raise
`CommandError`; the CLI prints its message as one `mmlog: error: ...` line and exits
with its `status`. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class CommandError(Exception):
    """An expected failure of a subcommand: one line on stderr, exit status `status`."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def add_bootstrap(parser) -> None:
    """The --bootstrap option every client command takes; $MMLOG_BOOTSTRAP changes its default."""
    import os

    default = os.environ.get("MMLOG_BOOTSTRAP", DEFAULT_BOOTSTRAP)
    parser.add_argument("--bootstrap", "--bootstrap-server", default=default, metavar="HOST:PORT",
                        help=f"a broker to start from (default {default}, or $MMLOG_BOOTSTRAP)")
