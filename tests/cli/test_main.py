"""The `mmlog` command line: the registry, one-line errors, common options in every position, `mmlog demo --keep`.

`mmlog demo` as the README runs it is in tests/test_readme_cli.py."""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path
import sys
import types

import pytest

from mmlog.cli import main as cli
from mmlog.errors import UnknownTopicOrPartition
from mmlog.cli import CommandError


def run(capsys, *argv) -> tuple[int, str, list[str]]:
    status = cli.main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err.splitlines()


@pytest.mark.parametrize(
    "argv, status, error",
    [
        ([], 2, "mmlog: error: missing command (see 'mmlog --help')"),
        (["frobnicate"], 2, f"mmlog: error: unknown command 'frobnicate' (choose from {', '.join(cli.COMMANDS)}) "
                            "(see 'mmlog --help')"),
        (["--frobnicate", "demo"], 2, "mmlog: error: unrecognized arguments: --frobnicate (see 'mmlog --help')"),
        (["dump-log"], 2, "mmlog: error: the following arguments are required: PATH (see 'mmlog dump-log --help')"),
        (["dump-log", "/no/such/dir"], 1, "mmlog: error: /no/such/dir: no such file or directory"),
        (["demo", "--records", "0"], 2, "mmlog: error: --records must be at least 1"),
    ],
)
def test_usage_errors_are_one_line_and_non_zero(capsys, argv, status, error):
    assert run(capsys, *argv) == (status, "", [error])


NO_BROKER = {"broker", "demo", "dump-log", "schemas"}  # every other command talks to a broker (schemas: to a registry)
# a value for each option a command family takes, as typed and as parsed
VALUES = {"--bootstrap": ("10.1.2.3:9999", "10.1.2.3:9999"), "--timeout": ("3.5", 3.5),
          "--command-config": ("client.properties", "client.properties")}


def leaves(parser: argparse.ArgumentParser, path: tuple[str, ...]):
    """(path, parser) of every command and sub-subcommand a user can run, e.g. ("topics", "create")."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
    for action in subs:
        for name, sub in action.choices.items():
            yield from leaves(sub, path + (name,))


def runnable(name: str) -> dict[tuple[str, ...], argparse.ArgumentParser]:
    return dict(leaves(cli.load_command(name)[1], (name,)))


def required_args(parser: argparse.ArgumentParser) -> list[str]:
    """Values for a parser's positionals and required options: the least a command line must say."""
    args = []
    for action in parser._actions:
        if not action.option_strings and not isinstance(action, argparse._SubParsersAction):
            args.append("x")
        elif action.required and action.option_strings:
            args += [action.option_strings[0], "x"]
    return args


def family_options(name: str) -> list[str]:
    """The options of a command itself, which its sub-subcommands must take too (`mmlog topics --timeout S`)."""
    parser = cli.load_command(name)[1]
    return [a.option_strings[0] for a in parser._actions if a.option_strings and a.dest != "help"]


def parse(path: tuple[str, ...], before: list[str], after: list[str]) -> argparse.Namespace:
    """`mmlog CMD [before] [SUB] REQUIRED [after]`, as the real command line parses it."""
    leaf = runnable(path[0])[path]
    return cli.load_command(path[0])[1].parse_args([*before, *path[1:], *required_args(leaf), *after])


BROKER_CLIENTS = [path for name in cli.COMMANDS if name not in NO_BROKER for path in runnable(name)]


@pytest.mark.parametrize("path", BROKER_CLIENTS, ids=" ".join)
def test_every_command_that_talks_to_a_broker_takes_its_options_before_and_after_its_subcommand(path, monkeypatch):
    """`mmlog topics --bootstrap B create T` and `mmlog topics create T --bootstrap B` mean the same, as do
    `mmlog produce --bootstrap B T` and `mmlog produce T --bootstrap B`; without it, $MMLOG_BOOTSTRAP or
    127.0.0.1:9092. A value before the sub-subcommand is kept (not overwritten by a default after it)."""
    monkeypatch.setenv("MMLOG_BOOTSTRAP", "10.9.9.9:1234")
    options = dict.fromkeys(["--bootstrap", *(family_options(path[0]) if len(path) > 1 else [])])
    for option in options:
        typed, value = VALUES[option]
        dest = option[2:].replace("-", "_")
        assert getattr(parse(path, [option, typed], []), dest) == value, f"{option} before"
        assert getattr(parse(path, [], [option, typed]), dest) == value, f"{option} after"
    assert parse(path, [], []).bootstrap == "10.9.9.9:1234"
    monkeypatch.delenv("MMLOG_BOOTSTRAP")
    assert parse(path, [], []).bootstrap == "127.0.0.1:9092"


@pytest.mark.parametrize("name", sorted(NO_BROKER))
def test_commands_that_talk_to_no_broker_take_no_bootstrap(name):
    for path, parser in runnable(name).items():
        assert "--bootstrap" not in parser._option_string_actions, path


def test_help_lists_every_command(capsys):
    status, out, err = run(capsys, "--help")
    assert status == 0 and err == []
    for name, (_, doc) in cli.COMMANDS.items():
        assert f"{name:<12} {doc}" in out


@pytest.mark.parametrize("name", sorted(cli.COMMANDS))
def test_every_command_is_a_module_with_a_description_arguments_and_run(capsys, name):
    module = importlib.import_module(cli.COMMANDS[name][0])
    assert module.__doc__ and callable(module.add_arguments) and callable(module.run)
    status, out, _ = run(capsys, name, "--help")
    assert status == 0
    assert out.startswith(f"usage: mmlog {name}")


@pytest.mark.parametrize(
    "exc, line",
    [
        (CommandError("it broke\non two lines"), "mmlog: error: it broke on two lines"),
        (UnknownTopicOrPartition("unknown topic 'x'"), "mmlog: error: UnknownTopicOrPartition: unknown topic 'x'"),
        (FileNotFoundError(2, "No such file or directory", "/x/y"), "mmlog: error: /x/y: No such file or directory"),
        (PermissionError(13, "Permission denied"), "mmlog: error: Permission denied"),
    ],
)
def test_expected_failures_of_a_command_are_one_line_without_traceback(capsys, monkeypatch, exc, line):
    module = types.ModuleType("mmlog_fake_command", "A command that fails.")
    module.add_arguments = lambda parser: None

    def fail(args):
        print("partial output")
        raise exc

    module.run = fail
    monkeypatch.setitem(sys.modules, "mmlog_fake_command", module)
    monkeypatch.setitem(cli.COMMANDS, "fail", ("mmlog_fake_command", "fails"))
    assert run(capsys, "fail") == (1, "partial output\n", [line])


def test_demo_keep_leaves_a_directory_that_dump_log_reads(tmp_path, capsys):
    status, out, _ = run(capsys, "demo", "--records", "3000", "--batch", "7", "--segment-bytes", "100000", "--keep")
    assert status == 0
    [kept] = [line.split("'mmlog dump-log ")[1].rstrip("'") for line in out.splitlines() if "dump-log" in line]
    try:
        status, dumped, err = run(capsys, "dump-log", kept)
        assert (status, err) == (0, [])
        assert dumped.splitlines()[-1].startswith("Summary: ")
        assert ", 429 batches, 3000 records, " in dumped.splitlines()[-1]
    finally:
        import shutil

        shutil.rmtree(Path(kept).parent.parent, ignore_errors=True)
