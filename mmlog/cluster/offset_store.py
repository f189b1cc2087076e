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

from mmlog.coordinator.offsets import (
    Done,
    GroupDelete,
    GroupMeta,
    OffsetCommit,
    OffsetDelete,
    OffsetStore,
    Record,
    TopicDelete,
    TxnOffsetCommit,
    TxnOffsetEnd,
)
from mmlog.cluster import paths

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
        records += self._pending_records(group_id)
        for r in records:
            self.table.apply(r)
        self.loaded.add(group_id)

    def _pending_records(self, group_id: str) -> list[Record]:
        """The offsets of the group's undecided transactions."""
        try:
            producers = self.zk.get_children(paths.group_pending(group_id))
        except NoNodeError:
            return []
        out: list[Record] = []
        for pid in producers:
            try:
                doc = paths.load(self.zk.get(paths.group_pending_producer(group_id, int(pid)))[0])
            except NoNodeError:
                continue
            out += [TxnOffsetCommit(group_id, int(pid), *entry) for entry in doc["offsets"]]
        return out

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
        pending: dict[tuple[str, int], dict] = {}  # (group, producer id) -> its pending offsets after `records`
        for r in records:
            if isinstance(r, TxnOffsetCommit):
                key = (r.group, r.producer_id)
                entries = pending.setdefault(key, dict(self.table.pending_offsets(*key)))
                entries[(r.topic, r.partition)] = (r.offset, r.leader_epoch, r.metadata, r.commit_ms)
            elif isinstance(r, TxnOffsetEnd):
                plan += self._plan_end(r)
            elif isinstance(r, OffsetCommit):
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
        for (group, pid), entries in pending.items():
            self._ensure_parent(paths.group_pending(group))
            path, data = paths.group_pending_producer(group, pid), _pending_doc(entries)
            if self.table.pending_offsets(group, pid):
                plan.append(lambda tx, path=path, data=data: tx.set_data(path, data))
            else:
                plan.append(lambda tx, path=path, data=data: tx.create(path, data))
        return plan

    def _plan_end(self, r: TxnOffsetEnd) -> list[Callable]:
        """A transaction's marker: its pending node goes, and on commit its offsets are written."""
        entries = self.table.pending_offsets(r.group, r.producer_id)
        if not entries:
            return []
        plan: list[Callable] = []
        if r.commit:
            for (topic, partition), c in entries.items():
                self._ensure_parent(paths.group_topic(r.group, topic))
                path = paths.group_offset(r.group, topic, partition)
                data = _offset_doc(OffsetCommit(r.group, topic, partition, c.offset, c.leader_epoch, c.metadata,
                                                c.commit_ms))
                exists = self.table.get(r.group, topic, partition) is not None
                plan.append(lambda tx, path=path, data=data, exists=exists:
                            tx.set_data(path, data) if exists else tx.create(path, data))
        path = paths.group_pending_producer(r.group, r.producer_id)
        plan.append(lambda tx, path=path: tx.delete(path))
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
                elif isinstance(r, (TxnOffsetCommit, TxnOffsetEnd)):
                    self._transactional_one_by_one(r)
        except Exception as exc:  # noqa: BLE001
            done(exc)
            return
        self._applied(records, done)

    def _transactional_one_by_one(self, r) -> None:
        """A pending offset upserted into its producer's node, or a marker applied node by node."""
        if isinstance(r, TxnOffsetCommit):
            entries = dict(self.table.pending_offsets(r.group, r.producer_id))
            entries[(r.topic, r.partition)] = (r.offset, r.leader_epoch, r.metadata, r.commit_ms)
            _upsert(self.zk, paths.group_pending_producer(r.group, r.producer_id), _pending_doc(entries))
            return
        if r.commit:
            for (topic, partition), c in self.table.pending_offsets(r.group, r.producer_id).items():
                _upsert(self.zk, paths.group_offset(r.group, topic, partition), _offset_doc(OffsetCommit(
                    r.group, topic, partition, c.offset, c.leader_epoch, c.metadata, c.commit_ms)))
        try:
            self.zk.delete(paths.group_pending_producer(r.group, r.producer_id))
        except NoNodeError:
            pass

    def close(self) -> None:
        """The ZooKeeper session belongs to the cluster store, which closes it."""


def _pending_doc(entries: dict) -> bytes:
    return paths.dump({"offsets": [[t, p, *(tuple(c))] for (t, p), c in sorted(entries.items())]})


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
