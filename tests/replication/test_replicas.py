"""Replicated topics on three real brokers: placement, acks=all, followers' byte-identical copies."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mmlog.client.admin import Admin
from mmlog.client.consumer import Consumer
from mmlog.client.producer import Producer
from mmlog.errors import InvalidReplicationFactor
from mmlog.protocol.messages import list_offsets
from mmlog.testing.cluster import log_bytes, partition_state
from mmlog.testing.wait import wait_for


def test_a_replicated_topic_puts_each_partition_on_three_brokers_and_leaders_spread(replicated):
    with Admin(replicated[0].bootstrap) as admin:
        admin.create_topic("spread", 6, replication_factor=3)
    states = [wait_for(lambda p=p: (s := partition_state(replicated[1].bootstrap, "spread", p))[2] and s,
                       what=f"partition {p}") for p in range(6)]
    assert all(sorted(replicas) == [0, 1, 2] for _, replicas, _ in states)
    assert sorted(leader for leader, _, _ in states) == [0, 0, 1, 1, 2, 2]
    assert all(leader == replicas[0] for leader, replicas, _ in states)  # the preferred replica leads
    for b in replicated:  # each broker creates its replicas' directories when it applies its roles
        wait_for(lambda b=b: all((b.data_dir / f"spread-{p}").is_dir() for p in range(6)),
                 what=f"broker {b.broker_id}'s six partition directories")


def test_topics_describe_shows_replicas_isr_and_under_replication(replicated):
    made = _topics(replicated[0], "create", "described", "--partitions", "2", "--replication-factor", "3")
    assert made.returncode == 0, made.stderr
    wait_for(lambda: len(partition_state(replicated[0].bootstrap, "described", 1)[2]) == 3, what="full ISRs")
    lines = _topics(replicated[1], "describe", "described").stdout.splitlines()
    assert all("replicas " in line and "isr " in line for line in lines[1:3]), lines
    assert not any("under-replicated" in line for line in lines), lines


def _topics(broker, *args):
    return subprocess.run([sys.executable, "-m", "mmlog", "topics", *args, "--bootstrap", broker.bootstrap,
                           "--timeout", "10"], capture_output=True, text=True, timeout=60)


def test_a_factor_above_the_live_brokers_is_refused_with_the_cause(replicated):
    with Admin(replicated[0].bootstrap) as admin:
        with pytest.raises(InvalidReplicationFactor, match="larger than the 3 available brokers"):
            admin.create_topic("too-many", 1, replication_factor=4)


def test_acks_all_records_are_on_every_replica_byte_for_byte(replicated):
    with Admin(replicated[0].bootstrap) as admin:
        admin.create_topic("copied", 1, {"min.insync.replicas": "2"}, replication_factor=3)
    leader, replicas, _ = wait_for(lambda: (s := partition_state(replicated[0].bootstrap, "copied"))[0] >= 0 and s,
                                   what="a leader")
    with Producer(replicated[0].bootstrap, acks="all", linger_ms=1) as producer:
        futures = [producer.send("copied", f"value-{i}".encode(), partition=0) for i in range(500)]
        offsets = [f.get(timeout=30).offset for f in futures]
    assert offsets == list(range(500))
    by_id = {b.broker_id: b for b in replicated}
    wait_for(lambda: len({log_bytes(by_id[r].data_dir, "copied") for r in replicas}) == 1,
             what="identical replicas")
    with Consumer(replicated[2].bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([("copied", 0)])
        got = []
        wait_for(lambda: got.extend(consumer.poll(0.5)) or len(got) >= 500, what="every record")
    assert [r.value for r in got] == [f"value-{i}".encode() for i in range(500)]


def list_latest(conn, topic: str, replica_id: int = -1, current_leader_epoch: int = -1):
    """ListOffsets v5 for the latest offset of partition 0: the partition's answer."""
    body = conn.request(list_offsets.API_KEY, 5, list_offsets.REQUEST(replica_id=replica_id, isolation_level=0, topics=[
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": current_leader_epoch,
                                        "timestamp": -1}]}]))
    return body.topics[0].partitions[0]


def test_followers_refuse_consumers_and_producers_so_clients_follow_the_leader(replicated):
    from mmlog.testing.connections import connect, fetch_one
    from tests.processors.test_bad_input import produce_one
    from mmlog.protocol.records import build_batch

    with Admin(replicated[0].bootstrap) as admin:
        admin.create_topic("leader-only", 1, replication_factor=3)
    leader, replicas, _ = wait_for(lambda: (s := partition_state(replicated[0].bootstrap, "leader-only"))[2]
                                   and len(s[2]) == 3 and s, what="a full ISR")
    follower = next(b for b in replicated if b.broker_id != leader)
    with connect(follower) as conn:  # once it has the topic (a moment after ZooKeeper does): NOT_LEADER_OR_FOLLOWER
        wait_for(lambda: fetch_one(conn, "leader-only", 0, 0).error_code == 6, what="the follower's answer")
        assert produce_one(conn, "leader-only", 0, build_batch([(None, b"x")])).error_code == 6
        assert list_latest(conn, "leader-only").error_code == 6  # its high watermark lags the leader's
        assert list_latest(conn, "leader-only", replica_id=-2).error_code == 0  # Kafka's debugging id reads it
    lead = next(b for b in replicated if b.broker_id == leader)
    with connect(lead) as conn:  # Metadata may say so before the leader has applied its state: clients retry
        wait_for(lambda: produce_one(conn, "leader-only", 0, build_batch([(None, b"x")])).error_code == 0,
                 what="the leader taking the record")
        wait_for(lambda: list_latest(conn, "leader-only").offset == 1, what="the high watermark past the record")
        assert list_latest(conn, "leader-only", current_leader_epoch=0).offset == 1
        assert list_latest(conn, "leader-only", current_leader_epoch=1).error_code == 75  # UNKNOWN_LEADER_EPOCH


def test_confluent_and_kafka_python_admin_clients_see_replicas_and_isr(replicated):
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient

    with Admin(replicated[0].bootstrap) as admin:
        admin.create_topic("seen", 2, replication_factor=3)
    wait_for(lambda: all(len(partition_state(replicated[0].bootstrap, "seen", p)[2]) == 3 for p in range(2)),
             what="full ISRs")
    client = AdminClient({"bootstrap.servers": replicated[2].bootstrap})
    described = client.describe_topics(TopicCollection(["seen"]))["seen"].result(30)
    for p in described.partitions:
        assert sorted(n.id for n in p.replicas) == [0, 1, 2] and sorted(n.id for n in p.isr) == [0, 1, 2]
        assert p.leader.id == p.replicas[0].id
    kafka = pytest.importorskip("kafka")
    kp = kafka.KafkaAdminClient(bootstrap_servers=replicated[1].bootstrap, api_version=(2, 5))
    try:
        [topic] = kp.describe_topics(["seen"])
    finally:
        kp.close()
    assert all(sorted(p["replica_nodes"]) == [0, 1, 2] and sorted(p["isr_nodes"]) == [0, 1, 2]
               for p in topic["partitions"]), topic
