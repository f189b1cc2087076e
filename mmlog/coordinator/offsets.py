"""Committed offsets: the records that change them, the table that holds them, the store interface.

Everything durable the group coordinator keeps is a stream of records, the same
in every backend (Kafka's `__consumer_offsets` is such a stream, keyed and
compacted):

    OffsetCommit(group, topic, partition, offset, leader_epoch, metadata, commit_ms)
    OffsetDelete(group, topic, partition)       an expired offset
    TopicDelete(topic)                          every group's offsets of a deleted topic
    GroupMeta(group, protocol_type, generation) a group's generation, so it never repeats
    GroupDelete(group)                          an empty group without offsets, removed
    TxnOffsetCommit(group, producer_id, topic, partition, offset, ...)
                                                an offset committed inside a transaction: pending
    TxnOffsetEnd(group, producer_id, commit)    the transaction's marker: its pending offsets
                                                become committed, or are dropped

Pending offsets are kept per group and producer until their marker comes (the
transaction coordinator sends it once the transaction is decided); OffsetFetch
sees only committed ones.

`OffsetTable` is the state those records fold into: replaying a stream from the
start rebuilds it, and `records()` gives back the shortest stream that rebuilds
it (what a compaction writes). Its `live_bytes` estimate tells a backend how
much of its file is still live.

`OffsetStore` is the small interface between the coordinator and a backend: the
coordinator reads the table directly (on the control thread, no copy) and
changes it only through `write(records, done)`. A backend makes the records
durable to its guarantee, then applies them to the table, then calls
`done(None)`; on failure it calls `done(exc)` and leaves the table unchanged, so
a commit is answered only once it is as durable as the backend promises.
`done` always runs on the control thread; the embedded log (`offset_log.py`)
calls it before `write` returns, a ZooKeeper backend may call it later.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Callable, Iterator, NamedTuple, Sequence


class OffsetCommit(NamedTuple):
    group: str
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    commit_ms: int


class OffsetDelete(NamedTuple):
    group: str
    topic: str
    partition: int


class TopicDelete(NamedTuple):
    topic: str


class GroupMeta(NamedTuple):
    group: str
    protocol_type: str
    generation: int


class GroupDelete(NamedTuple):
    group: str


class TxnOffsetCommit(NamedTuple):
    group: str
    producer_id: int
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    commit_ms: int


class TxnOffsetEnd(NamedTuple):
    group: str
    producer_id: int
    commit: bool


Record = OffsetCommit | OffsetDelete | TopicDelete | GroupMeta | GroupDelete | TxnOffsetCommit | TxnOffsetEnd


class Committed(NamedTuple):
    """One committed position of a group in a partition."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_ms: int


# Rough encoded sizes (the embedded log's layout) so that live_bytes tracks the file.
_OFFSET_FIXED = 1 + 2 + 2 + 4 + 8 + 4 + 8 + 4
_GROUP_FIXED = 1 + 2 + 2 + 4


def _offset_size(group: str, topic: str, c: Committed) -> int:
    return _OFFSET_FIXED + len(group) + len(topic) + len(c.metadata)


