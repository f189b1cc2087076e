"""The consumer in a group, against a real broker: sharing, failover, callbacks, commits, interop.

The broker's group timers are scaled down (a 100 ms initial rebalance delay,
sessions from 500 ms) and the consumers heartbeat every 250 ms with 1.5 s
sessions, so a rebalance settles in well under a second and a dead member is
evicted in under two.
"""

from __future__ import annotations

import collections
import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from mmlog.client import Consumer, TopicPartition
from mmlog.client.admin import Admin
from mmlog.client.group_offsets import CommitFailedError
from mmlog.errors import InconsistentGroupProtocol, InvalidSessionTimeout
from mmlog.testing import EmbeddedBroker
from mmlog.testing import wait as waiting
from tests.client.consumer_tools import create_topic, produce
from tests.coordinator.conftest import RawMember

FAST_GROUPS = {"group.initial.rebalance.delay.ms": 100, "group.min.session.timeout.ms": 500}
SESSION_MS = 1500
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("groups"), processors=2, config=FAST_GROUPS) as b:
        yield b


def member(broker, group: str, **config) -> Consumer:
    options = dict(group_id=group, auto_offset_reset="earliest", session_timeout_ms=SESSION_MS,
                   heartbeat_interval_ms=250, fetch_max_wait_ms=100)
    return Consumer(broker.bootstrap, **{**options, **config})


def produce_values(broker, topic: str, partitions: int, per_partition: int, tag: str, batch: int = 10) -> set[str]:
    """Produce known values ("tag-partition-i") in batches; return them."""
    sent = set()
    for p in range(partitions):
        for start in range(0, per_partition, batch):
            values = [f"{tag}-{p}-{i}" for i in range(start, min(start + batch, per_partition))]
            produce(broker, topic, p, [(None, v.encode()) for v in values])
            sent.update(values)
    return sent


def wait_for(condition, timeout: float = 20.0, what: str = "condition", poll=()):
    """mmlog.testing.wait.wait_for, polling the given in-process consumers meanwhile (each wants its polls), keeping
    what they return in `received(consumer)`. An error a poll raises is the test's to see: it propagates."""
    def polled():
        for c in poll:
            received(c).extend(c.poll(0.02))
        return condition()
    return waiting.wait_for(polled if poll else condition, timeout, what, interval=0 if poll else 0.05, retry=())


def received(consumer) -> list:
    """Every record wait_for's polls got from the consumer."""
    return consumer.__dict__.setdefault("_test_received", [])


def parts(tps) -> list[int]:
    return sorted(tp.partition for tp in tps)


def committed(broker, group: str) -> dict[int, int]:
    with Admin(broker.bootstrap) as admin:
        return {tp.partition: o.committed for tp, o in admin.group_offsets(group).items() if o.committed is not None}


# ------------------------------------------------------------------ members in processes of their own


class Member:
    """tests/client/group_member.py in a subprocess; its JSON lines are gathered by a thread."""

    def __init__(self, broker, group: str, topic: str, log: Path, processing_ms: int = 0) -> None:
        self.log = log
        env = dict(os.environ, PYTHONPATH=str(REPO))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.client.group_member", broker.bootstrap, group, topic, str(processing_ms)],
            stdout=subprocess.PIPE, stderr=open(log, "w"), text=True, cwd=REPO, env=env)
        self.assigned: list[int] | None = None
        self.records: list[tuple[int, int, str]] = []
        self.closed = False
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            event = json.loads(line)
            with self._lock:
                if "assigned" in event:
                    self.assigned = event["assigned"]
                elif "revoked" in event:
                    self.assigned = []
                elif "records" in event:
                    self.records += [tuple(r) for r in event["records"]]
                elif "closed" in event:
                    self.closed = True

    def consumed(self) -> list[tuple[int, int, str]]:
        with self._lock:
            return list(self.records)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(20) == 0, self.log.read_text()[-3000:]


