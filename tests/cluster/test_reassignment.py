"""A reassignment's replica sets and states, as Kafka's KIP-455 computes them (no ZooKeeper needed)."""

from __future__ import annotations

import pytest

from mmlog.cluster.paths import assignment, parse_assignment, parse_reassigning
from mmlog.replication.leader_and_isr import LeaderAndIsr
from mmlog.cluster.reassignment import Ongoing, check_target, moved, reassign_to
from mmlog.errors import InvalidReplicaAssignment


def test_the_replica_set_is_the_target_then_the_rest_of_the_origin():
    assert reassign_to([1, 2, 3], [4, 3, 2]) == Ongoing((4, 3, 2, 1), (4,), (1,))
    assert reassign_to([1], [1, 2, 3]) == Ongoing((1, 2, 3), (2, 3), ())
    assert reassign_to([1, 2], [1, 2]) == Ongoing((1, 2), (), ())


def test_origin_and_target_come_back_from_the_replica_set():
    ongoing = reassign_to([1, 2, 3], [4, 3, 2])
    assert ongoing.origin == [3, 2, 1] and ongoing.target == [4, 3, 2]  # Kafka's RS - AR: its order, not ORS's


@pytest.mark.parametrize("target, words", [([], "Empty replica list"), ([1, 1], "Duplicate replica ids"),
                                           ([1, -2], "Invalid broker id"), ([1, 9], "not alive")])
def test_bad_targets_are_invalid_replica_assignments(target, words):
    with pytest.raises(InvalidReplicaAssignment, match=words):
        check_target(target, {1, 2, 3})


def test_a_new_replica_set_keeps_a_live_leader_in_it_and_otherwise_elects_from_its_isr():
    cur = LeaderAndIsr(1, 5, (1, 2, 3), 1, version=3)
    assert moved(cur, (1, 2, 3, 4), {1, 2, 3, 4}, 7) == LeaderAndIsr(1, 6, (1, 2, 3), 7)  # started: epoch + 1
    assert moved(cur, (3, 2), {1, 2, 3}, 7) == LeaderAndIsr(3, 6, (2, 3), 7)  # the leader removed
    assert moved(cur, (4,), {1, 2, 3, 4}, 7).leader == -1  # nobody of the set in sync


def test_the_topic_node_carries_adding_and_removing_replicas():
    data = assignment([[4, 1], [2]], "id", {0: [4]}, {0: [1]})
    assert parse_assignment(data) == ([[4, 1], [2]], "id")
    assert parse_reassigning(data) == ({0: [4]}, {0: [1]})
    assert parse_reassigning(assignment([[1]], "id")) == ({}, {})
