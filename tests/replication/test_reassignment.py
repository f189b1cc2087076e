"""Partition reassignments (AlterPartitionReassignments / ListPartitionReassignments) on three real brokers.

Replicas are added while librdkafka produces with acks=all and removed (the leader
among them); a move is cancelled; the controller is SIGKILLed half way and the
next one finishes the move; bad requests get Kafka's error codes.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import confluent_kafka

import pytest
from kafka import TopicPartition as KpTopicPartition
from kafka.admin import KafkaAdminClient

from mmlog.client.admin import Admin
from mmlog.client.cluster import Cluster
from mmlog.client.records import TopicPartition
from mmlog.errors import (InvalidReplicaAssignment, NoReassignmentInProgress, NotController,
                          ReassignmentInProgress, UnknownTopicOrPartition)
from tests.wait import wait_for
from tests.replication.replicas import partition_state
from tests.replication.test_failover import SteadyProducer, check_replicas_identical, read_all


def by_id(brokers, node: int):
    return next(b for b in brokers if b.broker_id == node)


def controller_of(brokers, bootstrap: str | None = None) -> int:
    """Metadata's controller id, asked of `bootstrap` (a paused broker would not answer) or the first live one."""
    bootstrap = bootstrap or next(b for b in brokers if b.proc.poll() is None).bootstrap
    meta = Cluster(bootstrap, timeout=5)
    meta.refresh([])
    return meta.controller_id


def moved_to(brokers, topic: str, replicas: list[int], partition: int = 0, bootstrap: str | None = None) -> None:
    """Wait until the move is done: nothing in progress, the replicas and the ISR the target."""
    bootstrap = bootstrap or next(b for b in brokers if b.proc.poll() is None).bootstrap

    def done():
        with Admin(bootstrap) as admin:
            if admin.list_partition_reassignments():
                return False
        leader, now, isr = partition_state(bootstrap, topic, partition)
        return list(now) == replicas and sorted(isr) == sorted(replicas) and leader in replicas

    wait_for(done, timeout=40, what=f"{topic}-{partition} on {replicas}")


@contextlib.contextmanager
def logs_on_failure(brokers):
    """Print the brokers' last log lines if the block fails (failover tests on a loaded machine)."""
    try:
        yield
    except BaseException:
        for b in brokers:
            print(f"---- broker {b.broker_id}", *b.log_lines[-40:], sep="\n")
        raise


def has_dir(broker, topic: str, partition: int = 0) -> bool:
    return (Path(broker.data_dir) / f"{topic}-{partition}").is_dir()


def test_replicas_added_then_the_leader_moved_off_lose_no_acknowledged_record(replicated):
    with Admin(replicated[0].bootstrap) as admin:
        admin.create_topic("grow", 1, replication_factor=1)
    first = partition_state(replicated[0].bootstrap, "grow")[0]
    others = [b.broker_id for b in replicated if b.broker_id != first]
    producer = SteadyProducer(",".join(b.bootstrap for b in replicated), "grow", 1, rate=500)
    producer.start()
    try:
        wait_for(lambda: len(producer.acked) > 200, what="a first acknowledged load")
        with Admin(replicated[1].bootstrap) as admin:
            admin.alter_partition_reassignments({TopicPartition("grow", 0): [first, *others]})
        moved_to(replicated, "grow", [first, *others])  # RF 1 -> 3
        before = len(producer.acked)
        wait_for(lambda: len(producer.acked) > before + 200, what="acks with three replicas")
        with Admin(replicated[2].bootstrap) as admin:
            admin.alter_partition_reassignments({TopicPartition("grow", 0): others})  # off the leader's broker
        moved_to(replicated, "grow", others)
        wait_for(lambda: not has_dir(by_id(replicated, first), "grow"), what="the removed replica deleted")
        before = len(producer.acked)
        wait_for(lambda: len(producer.acked) > before + 200, what="acks from the new leader")
    finally:
        producer.stop()
    assert not producer.errors
    end = max(o for _, o in producer.acked.values()) + 1
    got = read_all(by_id(replicated, others[0]).bootstrap, "grow", 1, {0: end})
    assert all(got[0].get(o) == v for v, (_, o) in producer.acked.items())
    check_replicas_identical([by_id(replicated, r) for r in others], "grow", 1)


