"""ElectLeaders (key 43) on three real brokers: the controller decides, with Kafka's answers.

Automatic rebalancing is off here (`auto.leader.rebalance.enable`), so that only the
asked election moves a leader.
"""

from __future__ import annotations

import contextlib

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient

from mmlog.client.admin import Admin
from mmlog.client.consumer import Consumer
from mmlog.client.records import TopicPartition
from mmlog.errors import ElectionNotNeeded, EligibleLeadersNotAvailable, PreferredLeaderNotAvailable
from mmlog.testing.cluster import REPLICATION, by_id, partition_state, three_brokers
from mmlog.testing.wait import wait_for

NO_REBALANCE = {**REPLICATION, "auto.leader.rebalance.enable": False}


@pytest.fixture
def brokers(tmp_path, zk_connect):
    with three_brokers(tmp_path, zk_connect, **NO_REBALANCE) as brokers:
        yield brokers


def full_isr(bootstrap: str, topic: str, n: int = 3) -> tuple:
    return wait_for(lambda: (s := partition_state(bootstrap, topic)) and len(s[2]) == n and s, timeout=30,
                    what=f"{topic}-0 with {n} replicas in its ISR")


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    """acks=all, each value acknowledged (librdkafka: no compile to wait for)."""
    errors = []
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for v in values:
        producer.produce(topic, v, partition=0, on_delivery=lambda err, _: err and errors.append(err))
    assert producer.flush(20) == 0 and not errors


def moved_away(brokers, topic: str) -> tuple[int, tuple]:
    """Make a RF 3 topic, restart its preferred leader: (preferred id, replicas) once it is back in the ISR
    but leads no longer."""
    with Admin(brokers[0].bootstrap) as admin:
        admin.create_topic(topic, 1, replication_factor=3)
    leader, replicas, _ = full_isr(brokers[0].bootstrap, topic)
    assert leader == replicas[0]
    preferred = by_id(brokers, leader)
    assert preferred.stop() == 0  # controlled shutdown: leadership goes to another ISR member
    preferred.start()
    other = next(b for b in brokers if b is not preferred)
    state = full_isr(other.bootstrap, topic)
    assert state[0] != leader
    return leader, replicas


def test_a_preferred_election_gives_leadership_back_after_the_leader_restarted(brokers):
    preferred, replicas = moved_away(brokers, "pref")
    with Admin(brokers[1].bootstrap) as admin, Admin(brokers[2].bootstrap) as stale:
        assert stale.latest_offsets("pref") == {0: 0}  # its metadata names the leader before the election
        result = admin.elect_leaders("preferred", [TopicPartition("pref", 0)])
        assert result == {TopicPartition("pref", 0): None}
        wait_for(lambda: partition_state(brokers[0].bootstrap, "pref")[0] == preferred, what="the preferred leader")
        assert stale.latest_offsets("pref") == {0: 0}  # NOT_LEADER_OR_FOLLOWER, a refresh, the new leader
        again = admin.elect_leaders("preferred", [TopicPartition("pref", 0)])[TopicPartition("pref", 0)]
        assert isinstance(again, ElectionNotNeeded)
        unknown = admin.elect_leaders("preferred", [TopicPartition("nope", 0), TopicPartition("pref", 7)])
        assert {tp: type(e).__name__ for tp, e in unknown.items()} == {
            TopicPartition("nope", 0): "UnknownTopicOrPartition", TopicPartition("pref", 7): "UnknownTopicOrPartition"}
        every = admin.elect_leaders("preferred")  # null partitions: all of them
        assert isinstance(every[TopicPartition("pref", 0)], ElectionNotNeeded)


def test_a_preferred_replica_out_of_the_isr_cannot_be_elected(brokers):
    with Admin(brokers[0].bootstrap) as admin:
        admin.create_topic("pref-dead", 1, replication_factor=3)
    leader, replicas, _ = full_isr(brokers[0].bootstrap, "pref-dead")
    by_id(brokers, leader).kill()
    rest = [b for b in brokers if b.broker_id != leader]
    wait_for(lambda: partition_state(rest[0].bootstrap, "pref-dead")[0] not in (-1, leader), what="a new leader")
    with Admin(rest[0].bootstrap) as admin:
        result = admin.elect_leaders("preferred", [TopicPartition("pref-dead", 0)])
    assert isinstance(result[TopicPartition("pref-dead", 0)], PreferredLeaderNotAvailable)


