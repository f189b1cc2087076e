"""The controller's election rules and the replica placement, as Kafka decides them (no ZooKeeper needed)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from mmlog.cluster.assignment import assign_replicas, next_partitions
from mmlog.replication.election import PREFERRED, UNCLEAN, decide, requested
from mmlog.replication.leader_and_isr import LeaderAndIsr
from mmlog.errors import (ElectionNotNeeded, EligibleLeadersNotAvailable, InvalidReplicationFactor,
                          PreferredLeaderNotAvailable)

REPLICAS = [1, 2, 3]


def state(leader, epoch, isr):
    return LeaderAndIsr(leader, epoch, tuple(isr), 1, version=4)


def test_a_live_leader_stays_and_dead_followers_leave_the_isr():
    assert decide(state(1, 5, [1, 2, 3]), REPLICAS, {1, 2, 3}, False, 7) is None
    assert decide(state(1, 5, [1, 2, 3]), REPLICAS, {1, 3}, False, 7) == LeaderAndIsr(1, 5, (1, 3), 7)


def test_a_dead_leader_is_replaced_by_the_first_live_isr_member_in_assignment_order():
    assert decide(state(1, 5, [3, 2, 1]), REPLICAS, {2, 3}, False, 7) == LeaderAndIsr(2, 6, (3, 2), 7)
    assert decide(state(1, 5, [1, 3]), REPLICAS, {2, 3}, False, 7) == LeaderAndIsr(3, 6, (3,), 7)


def test_with_no_live_isr_member_the_partition_goes_offline_keeping_its_isr():
    offline = decide(state(1, 5, [1]), REPLICAS, {2, 3}, False, 7)
    assert offline == LeaderAndIsr(-1, 6, (1,), 7)
    assert decide(offline, REPLICAS, {2, 3}, False, 7) is None  # stays offline while only non-ISR replicas live
    assert decide(offline, REPLICAS, {1, 2, 3}, False, 8) == LeaderAndIsr(1, 7, (1,), 8)  # back with its ISR member


def test_a_bounced_leader_is_a_failed_leader_an_isr_member_that_stayed_up_leads_and_the_bounced_leave_the_isr():
    """Registered again since the state was written (restarted, or back from a lost session): it may have
    lost acknowledged records (a power loss), so it neither stays leader nor stays in the ISR."""
    assert decide(state(1, 5, [1, 2, 3]), REPLICAS, {1, 2, 3}, False, 7, bounced={1}) == LeaderAndIsr(2, 6, (2, 3), 7)
    assert decide(state(1, 5, [1, 2, 3]), REPLICAS, {1, 2, 3}, False, 7, bounced={1, 2}) == LeaderAndIsr(3, 6, (3,), 7)


def test_when_every_live_isr_member_bounced_one_of_them_leads_in_a_new_epoch():
    assert decide(state(1, 5, [1, 2]), REPLICAS, {1, 2, 3}, False, 7, bounced={1, 2}) == LeaderAndIsr(1, 6, (1, 2), 7)


def test_a_bounced_follower_leaves_the_isr_without_moving_a_steady_leader():
    """It may have lost records the ISR acknowledged: left in the ISR, a later election could pick it before it
    has fetched them again. It comes back through the leader once caught up."""
    assert decide(state(1, 5, [1, 2, 3]), REPLICAS, {1, 2, 3}, False, 7, bounced={2}) == LeaderAndIsr(1, 5, (1, 3), 7)
    assert decide(state(1, 5, [1, 2]), REPLICAS, {1, 2, 3}, False, 7, bounced={2, 3}) == LeaderAndIsr(1, 5, (1,), 7)
    assert decide(state(1, 5, [1, 3]), REPLICAS, {1, 2, 3}, False, 7, bounced={2}) is None  # not in the ISR


def test_a_preferred_replica_that_bounced_is_not_made_leader_by_a_rebalance():
    assert decide(state(2, 5, [2, 1, 3]), REPLICAS, {1, 2, 3}, False, 7, preferred=True, bounced={1}) \
        == LeaderAndIsr(2, 5, (2, 3), 7)


def test_bounced_since_compares_registrations_with_the_states_last_write():
    from mmlog.replication.election import bounced_since
    written = LeaderAndIsr(1, 5, (1, 2, 3), 7, version=3, zxid=100)
    assert bounced_since(written, {1, 2, 3}, {1: 150, 2: 50, 3: 99}) == {1}
    assert bounced_since(LeaderAndIsr(1, 5, (1, 2, 3), 7), {1, 2, 3}, {1: 150}) == set()  # zxid unknown: none


def test_unclean_election_takes_the_first_live_replica():
    assert decide(state(1, 5, [1]), REPLICAS, {2, 3}, True, 7) == LeaderAndIsr(2, 6, (2,), 7)


def test_the_last_isr_member_is_never_removed():
    assert decide(state(-1, 5, [1]), REPLICAS, {2}, False, 7) is None


def test_preferred_leaders_come_back_only_when_in_sync():
    assert decide(state(2, 5, [1, 2, 3]), REPLICAS, {1, 2, 3}, False, 7, preferred=True) == LeaderAndIsr(1, 6, (1, 2, 3), 7)
    assert decide(state(2, 5, [2, 3]), REPLICAS, {1, 2, 3}, False, 7, preferred=True) is None
    assert decide(state(2, 5, [1, 2, 3]), REPLICAS, {1, 2, 3}, False, 7) is None  # not asked: no move


@pytest.mark.parametrize("brokers,partitions,factor", [(3, 6, 3), (5, 20, 3), (4, 7, 2), (3, 1, 1), (6, 60, 3)])
def test_placement_spreads_leaders_and_replicas_and_never_doubles_a_broker(brokers, partitions, factor):
    ids = list(range(10, 10 + brokers))
    for seed in range(20):
        placed = assign_replicas(ids, partitions, factor, random.Random(seed))
        assert all(len(set(r)) == factor and set(r) <= set(ids) for r in placed)
        leaders = Counter(r[0] for r in placed)
        assert max(leaders.values()) - min(leaders.get(b, 0) for b in ids) <= 1
        replicas = Counter(b for r in placed for b in r)
        assert max(replicas.values()) - min(replicas.get(b, 0) for b in ids) <= factor


def test_a_factor_above_the_brokers_names_the_cause():
    with pytest.raises(InvalidReplicationFactor, match="larger than the 2 available brokers"):
        assign_replicas([1, 2], 3, 3)
    with pytest.raises(InvalidReplicationFactor, match="at least 1"):
        assign_replicas([1, 2], 3, 0)


@pytest.mark.parametrize("brokers,existing,grown,factor", [(3, 3, 9, 2), (5, 4, 20, 3), (4, 1, 8, 1), (3, 2, 3, 3)])
def test_added_partitions_continue_the_spread_with_partition_zeros_replication_factor(brokers, existing, grown,
                                                                                       factor):
    """CreatePartitions places new partitions as Kafka does: numbering on from the old count, starting
    at partition 0's leader, so a topic grown in steps is spread like one created at its final size."""
    ids = list(range(10, 10 + brokers))
    for seed in range(10):
        old = assign_replicas(ids, existing, factor, random.Random(seed))
        new = next_partitions(ids, old, grown)
        assert len(new) == grown - existing
        assert all(len(set(r)) == factor and set(r) <= set(ids) for r in new)
        first = ids.index(old[0][0])
        assert new == assign_replicas(ids, grown, factor, start=first)[existing:]
        leaders = Counter(r[0] for r in old + new)
        assert max(leaders.values()) - min(leaders.get(b, 0) for b in ids) <= 1