def test_members_share_partitions_and_a_killed_members_partitions_move_on_without_loss(broker, tmp_path):
    """Three members get two of six partitions each. One is SIGKILLed mid-stream: within its session timeout
    the other two take its partitions over, resuming exactly at its last commit, so the only duplicates are
    its records after that commit. A fourth member joins; every record is still consumed."""
    topic, group = "six", "six-members"
    create_topic(broker, topic, partitions=6)
    members = [Member(broker, group, topic, tmp_path / f"m{i}.log", processing_ms=100) for i in range(3)]
    try:
        wait_for(lambda: sorted(len(m.assigned or ()) for m in members) == [2, 2, 2], timeout=30,
                 what="two partitions each")
        assert sorted(p for m in members for p in m.assigned) == list(range(6))

        # Produce while they consume slowly (small fetches, 100 ms of "processing" per poll); kill one mid-way.
        sent = produce_values(broker, topic, 6, 100, "a", batch=5)
        victim, survivors = members[0], members[1:]
        victim_parts = set(victim.assigned)
        wait_for(lambda: len(victim.consumed()) >= 20, what="the victim's first records")
        victim.kill()
        last_commit = committed(broker, group)  # nobody else commits the victim's partitions until the takeover
        seen_by_victim = len(victim.consumed())

        wait_for(lambda: sorted(len(m.assigned or ()) for m in survivors) == [3, 3], timeout=30,
                 what="the victim's partitions taken over (after its session timed out)")
        assert sorted(p for m in survivors for p in m.assigned) == list(range(6))
        wait_for(lambda: {v for m in members for _, _, v in m.consumed()} >= sent, timeout=30,
                 what="every record of the first round")
        assert seen_by_victim < 600  # it really died mid-stream

        # A fourth member: a rebalance to 2-2-2 among the live ones; the next records are all consumed.
        members.append(Member(broker, group, topic, tmp_path / "m3.log"))
        live = members[1:]
        wait_for(lambda: sorted(len(m.assigned or ()) for m in live) == [2, 2, 2], timeout=30,
                 what="a 2-2-2 share after the fourth joined")
        sent |= produce_values(broker, topic, 6, 20, "c")
        wait_for(lambda: {v for m in members for _, _, v in m.consumed()} >= sent, timeout=30,
                 what="every record of the second round")
        for m in live:
            m.stop()
    finally:
        for m in members:
            if m.proc.poll() is None:
                m.proc.kill()

    records = [r for m in members for r in m.consumed()]
    assert {v for _, _, v in records} == sent  # nothing lost, nothing invented
    # Duplicates: only the victim's records after its last commit, which the new owner started from.
    twice = [(p, o) for (p, o), n in collections.Counter((p, o) for p, o, _ in records).items() if n > 1]
    for p, o in twice:
        assert p in victim_parts and o >= last_commit.get(p, 0), (p, o, last_commit)
    for p in victim_parts:
        after = [o for m in survivors for q, o, v in m.consumed() if q == p and v.startswith("a-")]
        if after:
            assert min(after) == last_commit.get(p, 0)  # resumed exactly at the last commit
    assert all(m.closed for m in live)
    assert committed(broker, group) == {p: 120 for p in range(6)}  # the closing members committed everything


# ------------------------------------------------------------------ in-process members


def test_on_assign_and_on_revoke_get_the_right_partitions(broker):
    topic, group = "callbacks", "callbacks-group"
    create_topic(broker, topic, partitions=4)
    events = []

    def callbacks(name):
        return dict(on_assign=lambda c, tps: events.append((name, "assign", parts(tps))),
                    on_revoke=lambda c, tps: events.append((name, "revoke", parts(tps))))

    # Member ids start with the client id, and range orders members by id: "a" gets the lower half.
    a = member(broker, group, client_id="a")
    a.subscribe([topic], **callbacks("a"))
    wait_for(lambda: a.assignment(), poll=[a], what="a's assignment")
    assert events == [("a", "assign", [0, 1, 2, 3])]
    assert a.subscription() == {topic}

    # b's session outlasts the wait below: a takes over at b's LeaveGroup, not when the session times out.
    b = member(broker, group, client_id="b", session_timeout_ms=120_000)
    b.subscribe([topic], **callbacks("b"))
    wait_for(lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2, poll=[a, b], what="a 2-2 share")
    # Each member's callbacks come in its own order; a and b poll independently, so they interleave freely.
    assert [e for e in events[1:] if e[0] == "a"] == [("a", "revoke", [0, 1, 2, 3]), ("a", "assign", [0, 1])]
    assert [e for e in events[1:] if e[0] == "b"] == [("b", "assign", [2, 3])]

    del events[:]
    b.close()  # revokes (commit, callback) and leaves: a gets everything at once, no session timeout
    wait_for(lambda: len(a.assignment()) == 4, poll=[a], timeout=30, what="a takes all four again")
    assert events == [("b", "revoke", [2, 3]), ("a", "revoke", [0, 1]), ("a", "assign", [0, 1, 2, 3])]
    a.close()
    assert events[-1] == ("a", "revoke", [0, 1, 2, 3])


