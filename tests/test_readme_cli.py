"""Every `mmlog` command the README shows runs as written, in the README's order, through the real CLI.

The commands are the pipelines, in the README's ```sh blocks and inline code, whose
program is `mmlog` (`pip install -e . && mmlog demo` holds one, `mmlog demo`; a kcat
or systemctl line holds none). How each kind runs:

- `mmlog broker ...` starts that broker with its data dir under tmp_path, a free port
  for its --listen and, for --zookeeper, a chroot of its own on the run's ZooKeeper; it runs
  until the end of its block, and the block's other commands reach it at the address the
  README gives it. A block's brokers start together (as in the terminals of a person
  following the README), before its first other command.
- every other command runs in bash (pipes and all) with `mmlog` on PATH. A README
  address (127.0.0.1:9093) becomes the broker started at it; in a block that starts
  none, 127.0.0.1:9092 and $MMLOG_BOOTSTRAP are the test's own broker. `--records N`
  runs at most RECORDS_CAP records: the README's figures take a minute and gigabytes,
  and `python -m tools.bench` measures them; here the command is under test.
  Placeholders (`mmlog dump-log PATH...`) become what they stand for.

A command of a kind this module does not know fails the test until it is taught here,
and so does an expectation left without its command: the README stays tested.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import functools
import itertools
import os
import re
import shlex
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Callable

import pytest

from mmlog.cli import main as cli
from mmlog.client.cluster import Cluster
from mmlog.testing import EmbeddedBroker, ZooKeeperServer

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DEFAULT = "127.0.0.1:9092"
ADDRESS = re.compile(r"(?:127\.0\.0\.1|localhost):\d+")
RECORDS_CAP = 5_000
CLIENTS = {"demo", "topics", "produce", "consume", "groups", "quotas", "perf", "dump-log",  # run in bash as written
           "reassign", "elect-leaders"}
OPERATORS = {"&&", "||", ";", "&", "|"}


def commands(markdown: str) -> list[tuple[int, list[list[str]]]]:
    """(block number, pipeline) of every `mmlog` pipeline in ```sh blocks and inline code, in order.

    A pipeline is its stages' argument lists, one of which runs `mmlog`. Each sh block, and each
    inline code span, is a block of its own."""
    found = []
    spans = re.finditer(r"```(\w*)\n(.*?)```|`([^`\n]+)`", markdown, flags=re.S)
    for number, span in enumerate(spans):
        if span[1] not in ("sh", None):
            continue
        for line in (span[2] if span[1] is not None else span[3]).splitlines():
            found += [(number, p) for p in _pipelines(line) if any(map(mmlog_args, p))]
    return found


def mmlog_args(stage: list[str]) -> list[str]:
    """The arguments of `mmlog` in a pipeline stage that runs it (after any NAME=VALUE words), else []."""
    words = list(itertools.dropwhile(re.compile(r"[A-Za-z_]\w*=").match, stage))
    return words[1:] if words[:1] == ["mmlog"] else []  # a bare `mmlog` in prose names the package, or Spark's format


def _pipelines(line: str) -> list[list[list[str]]]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    pipelines, stages, words = [], [], []
    for token in [*lexer, ";"]:
        if token not in OPERATORS:
            words.append(token)
            continue
        stages.append(words)
        words = []
        if token != "|":
            pipelines.append(stages)
            stages = []
    return pipelines


def shown(pipeline: list[list[str]]) -> str:
    return " | ".join(shlex.join(stage) for stage in pipeline)


# What a command prints, beyond exiting 0: a check per README command (every one must still be in the README).
EXPECT = {
    "mmlog demo": lambda out, err: (out.splitlines()[-1] == "  broker stopped cleanly" and err == ""
                                    and "checked every byte, and every record's offset and value: ok" in out),
    "mmlog topics create clicks --partitions 3 --config retention.ms=86400000":
        lambda out, err: out == "created topic clicks with 3 partition(s)\n",
    "mmlog quotas describe": lambda out, err: out == "client-id=batch-loader\tproducer_byte_rate=1048576\n",
    "mmlog consume clicks --from-beginning --max-messages 2":
        lambda out, err: sorted(out.splitlines()) == ["cart", "home"],
    "mmlog consume clicks --group reporting --from-beginning --max-messages 2":
        lambda out, err: sorted(out.splitlines()) == ["cart", "home"],
    "mmlog groups describe reporting":
        lambda out, err: out.startswith("Group: reporting\tState: Empty") and "Total lag: 0" in out,
    "mmlog perf consume --topic bench --api bulk":
        lambda out, err: out.startswith(f"consumed (bulk): {RECORDS_CAP + 1:,} records"),  # + perf's warm-up record
    "mmlog topics create events --partitions 6 --replication-factor 3 --config min.insync.replicas=2 "
    "--bootstrap 127.0.0.1:9093":
        lambda out, err: out == "created topic events with 6 partition(s)\n",
    "mmlog topics describe events --bootstrap 127.0.0.1:9092":  # six partitions, each on all three brokers
        lambda out, err: len([x for x in out.splitlines() if "replicas " in x and len(
            x.split("replicas ")[1].split()[0].split(",")) == 3]) == 6,
    "mmlog dump-log PATH...":  # the test broker's clicks partitions, which hold the two records produced above
        lambda out, err: out.splitlines()[-1].startswith("Summary: ") and ", 2 records, " in out.splitlines()[-1],
}
# ... and for every `mmlog perf produce` command
PERF_PRODUCE = lambda out, err: re.match(rf"produce {RECORDS_CAP:,} x 200 B to ", out) and " msg/s, " in out


def test_finding_the_commands():
    markdown = "\n".join([
        "```sh", "pip install -e . && mmlog demo", "kcat -C -b 127.0.0.1:9092 -t greetings -e",
        "printf 'a:b\\n' | mmlog produce t --key-separator :   # a comment", "journalctl -u mmlog -f",
        "MMLOG_BOOTSTRAP=h:1 mmlog topics list; mmlog topics describe t", "```",
        "```python", "print('mmlog demo')", "```",
        "The `mmlog` format. Inspect segments with `mmlog dump-log PATH...`.",
    ])
    assert [(block, shown(p)) for block, p in commands(markdown)] == [
        (0, "mmlog demo"), (0, "printf 'a:b\\n' | mmlog produce t --key-separator :"),
        (0, "MMLOG_BOOTSTRAP=h:1 mmlog topics list"), (0, "mmlog topics describe t"), (3, "mmlog dump-log PATH..."),
    ]


@pytest.fixture
def readme(tmp_path, request):
    with Readme(tmp_path, lambda: request.getfixturevalue("zookeeper")) as runner:
        yield runner


def test_every_mmlog_command_in_the_readme_runs_as_written(readme):
    checked = readme.run(README.read_text())
    assert "mmlog topics describe events --bootstrap 127.0.0.1:9092" in checked
    assert set(EXPECT) <= checked, f"expectations for commands no longer in the README: {set(EXPECT) - checked}"


@pytest.mark.parametrize("line, error", [
    ("mmlog frobnicate --now", "teach tests.test_readme_cli how to run `mmlog frobnicate`"),
    ("mmlog topics list --bootstrap 127.0.0.1:9999", "no broker was started at 127.0.0.1:9999"),
    ("mmlog broker --data-dir /d --listen 127.0.0.1:9092 --config /etc/x.properties",
     "teach tests.test_readme_cli how to run `mmlog broker --data-dir"),
])
def test_a_readme_command_this_test_cannot_run_fails_it(readme, line, error):
    with pytest.raises(AssertionError, match=re.escape(error)):
        readme.run(f"```sh\n{line}\n```\n")


class Readme:
    """Runs the `mmlog` commands of a README (see the module docstring); a context manager stopping all it started."""

    def __init__(self, tmp_path: Path, zookeeper: Callable[[], ZooKeeperServer]) -> None:
        self.tmp_path = tmp_path
        self.stack = contextlib.ExitStack()
        self.zookeeper = zookeeper  # the run's ZooKeeper, asked for when a README broker needs it
        self.chroot = f"/readme-{uuid.uuid4().hex[:12]}"  # under which the README's own chroot goes
        self.env = self._bash_env()

    def __enter__(self) -> "Readme":
        return self

    @functools.cached_property
    def ours(self) -> EmbeddedBroker:
        """The broker of the blocks that start none (started when first needed)."""
        return self.stack.enter_context(
            EmbeddedBroker(self.tmp_path / "broker", config={"group.initial.rebalance.delay.ms": 100}))

    def __exit__(self, *exc) -> None:
        self.stack.close()

    def run(self, markdown: str) -> set[str]:
        """Run every `mmlog` command of `markdown` once, in order; the commands whose output was checked."""
        checked: set[str] = set()
        done: set[str] = set()
        block, started = None, {}  # README address -> broker started by this block
        for number, pipeline in commands(markdown):
            text = shown(pipeline)
            if number != block:
                self._start(started)  # a block of brokers only
                self._stop(started)
                block, started = number, {}
            [args] = [args for args in map(mmlog_args, pipeline) if args]
            if args[0] == "broker":
                assert pipeline == [["mmlog", *args]], f"`{text}`: teach {__name__} to run a broker in a pipeline"
                address, broker = self._broker(args)
                started[address] = broker
                continue
            self._start(started)
            assert args[0] in CLIENTS, f"the README's `{text}`: teach {__name__} how to run `mmlog {args[0]}`"
            if text in done:  # `mmlog demo` is shown twice
                continue
            done.add(text)
            addresses = {DEFAULT: self.ours.bootstrap} | {a: b.bootstrap for a, b in started.items()}
            if started:
                wait_for_one_cluster(started.values())
            result = self._run(pipeline, addresses)
            assert result.returncode == 0, f"`{text}` exited {result.returncode}:\n{result.stderr}"
            check = EXPECT.get(text, PERF_PRODUCE if args[:2] == ["perf", "produce"] else None)
            if check is not None:
                assert check(result.stdout, result.stderr), f"`{text}` printed:\n{result.stdout}\n{result.stderr}"
                checked.add(text)
            if text == "mmlog topics create events --partitions 6 --bootstrap 127.0.0.1:9093":
                assert self._leaders("events", addresses["127.0.0.1:9093"]) == {0: 2, 1: 2, 2: 2}, \
                    "two partitions on each broker"
        self._start(started)
        self._stop(started)
        return checked

    def _broker(self, args: list[str]) -> tuple[str, EmbeddedBroker]:
        """A README `mmlog broker` command, to run here: its data dir under tmp_path, a free port, a chroot
        on the test's ZooKeeper. Returns the address the README gives it, and the broker (not started)."""
        argv = list(args)
        address = DEFAULT
        for i, (flag, value) in enumerate(zip(argv, argv[1:])):
            if flag == "--data-dir":
                argv[i + 1] = str(self.tmp_path / value.lstrip("/"))
            elif flag == "--listen":
                address, argv[i + 1] = value, f"{value.rsplit(':', 1)[0]}:0"
            elif flag == "--zookeeper":
                argv[i + 1] = ADDRESS.sub(self.zookeeper().connect + self.chroot, value)
        parsed = cli.load_command("broker")[1].parse_args(argv[1:])
        assert parsed.data_dir and Path(parsed.data_dir).is_relative_to(self.tmp_path) and parsed.listen \
            and parsed.config is None and not parsed.override, f"teach {__name__} how to run `mmlog {shlex.join(args)}`"
        broker = ReadmeBroker(argv, Path(parsed.data_dir))
        self.stack.callback(broker.stop)
        return address, broker

    @staticmethod
    def _start(brokers: dict[str, EmbeddedBroker]) -> None:
        """Start a block's brokers not yet started, all at once."""
        waiting = [broker for broker in brokers.values() if broker.proc is None]
        with concurrent.futures.ThreadPoolExecutor(max(1, len(waiting))) as pool:
            list(pool.map(EmbeddedBroker.start, waiting))  # re-raises a start's BrokerFailed

    @staticmethod
    def _stop(started: dict[str, EmbeddedBroker]) -> None:
        """Stop a block's brokers; each must stop cleanly (exit 0)."""
        codes = {address: broker.stop() for address, broker in started.items()}
        assert set(codes.values()) <= {0}, f"brokers that did not stop cleanly: {codes}"

    def _run(self, pipeline: list[list[str]], addresses: dict[str, str]) -> subprocess.CompletedProcess:
        """Run a README pipeline in bash with its addresses, record counts and placeholders made real here."""
        placeholders = {"PATH...": sorted(str(p) for p in self.ours.data_dir.glob("clicks-*") if p.is_dir())}
        stages = []
        for stage in pipeline:
            words = []
            for i, word in enumerate(stage):
                if i and stage[i - 1] == "--records":
                    word = str(min(int(word), RECORDS_CAP))
                for address in ADDRESS.findall(word):
                    assert address in addresses, f"`{shown(pipeline)}`: no broker was started at {address}"
                    word = word.replace(address, addresses[address])
                words += placeholders.get(word, [word])
            stages.append(shlex.join(words))
        return subprocess.run(["bash", "-euo", "pipefail", "-c", " | ".join(stages)], capture_output=True,
                              text=True, timeout=180, env=dict(self.env, MMLOG_BOOTSTRAP=addresses[DEFAULT]),
                              cwd=self.tmp_path)

    def _leaders(self, topic: str, bootstrap: str) -> dict[int, int]:
        """How many of `topic`'s partitions each broker leads, as `mmlog topics describe` prints it."""
        out = subprocess.run(["mmlog", "topics", "describe", topic, "--bootstrap", bootstrap], env=self.env,
                             capture_output=True, text=True, timeout=60, check=True).stdout
        return dict(collections.Counter(int(m) for m in re.findall(r"\tleader (-?\d+)\t", out)))

    def _bash_env(self) -> dict[str, str]:
        """An environment whose `mmlog` is this checkout's CLI, run by this interpreter."""
        shim = self.tmp_path / "bin" / "mmlog"
        shim.parent.mkdir()
        shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m mmlog "$@"\n')
        shim.chmod(0o755)
        path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        return dict(os.environ, PATH=f"{shim.parent}{os.pathsep}{os.environ['PATH']}", PYTHONPATH=path)


class ReadmeBroker(EmbeddedBroker):
    """A broker started from a README command line (rewritten by `Readme._start_broker`)."""

    def __init__(self, argv: list[str], data_dir: Path) -> None:
        super().__init__(data_dir)
        self.argv = argv

    def command(self) -> list[str]:
        return [sys.executable, "-m", "mmlog", *self.argv, "--exit-with-parent"]


def wait_for_one_cluster(brokers, timeout: float = 30.0) -> None:
    """Every broker lists all of them (as a person typing the next command would find)."""
    brokers = list(brokers)
    deadline = time.monotonic() + timeout
    for broker in brokers:
        view = Cluster(broker.bootstrap, timeout=5)
        view.refresh([])
        while len(view.brokers) < len(brokers):
            assert time.monotonic() < deadline, f"{broker.bootstrap} sees only {view.brokers}"
            time.sleep(0.1)
            view.refresh([])
