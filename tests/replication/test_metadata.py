"""Metadata from a survivor after a leader dies: its kept topic entries give way to the new leader and epoch."""

from __future__ import annotations

from mmlog.client.admin import Admin
from mmlog.protocol.messages import metadata
from tests.processors.test_bad_input import connect
from tests.processors.test_metadata_cache import raw_metadata
from tests.wait import wait_for


def partition_zero(conn, topic: str, version: int = 12):
    """Partition 0 of the topic in an all-topics answer, checked to be the codec's own encoding of it."""
    body = raw_metadata(conn, version)
    value = metadata.RESPONSE.decode(body, version)
    assert bytes(metadata.RESPONSE.encode(value, version)) == body
    [t] = [t for t in value.topics if t.name == topic]
    return t.partitions[0]


def test_a_survivor_names_the_new_leader_and_epoch_once_the_leader_is_killed(replicated):
    with Admin(replicated[0].bootstrap) as admin:
        admin.create_topic("led", 1, replication_factor=3)
    survivor = replicated[1]
    with connect(survivor) as conn:  # one connection: the survivor's one processor, its entries kept between asks
        before = wait_for(lambda: (p := partition_zero(conn, "led")).leader_epoch >= 0 and len(p.isr_nodes) == 3 and p,
                          what="a leader, its epoch and a full ISR in the view")
        victim = next(b for b in replicated if b.broker_id == before.leader_id)
        if victim is survivor:  # ask a broker that outlives the leader
            conn.close()
            survivor = replicated[2]
            conn = connect(survivor)
        for version in (12, 7, 1):  # entries kept for each
            assert partition_zero(conn, "led", version).leader_id == before.leader_id
        victim.kill()
        for version in (12, 7):
            after = wait_for(lambda v=version: (p := partition_zero(conn, "led", v)).leader_id
                             not in (-1, victim.broker_id) and victim.broker_id not in p.isr_nodes and p,
                             timeout=30, what=f"a new leader at v{version}")
            assert after.leader_epoch > before.leader_epoch and victim.broker_id in after.offline_replicas
        v1 = partition_zero(conn, "led", 1)  # no epoch in v1: the leader and ISR
        assert v1.leader_id not in (-1, victim.broker_id) and victim.broker_id not in v1.isr_nodes
        conn.close()
