"""A data dir's `meta.properties` (Kafka's own file name and keys: version, broker.id, cluster.id) and the
cluster id in it, which both stores agree on at start-up; and `ClusterError`, what stops a broker from
joining its cluster."""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

from mmlog.config.settings import ConfigError, parse_properties
from mmlog.system.files import atomic_write

META = "meta.properties"


class ClusterError(ConfigError):
    """The broker cannot join its cluster: a data dir of another broker or cluster, ZooKeeper away, ..."""


def new_cluster_id() -> str:
    """22 characters of URL-safe base64 of a random UUID, as Kafka makes them."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def load_meta(data_dir: Path, broker_id: int, wanted: str = "") -> str:
    """The data dir's cluster id from meta.properties, written first if absent (as `wanted` or new).

    Refuses a data dir that belongs to another broker id, or to another cluster than `wanted`.
    """
    path = Path(data_dir) / META
    if path.exists():
        props = parse_properties(path.read_text())
        stored_broker = int(props.get("broker.id", broker_id))
        if stored_broker != broker_id:
            raise ClusterError(f"{path}: data dir belongs to broker.id {stored_broker}, not {broker_id}")
        cluster = props.get("cluster.id", "")
        if wanted and cluster and wanted != cluster:
            raise ClusterError(f"{path}: data dir belongs to cluster {cluster}, not {wanted}")
        if cluster:
            return cluster
    cluster = wanted or new_cluster_id()
    atomic_write(path, f"version=0\nbroker.id={broker_id}\ncluster.id={cluster}\n".encode())
    return cluster


def stored_cluster_id(data_dir: Path) -> str:
    """The cluster id in a data dir's meta.properties, "" if it has none."""
    path = Path(data_dir) / META
    return parse_properties(path.read_text()).get("cluster.id", "") if path.exists() else ""
