"""The `mmlog` command line: the registry, one-line errors, and `mmlog demo` end to end."""

from __future__ import annotations

import importlib
import subprocess
from pathlib import Path
import sys
import types

import pytest

from mmlog import cli
from mmlog.errors import UnknownTopicOrPartition
from mmlog.tools import CommandError


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


def test_demo_runs_end_to_end_as_the_readme_says():
    done = subprocess.run(
        [sys.executable, "-m", "mmlog.cli", "demo"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert "produced 100000 records of 200 bytes" in done.stdout
    assert "checked every byte, and every record's offset and value: ok" in done.stdout
    assert done.stdout.splitlines()[-1] == "  broker stopped cleanly"


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
