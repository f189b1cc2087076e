"""The log manager: the topics and partition logs of a broker's data directories.

The topic catalogue (`topics.json` in the first data directory) is written by the one
process that owns the manager (the broker's control plane). Other processes open the
manager attached: they read the catalogue, reload it when asked about a topic they
do not know, and open partitions without recovery.

`LogManager` is this module's start-up and shutdown over parts that each hold one
concern, with their files and crash points:
  catalogue.py         the topics, their configs and assignments (`topics.json`)
  topic_admin.py       creating, growing, reassigning, deleting, reconfiguring topics
  open_partitions.py   the partitions open in this process, within a descriptor budget
  placement.py         which data directory holds a partition; offline log dirs
  housekeeping.py      retention, rolls and flushes when due, the HW checkpoint
  partition_gauges.py  the metrics scrape
They are classes LogManager inherits, sharing the state `__init__` sets.

Start-up (`load`, owner only): directories of deletions, creations and reassignments
cut short are removed (what the catalogue does not name here), then every hosted
partition not closed cleanly is opened with recovery; one closed cleanly (standalone:
its role needs no reset) is only checked (state page, file list and sizes) and left
closed until used; a log dir that fails meanwhile is offline from the start. Shutdown
(`close(clean=True)` at the broker's stop, after the processors): only then are
partitions marked clean, each flushed and closed, closed ones opened again one at a
time if written since their last clean close (their state page says: the first write
clears the mark), then the HW checkpoint written. A crash at any point before leaves
partitions not marked clean, which the next start recovers; a crash after some were
marked leaves those trusted as they are (their files were flushed first).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import threading
from collections import Counter, OrderedDict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from mmlog.config.settings import LogConfig
from mmlog.errors import KafkaStorageError, UnknownTopicOrPartition
from mmlog.log import kernels
from mmlog.log.catalogue import Catalogue
from mmlog.log.topic_info import TopicInfo
from mmlog.log.housekeeping import PASSES, Housekeeping
from mmlog.log.log_dirs import LogDirHealth, is_dir_failure, is_disk_full
from mmlog.log.open_partitions import OpenPartitions
from mmlog.log.partition import Partition
from mmlog.log.partition_gauges import Gauges
from mmlog.log.placement import Placement
from mmlog.log.state import PartitionState, TornState, mark_clean
from mmlog.log.topic_admin import TopicAdmin
from mmlog.system import syncfs

log = logging.getLogger(__name__)

CLOSE_THREADS = 16  # partitions flushed and marked clean at once at the stop
_PARTITION_DIR = re.compile(r"^(?P<topic>[a-zA-Z0-9._-]+)-(?P<partition>\d+)$")


class LogManager(TopicAdmin, Catalogue, OpenPartitions, Placement, Housekeeping, Gauges):
    """Topics and their partition logs across one or more data directories."""

    def __init__(self, log_dirs: list[Path] | Path, defaults: LogConfig | None = None, *, owner: bool = True,
                 broker_id: int | None = None, max_open: int | None = None) -> None:
        """`max_open`: partitions kept open at once (after load, in the owner; None: no limit)."""
        self.log_dirs = [Path(d) for d in (log_dirs if isinstance(log_dirs, list) else [log_dirs])]
        self.defaults = self.static_defaults = defaults or LogConfig()
        # Dynamic configs kept in the catalogue beside the topics: {"brokers": {level: {name: value}},
        # "quotas": {entity path: {key: value}}} (config/dynamic.py, config/quotas.py); the broker levels
        # make `defaults` over the static ones.
        self.dynamic: dict = {}
        self.owner = owner
        self.broker_id = broker_id
        self.max_open = max(2, max_open) if max_open else None
        # Told how many partitions each eviction closed (the processors' and the main process's metrics:
        # a steady count means clients spread over more partitions than a process keeps open).
        self.on_evict: Callable[[int], None] | None = None
        self._topics: dict[str, TopicInfo] = {}
        # Both caches spare the owner work per topic when thousands are auto-created: each topic's
        # catalogue JSON, valid while its TopicInfo and the objects it holds are the same (changes
        # replace them), and the replicas per broker, updated by a creation, recounted after any
        # other change.
        self._fragments: dict[str, tuple] = {}
        self._configs: dict[str, tuple] = {}  # topic -> (its overrides, the defaults, LogConfig of both)
        self._replicas: Counter | None = None
        self._partitions: OrderedDict[tuple[str, int], Partition] = OrderedDict()  # each one's `used`: when last looked up
        self._uses = 0  # the look-up counter `used` takes from (open_partitions.py)
        self._known: set[tuple[str, int]] = set()  # opened with recovery (or created) by this owner
        self._closed_hw: dict[tuple[str, int], int] = {}  # HW of a closed partition when it was closed
        self._not_due: dict[tuple[str, int], tuple[int, int]] = {}  # (no roll, no flush) before these ms
        # The timers' view of what changed and what is due (housekeeping.py): deadlines in heaps of (ms, key),
        # the partitions each pass has still to look at, the log dirs' board slots of the hosted partitions.
        self._due_heaps: tuple[list, list] = ([], [])  # rolls', flushes'
        self._retention_heap: list = []
        self._retention_due: dict[tuple[str, int], int] = {}
        self._pending: dict[str, set] = {name: set() for name in PASSES}
        self._board_keys: dict[int, list] | None = None
        self._board_seen: set | None = None
        self._board_version = -1
        self.looked_at = 0  # partitions the timers' passes looked at (read the state of), in all
        # closed partitions' segments as the metrics scrape last listed them: (topic, partition, topic id) ->
        # (generation, bases, bytes of all but the active segment); listed again when the generation moves
        self._segments_seen: dict[tuple[str, int, str], tuple[int, list[int], int]] = {}
        self.loaded = self.recovered = 0  # partitions load() opened, and how many of them it had to recover
        # Offline log dirs, shared with every process of the broker (log_dirs.py): the owner makes the page
        # before the supervisor forks, attached managers find it. _slot_of: the log dir of each partition.
        self.dir_health = LogDirHealth.create(self.log_dirs) if owner else LogDirHealth.shared(self.log_dirs)
        self._slot_of: dict[tuple[str, int], int] = {}
        self._lock = threading.RLock()
        self._catalogue_stamp: tuple[int, int, int] | None = None
        self._defer_save = 0
        self._save_pending = False
        # Catalogue writes: each snapshot of the topics gets a version under _lock, and is written under
        # _write_lock alone (lock order: _lock, then _write_lock), so a writer thread's fsync never holds
        # up the control thread's creations; a version older than the one on disk is not written.
        self._write_lock = threading.Lock()
        self._version = self._written = 0
        if owner:
            for d in self.log_dirs:
                d.mkdir(parents=True, exist_ok=True)
            kernels.warm()
        self.reload()

    def load(self) -> list[str]:
        """Owner start-up: open (recovering as needed) every partition of the catalogue not closed cleanly.

        Returns the recovery notes. Directories of deleted topics are removed.
        """
        self._require_owner()
        notes = []
        for d in self.log_dirs:
            try:
                self._remove_leftovers(d)
            except OSError as exc:
                self._failed(d, exc)
                if not is_dir_failure(exc):
                    raise
        self.loaded = self.recovered = 0
        opened: list[tuple[str, int]] = []
        for name, info in self._topics.items():
            for p in info.hosted(self.broker_id):
                if self._adopt_clean((name, p), info):  # closed cleanly: left closed, opened on first use
                    self.loaded += 1
                    continue
                opened.append((name, p))
                try:
                    part = self.partition(name, p)
                except KafkaStorageError as exc:  # a log dir that fails at start is offline from the start
                    notes.append(f"{name}-{p}: {exc}")
                    continue
                notes += part.recovered_notes
                self.loaded += 1
                self.recovered += part.recovered
        self._seen_at_load(opened)
        return notes

    def _remove_leftovers(self, d: Path) -> None:
        """Directories of deletions and creations cut short."""
        for entry in os.scandir(d):
            if not entry.is_dir():
                continue
            if entry.name.endswith("-delete"):
                shutil.rmtree(entry.path, ignore_errors=True)
                continue
            m = _PARTITION_DIR.match(entry.name)
            if m and (m["topic"] not in self._topics or not self._hosts(m["topic"], int(m["partition"]))):
                shutil.rmtree(entry.path, ignore_errors=True)  # a deletion (or a reassignment away) cut short

    def _clean_hw(self, key: tuple[str, int]) -> int | None:
        """A closed partition's HW if its state page is marked clean (read, not mapped), else None."""
        slot = self._slot_of.get(key)
        directory = self.log_dirs[slot] / f"{key[0]}-{key[1]}" if slot is not None else self._find(*key)
        if directory is None:
            return None
        try:
            s = PartitionState.copied(directory).snapshot()
        except (OSError, ValueError, TornState):
            return None
        return s.high_watermark if s.clean and not s.pending_op and not s.deleted else None

    def _close_clean_synced(self, todo: list, hws: dict) -> bool:
        """Close `todo` clean with two syncfs calls per file system instead of seven syncs a partition
        (mmlog/system/syncfs.py): every partition's snapshot and recovery point written, one sync that makes
        them and the logs durable, every state page marked clean, one sync for the marks. A crash before
        the second sync leaves some partitions unmarked: recovered at the next start, nothing lost. False
        (nothing done) when a log dir's file system is not one syncfs is trusted on."""
        dirs = [d for slot, d in enumerate(self.log_dirs) if not self.dir_health.offline(slot)]
        if not todo or not syncfs.supported(dirs):
            return False
        prepared = []  # (key, directory, HW, whether to mark it): each closed at once, so the descriptors
        for key, part in todo:  # in use stay one partition's, however many there are
            if part is None:
                try:
                    part = self._open(*key, self._topics[key[0]])
                except (UnknownTopicOrPartition, KafkaStorageError, OSError):
                    continue  # gone, or cannot be opened: recovered at the next start instead
            try:
                hw = part.high_watermark
                prepared.append((key, part.directory, hw, part.prepare_clean_close()))
            except UnknownTopicOrPartition:
                pass
            except OSError as exc:  # the disk failed at the last moment: recovery will do
                self._failed(part.directory, exc)
            finally:
                part.close(clean=False)
        try:
            syncfs.sync(dirs)
        except OSError as exc:  # a write-back error: nothing is marked clean, the next start recovers all
            log.error("shutdown: syncing the log dirs failed (%s): every partition is recovered at the next "
                      "start", exc)
            return True
        for key, directory, hw, marked in prepared:
            if marked:
                with contextlib.suppress(OSError, ValueError):  # unmarked: recovered at the next start
                    mark_clean(directory)
            if hw is not None:
                hws[key] = hw
        with contextlib.suppress(OSError):  # unsynced marks: those partitions are recovered, nothing else
            syncfs.sync(dirs)
        return True

    def _close_clean(self, item: tuple) -> tuple[tuple[str, int], int | None]:
        """Flush and mark one partition clean (opened again if closed); (key, its HW or None)."""
        key, part = item
        if part is None:
            try:
                part = self._open(*key, self._topics[key[0]])
            except (UnknownTopicOrPartition, KafkaStorageError, OSError):
                return key, None  # gone, or cannot be opened: recovered at the next start instead
        try:
            hw = part.high_watermark
        except UnknownTopicOrPartition:
            hw = None
        try:
            part.close(True)
        except OSError as exc:  # the disk failed at the last moment: recovery will do
            self._failed(part.directory, exc)
            part.close(clean=False)
        return key, hw

    def close(self, clean: bool | None = None) -> None:
        """Close every partition. The owner's clean close (at the broker's stop, after the processors)
        flushes and marks every hosted partition clean, opening again, one at a time, the closed ones
        written since their last clean close."""
        with self._lock:
            if self.owner and (clean or clean is None):
                hws = {}
                todo = []  # (key, the open partition or None): the ones written since their last clean close
                for key in self.hosted():
                    part = self._partitions.pop(key, None)
                    if self.dir_health.offline(self._slot_of.get(key)):
                        if part is not None:
                            part.close(clean=False)  # a dead disk: recovered at the next start, if it is back
                        continue
                    if part is None:
                        hw = self._clean_hw(key)
                        if hw is not None:  # nothing written since its clean close: nothing to write now
                            hws[key] = hw
                            continue
                    elif part._still_clean():  # open here, but nothing written since its clean close
                        with contextlib.suppress(UnknownTopicOrPartition):
                            hws[key] = part.high_watermark
                        part.close(clean=False)
                        continue
                    todo.append((key, part))
                if not self._close_clean_synced(todo, hws):
                    # Each clean close waits on its fsyncs (log, indexes, producer snapshot, state page): in
                    # threads, so the disk takes them together (a journal commits many at once).
                    with ThreadPoolExecutor(CLOSE_THREADS, thread_name_prefix="clean-close") as pool:
                        for key, hw in pool.map(self._close_clean, todo):
                            if hw is not None:
                                hws[key] = hw
                for part in self._partitions.values():  # not hosted (none expected): closed as they are
                    part.close(clean=False)
                self._partitions.clear()
                try:
                    self.checkpoint_high_watermarks(hws)
                except OSError as exc:
                    if not is_disk_full(exc):
                        raise
                    # A full disk at shutdown: the partitions closed cleanly above keep their high
                    # watermarks in their state pages, which a clean open trusts; the checkpoint (read
                    # only by a full recovery) stays at its last write. Not a failed shutdown.
                    log.warning("shutdown: high watermark checkpoint not written (%s); the partitions' "
                                "state pages hold them", exc.strerror)
                return
            for part in self._partitions.values():
                part.close(clean)
            self._partitions.clear()