def test_an_unclean_election_revives_a_partition_whose_isr_died_losing_what_only_the_isr_held(brokers):
    with Admin(brokers[0].bootstrap) as admin:
        admin.create_topic("unclean", 1, {"min.insync.replicas": "1"}, replication_factor=3)
    leader, replicas, _ = full_isr(brokers[0].bootstrap, "unclean")
    produce(brokers[0].bootstrap, "unclean", [b"both-%d" % i for i in range(10)])
    followers = [by_id(brokers, r) for r in replicas if r != leader]
    survivor = followers[0]
    survivor.stop()  # out of the ISR, holding the first ten records
    wait_for(lambda: survivor.broker_id not in partition_state(by_id(brokers, leader).bootstrap, "unclean")[2],
             what="the stopped follower out of the ISR")
    followers[1].kill()
    wait_for(lambda: partition_state(by_id(brokers, leader).bootstrap, "unclean")[2] == (leader,), timeout=30,
             what="the leader alone in the ISR")
    produce(by_id(brokers, leader).bootstrap, "unclean", [b"only-on-the-leader"])
    by_id(brokers, leader).kill()  # the whole ISR is dead now
    survivor.start()
    wait_for(lambda: partition_state(survivor.bootstrap, "unclean")[0] == -1, what="the partition offline")
    with Admin(survivor.bootstrap) as admin:
        result = admin.elect_leaders("unclean", [TopicPartition("unclean", 0)])
        assert result == {TopicPartition("unclean", 0): None}
        wait_for(lambda: partition_state(survivor.bootstrap, "unclean")[0] == survivor.broker_id,
                 what="the survivor leading")
        again = admin.elect_leaders("unclean", [TopicPartition("unclean", 0)])[TopicPartition("unclean", 0)]
        assert isinstance(again, ElectionNotNeeded)  # its leader lives
    with Admin(survivor.bootstrap) as admin:
        assert admin.latest_offsets("unclean") == {0: 10}  # the record only the old ISR held is gone
    got: dict[int, bytes] = {}
    with Consumer(survivor.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([("unclean", 0)])

        def ten_read() -> bool:
            got.update((r.offset, r.value) for r in consumer.poll(0.5))
            return len(got) >= 10

        wait_for(ten_read, what="the survivor's records")
    assert [got[o] for o in range(10)] == [b"both-%d" % i for i in range(10)]


def test_an_unclean_election_with_no_live_replica_is_refused(brokers):
    with Admin(brokers[0].bootstrap) as admin:
        admin.create_topic("lonely", 1, replication_factor=1)
    leader = partition_state(brokers[0].bootstrap, "lonely")[0]
    by_id(brokers, leader).kill()
    rest = [b for b in brokers if b.broker_id != leader]
    wait_for(lambda: partition_state(rest[0].bootstrap, "lonely")[0] == -1, what="the partition offline")
    with Admin(rest[0].bootstrap) as admin:
        result = admin.elect_leaders("unclean", [TopicPartition("lonely", 0)])
    assert isinstance(result[TopicPartition("lonely", 0)], EligibleLeadersNotAvailable)


def test_confluent_kafka_and_kafka_python_elect_preferred_leaders(brokers):
    preferred, _ = moved_away(brokers, "interop")
    bootstrap = ",".join(b.bootstrap for b in brokers)
    client = AdminClient({"bootstrap.servers": bootstrap})
    future = client.elect_leaders(confluent_kafka.ElectionType.PREFERRED, [confluent_kafka.TopicPartition("interop", 0)])
    results = future.result(20)
    assert [(tp.topic, tp.partition, err) for tp, err in results.items()] == [("interop", 0, None)]
    wait_for(lambda: partition_state(brokers[0].bootstrap, "interop")[0] == preferred, what="the preferred leader")
    kp = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20_000)
    with contextlib.closing(kp):
        answer = kp.elect_leaders(0, {"interop": [0]})  # its preferred leader leads: ELECTION_NOT_NEEDED, ignored
    [result] = answer.replica_election_results
    assert [(r.partition_id, r.error_code) for r in result.partition_result] == [(0, ElectionNotNeeded.code)]
