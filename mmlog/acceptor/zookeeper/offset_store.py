"""Committed offsets in ZooKeeper: the paper's offset registry, one node per group, topic and partition.

A broker holds in its table only the groups it coordinates. It loads a group from
ZooKeeper when it becomes the group's coordinator (`load_group`) and forgets it
when it stops being it (`unload_group`), so a group that moves away and comes back
is read afresh, with whatever another coordinator committed meanwhile.

A write is one ZooKeeper multi-op transaction (all partitions of an OffsetCommit
commit or none), sent asynchronously; the table is changed and the commit
answered on the control thread once ZooKeeper has acknowledged it, which means
a quorum has it on disk. Parent nodes a commit needs are created first (once per
group and topic); a transaction that fails because a node appeared or vanished
behind our back (another broker coordinated the group for a moment) is retried
once node by node.
"""

from __future__ import annotations

import functools
import logging
from typing import Callable, Sequence

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss, NodeExistsError, NoNodeError

from mmlog.acceptor.coordinator.offsets import (
    Done,
    GroupDelete,
    GroupMeta,
    OffsetCommit,
    OffsetDelete,
    OffsetStore,
    Record,
    TopicDelete,
)
from mmlog.acceptor.zookeeper import paths

log = logging.getLogger(__name__)

CallSoon = Callable[[Callable[[], None]], None]


