"""Group membership over the wire: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, as Kafka's coordinator answers.

Every test speaks the protocol by hand (`RawMember`) against a real broker whose
first rebalance waits 200 ms and whose minimum session timeout is 300 ms.
"""

import time

from mmlog.protocol.messages import find_coordinator, join_group, list_groups
from tests.coordinator.conftest import (
    FENCED_INSTANCE_ID,
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_GROUP_ID,
    INVALID_SESSION_TIMEOUT,
    MEMBER_ID_REQUIRED,
    NONE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    RawMember,
    connect,
    describe,
    list_all,
)
from mmlog.testing.wait import wait_for


def stable_pair(broker, group, **kw):
    """Two members in one Stable generation; a is the leader."""
    a, b = RawMember(broker, group, protocols=[("range", b"A")], **kw), RawMember(broker, group,
                                                                                 protocols=[("range", b"B")], **kw)
    a.send_join()
    b.send_join()
    ja, jb = a.receive_join(), b.receive_join()
    assert ja.error_code == jb.error_code == NONE and ja.generation_id == jb.generation_id
    leader, follower = (a, b) if ja.leader == a.member_id else (b, a)
    follower.send_sync()
    assert leader.sync({a.member_id: b"to-a", b.member_id: b"to-b"}).error_code == NONE
    assert follower.conn.receive().error_code == NONE
    return leader, follower


def test_find_coordinator_names_this_broker_as_metadata_does(broker):
    with connect(broker) as conn:
        host, port = broker.bootstrap.rsplit(":", 1)
        for version in (0, 1, 2):
            r = conn.request(find_coordinator.API_KEY, version, key="any-group")
            assert (r.error_code, r.node_id, r.host, r.port) == (NONE, 0, host, int(port))
        txn = conn.request(find_coordinator.API_KEY, 2, key="txn", key_type=1)  # makes __transaction_state
        assert (txn.error_code, txn.node_id, txn.host, txn.port) == (NONE, 0, host, int(port))


def test_one_member_joins_syncs_heartbeats_and_leaves(broker):
    m = RawMember(broker, "solo", protocols=[("range", b"my-subscription")])
    first = m.try_join()
    assert first.error_code == MEMBER_ID_REQUIRED and first.member_id.startswith("raw-test-")  # v4+ (KIP-394)
    m.member_id = first.member_id
    joined = m.join()  # answered after the initial rebalance delay (the test of that delay is below)
    assert (joined.error_code, joined.generation_id, joined.protocol_name) == (NONE, 1, "range")
    assert joined.leader == joined.member_id == first.member_id
    assert [(x.member_id, bytes(x.metadata)) for x in joined.members] == [(m.member_id, b"my-subscription")]

    with connect(broker) as conn:
        assert describe(conn, "solo").group_state == "CompletingRebalance"
        synced = m.sync({m.member_id: b"partitions 0-3"})
        assert (synced.error_code, bytes(synced.assignment)) == (NONE, b"partitions 0-3")
        assert m.heartbeat() == NONE
        d = describe(conn, "solo")
        assert (d.error_code, d.group_state, d.protocol_type, d.protocol_data) == (NONE, "Stable", "consumer", "range")
        [member] = d.members
        assert (member.member_id, member.client_id, member.client_host) == (m.member_id, "raw-test", "/127.0.0.1")
        assert (bytes(member.member_metadata), bytes(member.member_assignment)) == (b"my-subscription",
                                                                                     b"partitions 0-3")
        assert list_all(conn)["solo"] == "consumer"

        assert m.leave() == NONE
        d = describe(conn, "solo")
        assert (d.group_state, d.members) == ("Empty", [])
    assert m.heartbeat() == UNKNOWN_MEMBER_ID
    rejoined = m.try_join()  # its old id is gone: the group starts over from Empty at the next generation
    assert rejoined.error_code == UNKNOWN_MEMBER_ID
    m.member_id = ""
    assert m.join().generation_id == 3  # generation 2 was the empty one
    m.close()


