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
from mmlog.testing.cluster import by_id, check_replicas_identical, controller_of, is_moved, moved_to, partition_state
from mmlog.testing.wait import wait_for
from tests.replication.test_failover import SteadyProducer, read_all


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


def test_the_follower_throttle_slows_a_reassignments_catch_up_to_its_rate(replicated):
    """Two moves at once, one named in the throttled-replicas configs (as `mmlog reassign --throttle` names
    it): it copies no more than the rate allows over its time (plus the follower's full bucket and a
    quarter second's fetch), and the free one is done first. What the throttled copy's rate comes to is
    tools/bench_throttles.py's to measure."""
    rate = 512 << 10
    bootstrap = replicated[0].bootstrap
    plans, sizes = {}, {}
    with Admin(bootstrap) as admin:
        for topic in ("free", "slow"):
            admin.create_topic(topic, 1, replication_factor=1)
            fill(bootstrap, topic, 3 << 20)
            first = partition_state(bootstrap, topic)[0]
            plans[topic] = [first, next(b.broker_id for b in replicated if b.broker_id != first)]
            logs = (Path(by_id(replicated, first).data_dir) / f"{topic}-0").glob("*.log")
            sizes[topic] = sum(f.stat().st_size for f in logs)
        admin.set_replication_throttle(rate)
        admin.throttle_moves({TopicPartition("slow", 0): ([plans["slow"][0]], plans["slow"])})
        done: dict[str, float] = {}
        started = time.monotonic()
        admin.alter_partition_reassignments({TopicPartition(t, 0): replicas for t, replicas in plans.items()})

        def both_moved():
            for t in plans.keys() - done.keys():
                if is_moved(bootstrap, t, plans[t], others_may_move=True):
                    done[t] = time.monotonic() - started
            return len(done) == 2

        wait_for(both_moved, timeout=120, what="both moves", show=lambda: done)
        admin.set_replication_throttle(None)
    print(f"throttled at {rate} B/s: {sizes['slow']} B in {done['slow']:.1f} s; free: {sizes['free']} B in "
          f"{done['free']:.1f} s")
    assert sizes["slow"] <= 1.1 * rate * done["slow"] + 1.25 * rate + 64 * 1024, (sizes, done)
    assert list(done) == ["free", "slow"], done  # the free move was not held back: done first


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
