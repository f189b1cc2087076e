"""What replication tests look at: a topic's partition states through Metadata and in ZooKeeper, and replicas'
files."""

from __future__ import annotations

from pathlib import Path

from mmlog.client.cluster import Cluster
from mmlog.cluster import paths
from mmlog.cluster.paths import LeaderAndIsr


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