def test_a_manual_commit_is_where_the_next_member_resumes(broker):
    topic, group = "manual", "manual-group"
    create_topic(broker, topic, partitions=2)
    produce_values(broker, topic, 2, 10, "m")
    tps = [TopicPartition(topic, p) for p in range(2)]
    with member(broker, group, enable_auto_commit=False) as c:
        c.subscribe([topic])
        got = []
        wait_for(lambda: got.extend(c.poll(0.05)) or len(got) == 20, what="20 records")
        assert c.committed(tps) == {tps[0]: None, tps[1]: None}
        c.commit()
        assert c.committed(tps) == {tps[0]: 10, tps[1]: 10}
        c.commit({(topic, 1): 7})  # explicit offsets
        done = []
        c.commit({(topic, 0): 8}, asynchronous=True, callback=lambda offsets, exc: done.append((offsets, exc)))
        wait_for(lambda: done, poll=[c], what="the asynchronous commit's callback")
        assert done == [({tps[0]: 8}, None)]
        assert c.committed(tps) == {tps[0]: 8, tps[1]: 7}
        produce_values(broker, topic, 2, 3, "more")
        wait_for(lambda: got.extend(c.poll(0.05)) or len(got) == 26, what="the new records")
    # No auto-commit: closing stored nothing more. The next member resumes at 8 and 7.
    with member(broker, group) as d:
        d.subscribe([topic])
        again = []
        wait_for(lambda: again.extend(d.poll(0.05)) or len(again) == 2 + 3 + 3 + 3, what="from the commits on")
        # At the ends of both partitions: nothing the commits left out can come after these.
        assert [d.position(tp) for tp in tps] == [13, 13]
        again += d.poll(0)
    assert sorted((r.partition, r.offset) for r in again) == [(0, o) for o in range(8, 13)] + [
        (1, o) for o in range(7, 13)]


def test_auto_commit_on_the_interval_and_at_close(broker):
    topic, group = "auto", "auto-group"
    create_topic(broker, topic, partitions=2)
    produce_values(broker, topic, 2, 5, "x")
    c = member(broker, group, auto_commit_interval_ms=200)
    c.subscribe([topic])
    got = []
    wait_for(lambda: got.extend(c.poll(0.05)) or len(got) == 10, what="10 records")
    wait_for(lambda: committed(broker, group) == {0: 5, 1: 5}, poll=[c], timeout=5, what="the auto-commit")
    produce_values(broker, topic, 2, 2, "y")
    wait_for(lambda: got.extend(c.poll(0.01)) or len(got) == 14, timeout=5, what="4 more")
    c.close()  # right away: the final commit is close's
    assert committed(broker, group) == {0: 7, 1: 7}


