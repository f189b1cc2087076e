"""`mmlog reassign` and `mmlog elect-leaders` against a standalone broker: the cluster of one, and one-line
errors. (Moves between brokers run in the README's cluster block and tests/replication/.)"""

import json
import subprocess
import sys

import pytest

from mmlog.testing import EmbeddedBroker


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("broker"), processors=1) as b:
        subprocess.run([sys.executable, "-m", "mmlog", "topics", "create", "solo", "--partitions", "2",
                        "--bootstrap", b.bootstrap], check=True, capture_output=True, timeout=60)
        yield b


def mmlog(broker, *args, stdin=None):
    return subprocess.run([sys.executable, "-m", "mmlog", *args, "--bootstrap", broker.bootstrap, "--timeout", "5"],
                          capture_output=True, text=True, timeout=60, input=stdin)


def plan(*entries):
    return json.dumps({"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": r} for t, p, r in entries]})


def test_a_standalone_broker_never_needs_an_election(broker):
    out = mmlog(broker, "elect-leaders", "--election-type", "preferred", "--all-topic-partitions")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [f"Valid replica already elected for partition solo-{p}" for p in (0, 1)]
    unknown = mmlog(broker, "elect-leaders", "--election-type", "unclean", "--topic", "nope", "--partition", "0")
    assert unknown.returncode == 1 and "UnknownTopicOrPartition" in unknown.stdout
    usage = mmlog(broker, "elect-leaders", "--election-type", "preferred", "--topic", "solo")
    assert usage.returncode == 2 and usage.stderr.count("\n") == 1


def test_generate_proposes_and_execute_refuses_brokers_that_do_not_exist(broker):
    generated = mmlog(broker, "reassign", "--generate", "--topics-to-move-json-file", "-", "--broker-list", "0",
                      stdin='{"version":1,"topics":[{"topic":"solo"}]}')
    assert generated.returncode == 0, generated.stderr
    proposed = json.loads(generated.stdout.splitlines()[-1])
    assert [(e["topic"], e["partition"], e["replicas"]) for e in proposed["partitions"]] == [("solo", 0, [0]),
                                                                                              ("solo", 1, [0])]
    same = mmlog(broker, "reassign", "--execute", "--reassignment-json-file", "-", stdin=plan(("solo", 0, [0])))
    assert same.returncode == 0, same.stderr  # already there
    elsewhere = mmlog(broker, "reassign", "--execute", "--reassignment-json-file", "-", stdin=plan(("solo", 0, [3])))
    assert elsewhere.returncode == 1 and "not alive" in elsewhere.stderr and elsewhere.stderr.count("\n") == 1
    verified = mmlog(broker, "reassign", "--verify", "--reassignment-json-file", "-", stdin=plan(("solo", 0, [0])))
    assert "is completed" in verified.stdout
    assert mmlog(broker, "reassign", "--list").stdout == ""


def test_bad_files_and_cancels_are_one_line_errors(broker):
    missing = mmlog(broker, "reassign", "--execute", "--reassignment-json-file", "/nonexistent.json")
    assert missing.returncode == 1 and missing.stderr.startswith("mmlog: error: /nonexistent.json")
    garbage = mmlog(broker, "reassign", "--execute", "--reassignment-json-file", "-", stdin='{"partitions": [{}]}')
    assert garbage.returncode == 1 and "not a reassignment" in garbage.stderr
    cancel = mmlog(broker, "reassign", "--cancel", "--reassignment-json-file", "-", stdin=plan(("solo", 0, [0])))
    assert cancel.returncode == 1 and "No reassignment is in progress" in cancel.stderr
