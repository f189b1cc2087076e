"""A log manager's housekeeping: retention, time-based rolls and flushes, the high watermark checkpoint.

The owner's timers call these over every hosted partition, open or closed. A
partition is skipped, open or closed, while nothing can be due (a roll or flush not
before the time recorded when it last looked, `_not_due`), so a pass over thousands of
partitions looks at the few whose time has come and never opens a closed one before.
A failing disk met on the way takes the partition's log dir offline and the round goes
on.

On disk: each log dir's `replication-offset-checkpoint` (offset_checkpoint.py): the HW
of every partition in it, open ones' as they are, closed ones' as they were at close
(lower is safe: a restart that needs it never exposes more than was committed). A
partition's recovery reads it only when its state page is lost. The rest (segments,
flushes) is the partitions' own (partition.py, segment_deletion.py).

Crash points: the checkpoint is written atomically (one replacement), so a crash
leaves the previous one or the new one; a retention, roll or flush interrupted in a
partition has that partition's crash points.
"""

from __future__ import annotations

import time
from pathlib import Path

from mmlog.errors import UnknownTopicOrPartition
from mmlog.log import offset_checkpoint
from mmlog.log.log_dirs import is_dir_failure
from mmlog.log.partition import Partition
from mmlog.log.manager_state import ManagerState


class Housekeeping(ManagerState):
    """The timers' work over a LogManager's partitions (a part of LogManager)."""

    def apply_retention(self, keys=None) -> int:
        return sum(self._housekeep(part, Partition.apply_retention) for _, _, part in self.partitions(keys))

    def _housekeep(self, part: Partition, work) -> int:
        """work(part); a failing disk takes the partition's log dir offline and the round goes on."""
        try:
            return work(part)
        except OSError as exc:
            self._failed(part.directory, exc)
            if not is_dir_failure(exc):
                raise
            return 0

    def flush_due(self, keys=None) -> int:
        """fsync partitions whose flush.ms has passed (the housekeeping timer)."""
        return self._due(1, keys, Partition.maybe_flush)

    def roll_due(self, keys=None) -> int:
        """Roll partitions whose active segment is older than segment.ms (the housekeeping timer)."""
        return self._due(0, keys, Partition.maybe_roll)

    def _due(self, which: int, keys, work) -> int:
        """Run work (a roll: which=0, a flush: 1) on the partitions where it may be due, and remember
        for each one the earliest time it can next be due: a timer pass over thousands of partitions
        then looks at the few whose time has come, and never opens a closed one before."""
        now = int(time.time() * 1000)
        candidates = []
        for key in self.hosted() if keys is None else keys:
            bounds = self._not_due.get(key)
            if bounds is None or bounds[which] <= now:
                candidates.append(key)
        done = 0
        for key, part in ((k, p) for *k, p in self.partitions(candidates)):
            key = tuple(key)
            done += self._housekeep(part, work)
            if self.dir_health.offline(self._slot_of.get(key)):
                continue
            try:
                self._remember_due(key, part.config, part.snapshot())
            except Exception:  # noqa: BLE001 - deleted meanwhile: nothing to remember
                continue
        return done

    # ------------------------------------------------------------ high watermark checkpoint

    def _checkpoints(self, log_dir: Path) -> dict[tuple[str, int], int]:
        """The log dir's replication-offset-checkpoint, read once per manager."""
        cache = self.__dict__.setdefault("_checkpoint_cache", {})
        if log_dir not in cache:
            cache[log_dir] = offset_checkpoint.read(log_dir / offset_checkpoint.HIGH_WATERMARKS)
        return cache[log_dir]

    def checkpoint_high_watermarks(self, closed_hw: dict | None = None) -> None:
        """Write each log dir's replication-offset-checkpoint (owner only): open partitions' HWs, and
        closed ones' as they were at close (`closed_hw`, default the manager's own record)."""
        self._require_owner()
        closed_hw = self._closed_hw if closed_hw is None else closed_hw
        per_dir: dict[Path, dict] = {d: {} for d in self.log_dirs}
        for (topic, p), part in list(self._partitions.items()):
            if self.dir_health.offline(self._slot_of.get((topic, p))):
                continue  # its mmaps are not touched again
            try:
                per_dir.setdefault(part.directory.parent, {})[topic, p] = part.high_watermark
            except UnknownTopicOrPartition:
                continue  # deleted meanwhile
        for (topic, p), hw in list(closed_hw.items()):
            if (topic, p) not in self._partitions and (directory := self._find(topic, p)) is not None:
                per_dir.setdefault(directory.parent, {})[topic, p] = hw
        for log_dir, entries in per_dir.items():
            slot = self.dir_health.slot_of(log_dir)
            if self.dir_health.offline(slot):
                continue
            try:
                offset_checkpoint.write(log_dir / offset_checkpoint.HIGH_WATERMARKS, entries)
            except OSError as exc:
                self._failed(log_dir, exc)
                if not is_dir_failure(exc):
                    raise
