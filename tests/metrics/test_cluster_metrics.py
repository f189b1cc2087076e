"""Cluster figures on three brokers and a real ZooKeeper: followers' fetches count as replication bytes out;
a follower that dies makes its partition under-replicated on the leader, which counts the ISR shrink; exactly
one broker reports itself controller."""

from __future__ import annotations

from mmlog.client.admin import Admin
from mmlog.protocol import records as rec
from tests.metrics.scrape import scrape
from tests.client.consumer_tools import produce_batches, values
from tests.cluster.conftest import three_brokers
from tests.wait import wait_for

FAST = {"metrics.listen": "127.0.0.1:0", "replica.lag.time.max.ms": 1500, "replica.fetch.wait.max.ms": 200,
        "replica.fetch.backoff.ms": 100, "log.cleaner.enable": "false"}
URP = "kafka_cluster_partition_underreplicated"


def test_a_dead_follower_makes_its_partition_under_replicated_on_the_leader(tmp_path, zk_connect):  # noqa: F811
    with three_brokers(tmp_path, zk_connect, **FAST) as brokers:
        with Admin(brokers[0].bootstrap) as admin:
            admin.create_topic("urp", 1, replication_factor=3)

        def leader_in_sync():
            for b in brokers:
                if scrape(b).get(URP, None, topic="urp", partition=0) == 0:
                    return b
            return None

        leader = wait_for(leader_in_sync, timeout=30, what="a leader with its whole ISR")
        batch = rec.build_batch(values(5))
        produce_batches(leader, "urp", 0, [batch])
        # Both followers fetch the batch: each copy counts as replication bytes out, none as bytes out.
        wait_for(lambda: scrape(leader).get("kafka_server_brokertopicmetrics_replicationbytesout_total")
                 == 2 * len(batch), timeout=30, what="the followers' copies counted")
        assert scrape(leader).get("kafka_server_brokertopicmetrics_bytesout_total") == 0
        assert sum(scrape(b).get("kafka_controller_kafkacontroller_activecontrollercount") for b in brokers) == 1
        follower = next(b for b in brokers if b is not leader)
        follower.kill()
        s = wait_for(lambda: (s := scrape(leader)).get(URP, None, topic="urp", partition=0) == 1 and s,
                     timeout=30, what="the partition under-replicated on its leader")
        assert s.get("kafka_server_replicamanager_underreplicatedpartitions") == 1
        assert s.get("kafka_server_replicamanager_isrshrinks_total") >= 1
        live = [b for b in brokers if b is not follower]
        wait_for(lambda: sum(scrape(b).get("kafka_controller_kafkacontroller_activecontrollercount")
                             for b in live) == 1, timeout=30, what="one active controller among the live brokers")
