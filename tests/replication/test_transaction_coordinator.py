"""Transactions on three brokers: the transaction log is replicated, and a killed coordinator's
successor finishes what it started (librdkafka's transactional producer, read_committed readers)."""

from __future__ import annotations

import sys

import confluent_kafka

from mmlog.client.admin import Admin
from mmlog.client.records import TopicPartition
from mmlog.errors import NotCoordinator
from mmlog.ipc.cluster_view import transaction_partition
from mmlog.protocol.messages import describe_transactions
from mmlog.testing.cluster import REPLICATION, TXN, coordinator_of, full_isr, leader_of, moved_to, three_brokers
from mmlog.testing.connections import connect
from mmlog.testing.wait import wait_for
from tests.replication.test_failover import LibrdkafkaReader


def read_committed(brokers, topic: str, expect: int) -> list[bytes]:
    """Partition 0 as a read_committed librdkafka consumer sees it: `expect` values, then half a second
    more for any it should not see."""
    # Read once the metadata names a live leader: the last kill may have taken the partition's leader with it.
    leader_of(brokers, topic, 0)
    reader = LibrdkafkaReader(brokers, topic, "read_committed")
    try:
        reader.read(expect, timeout=40)
        values = reader.read(expect + 1, timeout=0.5)
    finally:
        reader.close()
    for error in reader.errors:
        print("consumer:", error, file=sys.stderr)  # shown should the test fail
    return values


def transactional_producer(brokers, txn_id: str) -> confluent_kafka.Producer:
    """librdkafka's producer of `txn_id`, initialised, for the topic "paid" (one partition, 3 replicas, min ISR 2)
    once it and the transaction log are fully replicated."""
    with Admin(brokers[0].bootstrap) as admin:
        admin.create_topic("paid", 1, {"min.insync.replicas": "2"}, replication_factor=3)
    full_isr(brokers, "paid", 1)
    producer = confluent_kafka.Producer({"bootstrap.servers": ",".join(b.bootstrap for b in brokers),
                                         "transactional.id": txn_id, "linger.ms": 1})
    producer.init_transactions(30)
    full_isr(brokers, "__transaction_state", 3)
    return producer


def test_a_killed_coordinator_is_replaced_and_its_transactions_complete(tmp_path, zk_connect):
    with three_brokers(tmp_path, zk_connect, **REPLICATION, **TXN) as brokers:
        producer = transactional_producer(brokers, "payments")
        producer.begin_transaction()
        producer.produce("paid", b"first", partition=0)
        producer.commit_transaction(30)
        # An open transaction when its coordinator dies: the successor loads it from its replica of the log.
        producer.begin_transaction()
        producer.produce("paid", b"second", partition=0)
        producer.flush(30)
        victim = coordinator_of(brokers, "payments")
        victim.kill()
        producer.commit_transaction(60)
        # A commit whose markers may still be on their way when the coordinator dies.
        producer.begin_transaction()
        producer.produce("paid", b"third", partition=0)
        victim.start()
        full_isr(brokers, "__transaction_state", 3)
        producer.commit_transaction(60)
        coordinator_of(brokers, "payments").kill()
        assert read_committed(brokers, "paid", 3) == [b"first", b"second", b"third"]


def test_a_coordinator_whose_log_partition_moves_away_resigns_and_the_new_leader_finishes_its_transaction(
        tmp_path, zk_connect):
    with three_brokers(tmp_path, zk_connect, **REPLICATION, **TXN) as brokers:
        producer = transactional_producer(brokers, "moving")
        producer.begin_transaction()
        producer.produce("paid", b"open", partition=0)
        producer.flush(30)
        old = coordinator_of(brokers, "moving")
        p = transaction_partition("moving", TXN["transaction.state.log.num.partitions"])
        rest = [b.broker_id for b in brokers if b is not old]
        with Admin(brokers[0].bootstrap) as admin:  # the old coordinator's replica goes, its leadership with it
            admin.alter_partition_reassignments({TopicPartition("__transaction_state", p): rest})
        moved_to(brokers, "__transaction_state", rest, partition=p)

        def resigned() -> bool:  # alive and serving, but no longer answering for the id from what it had loaded
            with connect(old) as conn:
                [state] = conn.request(describe_transactions.API_KEY, 0, transactional_ids=["moving"]).transaction_states
            return state.error_code == NotCoordinator.code

        wait_for(resigned, timeout=10, what="the old coordinator's resignation")
        producer.commit_transaction(60)
        assert coordinator_of(brokers, "moving").broker_id in rest
        assert read_committed(brokers, "paid", 1) == [b"open"]