def test_heartbeats_keep_the_membership_while_the_application_is_busy(broker):
    """The heartbeat thread: a pause between polls longer than the session timeout (but shorter than
    max_poll_interval_ms) neither evicts the member nor makes the group rebalance."""
    topic, group = "busy", "busy-group"
    create_topic(broker, topic, partitions=2)
    events = []
    with member(broker, group, session_timeout_ms=1000, heartbeat_interval_ms=200) as c:
        c.subscribe([topic], on_assign=lambda c, tps: events.append("assign"),
                    on_revoke=lambda c, tps: events.append("revoke"))
        wait_for(lambda: c.assignment(), poll=[c], what="the assignment")
        # "Processing", without a poll, until a member of another group with the same session timeout that
        # stopped heartbeating has been evicted: the broker's session checks ran past a session meanwhile.
        canary = RawMember(broker, "busy-canary", session_ms=1000)
        assert canary.join().error_code == 0 and canary.sync({canary.member_id: b""}).error_code == 0
        canary.close()
        with Admin(broker.bootstrap) as admin:
            wait_for(lambda: admin.describe_group("busy-canary").state == "Empty", what="the canary's eviction")
        c.poll(0.3)
        assert events == ["assign"]
        with Admin(broker.bootstrap) as admin:
            d = admin.describe_group(group)
        assert (d.state, len(d.members), d.members[0].assignment) == ("Stable", 1, sorted(c.assignment()))


def test_a_member_that_stops_polling_leaves_and_rejoins_when_it_polls_again(broker):
    """max_poll_interval_ms: the heartbeat thread leaves the group for a member that stopped polling, the
    others take its partitions at once, and its next poll rejoins (its partitions are revoked first)."""
    topic, group = "stalled", "stalled-group"
    create_topic(broker, topic, partitions=2)
    events = []
    slow = member(broker, group, client_id="a", max_poll_interval_ms=1000)
    slow.subscribe([topic], on_revoke=lambda c, tps: events.append(("revoke", parts(tps))))
    other = member(broker, group, client_id="b")
    other.subscribe([topic])
    wait_for(lambda: len(slow.assignment()) == 1 and len(other.assignment()) == 1, poll=[slow, other],
             what="one partition each")
    wait_for(lambda: len(other.assignment()) == 2, poll=[other], timeout=10, what="the other takes both")
    with pytest.raises(CommitFailedError, match="UnknownMemberId"):  # Java's CommitFailedException
        slow.commit({(topic, 0): 0})
    wait_for(lambda: len(slow.assignment()) == 1 and len(other.assignment()) == 1, poll=[slow, other],
             what="one each again")
    assert events == [("revoke", [0])]
    slow.close()
    other.close()


def test_a_static_member_restarts_into_its_old_partitions_without_a_rebalance(broker):
    """group_instance_id (KIP-345): a static member sorts first in the assignors' order, does not leave the
    group on close, and a new consumer with its instance id takes its place and partitions at once."""
    topic, group = "static", "static-group"
    create_topic(broker, topic, partitions=4)
    assigned_to_other = []
    first = member(broker, group, client_id="z", group_instance_id="instance-1")
    first.subscribe([topic])
    other = member(broker, group, client_id="a")
    other.subscribe([topic], on_assign=lambda c, tps: assigned_to_other.append(parts(tps)))
    wait_for(lambda: len(first.assignment()) == 2 and len(other.assignment()) == 2, poll=[first, other],
             what="two partitions each")
    assert parts(first.assignment()) == [0, 1]  # "z" but static: first in the order
    first.close()
    with Admin(broker.bootstrap) as admin:
        assert len(admin.describe_group(group).members) == 2  # still there until its session ends
    again = member(broker, group, client_id="z", group_instance_id="instance-1")
    again.subscribe([topic])
    wait_for(lambda: again.assignment(), poll=[again, other], what="the old partitions back")
    assert parts(again.assignment()) == [0, 1]
    for _ in range(10):
        other.poll(0.05)
    assert assigned_to_other == [[2, 3]]  # the other member never rebalanced
    again.close()
    other.close()


def test_a_pattern_subscribes_to_every_matching_topic(broker):
    for name in ("pat-a", "pat-b", "unrelated"):
        create_topic(broker, name, partitions=2)
    with member(broker, "pattern-group") as c:
        c.subscribe(re.compile(r"pat-.*"))
        wait_for(lambda: c.assignment(), poll=[c], what="the assignment")
        assert c.subscription() == {"pat-a", "pat-b"}
        assert sorted(c.assignment()) == [TopicPartition(t, p) for t in ("pat-a", "pat-b") for p in range(2)]


