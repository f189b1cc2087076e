"""The embedded metadata store: cluster id, producer-id blocks and committed offsets in the data dir.

A broker's "store" is where its cluster-wide facts live: this one (standalone, the
embedded default) or `zookeeper_store.ZooKeeperStore` (cluster mode). Both are a
`store.MetadataStore`: what the control plane, the boot, the transaction coordinator
and the metrics ask of a store.

With no ZooKeeper a broker keeps its cluster-wide facts beside its logs, in
`meta.properties` (`meta.py`).
Producer ids are handed out from blocks whose high end is written (atomically)
before any id in the block is used, so ids stay unique across restarts.
Committed offsets live in `__consumer_offsets.log` (`coordinator/offset_log.py`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from mmlog.ipc.cluster_view import ClusterView, Endpoint
from mmlog.security import acl_changes, users as users_module
from mmlog.coordinator.offset_log import OffsetLog
from mmlog.coordinator.offsets import OffsetStore
from mmlog.cluster.growth import check_growth
from mmlog.cluster.limits import PartitionLimits, hosted_replicas
from mmlog.cluster.meta import ClusterError, load_meta
from mmlog.errors import (ElectionNotNeeded, InvalidReplicaAssignment, InvalidReplicationFactor,
                          NoReassignmentInProgress, TopicAlreadyExists, UnknownTopicOrPartition)
from mmlog.system.files import atomic_write
from mmlog.log.log_dirs import is_disk_full
from mmlog.log.manager import LogManager
from mmlog.security import acls, credentials

PRODUCER_IDS = "producer_id_block"
BLOCK = 1000


def _overwrite_in_place(path: Path, data: bytes) -> None:
    """Write a number over the one a small file holds, in its own block (a full disk has no block for
    the copy `atomic_write` makes; without this no idempotent producer gets an id after a restart on a
    full disk, and their records time out). Durability as atomic_write's: no id of the new block is
    handed out before the fsync returns, and a power loss before it leaves the old number, whole: the
    write is a few bytes inside one sector, which disks write whole. The numbers only grow, so the new
    one covers the old one (the file grows by a digit at most, inside the block it has)."""
    path.with_name(path.name + ".tmp").unlink(missing_ok=True)  # what the failed atomic_write left
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, data, 0)
        os.fsync(fd)
    finally:
        os.close(fd)


class EmbeddedStore:
    """Standalone mode: cluster id, producer ids and committed offsets in the first data directory;
    topics are created and deleted in the local catalogue, and this broker is the whole cluster."""

    cluster_id: str
    clustered = False
    is_controller = True  # the whole cluster: its own controller
    states = None  # no partition states but the local catalogue's
    replicas = None  # every partition's only replica leads it
    wake: Callable[[], None]

    def __init__(self, data_dir: Path, broker_id: int, cluster_id: str = "", flush_messages: int = 2**63 - 1) -> None:
        """flush_messages: log.flush.interval.messages, which the offsets journal obeys like any log."""
        self.dir = Path(data_dir)
        self.flush_messages = flush_messages
        self.dir.mkdir(parents=True, exist_ok=True)
        self.cluster_id = load_meta(self.dir, broker_id, cluster_id)
        self._next_id = 0
        self._block_end = 0
        ids = self.dir / PRODUCER_IDS
        if not ids.exists():
            # Made at the first start, when there is room: a file with its block, which the first
            # allocation on a full disk can overwrite in place (_overwrite_in_place).
            try:
                atomic_write(ids, b"0")
            except OSError as exc:
                if not is_disk_full(exc):
                    raise
        self.me: Endpoint | None = None
        self.wake = lambda: None  # set by the control plane; nothing here wakes the processors

    def next_producer_id(self) -> int:
        if self._next_id >= self._block_end:
            path = self.dir / PRODUCER_IDS
            start = int(path.read_text()) if path.exists() else 0
            try:
                atomic_write(path, str(start + BLOCK).encode())
            except OSError as exc:
                if not is_disk_full(exc) or not path.exists():
                    raise
                _overwrite_in_place(path, str(start + BLOCK).encode())
            self._next_id, self._block_end = start, start + BLOCK
        pid = self._next_id
        self._next_id += 1
        return pid

    def offset_store(self, call_soon=None) -> OffsetStore:
        """The group coordinator's committed offsets (not yet loaded)."""
        return OffsetLog(self.dir, flush_messages=self.flush_messages)

    # ------------------------------------------------------------ the cluster of one

    def check_catalogue(self, manager: LogManager) -> None:
        """Topics of a cluster (with an assignment) cannot be served standalone."""
        spread = sorted(name for name, t in manager.topics().items() if t.assignment is not None)
        if spread:
            raise ClusterError(f"data dir holds topics of a ZooKeeper cluster ({', '.join(spread[:3])}); "
                             "start the broker with zookeeper.connect")

    def start(self, control, me: Endpoint) -> None:
        """Publish the view: this broker alone, its own controller and every group's coordinator."""
        self.me = me
        self.inter_broker = control.config.inter_broker_listener.name
        ClusterView.standalone(me).write(self.dir)

    def live_brokers(self) -> int:
        return 1

    def replicas_offline(self, keys) -> None:
        """Standalone: no other replica can lead them; they answer KAFKA_STORAGE_ERROR (the supervisor logs it)."""

    def alter_scram_credentials(self, deletions, upsertions) -> dict:
        """Standalone the credentials file is the store (security/credentials.py)."""
        path = credentials.path_in(self.dir)
        users = credentials.load(path)
        results = users_module.apply(users, deletions, upsertions)
        credentials.save(path, users)
        return results

    def create_acls(self, bindings) -> list[tuple[int, str | None]]:
        """Standalone the data dir's acls.json is the ACL store (security/acls.py)."""
        path = acls.path_in(self.dir)
        current = set(acls.load(path).bindings)
        acl_changes.created(current, bindings)
        acls.save(path, current)
        return [(0, None)] * len(bindings)

    def delete_acls(self, filters) -> list[list]:
        path = acls.path_in(self.dir)
        current = set(acls.load(path).bindings)
        results = acl_changes.deleted(current, filters)
        acls.save(path, current)
        return results

    def marker_address(self, topic: str, partition: int) -> tuple[str, int]:
        """Where a transaction marker for a partition (or a group) goes: here, the only broker."""
        return self.me.address(self.inter_broker)

    def create_topic(self, manager: LogManager, name: str, partitions: int, configs: dict,
                     validate_only: bool = False, replication_factor: int = 1,
                     limits: PartitionLimits | None = None) -> None:
        """Check everything (the partition count against `limits` first), then create, all or nothing."""
        if limits is not None:
            limits.check_topic(name, partitions)
        if replication_factor != 1:
            raise InvalidReplicationFactor(f"replication factor {replication_factor} larger than the 1 available "
                                           "broker (a standalone broker keeps one replica per partition)")
        manager.validate_topic(name, partitions, configs)
        if manager.has_topic(name):
            raise TopicAlreadyExists(f"topic {name!r} already exists")
        if limits is not None:
            me = manager.broker_id or 0
            limits.check_hosting(name, hosted_replicas(manager, me), partitions, None, me)
        if not validate_only:
            manager.create_topic(name, partitions, configs)

    def delete_topic(self, manager: LogManager, name: str) -> None:
        manager.delete_topic(name)

    def alter_topic_config(self, manager: LogManager, name: str, overrides: dict[str, str]) -> None:
        """Replace a topic's overrides in the catalogue; running partitions take them at once."""
        manager.alter_topic_config(name, overrides)

    def alter_broker_config(self, manager: LogManager, level: str, values: dict[str, str]) -> None:
        """Replace one level of the dynamic broker configs (this broker's or the default) in the catalogue."""
        manager.set_broker_level(level, values)

    def set_client_quotas(self, manager: LogManager, quotas: dict[str, dict]) -> None:
        """Replace the client quotas (entity path -> {key: value}) in the catalogue."""
        manager.set_dynamic("quotas", quotas)

    def create_partitions(self, manager: LogManager, name: str, count: int, assignments: list[list[int]] | None,
                          validate_only: bool = False, limits: PartitionLimits | None = None) -> None:
        """Grow a topic (CreatePartitions): every check first, then the new partitions, all or nothing."""
        if not manager.has_topic(name):
            raise UnknownTopicOrPartition(f"The topic '{name}' does not exist.")
        info = manager.topic(name)
        me = manager.broker_id or 0
        check_growth(name, info.partitions, count, assignments, [me], 1)
        if limits is not None:
            limits.check_topic(name, count - info.partitions)
            limits.check_hosting(name, hosted_replicas(manager, me), count - info.partitions, None, me)
        if not validate_only:
            manager.add_partitions(name, count)

    def elect_leaders(self, manager: LogManager, election_type: int, keys) -> dict:
        """Every partition here has one replica, which leads: no election is ever needed."""
        topics = {t: i.partitions for t, i in manager.topics().items()}
        keys = [(t, p) for t, n in topics.items() for p in range(n)] if keys is None else keys
        return {(t, p): ElectionNotNeeded("Leader election not needed for topic partition.")
                if 0 <= p < topics.get(t, 0) else UnknownTopicOrPartition(f"The partition {t}-{p} does not exist.")
                for t, p in keys}

    def alter_reassignments(self, manager: LogManager, requests) -> dict:
        """A standalone broker holds each partition's only replica: no replica can move elsewhere."""
        topics = {t: i.partitions for t, i in manager.topics().items()}
        me = manager.broker_id or 0
        out = {}
        for t, p, target in requests:
            if not 0 <= p < topics.get(t, 0):
                out[t, p] = UnknownTopicOrPartition(f"The partition {t}-{p} does not exist.")
            elif target is None:
                out[t, p] = NoReassignmentInProgress(f"No reassignment is in progress for {t}-{p}.")
            elif list(target) != [me]:
                out[t, p] = InvalidReplicaAssignment(f"Replica assignment has brokers that are not alive. Replica "
                                                     f"list: {list(target)}, live broker list: [{me}]")
            else:
                out[t, p] = None  # already so
        return out

    def list_reassignments(self, manager: LogManager, keys=None) -> dict:
        return {}

    def owns_group(self, group_id: str) -> bool:
        return True

    def sync_topics(self) -> None:
        """The local catalogue is the whole truth here: nothing to catch up with."""

    def timers(self) -> list:
        """No replicas, no elections: no periodic cluster work."""
        return []

    def bind_thread(self) -> None:
        """Nothing remote to wait for: no deadline to give the calling thread."""

    def controlled_shutdown(self) -> None:
        """Nothing to hand over: every partition is only here."""

    def close(self) -> None:
        """Nothing to release: every file is written as it changes."""