def test_a_second_member_makes_heartbeats_answer_rebalance_in_progress_and_gets_the_next_generation(broker):
    a = RawMember(broker, "pair", protocols=[("roundrobin", b"a-rr"), ("range", b"a-range")])
    assert a.join().generation_id == 1
    assert a.sync({a.member_id: b"all"}).error_code == NONE
    assert a.heartbeat() == NONE

    b = RawMember(broker, "pair", protocols=[("range", b"b-range"), ("roundrobin", b"b-rr")])
    b.send_join()
    wait_for(lambda: a.heartbeat() == REBALANCE_IN_PROGRESS, what="a rebalance (b's join is parked until a rejoins)")
    with connect(broker) as conn:
        assert describe(conn, "pair").group_state == "PreparingRebalance"
    a.send_join()
    ja, jb = a.receive_join(), b.receive_join()
    assert ja.generation_id == jb.generation_id == 2
    assert ja.leader == jb.leader == a.member_id  # the first member stays leader
    # Both list roundrobin and range, one vote each: the leader's preference breaks the tie.
    assert ja.protocol_name == jb.protocol_name == "roundrobin"
    assert {x.member_id: bytes(x.metadata) for x in ja.members} == {a.member_id: b"a-rr", b.member_id: b"b-rr"}
    assert jb.members == []  # only the leader sees the members

    assert a.heartbeat(generation=1) == ILLEGAL_GENERATION
    b.send_sync()  # parked until the leader's SyncGroup arrives
    ra = a.sync({a.member_id: b"for a", b.member_id: b"for b"})
    rb = b.conn.receive()
    assert (ra.error_code, bytes(ra.assignment)) == (NONE, b"for a")
    assert (rb.error_code, bytes(rb.assignment)) == (NONE, b"for b")
    assert a.heartbeat() == b.heartbeat() == NONE
    late = b.sync()  # a SyncGroup in a Stable generation gets the same assignment again
    assert (late.error_code, bytes(late.assignment)) == (NONE, b"for b")
    a.close()
    b.close()


def test_a_member_that_stops_heartbeating_is_evicted_and_the_one_that_heartbeats_is_not(broker):
    leader, silent = stable_pair(broker, "evict", session_ms=1000)
    generation = leader.generation
    silent.close()
    answers = []
    wait_for(lambda: answers.append(leader.heartbeat()) or answers[-1] != NONE, what="the silent member's eviction",
             interval=0.1, show=lambda: answers[-5:])
    # The leader heartbeated all along (every 0.1 s, a tenth of the session): told to rejoin, not evicted.
    assert answers[-1] == REBALANCE_IN_PROGRESS
    j = leader.join()
    assert j.generation_id == generation + 1
    assert [x.member_id for x in j.members] == [leader.member_id]
    with connect(broker) as conn:
        assert [m.member_id for m in describe(conn, "evict").members] == [leader.member_id]
    leader.close()


def test_a_member_that_does_not_rejoin_within_the_rebalance_timeout_is_removed(broker):
    a, b = stable_pair(broker, "slow-rejoin", rebalance_ms=800)
    c = RawMember(broker, "slow-rejoin", rebalance_ms=800)
    c.send_join()
    wait_for(lambda: a.heartbeat() == REBALANCE_IN_PROGRESS, what="the rebalance c's join starts")
    a.send_join()
    answers = []  # b keeps its session alive but never rejoins: removed when the rebalance times out
    wait_for(lambda: answers.append(b.heartbeat()) or answers[-1] == UNKNOWN_MEMBER_ID, what="b's removal",
             show=lambda: answers[-5:])
    assert set(answers) <= {REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID}, answers
    ja, jc = a.receive_join(), c.receive_join()
    assert ja.generation_id == jc.generation_id == a.generation
    assert sorted(x.member_id for x in ja.members) == sorted([a.member_id, c.member_id])
    for m in (a, b, c):
        m.close()


