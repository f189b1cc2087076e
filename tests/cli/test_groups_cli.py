"""`mmlog consume --group` and `mmlog groups list|describe` against a real broker."""

from __future__ import annotations

import time

import pytest

from mmlog.cli import main as cli
from mmlog.client import Consumer
from mmlog.client.admin import Admin
from mmlog.testing import EmbeddedBroker
from tests.client.consumer_tools import create_topic, produce

FAST_GROUPS = {"group.initial.rebalance.delay.ms": 100, "group.min.session.timeout.ms": 500}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("broker"), processors=1, config=FAST_GROUPS) as b:
        create_topic(b, "orders", partitions=2)
        for p in range(2):
            produce(b, "orders", p, [(None, b"order-%d-%d" % (p, i)) for i in range(5)])
        yield b


def run(capsysbinary, *argv) -> tuple[int, str, str]:
    status = cli.main(list(argv))
    out = capsysbinary.readouterr()
    return status, out.out.decode(), out.err.decode()


def test_consume_with_a_group_resumes_after_what_it_printed(broker, capsysbinary):
    """--max-messages 3 prints three records; the group's commit at exit is just after them (the records
    handed over but not printed are not committed), so the next run prints exactly the other seven."""
    common = ["consume", "orders", "--bootstrap", broker.bootstrap, "--group", "cli-readers", "--from-beginning"]
    status, first, err = run(capsysbinary, *common, "--max-messages", "3")
    assert status == 0 and "Processed a total of 3 messages" in err
    status, rest, err = run(capsysbinary, *common, "--timeout-ms", "1500")
    assert status == 0 and "Processed a total of 7 messages" in err
    printed = first.splitlines() + rest.splitlines()
    assert sorted(printed) == sorted(f"order-{p}-{i}" for p in range(2) for i in range(5))
    status, again, err = run(capsysbinary, *common, "--timeout-ms", "800")
    assert (status, again) == (0, "") and "Processed a total of 0 messages" in err


def test_groups_list_and_describe_show_members_offsets_and_lag(broker, capsysbinary):
    with Consumer(broker.bootstrap, group_id="cli-live", client_id="live-client", auto_offset_reset="earliest",
                  enable_auto_commit=False, session_timeout_ms=5000, heartbeat_interval_ms=200) as c:
        c.subscribe(["orders"])
        got = []
        deadline = time.monotonic() + 15
        while len(got) < 10:
            assert time.monotonic() < deadline
            got += c.poll(0.1)
        c.commit({("orders", 0): 5, ("orders", 1): 2})
        with Admin(broker.bootstrap) as admin:
            [member] = admin.describe_group("cli-live").members
        member_id = member.member_id
        assert member_id.startswith("live-client-")

        status, out, _ = run(capsysbinary, "groups", "--bootstrap", broker.bootstrap, "list")
        assert status == 0
        assert "cli-live\tStable\t1 member(s)" in out.splitlines()

        status, out, _ = run(capsysbinary, "groups", "--bootstrap", broker.bootstrap, "describe", "cli-live")
        assert status == 0, out
        lines = out.splitlines()
        assert lines[0] == "Group: cli-live\tState: Stable\tProtocol: consumer/range\tMembers: 1"
        assert lines[1] == (f"  member {member_id}\tclient live-client\thost /127.0.0.1\t"
                            "partitions orders-0,orders-1")
        rows = [line.split() for line in lines[2:]]
        assert rows == [["TOPIC", "PARTITION", "COMMITTED", "LATEST", "LAG", "MEMBER"],
                        ["orders", "0", "5", "5", "0", member_id],
                        ["orders", "1", "2", "5", "3", member_id],
                        ["Total", "lag:", "3"]]

    # Closed: the member left; its offsets stay.
    status, out, _ = run(capsysbinary, "groups", "--bootstrap", broker.bootstrap, "describe", "cli-live")
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == "Group: cli-live\tState: Empty\tProtocol: consumer\tMembers: 0"
    assert [line.split() for line in lines[2:]] == [["orders", "0", "5", "5", "0", "-"],
                                                    ["orders", "1", "2", "5", "3", "-"],
                                                    ["Total", "lag:", "3"]]


def test_describe_an_unknown_group_is_one_line(broker, capsysbinary):
    status, out, err = run(capsysbinary, "groups", "--bootstrap", broker.bootstrap, "describe", "nobody")
    assert status == 1 and out == ""
    assert err == "mmlog: error: group 'nobody' does not exist\n"