class ZooKeeperOffsetStore(OffsetStore):
    """The coordinator's OffsetStore backed by /consumers in ZooKeeper."""

    def __init__(self, zk: KazooClient, call_soon: CallSoon) -> None:
        super().__init__()
        self.zk = zk
        self.call_soon = call_soon
        self.loaded: set[str] = set()
        self._parents: set[str] = set()  # /consumers/<g>/offsets/<t> known to exist

    # ------------------------------------------------------------ loading

    def load(self) -> list[str]:
        """Nothing at start-up: groups are loaded as this broker becomes their coordinator."""
        return []

    def is_loaded(self, group_id: str) -> bool:
        return group_id in self.loaded

    def loaded_groups(self) -> list[str]:
        return list(self.loaded)

    def group_ids(self) -> list[str]:
        """Every group with a node in the registry."""
        return [paths.group_id_of(c) for c in self.zk.get_children(paths.CONSUMERS)]

    def load_group(self, group_id: str) -> None:
        """Read a group's generation and committed offsets into the table (replacing what it held)."""
        self.unload_group(group_id)
        records: list[Record] = []
        try:
            data, _ = self.zk.get(paths.group_generation(group_id))
            doc = paths.load(data)
            records.append(GroupMeta(group_id, doc["protocol_type"], doc["generation"]))
        except NoNodeError:
            pass
        try:
            topics = self.zk.get_children(paths.group_offsets(group_id))
        except NoNodeError:
            topics = []
        for topic in topics:
            parent = paths.group_topic(group_id, topic)
            self._parents.add(parent)
            for child in self.zk.get_children(parent):
                try:
                    doc = paths.load(self.zk.get(f"{parent}/{child}")[0])
                except NoNodeError:
                    continue
                records.append(OffsetCommit(group_id, topic, int(child), doc["offset"], doc["leader_epoch"],
                                            doc["metadata"], doc["commit_ms"]))
        for r in records:
            self.table.apply(r)
        self.loaded.add(group_id)

    def unload_group(self, group_id: str) -> None:
        """Forget a group this broker no longer coordinates (its nodes stay in ZooKeeper)."""
        self.table.apply(GroupDelete(group_id))
        self.loaded.discard(group_id)
        prefix = paths.group(group_id) + "/"
        self._parents = {p for p in self._parents if not p.startswith(prefix)}

    # ------------------------------------------------------------ writing

    def write(self, records: Sequence[Record], done: Done) -> None:
        if not records:
            done(None)
            return
        if not self.zk.connected:  # kazoo would hold the request until ZooKeeper is back: fail it now
            done(ConnectionLoss("not connected to ZooKeeper"))
            return
        try:
            plan = self._plan(records)
        except Exception as exc:  # noqa: BLE001 - the connection's state decides: report, change nothing
            done(exc)
            return
        if not plan:
            self._applied(records, done)
            return
        tx = self.zk.transaction()
        for op in plan:
            op(tx)
        result = tx.commit_async()

        def finished(res) -> None:  # on kazoo's thread: hop to the control thread
            try:
                failures = [r for r in res.get() if isinstance(r, Exception)]
            except Exception as exc:  # noqa: BLE001 - connection loss, session expiry
                self.call_soon(functools.partial(done, exc))  # `exc` is unbound after the except block
                return
            if failures:
                self.call_soon(lambda: self._retry_one_by_one(records, done))
            else:
                self.call_soon(lambda: self._applied(records, done))

        result.rawlink(finished)

    def _applied(self, records: Sequence[Record], done: Done) -> None:
        for r in records:
            self.table.apply(r)
        done(None)

    def _plan(self, records: Sequence[Record]) -> list[Callable]:
        """The transaction's operations; deletions of whole subtrees are done here, synchronously."""
        plan: list[Callable] = []
        for r in records:
            if isinstance(r, OffsetCommit):
                self._ensure_parent(paths.group_topic(r.group, r.topic))
                path, data = paths.group_offset(r.group, r.topic, r.partition), _offset_doc(r)
                if self.table.get(r.group, r.topic, r.partition) is None:
                    plan.append(lambda tx, path=path, data=data: tx.create(path, data))
                else:
                    plan.append(lambda tx, path=path, data=data: tx.set_data(path, data))
            elif isinstance(r, GroupMeta):
                path, data = paths.group_generation(r.group), _generation_doc(r)
                self.zk.ensure_path(paths.group(r.group))
                if r.group in self.table.groups:
                    plan.append(lambda tx, path=path, data=data: tx.set_data(path, data))
                else:
                    plan.append(lambda tx, path=path, data=data: tx.create(path, data))
            elif isinstance(r, OffsetDelete):
                if self.table.get(r.group, r.topic, r.partition) is not None:
                    path = paths.group_offset(r.group, r.topic, r.partition)
                    plan.append(lambda tx, path=path: tx.delete(path))
            elif isinstance(r, TopicDelete):
                for child in self.zk.get_children(paths.CONSUMERS):
                    self.zk.delete(paths.group_topic(paths.group_id_of(child), r.topic), recursive=True)
                self._parents = {p for p in self._parents if not p.endswith("/" + r.topic)}
            elif isinstance(r, GroupDelete):
                self.zk.delete(paths.group(r.group), recursive=True)
                self.unload_group(r.group)
        return plan

    def _ensure_parent(self, path: str) -> None:
        if path not in self._parents:
            self.zk.ensure_path(path)
            self._parents.add(path)

    def _retry_one_by_one(self, records: Sequence[Record], done: Done) -> None:
        """The transaction hit a node that appeared or vanished: upsert and delete each node on its own."""
        try:
            for r in records:
                if isinstance(r, OffsetCommit):
                    _upsert(self.zk, paths.group_offset(r.group, r.topic, r.partition), _offset_doc(r))
                elif isinstance(r, GroupMeta):
                    _upsert(self.zk, paths.group_generation(r.group), _generation_doc(r))
                elif isinstance(r, OffsetDelete):
                    try:
                        self.zk.delete(paths.group_offset(r.group, r.topic, r.partition))
                    except NoNodeError:
                        pass
        except Exception as exc:  # noqa: BLE001
            done(exc)
            return
        self._applied(records, done)

    def close(self) -> None:
        """The ZooKeeper session belongs to the cluster store, which closes it."""


def _offset_doc(r: OffsetCommit) -> bytes:
    return paths.dump({"offset": r.offset, "leader_epoch": r.leader_epoch, "metadata": r.metadata,
                       "commit_ms": r.commit_ms})


def _generation_doc(r: GroupMeta) -> bytes:
    return paths.dump({"protocol_type": r.protocol_type, "generation": r.generation})


def _upsert(zk: KazooClient, path: str, data: bytes) -> None:
    try:
        zk.set(path, data)
    except NoNodeError:
        try:
            zk.create(path, data, makepath=True)
        except NodeExistsError:
            zk.set(path, data)
