"""What a metrics scrape shows of a log manager's partitions, without opening the closed ones.

On disk: nothing written; a closed partition's `partition.state` is copied (not
mapped for writing) and its directory listed only when its generation moved. Crash
points: none.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from mmlog.errors import KafkaError, UnknownTopicOrPartition
from mmlog.log.files import log_size, segment_bases
from mmlog.log.state import PartitionState, Replication, Snapshot, TornState
from mmlog.log.manager_state import ManagerState


@dataclass(frozen=True)
class PartitionGauges:
    """What a metrics scrape shows of one partition (`LogManager.gauges`)."""

    topic: str
    partition: int
    snapshot: Snapshot
    replication: Replication
    size_bytes: int
    segments: int


def _closed_gauges(topic: str, partition: int, directory: Path, segments_seen: dict, topic_id: str) -> PartitionGauges:
    """A closed partition's gauges from a copy of its state page and, when its segment set changed since
    `segments_seen` noted it (another generation), its directory."""
    state = PartitionState.copied(directory)
    snap, rep = state.snapshot(), state.replication()
    if snap.deleted:
        raise UnknownTopicOrPartition(f"{topic}-{partition} was deleted")
    key = (topic, partition, topic_id)
    generation, bases, older = segments_seen.get(key, (None, None, 0))
    if generation != snap.generation:  # a roll, retention or truncation since: list the segments again
        bases = segment_bases(directory)
        older = sum(log_size(directory, b) for b in bases if b != snap.active_base)
        segments_seen[key] = (snap.generation, bases, older)
    # the active segment holds what the state says (its file may be longer), as Partition.size_bytes counts it
    return PartitionGauges(topic, partition, snap, rep, older + snap.active_size, len(bases))


class Gauges(ManagerState):
    """The metrics scrape of a LogManager (a part of LogManager)."""

    def gauges(self) -> Iterator["PartitionGauges"]:
        """Every hosted partition's offsets, replication and size (the owner's metrics scrape), without
        opening a closed partition's log: its state page is copied, and its segments are listed only when
        their generation moved; and only for the partitions whose state changed since the last scrape (the
        log dirs' boards, touched.py): an idle one's gauges are the ones it had. Reopening them in turn
        evicted the partitions housekeeping had open, for a scrape every few seconds (docs/benchmarks.md,
        "metrics-scrape")."""
        for key in [k for k in self._segments_seen if k[0] not in self._topics]:
            del self._segments_seen[key]  # deleted topics
        cache = self.__dict__.setdefault("_gauges_cache", {})
        changed = self._changed("gauges")
        for key in [k for k in cache if k[0] not in self._topics]:
            del cache[key]
        for topic, p in self.hosted():
            key = (topic, p)
            if key not in changed and (known := cache.get(key)) is not None:
                if not (self.dir_health.any_offline[0] and self.dir_health.offline(self._slot_of.get(key, -1))):
                    yield known
                continue
            cache.pop(key, None)
            self.looked_at += 1
            try:
                part = self._partitions.get(key)
                if part is not None:
                    g = PartitionGauges(topic, p, part.snapshot(), part.replication(), part.size_bytes(),
                                        len(part.segment_bases()))
                else:
                    slot = self._slot_of.get(key)
                    if self.dir_health.offline(slot if slot is not None else -1):
                        continue
                    # where it lives is known after load(): no stat first (a missing directory fails the read)
                    directory = self.log_dirs[slot] / f"{topic}-{p}" if slot is not None else self._find(topic, p)
                    if directory is None:
                        continue
                    g = _closed_gauges(topic, p, directory, self._segments_seen, self._topics[topic].topic_id)
            except (OSError, ValueError, KafkaError, TornState):
                continue  # deleted, torn or failing meanwhile: not shown this time
            cache[key] = g
            yield g
