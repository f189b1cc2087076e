"""The partitions a log manager holds open in its process, within a budget of descriptors and mappings.

In cluster mode a topic's partitions are spread over the brokers: its catalogue
entry carries the `assignment` and this broker opens only the partitions assigned
to it (`broker_id`); asking for another one is NOT_LEADER_OR_FOLLOWER. A standalone
broker's topics have no assignment: every partition is here, led alone. A replica
in cluster mode is created without a role (appends refused) until the control plane
applies its partition state. The owner opens a partition with recovery the first
time, attached (no recovery, no role reset) after that; other processes always
attach.

Descriptors and mappings: an open partition holds one descriptor (its active
segment's log: the state page and both indexes are mapped without one, mapping.py,
and the lock is a record lock in the log dir's one locks file, lock.py) and three
memory mappings, and one descriptor and two mappings more while it has an older
segment open (one at most: segment_view.py, "Open files"). Every process keeps at
most `max_open` partitions open, least recently used first out
(`open_partition_budget`: from the descriptor limit, which the broker raises to its
hard limit at start, and vm.max_map_count, past a reserve for connections, older
segments and the rest of the process). A look-up marks the partition used (a counter,
no lock); only an eviction sorts by it. After `load()` the owner needs a partition
only for housekeeping and role changes; a processor needs the ones its clients use. A
request parked on a partition (acks=all, DeleteRecords) names it rather than holding
the open log, so closing it under the request is safe, and a FileSlice being sent
keeps its own file open.

On disk: nothing of its own (the partition directories are the partitions'). Crash
points: none; closing one the processors still write to never marks it clean, so
whatever a crash leaves, the next start recovers: only `close(clean=True)` at the
broker's stop marks partitions clean (manager.py). The owner notes, for each
partition it closes, its HW (for the HW checkpoint: lower is safe, a restart that
needs it never exposes more than was committed) and when a roll or flush can next
be due (housekeeping.py).
"""

from __future__ import annotations

import heapq
import os
import resource
from pathlib import Path
from typing import Iterator

from mmlog.errors import KafkaStorageError, NotLeaderOrFollower, UnknownTopicOrPartition
from mmlog.log.topic_info import TopicInfo
from mmlog.log.files import segment_bases
from mmlog.log.log_dirs import is_dir_failure
from mmlog.log.partition import Partition
from mmlog.log.leader_epochs import FILE_NAME as EPOCHS_FILE
from mmlog.log.log_recovery import clean_files_ok
from mmlog.log.housekeeping import NEVER
from mmlog.log.state import TXN_LAYOUT_V1, PartitionState, Role, TornState
from mmlog.log.manager_state import ManagerState

# What an open one-segment partition holds in any process: its active log's descriptor, and the mappings of
# partition.state and both indexes (tools/measure_descriptors.py measures it; docs/operations.md).
DESCRIPTORS_PER_PARTITION = 1
MAPPINGS_PER_PARTITION = 3
MAX_MAP_COUNT = Path("/proc/sys/vm/max_map_count")
# Kept for the rest: connections, older segments being read, sockets, numba's and the heap's mappings.
RESERVED_DESCRIPTORS = 256
RESERVED_MAPPINGS = 8192


