"""The partition state watches: a watch whose first read ZooKeeper refused is set again, so no hosted
partition stays without its state (a broker waking to a dead session synced a topic half way)."""

from __future__ import annotations

import time

from mmlog.cluster import paths
from mmlog.cluster.partition_states import PartitionStates
from mmlog.errors import MetadataStoreUnreachable
from mmlog.replication.leader_and_isr import LeaderAndIsr


def test_state_watches_a_refused_call_left_unset_are_set_by_the_next_track(zk, monkeypatch):
    for p in range(3):
        zk.create(paths.partition_state("t", p), LeaderAndIsr(p, 0, (p,), 1).to_json(), makepath=True)
    applied = []
    states = PartitionStates(zk, lambda fn: fn(), applied.append)
    get = zk.get

    def refused(path, watch=None):
        if path == paths.partition_state("t", 1):
            raise MetadataStoreUnreachable("ZooKeeper connection lost")  # what the control thread meets
        return get(path, watch=watch)

    monkeypatch.setattr(zk, "get", refused)
    try:
        states.track("t", "id-1", 3)
    except MetadataStoreUnreachable:
        pass
    else:
        raise AssertionError("the refused read did not reach track")
    monkeypatch.setattr(zk, "get", get)
    assert states.get("t", 0) is not None and states.get("t", 1) is None and states.get("t", 2) is None

    states.watch_missing()  # the connection is back (or sync_topics tracks the topic again)
    assert [s.leader for s in states.of_topic("t")] == [0, 1, 2]
    assert {k for keys in applied for k in keys} == {("t", 0), ("t", 1), ("t", 2)}

    zk.set(paths.partition_state("t", 1), LeaderAndIsr(2, 1, (2,), 1).to_json())
    deadline = time.monotonic() + 10
    while states.get("t", 1).leader != 2:
        assert time.monotonic() < deadline, "the watch set again did not see the change"
        time.sleep(0.05)
