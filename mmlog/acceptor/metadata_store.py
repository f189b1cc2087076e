"""The embedded metadata store: cluster id, producer-id blocks and committed offsets in the data dir.

With no ZooKeeper a broker keeps its cluster-wide facts beside its logs, in
`meta.properties` (Kafka's own file name and keys: version, broker.id, cluster.id).
Producer ids are handed out from blocks whose high end is written (atomically)
before any id in the block is used, so ids stay unique across restarts.
Committed offsets live in `__consumer_offsets.log` (`coordinator/offset_log.py`);
`offset_store()` is where a ZooKeeper store will hand out its own backend.
"""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

from mmlog.acceptor.coordinator.offset_log import OffsetLog
from mmlog.acceptor.coordinator.offsets import OffsetStore
from mmlog.config.settings import parse_properties
from mmlog.log.files import atomic_write

META = "meta.properties"
PRODUCER_IDS = "producer_id_block"
BLOCK = 1000


def new_cluster_id() -> str:
    """22 characters of URL-safe base64 of a random UUID, as Kafka makes them."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class EmbeddedStore:
    """Cluster id, broker id check, producer ids: all in the first data directory."""

    def __init__(self, data_dir: Path, broker_id: int, cluster_id: str = "") -> None:
        self.dir = Path(data_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.cluster_id = self._load_meta(broker_id, cluster_id)
        self._next_id = 0
        self._block_end = 0

    def _load_meta(self, broker_id: int, wanted: str) -> str:
        path = self.dir / META
        if path.exists():
            props = parse_properties(path.read_text())
            stored_broker = int(props.get("broker.id", broker_id))
            if stored_broker != broker_id:
                raise ValueError(f"{path}: data dir belongs to broker.id {stored_broker}, not {broker_id}")
            cluster = props.get("cluster.id", "")
            if wanted and cluster and wanted != cluster:
                raise ValueError(f"{path}: data dir belongs to cluster {cluster}, not {wanted}")
            if cluster:
                return cluster
        cluster = wanted or new_cluster_id()
        atomic_write(path, f"version=0\nbroker.id={broker_id}\ncluster.id={cluster}\n".encode())
        return cluster

    def next_producer_id(self) -> int:
        if self._next_id >= self._block_end:
            path = self.dir / PRODUCER_IDS
            start = int(path.read_text()) if path.exists() else 0
            atomic_write(path, str(start + BLOCK).encode())
            self._next_id, self._block_end = start, start + BLOCK
        pid = self._next_id
        self._next_id += 1
        return pid

    def offset_store(self) -> OffsetStore:
        """The group coordinator's committed offsets (not yet loaded)."""
        return OffsetLog(self.dir)