def test_a_cancelled_reassignment_goes_back_to_the_original_replicas(replicated):
    with Admin(replicated[0].bootstrap) as admin:
        admin.create_topic("cancel", 1, replication_factor=1)
        first = partition_state(replicated[0].bootstrap, "cancel")[0]
        added = next(b for b in replicated if b.broker_id not in (first, controller_of(replicated)))
        added.pause()  # it cannot catch up: the move stays in progress (the controller must answer: not it)
        try:
            admin.alter_partition_reassignments({TopicPartition("cancel", 0): [added.broker_id]})
            ongoing = admin.list_partition_reassignments()
            assert {tp: (r.replicas, r.adding, r.removing) for tp, r in ongoing.items()} == {
                TopicPartition("cancel", 0): ((added.broker_id, first), (added.broker_id,), (first,))}
            assert ongoing[TopicPartition("cancel", 0)].target == (added.broker_id,)
            with pytest.raises(ReassignmentInProgress):  # growing the topic would lose the move (as Kafka)
                admin.create_partitions({"cancel": 2})
            admin.alter_partition_reassignments({TopicPartition("cancel", 0): None})
            assert admin.list_partition_reassignments() == {}
            with pytest.raises(NoReassignmentInProgress):
                admin.alter_partition_reassignments({TopicPartition("cancel", 0): None})
        finally:
            added.resume()
    moved_to(replicated, "cancel", [first])
    wait_for(lambda: not has_dir(added, "cancel"), what="the cancelled replica deleted")


def test_a_new_controller_finishes_a_reassignment_the_killed_one_started(replicated):
    with Admin(replicated[0].bootstrap) as admin:
        admin.create_topic("failover-move", 3, replication_factor=1)
    controller = controller_of(replicated)
    meta = Cluster(replicated[0].bootstrap, timeout=5)
    meta.refresh(["failover-move"], allow_auto_create=False)
    p, leader = next((p, l) for p, l in enumerate(meta.topics["failover-move"].leaders) if l != controller)
    added = next(b for b in replicated if b.broker_id not in (controller, leader))
    added.pause()
    with logs_on_failure(replicated):
        try:
            with Admin(by_id(replicated, leader).bootstrap) as admin:
                admin.alter_partition_reassignments({TopicPartition("failover-move", p): [leader, added.broker_id]})
                assert TopicPartition("failover-move", p) in admin.list_partition_reassignments()
            by_id(replicated, controller).kill()
            asked = by_id(replicated, leader).bootstrap  # the one broker neither killed nor paused
            wait_for(lambda: controller_of(replicated, asked) not in (-1, controller), timeout=40,
                     what="a new controller")
        finally:
            added.resume()
        moved_to(replicated, "failover-move", [leader, added.broker_id], p, by_id(replicated, leader).bootstrap)