def test_an_assign_consumer_commits_as_generation_minus_one_and_starts_from_its_commit(broker):
    topic, group = "assigned", "assign-group"
    create_topic(broker, topic, partitions=2)
    produce_values(broker, topic, 2, 10, "s")
    tps = [TopicPartition(topic, p) for p in range(2)]
    with member(broker, group) as c:
        c.assign(tps)
        got = []
        wait_for(lambda: got.extend(c.poll(0.05)) or len(got) == 20, what="20 records")
        c.commit({tps[0]: 4, tps[1]: 6})
        c.seek(tps[0], 4)
        c.seek(tps[1], 6)
    # close() auto-committed the positions (4, 6: seeked back, nothing handed over since)
    assert committed(broker, group) == {0: 4, 1: 6}
    with member(broker, group, auto_offset_reset="latest") as d:
        d.assign(tps)
        assert d.position(tps[0]) == 4 and d.position(tps[1]) == 6  # the commit, not "latest"
        d.assign([tps[0]])
        d.assign(tps)  # kept partition 0; 1 looks its commit up again
        d.seek(tps[1], 9)  # a seek before the answer wins
        assert d.position(tps[1]) == 9


def test_misuse_is_refused(broker):
    with Consumer(broker.bootstrap) as c:
        with pytest.raises(ValueError, match="group_id"):
            c.subscribe(["t"])
        with pytest.raises(ValueError, match="group_id"):
            c.commit()
    with pytest.raises(ValueError, match="partition_assignment_strategy"):
        Consumer(broker.bootstrap, group_id="g", partition_assignment_strategy=["sticky"])
    with pytest.raises(ValueError, match="heartbeat_interval_ms"):
        Consumer(broker.bootstrap, group_id="g", session_timeout_ms=1000, heartbeat_interval_ms=1000)
    with pytest.raises(ValueError, match="group_instance_id"):
        Consumer(broker.bootstrap, group_instance_id="i")
    with member(broker, "misuse") as c:
        c.assign([("t", 0)])
        with pytest.raises(ValueError, match="do not mix"):
            c.subscribe(["t"])
        c.unassign()
        c.subscribe(["t"])
        with pytest.raises(ValueError, match="do not mix"):
            c.assign([("t", 0)])
        with pytest.raises(TypeError):
            c.subscribe([1])


def test_errors_no_retry_cures_are_raised_from_every_poll(broker):
    with member(broker, "bad-session", session_timeout_ms=400, heartbeat_interval_ms=100) as c:
        c.subscribe(["anything"])  # below the broker's group.min.session.timeout.ms
        for _ in range(2):
            with pytest.raises(InvalidSessionTimeout):
                wait_for(lambda: False, poll=[c], timeout=5)
    with member(broker, "no-common-assignor", partition_assignment_strategy=["roundrobin"]) as a, \
            member(broker, "no-common-assignor", partition_assignment_strategy=["range"]) as b:
        create_topic(broker, "one-assignor-each")
        a.subscribe(["one-assignor-each"])
        b.subscribe(["one-assignor-each"])
        wait_for(lambda: a.assignment(), poll=[a], what="the first member's join")
        with pytest.raises(InconsistentGroupProtocol):
            wait_for(lambda: False, poll=[b], timeout=5)


# ------------------------------------------------------------------ interop


