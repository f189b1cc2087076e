"""The group state machine's tables and rules, without a broker."""

import pytest

from mmlog.coordinator.groups import (
    COMPLETING,
    DEAD,
    EMPTY,
    PREPARING,
    STABLE,
    VALID_PREVIOUS,
    Group,
    IllegalTransition,
    Member,
)


def member(member_id, *protocols, instance=None):
    return Member(member_id, instance, "client", "/127.0.0.1", 10_000, 10_000, "consumer",
                  [(name, name.encode()) for name in protocols])


@pytest.mark.parametrize("start,to,allowed", [
    (EMPTY, PREPARING, True), (EMPTY, STABLE, False), (EMPTY, COMPLETING, False),
    (PREPARING, COMPLETING, True), (PREPARING, EMPTY, True), (PREPARING, STABLE, False),
    (COMPLETING, STABLE, True), (COMPLETING, PREPARING, True), (COMPLETING, EMPTY, False),
    (STABLE, PREPARING, True), (STABLE, COMPLETING, False), (STABLE, EMPTY, False),
    (EMPTY, DEAD, True), (STABLE, DEAD, True), (DEAD, DEAD, True), (DEAD, PREPARING, False),
])
def test_transitions_follow_kafkas_table(start, to, allowed):
    group = Group("g")
    group.state = start
    assert (start in VALID_PREVIOUS[to]) == allowed
    if allowed:
        group.transition(to)
        assert group.state is to
    else:
        with pytest.raises(IllegalTransition):
            group.transition(to)


def test_the_protocol_is_one_every_member_lists_chosen_by_votes():
    group = Group("g")
    group.add(member("a", "range", "roundrobin"))
    group.add(member("b", "roundrobin", "range", "sticky"))
    group.add(member("c", "roundrobin", "range"))
    assert group.select_protocol() == "roundrobin"  # two votes to one
    assert group.supports_protocols("consumer", ["sticky"])  # Empty: the first member sets the rules
    group.state = STABLE
    assert group.supports_protocols("consumer", ["sticky", "range"])
    assert not group.supports_protocols("consumer", ["sticky"])  # a and c do not list it
    assert not group.supports_protocols("connect", ["range"])
    # A member rejoining with new protocols is checked against the others only.
    assert group.supports_protocols("consumer", ["roundrobin"], member_id="a")


def test_the_leader_is_the_first_member_and_its_successor_the_next():
    group = Group("g")
    for name in "abc":
        group.add(member(name, "range"))
    assert group.leader_id == "a"
    group.remove("a")
    assert group.leader_id == "b"
    group.members["c"].join_reply = lambda _: None  # only c rejoined
    assert group.elect_joined_leader() and group.leader_id == "c"


def test_static_members_are_found_by_instance_and_others_are_fenced():
    group = Group("g")
    group.add(member("s-1", "range", instance="s"))
    assert group.static == {"s": "s-1"}
    assert not group.is_static_member_fenced("s-1", "s")
    assert group.is_static_member_fenced("s-2", "s")
    assert not group.is_static_member_fenced("x", None)
    group.remove("s-1")
    assert group.static == {}
