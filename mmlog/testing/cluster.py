"""Three-broker clusters on a ZooKeeper, for tests and soaks, and what they ask of one: a partition's leader,
replicas and ISR, the controller, a transactional id's coordinator, the replicas' segment files.

`three_brokers` starts brokers 0, 1 and 2 (`EmbeddedBroker`s) on one ZooKeeper chroot; `REPLICATION` and `TXN`
are the short timeouts and the small transaction log that make a failover take seconds. Every wait goes
through `wait_for`, which tries again while brokers come and go.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
from pathlib import Path

from mmlog.client.admin import Admin
from mmlog.client.cluster import Cluster
from mmlog.client.records import TopicPartition
from mmlog.protocol.messages import find_coordinator
from mmlog.testing import EmbeddedBroker
from mmlog.cluster import paths
from mmlog.replication.leader_and_isr import LeaderAndIsr
from mmlog.testing.connections import connect
from mmlog.testing.wait import wait_for

SESSION_MS = 3000  # how long a SIGKILLed broker stays in the registry

# Short enough that failover tests take seconds, long enough for a loaded 2-core machine.
REPLICATION = {
    "replica.lag.time.max.ms": 2000,
    "replica.fetch.wait.max.ms": 200,
    "replica.fetch.backoff.ms": 100,
    "replica.high.watermark.checkpoint.interval.ms": 500,
    "leader.imbalance.check.interval.seconds": 1,
}
# The transaction state log small and replicated on all three brokers.
TXN = {"transaction.state.log.num.partitions": 3, "transaction.state.log.replication.factor": 3,
       "transaction.state.log.min.isr": 2, "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500}


def cluster_broker(tmp_path, zk_connect: str, broker_id: int, user: str | None = None, **config) -> EmbeddedBroker:
    return EmbeddedBroker(tmp_path / f"broker-{broker_id}", processors=1, user=user, config={
        "zookeeper.connect": zk_connect, "broker.id": broker_id, "zookeeper.session.timeout.ms": SESSION_MS,
        "group.initial.rebalance.delay.ms": 0, **config})


@contextlib.contextmanager
def three_brokers(tmp_path, zk_connect: str, users=None, homes=None, own=None, **config):
    """Brokers 0, 1 and 2 on one ZooKeeper chroot, registered; every one is stopped at the end.
    `users`: broker id -> the system user it runs as (partition tests); `homes`: broker id -> the directory
    its data dir is made in instead of `tmp_path` (a file system of its own: power-loss soaks); `own`: broker
    id -> settings of that broker's alone (over `config`).

    Broker 0 starts first and is the controller (it is ready only once it has stood for election), as tests
    have always had it; 1 and 2 then start side by side, their boots (imports, kernels, logs) overlapping."""
    brokers = [cluster_broker((homes or {}).get(i, tmp_path), zk_connect, i, (users or {}).get(i),
                              **{**config, **(own or {}).get(i, {})}) for i in range(3)]
    try:
        brokers[0].start()
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            for started in [pool.submit(b.start) for b in brokers[1:]]:
                started.result()
        wait_for(lambda: len(live_brokers(brokers[0].bootstrap)) == 3, what="three registered brokers")
        yield brokers
    finally:
        for b in brokers:
            b.stop()


def live_brokers(bootstrap: str) -> dict[int, object]:
    """node id -> broker, as Metadata from this bootstrap says."""
    meta = Cluster(bootstrap, timeout=5)
    meta.refresh([])
    return meta.brokers


def leaders(bootstrap: str, topic: str) -> tuple[int, ...]:
    meta = Cluster(bootstrap, timeout=5)
    meta.refresh([topic], allow_auto_create=False)
    return meta.topics[topic].leaders


def partition_state(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, tuple, tuple]:
    """(leader, replicas, ISR) of a partition, as Metadata from `bootstrap` reports it."""
    meta = Cluster(bootstrap, timeout=5)
    meta.refresh([topic], allow_auto_create=False)
    info = meta.topics[topic]
    return info.leaders[partition], info.replicas[partition], info.isr[partition]


def zk_state(zk, topic: str, p: int = 0) -> LeaderAndIsr:
    """A partition's state node as ZooKeeper holds it (what the controller wrote; read by the test's own session)."""
    return LeaderAndIsr.parse(*zk.get(paths.partition_state(topic, p)))


def log_bytes(data_dir: Path, topic: str, partition: int = 0) -> bytes:
    """The concatenated segment files of a replica (segments may be cut at other points on each replica)."""
    directory = Path(data_dir) / f"{topic}-{partition}"
    return b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))


def leader_of(brokers, topic: str, partition: int = 0):
    """The live broker among these that leads the partition, once the metadata says so: a leader killed a
    moment ago stays in the metadata until the controller sees its session end."""
    live = {b.broker_id: b for b in brokers if b.proc.poll() is None}
    [leader] = wait_for(lambda: (s := partition_state(next(iter(live.values())).bootstrap, topic, partition))[0]
                        in live and [s[0]], what=f"a live leader of {topic}-{partition}")
    return live[leader]


def full_isr(brokers, topic: str, partitions: int) -> None:
    wait_for(lambda: all(len(partition_state(brokers[0].bootstrap, topic, p)[2]) == 3 for p in range(partitions)),
             timeout=40, what="every replica back in the ISR")


def check_replicas_identical(brokers, topic: str, partitions: int) -> None:
    for p in range(partitions):
        wait_for(lambda p=p: len({log_bytes(b.data_dir, topic, p) for b in brokers}) == 1, timeout=30,
                 what=f"identical replicas of {topic}-{p}")


def controller_of(brokers, bootstrap: str | None = None) -> int:
    """Metadata's controller id, asked of `bootstrap` (a paused broker would not answer) or the first live one."""
    bootstrap = bootstrap or next(b for b in brokers if b.proc.poll() is None).bootstrap
    meta = Cluster(bootstrap, timeout=5)
    meta.refresh([])
    return meta.controller_id


def coordinator_of(brokers, txn_id: str):
    """The broker that coordinates the transactional id, as FindCoordinator from a live broker answers."""
    live = [b for b in brokers if b.proc.poll() is None]

    def ask():
        with connect(live[0]) as conn:
            r = conn.request(find_coordinator.API_KEY, 2, key=txn_id, key_type=1)
        return [r.node_id] if r.error_code == 0 else None  # a list: broker 0 is a node id too

    [node] = wait_for(ask, what=f"the coordinator of {txn_id}")
    return next(b for b in brokers if b.broker_id == node)


def by_id(brokers, node: int):
    return next(b for b in brokers if b.broker_id == node)


def moved_to(brokers, topic: str, replicas: list[int], partition: int = 0, bootstrap: str | None = None) -> None:
    """Wait until the move is done: nothing in progress, the replicas and the ISR the target."""
    bootstrap = bootstrap or next(b for b in brokers if b.proc.poll() is None).bootstrap
    wait_for(lambda: is_moved(bootstrap, topic, replicas, partition), timeout=40,
             what=f"{topic}-{partition} on {replicas}")


def is_moved(bootstrap: str, topic: str, replicas: list[int], partition: int = 0, others_may_move=False) -> bool:
    """Is the partition's move done: no move in progress (but other partitions' if `others_may_move`), the
    replicas and the ISR the target?"""
    with Admin(bootstrap) as admin:
        moving = admin.list_partition_reassignments()
    if TopicPartition(topic, partition) in moving or (moving and not others_may_move):
        return False
    leader, now, isr = partition_state(bootstrap, topic, partition)
    return list(now) == replicas and sorted(isr) == sorted(replicas) and leader in replicas
