"""Power loss of one broker of three: its replicas recover by truncation to the leader, nothing acknowledged lost.

Each broker's data directory is on a power-loss file system of its own (mmlog/testing/lazyfs.py), so one
broker loses power while the others keep running, as one machine of a cluster does.
"""

from __future__ import annotations

import random
import time

import pytest

from mmlog.client.admin import Admin
from mmlog.testing.cluster import REPLICATION, check_replicas_identical, full_isr, leader_of, three_brokers
from mmlog.testing.lazyfs import available, homes
from mmlog.testing.wait import wait_for
from tests.replication.test_failover import SteadyProducer, read_all

pytestmark = pytest.mark.skipif(available() is not None, reason=str(available()))

TOPIC = "replicated"
PARTITIONS = 2


@pytest.mark.parametrize("seed", [3])
def test_a_broker_that_loses_power_truncates_to_the_leader_and_nothing_acknowledged_is_lost(machines, zk_connect,
                                                                                           seed):
    """Guarantee: replication factor 3, min.insync.replicas 2, idempotent acks=all, the default flush policy
    (nothing fsynced but rolled segments): when the leader's machine loses power, at a seeded random moment
    of the load, twice, no acknowledged record is lost; the broker starts again, truncates what it had not
    synced to the new leader's log (leader epochs), rejoins the ISR, and all replicas end byte-identical."""
    rng = random.Random(seed)
    config = {**REPLICATION, "log.segment.bytes": 64 * 1024, "log.index.size.max.bytes": 64 * 1024,
              "transaction.state.log.num.partitions": 1}
    with three_brokers(machines[0].mountpoint.parent, zk_connect, homes=homes(machines), **config) as brokers:
        with Admin(brokers[0].bootstrap) as admin:
            admin.create_topic(TOPIC, PARTITIONS, {"min.insync.replicas": "2"}, replication_factor=3)
        full_isr(brokers, TOPIC, PARTITIONS)
        producer = SteadyProducer(",".join(b.bootstrap for b in brokers), TOPIC, PARTITIONS, rate=500,
                                  idempotent=True)
        producer.start()
        try:
            wait_for(lambda: len(producer.acked) > 200, what="a first acknowledged load")
            for _ in range(2):
                victim = leader_of(brokers, TOPIC, 0)
                time.sleep(rng.uniform(0.2, 1.5))
                victim.kill()
                machines[victim.broker_id].lose_power(rng.choice(["synced", "all"]), rng.choice(["empty", "zeros"]))
                restarted_at = len(victim.log_lines)
                victim.start()
                full_isr(brokers, TOPIC, PARTITIONS)
                recovered = [line for line in victim.log_lines[restarted_at:] if "recovery:" in line
                             or f"{TOPIC}-0: truncated to" in line or f"{TOPIC}-1: truncated to" in line]
                print(f"broker {victim.broker_id} lost power; after it: {len(recovered)} recovery and truncation "
                      f"lines, e.g. {recovered[:2]}")
                before = len(producer.acked)
                wait_for(lambda: len(producer.acked) > before + 200, what="acks after the restart")
        finally:
            producer.stop()
        assert not producer.errors, producer.errors[:5]
        ends = {p: max(o for q, o in producer.acked.values() if q == p) + 1 for p in range(PARTITIONS)}
        got = read_all(brokers[0].bootstrap, TOPIC, PARTITIONS, ends)
        lost = [(v, p, o) for v, (p, o) in producer.acked.items() if got[p].get(o) != v]
        assert not lost, f"{len(lost)} of {len(producer.acked)} acknowledged records not at their offsets: {lost[:5]}"
        check_replicas_identical(brokers, TOPIC, PARTITIONS)