def test_the_first_rebalance_waits_for_members_that_arrive_during_the_initial_delay(broker):
    members = [RawMember(broker, "initial") for _ in range(3)]
    for m in members:
        m.send_join()
        time.sleep(0.05)
    joins = [m.receive_join() for m in members]
    assert {j.generation_id for j in joins} == {1}  # one rebalance for all three
    assert len({j.leader for j in joins}) == 1
    assert sum(len(j.members) for j in joins) == 3
    for m in members:
        m.close()


def test_illegal_generation_unknown_member_and_other_refusals(broker):
    leader, follower = stable_pair(broker, "refusals")
    assert leader.heartbeat(generation=leader.generation + 1) == ILLEGAL_GENERATION
    assert follower.sync().error_code == NONE
    stale = RawMember(broker, "refusals")
    stale.member_id, stale.generation = "no-such-member", leader.generation
    assert stale.heartbeat() == UNKNOWN_MEMBER_ID
    assert stale.sync().error_code == UNKNOWN_MEMBER_ID
    assert stale.try_join().error_code == UNKNOWN_MEMBER_ID
    orphan = RawMember(broker, "never-created")
    orphan.member_id = "made-up"
    assert orphan.try_join().error_code == UNKNOWN_MEMBER_ID
    assert orphan.heartbeat() == UNKNOWN_MEMBER_ID

    assert RawMember(broker, "refusals", session_ms=100).try_join().error_code == INVALID_SESSION_TIMEOUT
    assert RawMember(broker, "refusals", session_ms=1_800_001).try_join().error_code == INVALID_SESSION_TIMEOUT
    assert RawMember(broker, "").try_join().error_code == INVALID_GROUP_ID
    assert RawMember(broker, "refusals", protocol_type="connect").try_join().error_code == INCONSISTENT_GROUP_PROTOCOL
    no_common_protocol = RawMember(broker, "refusals", protocols=[("sticky", b"")])
    assert no_common_protocol.try_join().error_code == INCONSISTENT_GROUP_PROTOCOL

    newcomer = RawMember(broker, "refusals")
    newcomer.send_join()
    wait_for(lambda: leader.heartbeat() == REBALANCE_IN_PROGRESS, what="the rebalance the newcomer starts")
    assert follower.sync().error_code == REBALANCE_IN_PROGRESS  # SyncGroup while preparing a rebalance
    for m in (leader, follower, stale, orphan, newcomer):
        m.close()


def test_a_static_member_that_rejoins_keeps_its_member_id_and_assignment_without_a_rebalance(broker):
    static = RawMember(broker, "static", instance="instance-1", protocols=[("range", b"S")])
    other = RawMember(broker, "static", protocols=[("range", b"O")])
    static.send_join()
    other.send_join()
    js, jo = static.receive_join(), other.receive_join()
    assert js.error_code == jo.error_code == NONE  # a static member needs no MEMBER_ID_REQUIRED round trip
    assert static.member_id.startswith("instance-1-")
    leader, follower = (static, other) if js.leader == static.member_id else (other, static)
    follower.send_sync()
    leader.sync({static.member_id: b"static's", other.member_id: b"other's"})
    follower.conn.receive()
    generation, member_id = static.generation, static.member_id
    with connect(broker) as conn:
        assert [m.group_instance_id for m in describe(conn, "static").members if m.member_id == member_id] == [
            "instance-1"]

    static.reconnect()  # the process restarts: it knows its instance id, not its member id
    static.member_id = ""
    again = static.join()
    assert (again.error_code, again.member_id, again.generation_id) == (NONE, member_id, generation)
    assert bytes(static.sync().assignment) == b"static's"
    assert other.heartbeat() == NONE  # no rebalance happened

    zombie = RawMember(broker, "static", instance="instance-1")
    zombie.member_id = "instance-1-some-other-id"
    assert zombie.try_join().error_code == FENCED_INSTANCE_ID
    zombie.generation = generation
    assert zombie.heartbeat() == FENCED_INSTANCE_ID

    # LeaveGroup v3 by group instance id alone.
    with connect(broker) as conn:
        r = conn.request(13, 3, group_id="static", members=[{"member_id": "", "group_instance_id": "instance-1"},
                                                            {"member_id": "nobody", "group_instance_id": None}])
        assert r.error_code == NONE
        assert [(m.group_instance_id, m.error_code) for m in r.members] == [("instance-1", NONE),
                                                                           (None, UNKNOWN_MEMBER_ID)]
    assert other.heartbeat() == REBALANCE_IN_PROGRESS
    for m in (static, other, zombie):
        m.close()


