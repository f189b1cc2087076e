"""A log manager's housekeeping: retention, time-based rolls and flushes, the high watermark checkpoint.

The owner's timers call these over the hosted partitions, open or closed, but a pass
looks only at the partitions whose state changed since the pass before (the log dirs'
boards, touched.py: every process stamps a partition there when it publishes its
state) and those whose time has come (a roll or flush or retention deadline recorded
when it last looked, kept in a heap): an idle partition costs a pass nothing, opens
nothing, reads no state page. After a start, or when the catalogue changes, the
partitions the pass has not seen yet are looked at once. A failing disk met on the way
takes the partition's log dir offline and the round goes on.

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

import heapq
import time
from pathlib import Path

from mmlog.errors import UnknownTopicOrPartition
from mmlog.log import offset_checkpoint, touched
from mmlog.log.log_dirs import is_dir_failure
from mmlog.log.partition import Partition
from mmlog.log.manager_state import ManagerState


NEVER = 1 << 62  # no deadline: only a change to the partition can make the work due
PASSES = ("roll", "flush", "retention", "gauges")  # the passes that each take every sweep's changed partitions


class Housekeeping(ManagerState):
    """The timers' work over a LogManager's partitions (a part of LogManager)."""

    def apply_retention(self, keys=None) -> int:
        """Delete expired segments: of `keys`, or (the timer) of the partitions changed since the last pass
        or whose oldest segment's time has come."""
        if keys is not None:
            return sum(self._housekeep(part, Partition.apply_retention) for _, _, part in self.partitions(keys))
        now = int(time.time() * 1000)
        candidates = self._changed("retention") | self._deadlines_passed(self._retention_heap, self._retention_due.get,
                                                                           now)
        done = 0
        for topic, p, part in self.partitions(sorted(candidates)):
            key = (topic, p)
            self.looked_at += 1
            try:
                count, due = part.retention_pass(now)
            except OSError as exc:
                self._failed(part.directory, exc)
                if not is_dir_failure(exc):
                    raise
                continue
            except Exception:  # noqa: BLE001 - deleted meanwhile
                continue
            done += count
            self._set_deadline(self._retention_heap, self._retention_due, key, NEVER if due is None else due)
        return done

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
        """Run work (a roll: which=0, a flush: 1) on the partitions where it may be due, and remember for
        each one the earliest time it can next be due without a change: a pass over thousands of
        partitions then looks at the few that changed or whose time has come."""
        now = int(time.time() * 1000)
        if keys is None:
            heap = self._due_heaps[which]
            candidates = self._changed(("roll", "flush")[which]) | self._deadlines_passed(
                heap, lambda key: (b := self._not_due.get(key)) and b[which], now)
        else:
            candidates = [k for k in keys if (b := self._not_due.get(k)) is None or b[which] <= now]
        done = 0
        for key, part in ((k, p) for *k, p in self.partitions(sorted(candidates))):
            key = tuple(key)
            self.looked_at += 1
            done += self._housekeep(part, work)
            if self.dir_health.offline(self._slot_of.get(key)):
                continue
            try:
                self._remember_due(key, part.config, part.snapshot())
            except Exception:  # noqa: BLE001 - deleted meanwhile: nothing to remember
                continue
        return done

    # ------------------------------------------------------------ what changed, what is due

    def _changed(self, pass_name: str) -> set:
        """The hosted partitions changed since `pass_name` last asked (and, once, those it never saw)."""
        self._sweep_boards()
        changed, self._pending[pass_name] = self._pending[pass_name], set()
        return changed

    def _seen_at_load(self, opened: list) -> None:
        """After the owner's start: the timers have seen every hosted partition but those `opened` (recovered or
        reset: looked at by the first passes); the ones left closed have their deadlines from their state
        pages (open_partitions.py, `_adopt_clean`)."""
        self._board_version = -1
        self._board_seen = set(self.hosted())
        self._board_keys = None
        self._sweep_boards()  # builds the slots' keys; the start's own stamps go to every pass once
        for pending in self._pending.values():
            pending |= set(opened)

    def _sweep_boards(self) -> None:
        """Move every log dir's board on and hand the partitions stamped since to every pass."""
        if self._board_version != self._version or self._board_keys is None:
            keys = set(self.hosted())
            new = keys - self._board_seen if self._board_seen is not None else keys
            self._board_seen = keys
            self._board_keys = {}
            for key in keys:
                self._board_keys.setdefault(touched.slot_of(f"{key[0]}-{key[1]}"), []).append(key)
            self._board_version = self._version
            for pending in self._pending.values():
                pending |= new
        changed: set = set()
        for slot, d in enumerate(self.log_dirs):
            if self.dir_health.offline(slot):
                continue
            try:
                stamped = touched.board_for(d).sweep()
            except OSError:
                continue  # its partitions' own operations meet the failure
            for s in stamped.tolist():
                changed.update(self._board_keys.get(s, ()))
        if changed:
            for pending in self._pending.values():
                pending |= changed

    @staticmethod
    def _deadlines_passed(heap: list, deadline_of, now: int) -> set:
        """Keys whose deadline in `heap` has passed (entries a newer deadline replaced are dropped:
        `deadline_of(key)` is the one in force)."""
        out = set()
        while heap and heap[0][0] <= now:
            at, key = heapq.heappop(heap)
            if deadline_of(key) == at:
                out.add(key)
        return out

    @staticmethod
    def _set_deadline(heap: list, due: dict, key, at: int) -> None:
        """Record key's deadline, in the heap once per deadline (not again while it stays the same)."""
        if due.get(key) == at:
            return
        due[key] = at
        if at < NEVER:
            heapq.heappush(heap, (at, key))

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