# ---------------------------------------------------------------- asked elections (ElectLeaders)

def test_a_preferred_election_moves_leadership_to_the_first_replica_when_it_is_live_and_in_sync():
    assert requested(state(2, 5, [1, 2, 3]), REPLICAS, {1, 2, 3}, PREFERRED, 7) == LeaderAndIsr(1, 6, (1, 2, 3), 7)
    with pytest.raises(ElectionNotNeeded):
        requested(state(1, 5, [1, 2, 3]), REPLICAS, {1, 2, 3}, PREFERRED, 7)
    with pytest.raises(PreferredLeaderNotAvailable):  # out of the ISR
        requested(state(2, 5, [2, 3]), REPLICAS, {1, 2, 3}, PREFERRED, 7)
    with pytest.raises(PreferredLeaderNotAvailable):  # dead
        requested(state(2, 5, [1, 2, 3]), REPLICAS, {2, 3}, PREFERRED, 7)


def test_an_unclean_election_takes_a_live_replica_only_when_the_leader_and_every_isr_member_are_dead():
    with pytest.raises(ElectionNotNeeded):  # the leader lives
        requested(state(2, 5, [2]), REPLICAS, {1, 2, 3}, UNCLEAN, 7)
    assert requested(state(-1, 5, [1]), REPLICAS, {2, 3}, UNCLEAN, 7) == LeaderAndIsr(2, 6, (2,), 7)
    assert requested(state(-1, 5, [1, 3]), REPLICAS, {2, 3}, UNCLEAN, 7) == LeaderAndIsr(3, 6, (3,), 7)  # clean
    with pytest.raises(EligibleLeadersNotAvailable):
        requested(state(-1, 5, [1]), REPLICAS, set(), UNCLEAN, 7)
