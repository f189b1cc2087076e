"""Every partition's state node, watched: who leads in which epoch, and the ISR.

Each broker watches the state node of every partition in the cluster (Metadata
answers for all of them, and a follower must learn its new leader at once). A
watch fires on kazoo's thread; it only records the new state and marks the
partition changed. The first mark schedules one `on_change(keys)` on the control
thread, which then sees every partition that changed meanwhile: an election that
moved a hundred leaders in one transaction is applied in one pass.

A watch ends when its topic is no longer tracked (deleted), by returning False.
"""

from __future__ import annotations

import threading
from typing import Callable

from kazoo.recipe.watchers import DataWatch

from mmlog.cluster import paths
from mmlog.replication.leader_and_isr import LeaderAndIsr

Key = tuple[str, int]


class PartitionStates:
    """The latest state of every tracked partition, and who to tell when one changes."""

    def __init__(self, zk, on_change: Callable[[Callable[[], None]], None], apply: Callable[[set], None]) -> None:
        """`on_change(fn)` runs fn on the control thread; `apply(keys)` is what fn does there."""
        self.zk = zk
        self._schedule = on_change
        self._apply = apply
        self._states: dict[Key, LeaderAndIsr] = {}
        self._tracked: dict[str, tuple[str, int]] = {}  # topic -> (topic id, partitions)
        self._watched: dict[str, tuple[str, int]] = {}  # topic -> (topic id, partitions whose watch is set)
        self._serial: dict[Key, int] = {}  # the live watch of each partition (a replaced one ends itself)
        self._dirty: set[Key] = set()
        self._lock = threading.Lock()

    def get(self, topic: str, partition: int) -> LeaderAndIsr | None:
        return self._states.get((topic, partition))

    def of_topic(self, topic: str) -> list[LeaderAndIsr | None]:
        tracked = self._tracked.get(topic)
        return [self._states.get((topic, p)) for p in range(tracked[1] if tracked else 0)]

    def topics(self) -> list[str]:
        return list(self._tracked)

    def track(self, topic: str, topic_id: str, partitions: int) -> None:
        """Watch the state nodes of a topic (again, if it was re-created under another id; those of its
        new partitions, if it grew; those a refused ZooKeeper call left unwatched, see below)."""
        self._tracked[topic] = (topic_id, partitions)
        before = self._watched.get(topic)
        if before == (topic_id, partitions):
            return
        watched = before[1] if before is not None and before[0] == topic_id else 0  # grown: the new ones only
        for p in range(watched, partitions):
            # A watch's first read runs on the calling thread: on the control thread it is refused while
            # the connection is down (session.py), and the partitions after it would get no watch, their
            # states never read here. So a partition counts as watched only once its watch is set, and the
            # next call (sync_topics, a new session, the connection back: `watch_missing`) sets the rest;
            # a watch whose first read failed but that kazoo re-runs later is ended by its successor's serial.
            key = (topic, p)
            serial = self._serial[key] = self._serial.get(key, 0) + 1
            DataWatch(self.zk, paths.partition_state(topic, p), self._watcher(topic, topic_id, p, serial))
            self._watched[topic] = (topic_id, p + 1)

    def watch_missing(self) -> None:
        """Set the state watches that a refused ZooKeeper call left unset (the connection is back)."""
        for topic, (topic_id, partitions) in list(self._tracked.items()):
            self.track(topic, topic_id, partitions)

    def untrack(self, topic: str) -> None:
        self._tracked.pop(topic, None)
        self._watched.pop(topic, None)
        with self._lock:
            for key in [k for k in self._states if k[0] == topic]:
                del self._states[key]
            for key in [k for k in self._serial if k[0] == topic]:
                del self._serial[key]

    def _watcher(self, topic: str, topic_id: str, partition: int, serial: int):
        def changed(data, stat, *_) -> bool:
            if self._tracked.get(topic, ("",))[0] != topic_id:
                return False  # deleted (or re-created: a new watch serves the new topic)
            if self._serial.get((topic, partition)) != serial:
                return False  # replaced by a watch set again (its first read had been refused)
            state = None if data is None else LeaderAndIsr.parse(data, stat.version, stat.mzxid)
            with self._lock:
                old = self._states.get((topic, partition))
                if state is None:
                    self._states.pop((topic, partition), None)
                elif old is None or old.version <= state.version:  # a reread may have seen a newer one
                    self._states[topic, partition] = state
                first = not self._dirty
                self._dirty.add((topic, partition))
            if first:
                self._schedule(self.drain)
            return True

        return changed

    def drain(self) -> None:
        """Apply what changed since the last drain (on the control thread)."""
        with self._lock:
            keys, self._dirty = self._dirty, set()
        if keys:
            self._apply(keys)

    def reread(self, topic: str, partition: int) -> LeaderAndIsr | None:
        """Read a state node now (after a failed compare-and-set), keeping what it says."""
        try:
            data, stat = self.zk.get(paths.partition_state(topic, partition))
        except Exception:  # noqa: BLE001 - NoNodeError: deleted meanwhile
            return None
        state = LeaderAndIsr.parse(data, stat.version, stat.mzxid)
        with self._lock:
            old = self._states.get((topic, partition))
            if old is None or old.version <= state.version:
                self._states[topic, partition] = state
        return state
