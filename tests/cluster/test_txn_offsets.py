"""Offsets committed in a transaction, against the ZooKeeper store (whose writes complete later, on ZooKeeper's
thread): a marker ends what was written before it, even a write still in flight, and a commit of an older producer
epoch than a marker's is fenced, so no offsets are left pending with no transaction to end them.

Found by tools/soak_failover.py --pipeline, in a round that SIGKILLed all three brokers, the controller, a leader
and the transaction coordinator: offsets of producer 5001 stayed pending in ZooKeeper with its transaction
long over (the coordinator had it Empty), and every later consume-transform-produce worker's OffsetFetch
(require_stable) answered UNSTABLE_OFFSET_COMMIT until librdkafka gave up; 1,980 of 2,000 inputs were never
copied. A worker that failed left a TxnOffsetCommit behind it; the next worker's InitProducerId aborted its
transaction, and the abort's marker reached the group before that commit was in the table (still being written,
or not yet handled), so it ended nothing and the commit stayed pending for ever.
"""

from __future__ import annotations

import queue

import pytest

from mmlog.coordinator.coordinator import GroupCoordinator
from mmlog.cluster import paths
from mmlog.cluster.offset_store import ZooKeeperOffsetStore
from mmlog.cluster.session import connect
from mmlog.config.broker import BrokerConfig

PRODUCER_FENCED, UNSTABLE_OFFSET_COMMIT = 90, 88


@pytest.fixture
def coordinator(zk_connect):
    """A group coordinator on the ZooKeeper store, its completions queued for the test's thread to run."""
    zk = connect(zk_connect, 5000, 10000)
    tasks: queue.Queue = queue.Queue()
    store = ZooKeeperOffsetStore(zk, tasks.put)
    coordinator = GroupCoordinator(BrokerConfig.load(), store, lambda topic: 1, lambda delay, fn: None)
    coordinator.tasks = tasks
    yield coordinator
    zk.stop()
    zk.close()


def commit(group: str, pid: int, epoch: int, offset: int) -> dict:
    return {"group_id": group, "member_id": "", "generation_id": -1, "group_instance_id": None,
            "topics": [("in", [(0, offset, -1, "")])], "producer_id": pid, "producer_epoch": epoch}


def marker(group: str, pid: int, epoch: int, commit_: bool) -> dict:
    return {"group_id": group, "producer_id": pid, "producer_epoch": epoch, "commit": commit_}


def until(coordinator, answers: list, count: int) -> list:
    """Run ZooKeeper's completions until `count` answers are in."""
    while len(answers) < count:
        coordinator.tasks.get(timeout=10)()
    return answers


def codes(answer: dict) -> list[int]:
    return [p["error_code"] for t in answer["topics"] for p in t["partitions"]]


def stable(coordinator, group: str) -> bool:
    answers = []
    coordinator.offset_fetch({"group_id": group, "topics": [("in", [0])], "require_stable": True}, answers.append)
    return UNSTABLE_OFFSET_COMMIT not in [p["error_code"] for t in answers[0]["topics"] for p in t["partitions"]]


def test_a_marker_that_comes_while_the_commit_is_being_written_ends_it(coordinator):
    answers = []
    coordinator.txn_offset_commit(commit("g-race", 7, 0, 5), answers.append)
    coordinator.txn_offsets_end(marker("g-race", 7, 1, False), answers.append)  # the write is in ZooKeeper's hands
    committed, ended = until(coordinator, answers, 2)
    assert codes(committed) == [0] and ended == {"error_code": 0}
    assert coordinator.store.table.pending_offsets("g-race", 7) == {}
    assert not coordinator.store.zk.exists(paths.group_pending_producer("g-race", 7))
    assert stable(coordinator, "g-race") and coordinator.store.table.get("g-race", "in", 0) is None


def test_a_committed_marker_after_an_in_flight_commit_commits_its_offsets(coordinator):
    answers = []
    coordinator.txn_offset_commit(commit("g-commit", 8, 0, 9), answers.append)
    coordinator.txn_offsets_end(marker("g-commit", 8, 0, True), answers.append)
    until(coordinator, answers, 2)
    assert coordinator.store.table.get("g-commit", "in", 0).offset == 9 and stable(coordinator, "g-commit")


def test_a_commit_of_an_older_epoch_than_a_markers_is_fenced_and_left_out(coordinator):
    answers = []
    coordinator.txn_offsets_end(marker("g-late", 9, 3, False), answers.append)  # a fenced producer's abort
    until(coordinator, answers, 1)
    coordinator.txn_offset_commit(commit("g-late", 9, 2, 11), answers.append)  # its commit, arriving late
    assert codes(until(coordinator, answers, 2)[1]) == [PRODUCER_FENCED]
    assert coordinator.store.table.pending_offsets("g-late", 9) == {} and stable(coordinator, "g-late")
    coordinator.txn_offset_commit(commit("g-late", 9, 3, 12), answers.append)  # the producer's current epoch
    assert codes(until(coordinator, answers, 3)[2]) == [0]
    assert not stable(coordinator, "g-late")  # pending until its own marker
