"""Committed offsets in ZooKeeper: written in one transaction, loaded per group, forgotten when a group moves."""

from __future__ import annotations

import queue

import pytest

from mmlog.coordinator.offsets import (GroupMeta, OffsetCommit, OffsetDelete, TopicDelete, TxnOffsetCommit,
                                                TxnOffsetEnd)
from mmlog.cluster.offset_store import ZooKeeperOffsetStore
from mmlog.cluster.session import connect


@pytest.fixture
def stores(zk_connect):
    """Two stores on separate sessions (two brokers), with their completions run on the test's thread."""
    made = []

    def make():
        zk = connect(zk_connect, 5000, 10000)
        tasks: queue.Queue = queue.Queue()
        store = ZooKeeperOffsetStore(zk, tasks.put)
        made.append(zk)
        return store, tasks

    yield make
    for zk in made:
        zk.stop()
        zk.close()


def write(store, tasks, records) -> BaseException | None:
    results = []
    store.write(records, results.append)
    while not results:
        tasks.get(timeout=10)()
    return results[0]


def commit(group, topic, partition, offset, metadata=""):
    return OffsetCommit(group, topic, partition, offset, -1, metadata, 1000 + offset)


def test_what_one_broker_commits_another_loads(stores):
    a, a_tasks = stores()
    b, _ = stores()
    assert write(a, a_tasks, [GroupMeta("g/1 é", "consumer", 3),
                              commit("g/1 é", "t", 0, 10, "m"), commit("g/1 é", "t", 1, 11)]) is None
    assert write(a, a_tasks, [commit("g/1 é", "t", 0, 12)]) is None  # an update of an existing node
    b.load_group("g/1 é")
    assert b.is_loaded("g/1 é") and "g/1 é" in b.group_ids()
    assert b.table.group_offsets("g/1 é") == a.table.group_offsets("g/1 é")
    assert b.table.get("g/1 é", "t", 0).offset == 12 and b.table.get("g/1 é", "t", 0).metadata == ""
    assert b.table.groups["g/1 é"].generation == 3


def test_an_unloaded_group_is_read_afresh(stores):
    a, a_tasks = stores()
    b, b_tasks = stores()
    write(a, a_tasks, [commit("moving", "t", 0, 1)])
    b.load_group("moving")
    a.unload_group("moving")
    assert not a.is_loaded("moving") and a.table.group_offsets("moving") == {}
    write(b, b_tasks, [commit("moving", "t", 0, 2)])
    a.load_group("moving")
    assert a.table.get("moving", "t", 0).offset == 2


def test_a_stale_view_of_a_node_is_repaired_one_by_one(stores):
    """Two coordinators for a moment: both think the node is new; the second's transaction fails and
    is retried node by node, and the later commit wins."""
    a, a_tasks = stores()
    b, b_tasks = stores()
    assert write(a, a_tasks, [commit("both", "t", 0, 5)]) is None
    assert write(b, b_tasks, [commit("both", "t", 0, 6)]) is None
    fresh, _ = stores()
    fresh.load_group("both")
    assert fresh.table.get("both", "t", 0).offset == 6


def test_deletions(stores):
    a, tasks = stores()
    write(a, tasks, [commit("d1", "gone", 0, 1), commit("d1", "kept", 0, 2), commit("d2", "gone", 3, 4)])
    write(a, tasks, [TopicDelete("gone")])
    write(a, tasks, [OffsetDelete("d1", "kept", 0)])
    b, _ = stores()
    b.load_group("d1")
    b.load_group("d2")
    assert b.table.group_offsets("d1") == {} and b.table.group_offsets("d2") == {}


def test_a_write_while_zookeeper_is_away_fails_at_once_and_changes_nothing(tmp_path):
    """The coordinator answers COORDINATOR_NOT_AVAILABLE (clients retry) instead of a commit hanging
    until ZooKeeper returns."""
    import time

    from kazoo.exceptions import ConnectionLoss

    from mmlog.testing import ZooKeeperServer

    with ZooKeeperServer(tmp_path / "zk") as server:
        zk = connect(server.connect + "/lost", 5000, 10000)
        tasks: queue.Queue = queue.Queue()
        store = ZooKeeperOffsetStore(zk, tasks.put)
        try:
            assert write(store, tasks, [commit("g", "t", 0, 1)]) is None
            server.stop()
            deadline = time.monotonic() + 20
            while zk.connected and time.monotonic() < deadline:
                time.sleep(0.05)
            results = []
            store.write([commit("g", "t", 0, 2)], results.append)
            assert len(results) == 1 and isinstance(results[0], ConnectionLoss)
            assert store.table.get("g", "t", 0).offset == 1
        finally:
            zk.stop()
            zk.close()


def test_transactional_offsets_are_pending_in_zookeeper_until_their_marker(stores):
    a, a_tasks = stores()
    b, b_tasks = stores()
    assert write(a, a_tasks, [commit("txg", "t", 0, 1)]) is None
    assert write(a, a_tasks, [TxnOffsetCommit("txg", 9, "t", 0, 40, -1, "", 5),
                              TxnOffsetCommit("txg", 9, "t", 1, 41, -1, "", 5)]) is None
    assert write(a, a_tasks, [TxnOffsetCommit("txg", 9, "t", 1, 42, -1, "", 6)]) is None  # the node rewritten
    b.load_group("txg")  # another coordinator takes the group over mid-transaction
    assert b.table.get("txg", "t", 0).offset == 1
    assert {k: c.offset for k, c in b.table.pending_offsets("txg", 9).items()} == {("t", 0): 40, ("t", 1): 42}
    assert write(b, b_tasks, [TxnOffsetEnd("txg", 9, True)]) is None
    a.load_group("txg")
    assert a.table.get("txg", "t", 0).offset == 40 and a.table.get("txg", "t", 1).offset == 42
    assert a.table.pending == {}
