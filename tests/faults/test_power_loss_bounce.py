"""A leader that loses power and registers again before the controller has seen it gone (a "bounced" broker).

Found by `tools/soak_failover.py --kinds power --seed 2` (docs/replication.md, "Soak under partitions and power
losses"): 3.3 s after it lost power, a broker answered produce requests as the leader of a partition it had
led before, with a log that had lost the producer's batches. Its old ZooKeeper session ends while the
controller is slow to read `/brokers/ids` (here: SIGSTOPped for 3 s, well inside its own session); the
restarted broker, waiting for its old registration to go, registers again at once; the controller then
read the same live brokers as before and elected nobody, and the broker took the leadership the partition
state still gave it, in the same leader epoch. Its followers truncated to its log (OffsetsForLeaderEpoch),
and every acknowledged record it had not synced was gone. After a process crash the page cache keeps them,
which is why no process-kill test met it.

Fixed as Kafka does with its broker epoch (the czxid of a broker's registration): a broker never leads by a
partition state written before it registered, and the controller treats a broker registered since a state
was written as failed, then started (`election.decide`).
"""

from __future__ import annotations

import threading
import time

import confluent_kafka
import pytest

from mmlog.client.admin import Admin
from mmlog.testing.cluster import REPLICATION, controller_of, full_isr, leader_of, three_brokers
from mmlog.testing.lazyfs import available, homes
from mmlog.testing.wait import wait_for
from tests.replication.test_failover import read_all

pytestmark = pytest.mark.skipif(available() is not None, reason=str(available()))

SESSION_S = 10.0  # long enough to pause the controller across the bounce without ending its own session
TOPIC = "bounced"


def produce(brokers, partition: int, count: int) -> dict[bytes, int]:
    """`count` acks=all records to one partition; value -> acknowledged offset."""
    acked: dict[bytes, int] = {}
    producer = confluent_kafka.Producer({"bootstrap.servers": ",".join(b.bootstrap for b in brokers),
                                         "acks": "all", "linger.ms": 5, "log_level": 0})

    def delivered(err, msg) -> None:
        if err is None:
            acked[msg.value()] = msg.offset()

    for i in range(count):
        producer.produce(TOPIC, b"v%06d" % i, partition=partition, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0
    return acked


def test_a_leader_back_from_a_power_loss_before_the_controller_saw_it_gone_loses_nothing_acknowledged(
        machines, zk_connect):
    """Guarantee wanted: RF 3, min.insync.replicas 2, acks=all, default flush policy; the leader loses power and
    is back before the controller has noticed: no acknowledged record is lost (it must not lead on its log)."""
    with three_brokers(machines[0].mountpoint.parent, zk_connect, homes=homes(machines), **REPLICATION,
                       **{"zookeeper.session.timeout.ms": int(SESSION_S * 1000)}) as brokers:
        with Admin(brokers[0].bootstrap) as admin:
            admin.create_topic(TOPIC, 3, {"min.insync.replicas": "2"}, replication_factor=3)
        full_isr(brokers, TOPIC, 3)
        ctl = next(b for b in brokers if b.broker_id == controller_of(brokers))
        partition = next(p for p in range(3) if leader_of(brokers, TOPIC, p) is not ctl)
        leader = leader_of(brokers, TOPIC, partition)
        acked = produce(brokers, partition, 3000)
        killed = time.monotonic()
        leader.kill()
        machines[leader.broker_id].lose_power("synced", "empty")
        since = len(leader.log_lines)
        starting = threading.Thread(target=leader.start, daemon=True)  # it registers once its old session ends
        starting.start()
        time.sleep(max(0.0, killed + SESSION_S - 2.5 - time.monotonic()))
        ctl.pause()  # the controller, slow: it reads /brokers/ids only after the leader registered again
        try:
            wait_for(lambda: any("registered" in line for line in leader.log_lines[since:]), timeout=8,
                     what="the leader registered again")
            time.sleep(0.3)
        finally:
            ctl.resume()
        starting.join(60)
        full_isr(brokers, TOPIC, 3)
        other = next(b for b in brokers if b is not leader)
        with Admin(other.bootstrap) as admin:
            ends = admin.latest_offsets(TOPIC)  # what the cluster now holds (0 on the partition, unfixed)
        got = read_all(other.bootstrap, TOPIC, 3, ends)
        lost = [(v, o) for v, o in acked.items() if got[partition].get(o) != v]
        assert not lost, f"{len(lost)} of {len(acked)} acknowledged records lost: {lost[:3]}"