def _committed(broker, group):
    with Admin(broker.bootstrap) as admin:
        return {(tp.topic, tp.partition): o.committed for tp, o in admin.group_offsets(group).items()}


def test_reset_offsets_is_a_dry_run_unless_executed(broker, capsysbinary):
    common = ["groups", "reset-offsets", "cli-reset", "--bootstrap", broker.bootstrap]
    status, out, err = run(capsysbinary, *common, "--topic", "orders", "--to-offset", "3", "--execute")
    assert (status, err) == (0, "")
    assert _committed(broker, "cli-reset") == {("orders", 0): 3, ("orders", 1): 3}
    status, out, _ = run(capsysbinary, *common, "--all-topics", "--to-earliest")
    assert status == 0
    assert out.splitlines() == ["GROUP      TOPIC   PARTITION  NEW-OFFSET", "cli-reset  orders  0          0",
                                "cli-reset  orders  1          0",
                                "dry run: nothing changed (add --execute to commit these offsets)"]
    assert _committed(broker, "cli-reset") == {("orders", 0): 3, ("orders", 1): 3}


@pytest.mark.parametrize("how, expected", [
    (["--to-earliest"], {0: 0, 1: 0}),
    (["--to-latest"], {0: 5, 1: 5}),
    (["--shift-by", "-2"], {0: 1, 1: 1}),
    (["--shift-by", "9"], {0: 5, 1: 5}),  # kept within the log, as Kafka's tool does
    (["--to-offset", "99"], {0: 5, 1: 5}),
    (["--to-datetime", "2000-01-01T00:00:00.000"], {0: 0, 1: 0}),
    (["--to-datetime", "2999-01-01T00:00:00+00:00"], {0: 5, 1: 5}),  # no record that late: the latest
])
def test_reset_offsets_to_each_target(broker, capsysbinary, how, expected):
    group = f"cli-reset-{abs(hash(tuple(how))) % 10**6}"
    base = ["groups", "reset-offsets", group, "--bootstrap", broker.bootstrap, "--execute"]
    assert run(capsysbinary, *base, "--topic", "orders", "--to-offset", "3")[0] == 0
    status, _, err = run(capsysbinary, *base, "--topic", "orders:0,1", *how)
    assert (status, err) == (0, "")
    assert _committed(broker, group) == {("orders", p): o for p, o in expected.items()}


def test_reset_offsets_refuses_a_group_with_members(broker, capsysbinary):
    with Consumer(broker.bootstrap, group_id="cli-busy", session_timeout_ms=5000, heartbeat_interval_ms=200) as c:
        c.subscribe(["orders"])
        deadline = time.monotonic() + 15
        while not c.assignment():
            assert time.monotonic() < deadline
            c.poll(0.1)
        status, _, err = run(capsysbinary, "groups", "reset-offsets", "cli-busy", "--bootstrap", broker.bootstrap,
                             "--topic", "orders", "--to-earliest")
        assert status == 1
        assert err.strip() == ("mmlog: error: Assignments can only be reset if the group 'cli-busy' is inactive, "
                               "but the current state is Stable.")
        status, _, err = run(capsysbinary, "groups", "delete", "cli-busy", "--bootstrap", broker.bootstrap)
        assert status == 1 and err.startswith("mmlog: error: NonEmptyGroup: group 'cli-busy'")


def test_delete_offsets_and_delete_groups(broker, capsysbinary):
    base = ["--bootstrap", broker.bootstrap]
    assert run(capsysbinary, "groups", "reset-offsets", "cli-gone", *base, "--topic", "orders", "--to-latest",
               "--execute")[0] == 0
    status, out, _ = run(capsysbinary, "groups", "delete-offsets", "cli-gone", *base, "--topic", "orders:1")
    assert status == 0 and _committed(broker, "cli-gone") == {("orders", 0): 5}
    status, out, _ = run(capsysbinary, "groups", "delete", "cli-gone", *base)
    assert (status, out) == (0, "deleted group cli-gone\n")
    status, _, err = run(capsysbinary, "groups", "delete", "cli-gone", *base)
    assert status == 1 and "GroupIdNotFound" in err
    status, _, err = run(capsysbinary, "groups", "reset-offsets", "cli-x", *base, "--topic", "nope", "--to-latest")
    assert (status, err.strip()) == (1, "mmlog: error: topic 'nope' does not exist")
