"""A failed log dir in a cluster: the broker tells the controller, which moves the leadership of the
replicas on that dir to other brokers and drops them from the ISR, while its replicas on healthy dirs
stay; producers with acks=all go on and lose nothing. The failing disk is a real ext4 image shut down."""

from __future__ import annotations

import time

from mmlog.client.admin import Admin
from mmlog.client.consumer import Consumer
from mmlog.client.producer import Producer
from mmlog.testing import EmbeddedBroker
from tests import disk
from tests.cluster.conftest import SESSION_MS
from tests.wait import wait_for
from tests.replication.conftest import REPLICATION
from tests.replication.replicas import partition_state
from tests.replication.test_failover import full_isr

TOPIC, PARTITIONS = "disks", 6


def cluster(tmp_path, zk_connect, first_dirs: str) -> list[EmbeddedBroker]:
    """Brokers 0, 1, 2; broker 0 on the log dirs `first_dirs`."""
    config = {"zookeeper.connect": zk_connect, "zookeeper.session.timeout.ms": SESSION_MS,
              "group.initial.rebalance.delay.ms": 0, **REPLICATION}
    return [EmbeddedBroker(first_dirs if i == 0 else tmp_path / f"broker-{i}", processors=1,
                           config={**config, "broker.id": i}) for i in range(3)]


def test_replicas_on_a_failed_log_dir_lose_leadership_and_leave_the_isr(tmp_path, zk_connect):
    with disk.failing_fs(tmp_path) as ext4:
        healthy, failing = tmp_path / "broker-0", ext4 / "broker-0"
        brokers = cluster(tmp_path, zk_connect, f"{healthy},{failing}")
        try:
            for b in brokers:
                b.start()
            with Admin(brokers[1].bootstrap) as admin:
                admin.create_topic(TOPIC, PARTITIONS, {"min.insync.replicas": "2"}, replication_factor=3)
            full_isr(brokers, TOPIC, PARTITIONS)
            on_failing = {p for p in range(PARTITIONS) if (failing / f"{TOPIC}-{p}").is_dir()}
            assert on_failing and len(on_failing) < PARTITIONS  # both dirs hold some of broker 0's replicas
            bootstrap = ",".join(b.bootstrap for b in brokers)
            with Producer(bootstrap, linger_ms=1, retries=20, delivery_timeout_ms=60_000) as producer:
                first = [producer.send(TOPIC, b"before-%d" % i, partition=i % PARTITIONS) for i in range(60)]
                [f.get(timeout=30) for f in first]
                disk.shut_down(ext4)
                after = [producer.send(TOPIC, b"after-%d" % i, partition=i % PARTITIONS) for i in range(120)]
                acked = [f.get(timeout=60) for f in after]

            def moved() -> bool:
                states = {p: partition_state(brokers[1].bootstrap, TOPIC, p) for p in range(PARTITIONS)}
                return all(states[p][0] not in (0, -1) and 0 not in states[p][2] for p in on_failing) and \
                    all(0 in states[p][2] for p in set(range(PARTITIONS)) - on_failing)

            wait_for(moved, timeout=30, what="broker 0's replicas on the failed dir out of the ISR, leaders moved")
            assert brokers[0].proc.poll() is None  # still serving its healthy dir
            got: dict[bytes, int] = {}
            with Consumer(brokers[1].bootstrap, auto_offset_reset="earliest") as consumer:
                consumer.assign([(TOPIC, p) for p in range(PARTITIONS)])
                deadline = time.monotonic() + 30
                while len(got) < 180 and time.monotonic() < deadline:
                    got.update((r.value, r.offset) for r in consumer.poll(0.5))
            assert {b"before-%d" % i for i in range(60)} | {b"after-%d" % i for i in range(120)} <= set(got)
            assert len(acked) == 120
        finally:
            for b in brokers:
                b.stop()