def open_partition_budget(configured: int = 0) -> int:
    """Partitions a process keeps open at once: `configured` (log.max.open.partitions), or when 0 what the
    descriptor limit holds past a quarter of it (at least RESERVED_DESCRIPTORS) kept for connections and older
    segments, one descriptor a partition, and what vm.max_map_count holds past RESERVED_MAPPINGS at three
    mappings a partition. Under a 20,000-descriptor limit and the default 65,530 mappings: 15,000; under
    1,024 descriptors, 768."""
    if configured:
        return configured
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 20
    try:
        maps = int(MAX_MAP_COUNT.read_text())
    except (OSError, ValueError):
        maps = 65530  # the kernel's default
    by_descriptors = (soft - max(RESERVED_DESCRIPTORS, soft // 4)) // DESCRIPTORS_PER_PARTITION
    by_mappings = (maps - RESERVED_MAPPINGS) // MAPPINGS_PER_PARTITION
    return max(8, min(by_descriptors, by_mappings))


class OpenPartitions(ManagerState):
    """Opening, evicting and listing the partitions of a LogManager (a part of LogManager)."""

    def partition(self, topic: str, partition: int) -> Partition:
        """The open partition log (opened on first use; in the owner, maybe closing the least recently used)."""
        key = (topic, partition)
        part = self._partitions.get(key)
        if part is not None:
            if self.dir_health.any_offline[0]:
                self._check_online(key)
            self._uses += 1
            part.used = self._uses  # least recently used first out (_evict): no lock, no reordering
            return part
        info = self.topic(topic)
        if partition >= info.partitions and not self.owner:  # grown since we read the catalogue?
            self.reload()
            info = self.topic(topic)
        if not 0 <= partition < info.partitions:
            raise UnknownTopicOrPartition(f"{topic} has no partition {partition}")
        if self.broker_id is not None and self.broker_id not in (replicas := info.replicas(partition, self.broker_id)):
            raise NotLeaderOrFollower(f"{topic}-{partition} lives on brokers {replicas}")
        with self._lock:
            part = self._partitions.get(key) or self._open(topic, partition, info)
            self._uses += 1
            part.used = self._uses
            self._partitions[key] = part
            self._evict()
            return part

    def _make_partition(self, name: str, p: int, log_config, assignment, counts, made: list) -> None:
        """A new partition of a topic being created or grown, placed and opened (its directory noted in
        `made`, for the caller's all-or-nothing undo): led alone standalone, waiting for its role in a
        cluster (caller holds the lock)."""
        directory = self._place(name, p, counts)
        made.append(directory)
        part = Partition(directory, log_config, broker_id=self.broker_id or 0)
        self._uses += 1
        part.used = self._uses  # the newest: not the one the eviction below closes
        self._partitions[(name, p)] = part
        self._slot_of[(name, p)] = self.dir_health.slot_of(directory)
        self._known.add((name, p))
        if assignment is None:
            self._lead_alone(part)
        else:
            part.stop_serving(assignment[p])
        self._remember_due((name, p), part.config, part.snapshot())
        self._evict()

    def _open(self, topic: str, partition: int, info: TopicInfo) -> Partition:
        key = (topic, partition)
        directory = self._find(topic, partition)
        if directory is None and self.dir_health.any_offline[0]:  # never made anew beside its dead copy
            raise KafkaStorageError(f"{topic}-{partition} is in no online log dir")
        try:
            part = self._open_in(key, directory, info)
        except OSError as exc:
            if is_dir_failure(exc):
                raise self._failed(directory or self.log_dirs[0], exc) from exc
            raise
        self._slot_of[key] = self.dir_health.slot_of(part.directory)
        return part

    def _open_in(self, key: tuple[str, int], directory: Path | None, info: TopicInfo) -> Partition:
        topic, partition = key
        if self.owner and key in self._known:  # closed to save descriptors: attach again, as it was
            if directory is None:
                raise UnknownTopicOrPartition(f"{topic}-{partition} has no directory")
            part = Partition(directory, self.config_for(topic), recover=False, broker_id=self.broker_id or 0)
            self._closed_hw.pop(key, None)
            return part
        if directory is None:
            if not self.owner:
                raise UnknownTopicOrPartition(f"{topic}-{partition} has no directory yet")
            directory = self._place(topic, partition)
        checkpoint_hw = self._checkpoints(directory.parent).get(key) if self.owner else None
        part = Partition(directory, self.config_for(topic), recover=self.owner, checkpoint_hw=checkpoint_hw,
                         broker_id=self.broker_id or 0)
        if self.owner:
            self._known.add(key)
            if info.assignment is None:
                self._lead_alone(part)
            else:  # whatever role it had before a restart is stale until the control plane says
                part.stop_serving(info.assignment[partition])
        return part

    def _evict(self) -> None:
        """Close least recently used partitions past max_open (never marking them clean: processors
        may still be appending). Caller holds the lock."""
        if self.max_open is None:
            return
        excess = len(self._partitions) - self.max_open
        if excess <= 0:
            return
        # A tenth more than needed at once: the sort below then runs once per max_open/10 openings, not each one.
        excess = min(len(self._partitions) - 1, excess + self.max_open // 10)
        order = sorted(self._partitions.items(), key=lambda kv: kv[1].used)
        closed = 0
        for key, part in order[:excess]:
            del self._partitions[key]
            if self.owner:
                self._note_closed(key, part)
            part.close(clean=False)
            closed += 1
        if closed and self.on_evict is not None:
            self.on_evict(closed)

    def _note_closed(self, key: tuple[str, int], part: Partition) -> None:
        """What housekeeping needs of a partition while it is closed (see the module docstring)."""
        try:
            snap = part.snapshot()
        except Exception:  # noqa: BLE001 - deleted or torn: housekeeping opens it next time
            return
        self._closed_hw[key] = snap.high_watermark
        self._remember_due(key, part.config, snap)

    def _adopt_clean(self, key: tuple[str, int], info: TopicInfo) -> bool:
        """At the owner's start: take a standalone partition closed cleanly, led here alone, as known and
        closed, without opening it (its state page read, its directory listed: what a clean open checks).
        Its clean mark stays until the first write, in any process, clears it (segment_view.py), so a crash
        from now on finds it clean only if nothing was written, and recovers it otherwise. False: open it."""
        if info.assignment is not None:
            return False  # a replica's role must be reset at every start (_open_in): opened
        directory = self._find(*key)
        if directory is None:
            return False
        try:
            state = PartitionState.copied(directory)
            s, rep = state.snapshot(), state.replication()
            me = (self.broker_id or 0,)
            if not (s.clean and not s.pending_op and not s.deleted and s.txn_layout == TXN_LAYOUT_V1
                    and (rep.role, rep.leader_epoch, rep.replicas, rep.isr) == (Role.LEADER, 0, me, me)
                    and s.high_watermark == s.log_end):
                return False
            names = set(os.listdir(directory))
            if EPOCHS_FILE not in names or not clean_files_ok(directory, s, names):
                return False
        except (OSError, ValueError, TornState):
            return False  # the open says what is wrong (or takes the log dir offline)
        self._known.add(key)
        self._closed_hw[key] = s.high_watermark
        self._remember_due(key, self.config_for(key[0]), s)
        if len(segment_bases(directory, names)) > 1:  # older segments: the first retention pass looks at it
            self._pending["retention"].add(key)
        return True

    def _remember_due(self, key: tuple[str, int], config, snap) -> None:
        """The earliest times a roll and a flush of the partition can be due: rolled_at_ms and
        flushed_at_ms only move forward, and an empty active segment gets its first batch from now on."""
        # an empty active segment and nothing unflushed: nothing is due before a change, which the boards
        # show the timers (touched.py)
        no_roll = snap.rolled_at_ms + config.segment_ms if snap.active_size else NEVER
        no_flush = snap.flushed_at_ms + config.flush_ms if snap.unflushed else NEVER
        old = self._not_due.get(key)
        self._not_due[key] = bounds = (min(no_roll, NEVER), min(no_flush, NEVER))
        for which, (heap, at) in enumerate(zip(self._due_heaps, bounds)):
            # once per deadline: a partition written every pass keeps its roll deadline for segment.ms
            if at < NEVER and (old is None or old[which] != at):
                heapq.heappush(heap, (at, key))

    def open_count(self) -> int:
        """Partitions open in this process now."""
        return len(self._partitions)

    def _lead_alone(self, part: Partition) -> None:
        """A standalone partition: this broker leads it in epoch 0 with an ISR of itself (HW = LEO)."""
        me = (self.broker_id or 0,)
        rep = part.replication()
        if ((rep.role, rep.leader_epoch, rep.replicas, rep.isr) != (Role.LEADER, 0, me, me) or part.latest_epoch() < 0
                or part.high_watermark != part.log_end_offset):
            part.become_leader(0, me, me, 0)

    def hosted(self) -> list[tuple[str, int]]:
        """Every partition of the catalogue with a replica here."""
        return [(name, p) for name, info in list(self._topics.items()) for p in info.hosted(self.broker_id)]

    def partitions(self, keys=None) -> Iterator[tuple[str, int, Partition]]:
        """The partitions open here; in the owner every hosted one (or those of `keys`), opened in turn
        (each stays valid for the caller's step: the least recently used are the ones closed)."""
        if not self.owner:
            for (topic, p), part in list(self._partitions.items()):
                yield topic, p, part
            return
        for topic, p in self.hosted() if keys is None else keys:
            try:
                part = self.partition(topic, p)
            except (UnknownTopicOrPartition, NotLeaderOrFollower):
                continue  # deleted meanwhile
            except KafkaStorageError:
                continue  # its log dir is offline
            yield topic, p, part