def test_an_mmlog_and_a_confluent_kafka_consumer_share_a_group(broker):
    """Same group, assignor "range": the mmlog member leads first (librdkafka reads its assignment), then
    a new mmlog member is led by librdkafka (mmlog reads librdkafka's). Every record is consumed."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic, group = "mixed", "mixed-group"
    create_topic(broker, topic, partitions=4)
    sent = produce_values(broker, topic, 4, 25, "m")
    values: list[tuple[str, str]] = []
    lock = threading.Lock()
    ck_assignment: list[int] = []
    stop = threading.Event()

    def confluent():
        c = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                                      "partition.assignment.strategy": "range", "auto.offset.reset": "earliest",
                                      "session.timeout.ms": 6000, "heartbeat.interval.ms": 250,
                                      "enable.auto.commit": True, "auto.commit.interval.ms": 100})
        c.subscribe([topic])
        try:
            while not stop.is_set():
                msg = c.poll(0.05)
                ck_assignment[:] = sorted(tp.partition for tp in c.assignment())
                if msg is not None and not msg.error():
                    with lock:
                        values.append(("ck", msg.value().decode()))
        finally:
            c.close()

    first = member(broker, group, partition_assignment_strategy=["range"])
    first.subscribe([topic])
    wait_for(lambda: len(first.assignment()) == 4, poll=[first], what="the mmlog member alone")
    thread = threading.Thread(target=confluent, daemon=True)
    thread.start()
    try:
        wait_for(lambda: len(first.assignment()) == 2 and len(ck_assignment) == 2, poll=[first], timeout=30,
                 what="2-2 with the mmlog member leading")
        assert sorted(parts(first.assignment()) + ck_assignment) == [0, 1, 2, 3]
        first.close()  # leaves: librdkafka takes all four and becomes the leader
        wait_for(lambda: len(ck_assignment) == 4, timeout=30, what="librdkafka alone")
        second = member(broker, group, partition_assignment_strategy=["roundrobin", "range"])
        second.subscribe([topic])
        wait_for(lambda: len(second.assignment()) == 2 and len(ck_assignment) == 2, poll=[second], timeout=30,
                 what="2-2 with librdkafka leading")
        assert sorted(parts(second.assignment()) + ck_assignment) == [0, 1, 2, 3]
        sent |= produce_values(broker, topic, 4, 10, "n")
        wait_for(lambda: {v for _, v in values} | {r.value.decode() for r in received(first) + received(second)}
                 >= sent, poll=[second], timeout=30, what="every record")
        second.close()
    finally:
        stop.set()
        thread.join(30)


# ------------------------------------------------------------------ durability


def test_committed_offsets_survive_a_broker_restart(tmp_path):
    with EmbeddedBroker(tmp_path / "data", processors=1, config=FAST_GROUPS) as b:
        create_topic(b, "durable", partitions=2)
        produce_values(b, "durable", 2, 10, "d")
        with member(b, "durable-group") as c:
            c.subscribe(["durable"])
            got = []
            wait_for(lambda: got.extend(c.poll(0.05)) or len(got) == 20, what="20 records")
            c.commit({("durable", 0): 10, ("durable", 1): 3})
            c.seek(("durable", 1), 3)
        b.stop()
        b.start()
        produce_values(b, "durable", 2, 2, "after")
        with member(b, "durable-group") as d:
            assert d.committed([("durable", 0), ("durable", 1)]) == {("durable", 0): 10, ("durable", 1): 3}
            d.subscribe(["durable"])
            again = []
            wait_for(lambda: again.extend(d.poll(0.05)) or len(again) == 2 + 9, what="from the commits on")
        assert sorted((r.partition, r.offset) for r in again) == [(0, 10), (0, 11)] + [(1, o) for o in range(3, 12)]


def test_a_member_rejoins_after_a_broker_restart(tmp_path):
    """The restarted coordinator has forgotten the member (UNKNOWN_MEMBER_ID): it rejoins and goes on."""
    with EmbeddedBroker(tmp_path / "data", processors=1, config=FAST_GROUPS) as b:
        create_topic(b, "restart", partitions=2)
        events = []
        with member(b, "restart-group", reconnect_backoff_max_ms=200) as c:
            c.subscribe(["restart"], on_assign=lambda c, tps: events.append(parts(tps)))
            wait_for(lambda: c.assignment(), poll=[c], what="the assignment")
            b.stop()
            c.poll(0.3)
            b.start()
            sent = produce_values(b, "restart", 2, 3, "r")
            wait_for(lambda: len(events) >= 2 and {r.value.decode() for r in received(c)} >= sent, poll=[c],
                     timeout=20, what="a rejoin and the records after the restart")
        assert events == [[0, 1], [0, 1]]
