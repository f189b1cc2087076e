"""`mmlog topics`: create, list, describe, delete, and one-line errors."""

import os
import subprocess
import sys

import pytest

from mmlog.testing import EmbeddedBroker


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("broker"), processors=1) as b:
        yield b


def topics(broker, *args, bootstrap=None):
    return subprocess.run([sys.executable, "-m", "mmlog", "topics", "--bootstrap", bootstrap or broker.bootstrap,
                           "--timeout", "2", *args], capture_output=True, text=True, timeout=60)


def test_bootstrap_before_or_after_the_subcommand_or_from_the_environment(broker):
    """kafka-topics.sh and rpk users put --bootstrap anywhere; $MMLOG_BOOTSTRAP (here a dead port) is only the
    default, so a value typed before `create` must not be replaced by the default after it."""
    def mmlog(*args, env_bootstrap="127.0.0.1:1"):
        return subprocess.run([sys.executable, "-m", "mmlog", "topics", *args], capture_output=True, text=True,
                              timeout=60, env=dict(os.environ, MMLOG_BOOTSTRAP=env_bootstrap))

    after = mmlog("create", "where-after", "--partitions", "2", "--bootstrap", broker.bootstrap, "--timeout", "5")
    before = mmlog("--bootstrap", broker.bootstrap, "--timeout", "5", "create", "where-before")
    assert (after.returncode, before.returncode) == (0, 0), after.stderr + before.stderr
    listed = mmlog("list", env_bootstrap=broker.bootstrap).stdout.splitlines()
    assert "where-after\t2" in listed and "where-before\t1" in listed
    nowhere = mmlog("list", "--timeout", "1")
    assert nowhere.returncode == 1 and "127.0.0.1:1" in nowhere.stderr


def test_topics_round_trip(broker):
    made = topics(broker, "create", "cli-t", "--partitions", "2", "--config", "retention.ms=5000")
    assert made.returncode == 0 and "created topic cli-t" in made.stdout
    assert "cli-t\t2" in topics(broker, "list").stdout.splitlines()
    described = topics(broker, "describe", "cli-t").stdout
    assert "Partitions: 2" in described and "config overrides: retention.ms=5000" in described
    assert topics(broker, "delete", "cli-t").returncode == 0
    assert "cli-t" not in topics(broker, "list").stdout


@pytest.mark.parametrize("args, message", [
    (["create", "cli-dup"], "TopicAlreadyExists"),
    (["describe", "cli-none"], "UnknownTopicOrPartition"),
    (["create", "x", "--config", "novalue"], "--config wants KEY=VALUE"),
])
def test_errors_are_one_line(broker, args, message):
    topics(broker, "create", "cli-dup")
    out = topics(broker, *args)
    assert out.returncode != 0
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mmlog: error:") and message in lines[0]


def test_an_unreachable_broker_is_one_line(broker):
    out = topics(broker, "list", bootstrap="127.0.0.1:1")
    assert out.returncode == 1
    assert out.stderr.strip().startswith("mmlog: error: ConnectionClosed: no broker reachable")
