"""CreatePartitions in cluster mode: ZooKeeper holds the grown assignment, every broker serves the new
partitions' replicas, acks=all records reach them, and a broker away during the growth catches up."""

from __future__ import annotations

import json

from confluent_kafka.admin import AdminClient, NewPartitions

from mmlog.client.admin import Admin
from mmlog.client.producer import Producer
from mmlog.testing.cluster import REPLICATION, partition_state, three_brokers
from mmlog.testing.wait import wait_for


def states_everywhere(brokers, topic: str, count: int):
    """(leader, replicas, ISR) of every partition, once every broker's Metadata shows `count` of them
    with a leader and a full ISR."""
    def ready():
        seen = []
        for b in brokers:
            states = [partition_state(b.bootstrap, topic, p) for p in range(count)]
            if any(leader < 0 or sorted(isr) != sorted(replicas) for leader, replicas, isr in states):
                return None
            seen.append(states)
        return seen[0] if all(s == seen[0] for s in seen) else None
    return wait_for(ready, what=f"{count} partitions of {topic} everywhere")


def test_grown_partitions_are_replicated_spread_and_take_acks_all_records(tmp_path, zk_connect, zk):  # noqa: F811
    with three_brokers(tmp_path, zk_connect, **REPLICATION) as brokers:
        with Admin(brokers[0].bootstrap) as admin:
            admin.create_topic("grown", 2, {"min.insync.replicas": "2"}, replication_factor=2)
        old = states_everywhere(brokers, "grown", 2)
        client = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
        client.create_partitions([NewPartitions("grown", 6)])["grown"].result(20)

        states = states_everywhere(brokers, "grown", 6)
        assert states[:2] == old
        node = json.loads(zk.get("/brokers/topics/grown")[0])
        assert [node["partitions"][str(p)] for p in range(6)] == [list(replicas) for _, replicas, _ in states]
        assert all(len(set(replicas)) == 2 for _, replicas, _ in states)  # the topic's replication factor
        leaders = [replicas[0] for _, replicas, _ in states]
        assert sorted(leaders) == [0, 0, 1, 1, 2, 2]  # new leaders go on round the brokers
        for b in brokers:
            mine = sorted(p for p, (_, replicas, _) in enumerate(states) if b.broker_id in replicas)
            wait_for(lambda b=b, mine=mine: sorted(int(d.name.rsplit("-", 1)[1])
                                                   for d in b.data_dir.glob("grown-*")) == mine,
                     what=f"broker {b.broker_id}'s directories")

        with Producer(brokers[2].bootstrap, acks="all", linger_ms=1) as producer:
            futures = [producer.send("grown", b"v%d" % i, partition=i % 6) for i in range(60)]
            assert all(f.get(timeout=30).offset == i // 6 for i, f in enumerate(futures))


def test_a_broker_away_while_a_topic_grows_has_the_new_partitions_when_it_returns(tmp_path, zk_connect):  # noqa: F811
    with three_brokers(tmp_path, zk_connect, **REPLICATION) as brokers:
        with Admin(brokers[0].bootstrap) as admin:
            admin.create_topic("away", 3, replication_factor=2)
        states_everywhere(brokers, "away", 3)
        brokers[2].stop()
        with Admin(brokers[0].bootstrap) as admin:
            wait_for(lambda: sorted(admin.cluster.refresh([]) or admin.cluster.brokers) == [0, 1],
                     what="broker 2 gone")
            admin.create_partitions({"away": 5})  # the new replicas go to the live brokers only
        brokers[2].start()
        assert wait_for(lambda: Admin(brokers[2].bootstrap).list_topics().get("away") == 5, what="growth seen")


def test_an_altered_topic_config_is_in_zookeeper_and_every_broker_applies_it(tmp_path, zk_connect, zk):  # noqa: F811
    with three_brokers(tmp_path, zk_connect, **REPLICATION) as brokers:
        with Admin(brokers[0].bootstrap) as admin:
            admin.create_topic("configured", 3, {"retention.ms": "60000"}, replication_factor=2)
        states_everywhere(brokers, "configured", 3)
        with Admin(brokers[1].bootstrap) as admin:
            admin.alter_topic_config("configured", {"segment.bytes": "1048576"}, delete=["retention.ms"])
        assert json.loads(zk.get("/config/topics/configured")[0])["config"] == {"segment.bytes": "1048576"}
        for b in brokers:  # each broker's own catalogue (DescribeConfigs answers from it)
            with Admin(b.bootstrap) as admin:
                admin.cluster.refresh([])
                admin._controller = lambda b=b: b.broker_id  # ask this broker, not the controller
                wait_for(lambda admin=admin: admin.topic_config("configured")[1] == {"segment.bytes"},
                         what=f"broker {b.broker_id}'s overrides")