def fill(bootstrap: str, topic: str, size: int) -> None:
    """About `size` bytes of 1 KiB values in partition 0, acknowledged by the leader."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 20})
    for i in range(size // 1024):
        producer.produce(topic, b"%1024d" % i, partition=0)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0


def timed_move(brokers, topic: str, throttled: bool = False) -> tuple[float, int]:
    """(seconds, bytes) of adding a second replica to `topic`-0 (named in the topic's throttled-replicas
    configs if `throttled`, as `mmlog reassign --throttle` names it)."""
    first = partition_state(brokers[0].bootstrap, topic)[0]
    added = next(b for b in brokers if b.broker_id != first)
    size = sum(f.stat().st_size for f in (Path(by_id(brokers, first).data_dir) / f"{topic}-0").glob("*.log"))
    start = time.monotonic()
    with Admin(brokers[0].bootstrap) as admin:
        if throttled:
            admin.throttle_moves({TopicPartition(topic, 0): ([first], [first, added.broker_id])})
        admin.alter_partition_reassignments({TopicPartition(topic, 0): [first, added.broker_id]})
    moved_to(brokers, topic, [first, added.broker_id])
    return time.monotonic() - start, size


def test_the_follower_throttle_slows_a_reassignments_catch_up_to_its_rate(replicated):
    rate = 1 << 20
    with Admin(replicated[0].bootstrap) as admin:
        for topic in ("free", "slow"):
            admin.create_topic(topic, 1, replication_factor=1)
            fill(replicated[0].bootstrap, topic, 3 << 20)
        free_s, free_bytes = timed_move(replicated, "free")
        admin.set_replication_throttle(rate)
        slow_s, slow_bytes = timed_move(replicated, "slow", throttled=True)
        admin.set_replication_throttle(None)
    print(f"unthrottled: {free_bytes / free_s / 1e6:.1f} MB/s; throttled at {rate / 1e6:.1f} MB/s: "
          f"{slow_bytes / slow_s / 1e6:.2f} MB/s ({slow_bytes} B in {slow_s:.1f} s)")
    assert rate / 2 < slow_bytes / slow_s < rate * 1.5
    assert slow_s > 2 * free_s


def test_bad_reassignments_get_kafkas_error_codes(replicated):
    with Admin(replicated[0].bootstrap) as admin:
        admin.create_topic("bad", 1, replication_factor=1)
        cases = [(TopicPartition("nope", 0), [0], UnknownTopicOrPartition),
                 (TopicPartition("bad", 5), [0], UnknownTopicOrPartition),
                 (TopicPartition("bad", 0), [0, 7], InvalidReplicaAssignment),
                 (TopicPartition("bad", 0), [1, 1], InvalidReplicaAssignment),
                 (TopicPartition("bad", 0), [], InvalidReplicaAssignment),
                 (TopicPartition("bad", 0), None, NoReassignmentInProgress)]
        for tp, replicas, error in cases:
            with pytest.raises(error):
                admin.alter_partition_reassignments({tp: replicas})
        assert admin.list_partition_reassignments() == {}
    # Only the controller answers: another broker says NOT_CONTROLLER (clients go to Metadata's controller).
    from mmlog.client.connection import BrokerConnection
    from mmlog.protocol.messages import list_partition_reassignments as lpr
    other = next(b for b in replicated if b.broker_id != controller_of(replicated))
    host, port = other.bootstrap.split(":")
    with BrokerConnection(host, int(port)) as conn:
        body = conn.request(lpr.API_KEY, 0, lpr.REQUEST(timeout_ms=1000, topics=None))
    assert body.error_code == NotController.code


def test_kafka_python_alters_and_lists_reassignments(replicated):
    with Admin(replicated[0].bootstrap) as admin:
        admin.create_topic("kp-move", 1, replication_factor=1)
    first = partition_state(replicated[0].bootstrap, "kp-move")[0]
    added = next(b for b in replicated if b.broker_id not in (first, controller_of(replicated)))
    target = [added.broker_id, first]
    live = ",".join(b.bootstrap for b in replicated if b is not added)
    client = KafkaAdminClient(bootstrap_servers=live, request_timeout_ms=20_000)
    with contextlib.closing(client):
        assert client.list_partition_reassignments() == {}  # connected to the controller before the pause
        added.pause()  # it cannot catch up: the move stays listed until it comes back
        try:
            result = client.alter_partition_reassignments({KpTopicPartition("kp-move", 0): target})
            assert result == {KpTopicPartition("kp-move", 0): None}
            listed = client.list_partition_reassignments()
            assert list(listed) == [KpTopicPartition("kp-move", 0)], listed
        finally:
            added.resume()
        moved_to(replicated, "kp-move", target)
        assert client.list_partition_reassignments() == {}
