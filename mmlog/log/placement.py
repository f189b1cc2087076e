"""Where a log manager's partitions live: finding and placing them over the data directories, and
letting go of those on an offline one.

Layout: each data directory (`log.dirs`) holds partition directories
`<topic>-<partition>/`; a new partition goes to the online directory holding the
fewest.

Offline log dirs (`log_dirs.py`, Kafka's log dir failure handling): a failing disk
(EIO...) met by any process takes its whole log dir offline in every process of the
broker. From then on `partition()` answers KafkaStorageError for each partition there
(letting go of it: unmapped, never written), `_find` and placement see only online
dirs (a partition is never made anew beside its dead copy), housekeeping, the HW
checkpoint, deletion and the clean close skip them, and a dir that fails during
`load()` is offline from the start. The check while every dir is online is one read
of a shared int32. A full disk (ENOSPC) is not a failure: it fails the request, the
dir stays online.

On disk: nothing of its own (the health flags are a memory page shared across fork,
log_dirs.py). Crash points: none; a partition directory is made by the partition's
own first open.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from mmlog.errors import KafkaStorageError
from mmlog.log.log_dirs import is_dir_failure
from mmlog.log.manager_state import ManagerState


class Placement(ManagerState):
    """The log dirs of a LogManager's partitions, and their health (a part of LogManager)."""

    def _check_online(self, key: tuple[str, int]) -> None:
        """KAFKA_STORAGE_ERROR for a partition whose log dir went offline; this process lets go of it
        (its mmaps are never touched again)."""
        slot = self._slot_of.get(key)
        if slot is not None and self.dir_health.offline(slot):
            with self._lock:
                part = self._partitions.pop(key, None)
                if part is not None:
                    part.close(clean=False)  # unmaps and closes: no write, no msync
            raise KafkaStorageError(f"{key[0]}-{key[1]}: log dir {self.log_dirs[slot]} is offline")

    def _failed(self, path: Path, exc: OSError) -> KafkaStorageError:
        """An I/O error outside a partition's own reads and writes (opening, listing, housekeeping):
        a failing disk takes its log dir offline."""
        slot = self.dir_health.slot_of(path)
        if is_dir_failure(exc) and slot is not None:
            self.dir_health.mark_offline(slot, exc.errno)
        return KafkaStorageError(f"{path}: {exc.strerror or exc}")

    def is_offline(self, topic: str, partition: int) -> bool:
        """Whether a hosted partition is on an offline log dir (Metadata); no disk access while every
        dir is online. A partition found in no online dir while some dir is offline counts as offline."""
        if not self.dir_health.any_offline[0]:
            return False
        slot = self._slot_of.get((topic, partition))
        if slot is None:
            try:
                directory = self._find(topic, partition)
            except KafkaStorageError:
                return True
            if directory is None:
                return True
            slot = self._slot_of[(topic, partition)] = self.dir_health.slot_of(directory)
        return self.dir_health.offline(slot)

    def offline_partitions(self, slot: int) -> list[tuple[str, int]]:
        """The partitions this manager knows to be in log dir `slot` (the owner knows every hosted one)."""
        return sorted(key for key, s in self._slot_of.items() if s == slot and key[0] in self._topics)

    def drop_offline(self) -> int:
        """Close (unmap, without writing) the open partitions of offline log dirs; returns how many."""
        with self._lock:
            doomed = [k for k in self._partitions if self.dir_health.offline(self._slot_of.get(k, -1))]
            for key in doomed:
                self._partitions.pop(key).close(clean=False)
            return len(doomed)

    def _find(self, topic: str, partition: int) -> Path | None:
        """The partition's directory in an online log dir, or None."""
        for slot, d in enumerate(self.log_dirs):
            if self.dir_health.offline(slot):
                continue
            candidate = d / f"{topic}-{partition}"
            try:
                mode = os.stat(candidate).st_mode
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError as exc:  # EIO: a failing disk (Path.is_dir would raise it too, os.path.isdir hide it)
                raise self._failed(d, exc) from exc
            if stat.S_ISDIR(mode):
                self._slot_of[(topic, partition)] = slot
                return candidate
        return None

    def _place(self, topic: str, partition: int, counts: dict[Path, int] | None = None) -> Path:
        """Existing directory of a partition, or a new one in the emptiest data dir (`counts`: directories
        per data dir, counted once by the caller and kept up to date here)."""
        found = self._find(topic, partition)
        if found is not None:
            return found
        online = [self.log_dirs[slot] for slot in self.dir_health.online_slots()]
        if not online:
            raise KafkaStorageError("every log dir is offline")
        if len(online) == 1:
            return online[0] / f"{topic}-{partition}"
        counts = self._dir_counts() if counts is None else counts
        emptiest = min(online, key=lambda d: counts.get(d, 0))
        counts[emptiest] = counts.get(emptiest, 0) + 1
        return emptiest / f"{topic}-{partition}"

    def _dir_counts(self) -> dict[Path, int]:
        """Partition directories per online log dir."""
        counts = {}
        for slot in self.dir_health.online_slots():
            d = self.log_dirs[slot]
            try:
                counts[d] = sum(1 for e in os.scandir(d) if e.is_dir())
            except OSError as exc:
                raise self._failed(d, exc) from exc
        return counts