def test_old_clients_versions_0_to_3_run_the_same_flow(broker):
    """kafka-python 2.0.2 speaks JoinGroup v2, SyncGroup/Heartbeat/LeaveGroup v1; v0 has no rebalance timeout."""
    for version in (0, 1, 2, 3):
        group = f"old-v{version}"
        m = RawMember(broker, group, version=version)
        j = m.join()  # no MEMBER_ID_REQUIRED below v4
        assert (j.error_code, j.generation_id, j.leader) == (NONE, 1, m.member_id)
        assert bytes(m.sync({m.member_id: b"x"}).assignment) == b"x"
        assert m.heartbeat() == NONE
        assert m.leave() == NONE
        assert m.leave() == UNKNOWN_MEMBER_ID  # v0-2: the member's error is the top-level error
        m.close()


def test_list_groups_answers_every_version_and_includes_offset_only_groups(broker):
    from tests.coordinator.conftest import commit, create_topic

    create_topic(broker, "listed")
    with connect(broker) as conn:
        assert commit(conn, "simple-consumer", {("listed", 0): 3}) == {("listed", 0): NONE}
        for version in (0, 1, 2):
            groups = {g.group_id: g.protocol_type for g in conn.request(list_groups.API_KEY, version).groups}
            assert groups["simple-consumer"] == ""  # offsets only: no protocol type
        d = describe(conn, "simple-consumer")
        assert (d.group_state, d.protocol_type, d.members) == ("Empty", "", [])
        unknown = describe(conn, "no-such-group")
        assert (unknown.error_code, unknown.group_state) == (NONE, "Dead")  # what Kafka answers before v6


def test_a_join_answered_after_its_client_left_harms_no_other_connection(broker):
    """The parked JoinGroup's answer must not be written to a newer connection that reuses its fd."""
    a = RawMember(broker, "gone")
    a.join()
    a.sync({a.member_id: b""})
    b = RawMember(broker, "gone")
    b.send_join()
    wait_for(lambda: a.heartbeat() == REBALANCE_IN_PROGRESS, what="the rebalance b's join starts")
    pids = broker.processor_pids()
    b.close()  # b's join stays parked in the coordinator
    bystanders = [connect(broker) for _ in range(8)]  # some take over b's fd number
    a.join()  # completes the rebalance: b's parked join is answered to a closed connection
    for conn in bystanders:
        assert conn.request(join_group.API_KEY, 0, group_id="", session_timeout_ms=10_000, member_id="",
                            protocol_type="consumer", protocols=[]).error_code == INVALID_GROUP_ID
        conn.close()
    assert broker.processor_pids() == pids
    a.close()


def test_sigterm_answers_a_parked_join_with_not_coordinator_and_stops_at_once(tmp_path):
    from mmlog.testing import EmbeddedBroker
    from tests.coordinator.conftest import FAST_GROUPS

    # A shutdown that waited for the parked join would wait out controlled.shutdown.timeout.ms: set longer
    # than stop()'s 30 s, after which it kills the broker (exit code -9, not 0).
    config = {**FAST_GROUPS, "controlled.shutdown.timeout.ms": 600_000}
    with EmbeddedBroker(tmp_path / "data", processors=1, config=config) as broker:
        a, b = stable_pair(broker, "stopping", rebalance_ms=60_000)
        c = RawMember(broker, "stopping", rebalance_ms=60_000)
        c.send_join()  # parked: a and b would have a minute to rejoin
        wait_for(lambda: a.heartbeat() == REBALANCE_IN_PROGRESS, what="the rebalance c's join starts")
        assert broker.stop(timeout=30) == 0
        assert c.receive_join().error_code == 16  # NOT_COORDINATOR: the client looks for the coordinator again
        for m in (a, b, c):
            m.close()