class OffsetTable:
    """Committed offsets by group, and each group's last generation: the folded record stream."""

    def __init__(self) -> None:
        self.offsets: dict[str, dict[tuple[str, int], Committed]] = {}
        self.groups: dict[str, GroupMeta] = {}
        # group -> producer id -> {(topic, partition): offset}: committed by a transaction not yet decided
        self.pending: dict[str, dict[int, dict[tuple[str, int], Committed]]] = {}
        self.live_bytes = 0

    def apply(self, record: Record) -> None:
        """Fold one record in (replay and live writes alike)."""
        if isinstance(record, OffsetCommit):
            group, topic, partition = record.group, record.topic, record.partition
            entry = Committed(record.offset, record.leader_epoch, record.metadata, record.commit_ms)
            table = self.offsets.setdefault(group, {})
            old = table.get((topic, partition))
            if old is not None:
                self.live_bytes -= _offset_size(group, topic, old)
            table[(topic, partition)] = entry
            self.live_bytes += _offset_size(group, topic, entry)
        elif isinstance(record, OffsetDelete):
            self._drop(record.group, record.topic, record.partition)
        elif isinstance(record, TopicDelete):
            for group, table in list(self.offsets.items()):
                for topic, partition in [k for k in table if k[0] == record.topic]:
                    self._drop(group, topic, partition)
            for producers in self.pending.values():
                for entries in producers.values():
                    for key in [k for k in entries if k[0] == record.topic]:
                        del entries[key]
        elif isinstance(record, GroupMeta):
            old = self.groups.get(record.group)
            if old is not None:
                self.live_bytes -= _GROUP_FIXED + len(old.group) + len(old.protocol_type)
            self.groups[record.group] = record
            self.live_bytes += _GROUP_FIXED + len(record.group) + len(record.protocol_type)
        elif isinstance(record, TxnOffsetCommit):
            entry = Committed(record.offset, record.leader_epoch, record.metadata, record.commit_ms)
            producers = self.pending.setdefault(record.group, {})
            producers.setdefault(record.producer_id, {})[(record.topic, record.partition)] = entry
        elif isinstance(record, TxnOffsetEnd):
            entries = self.pending.get(record.group, {}).pop(record.producer_id, {})
            if not self.pending.get(record.group, True):
                del self.pending[record.group]
            if record.commit:
                for (topic, partition), c in entries.items():
                    self.apply(OffsetCommit(record.group, topic, partition, c.offset, c.leader_epoch, c.metadata,
                                            c.commit_ms))
        elif isinstance(record, GroupDelete):
            for topic, partition in list(self.offsets.get(record.group, ())):
                self._drop(record.group, topic, partition)
            self.pending.pop(record.group, None)
            old = self.groups.pop(record.group, None)
            if old is not None:
                self.live_bytes -= _GROUP_FIXED + len(old.group) + len(old.protocol_type)
        else:
            raise TypeError(f"not an offset record: {record!r}")

    def _drop(self, group: str, topic: str, partition: int) -> None:
        table = self.offsets.get(group)
        if table is None:
            return
        old = table.pop((topic, partition), None)
        if old is not None:
            self.live_bytes -= _offset_size(group, topic, old)
        if not table:
            del self.offsets[group]

    def get(self, group: str, topic: str, partition: int) -> Committed | None:
        return self.offsets.get(group, {}).get((topic, partition))

    def group_offsets(self, group: str) -> dict[tuple[str, int], Committed]:
        return self.offsets.get(group, {})

    def group_ids(self) -> set[str]:
        return set(self.offsets) | set(self.groups) | set(self.pending)

    def pending_offsets(self, group: str, producer_id: int) -> dict[tuple[str, int], Committed]:
        return self.pending.get(group, {}).get(producer_id, {})

    def pending_partitions(self, group: str) -> set[tuple[str, int]]:
        """(topic, partition) holding offsets of an open transaction in `group` (any producer)."""
        return {key for entries in self.pending.get(group, {}).values() for key in entries}

    def records(self) -> Iterator[Record]:
        """The shortest record stream that rebuilds this table (for compaction)."""
        yield from self.groups.values()
        for group, table in self.offsets.items():
            for (topic, partition), c in table.items():
                yield OffsetCommit(group, topic, partition, c.offset, c.leader_epoch, c.metadata, c.commit_ms)
        for group, producers in self.pending.items():
            for pid, entries in producers.items():
                for (topic, partition), c in entries.items():
                    yield TxnOffsetCommit(group, pid, topic, partition, c.offset, c.leader_epoch, c.metadata,
                                          c.commit_ms)


Done = Callable[[BaseException | None], None]


class OffsetStore(ABC):
    """Where a coordinator's offsets and group generations live: a table plus a durable backend."""

    def __init__(self) -> None:
        self.table = OffsetTable()

    @abstractmethod
    def load(self) -> list[str]:
        """Fill `table` from durable storage (at start-up); returns notes about repairs made."""

    @abstractmethod
    def write(self, records: Sequence[Record], done: Done) -> None:
        """Make records durable, apply them to `table`, then done(None); or done(exc) and change nothing."""

    def is_loaded(self, group_id: str) -> bool:
        """Whether the table holds what the backend has for this group (a store that loads all at once: always)."""
        return True

    def load_group(self, group_id: str) -> None:
        """Read one group into the table (stores that load groups one at a time)."""

    def unload_group(self, group_id: str) -> None:
        """Forget a group that another broker coordinates now (it stays in the backend)."""

    def loaded_groups(self) -> list[str]:
        """The groups read in one at a time (`load_group`) and not forgotten since (none for a store
        that loads all at once)."""
        return []

    def group_ids(self) -> list[str]:
        """Every group the backend holds."""
        return sorted(self.table.group_ids())

    def flush_due(self, interval_ms: int) -> None:
        """Force what was written to stable storage if the oldest unforced write is older than interval_ms."""

    def close(self) -> None:
        """Release the backend (after a final flush)."""
