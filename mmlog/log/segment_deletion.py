"""What removes whole segments from a partition: retention, DeleteRecords, a follower taking its
leader's log start, and the cleaner's swap of cleaned segments for the ones they replace.

On disk: moves the log start in `partition.state` and unlinks the leading segments'
files (`<base>.log`, `.index`, `.timeindex`, `.txnindex`: files.delete_segment_files),
trims the leader-epoch-checkpoint from the start and removes the producer snapshots
below the new log start (but the newest of them). A process reading an unlinked
segment through an open FileSlice goes on reading it.

Crash points: the new log start is published before any segment is unlinked
(PENDING_OP = DELETE_SEGMENTS meanwhile, the generation bumped), and the state page is
flushed after; recovery drops the segments it finds wholly below the state's log
start, so one left behind goes at the next open, and a crash before the publish
leaves the segments and the old log start, as if nothing had run. The swap's steps and crash points are
cleaner/segment_swap.py's; it runs under the lock with PENDING_OP = SWAP, which readers
wait out.
"""

from __future__ import annotations

import bisect

from mmlog.errors import OffsetOutOfRange
from mmlog.log import producer_state, retention
from mmlog.log.cleaner import segment_swap
from mmlog.log.files import delete_segment_files
from mmlog.log.segment_view import DELETE_SEGMENTS, IDLE, SegmentView, now_ms
from mmlog.log.state import Snapshot


class SegmentDeletion(SegmentView):
    """Moving a partition's log start and deleting what falls below it (a part of Partition)."""

    def apply_retention(self, now: int | None = None) -> int:
        """Delete whole expired segments (retention.ms / retention.bytes); return how many."""
        now = now_ms() if now is None else now
        with self._writing() as s:
            summaries = [
                retention.SegmentSummary(
                    b,
                    s.active_size if b == s.active_base else self._older_size(b),
                    self._max_timestamp(s, b),
                )
                for b in self._bases
            ]
            count = retention.expired_prefix(summaries, self.config, now)
            if count:
                self._delete_prefix(s, count)
            return count

    def retention_pass(self, now: int | None = None) -> tuple[int, int | None]:
        """`apply_retention`, and the earliest time it can delete anything again without a change to the
        partition (None: not before one). A partition of one segment is looked at without the lock (an
        idle partition stays marked clean): retention never deletes the active segment."""
        now = now_ms() if now is None else now
        self.snapshot()
        count = self.apply_retention(now) if len(self._bases) > 1 else 0
        config = self.config
        if len(self._bases) <= 1 or not config.delete or config.retention_ms < 0:
            return count, None  # by size: only an append can push it over
        s = self.snapshot()
        return count, self._max_timestamp(s, self._bases[0]) + config.retention_ms + 1

    def _delete_prefix(self, s: Snapshot, count: int) -> None:
        """Move the log start past `count` leading segments, then unlink them."""
        doomed = self._bases[:count]
        new_start = self._bases[count]
        self.state.set_pending(DELETE_SEGMENTS)
        self.state.update(generation=s.generation + 1, log_start=max(s.log_start, new_start))
        self.epochs.truncate_from_start(max(s.log_start, new_start))
        for base in doomed:
            self._delete_segment(base)
        producer_state.remove_snapshots_below(self.directory, max(s.log_start, new_start))
        self.state.update(pending_op=IDLE)
        self.state.flush()
        self._sync(self.state.snapshot())

    def _delete_segment(self, base: int) -> None:
        """Close a segment and unlink its files; open slices keep reading the unlinked files."""
        if base == self._active_base:
            self._mappings_changed()
        segment = self._segments.pop(base, None)
        if segment is not None:
            segment.close()
        delete_segment_files(self.directory, base)

    def delete_records_before(self, offset: int) -> int:
        """Advance the log start offset (Kafka's DeleteRecords); drop segments wholly below it at once.
        Returns the log start now. Kafka's OFFSET_OUT_OF_RANGE past the high watermark or below 0."""
        with self._writing() as s:
            if offset < 0:
                raise OffsetOutOfRange(f"The offset {offset} for partition {self.directory.name} is not valid")
            if offset > s.high_watermark:
                raise OffsetOutOfRange(f"Cannot increment the log start offset to {offset} of partition "
                                       f"{self.directory.name} since it is larger than the high watermark "
                                       f"{s.high_watermark}")
            return self._advance_log_start_locked(s, offset)

    def follow_log_start(self, leader_log_start: int, *, following: int | None = None) -> None:
        """Follower: take the leader's log start offset (from its Fetch answer) as ours, up to our HW, as
        Kafka's follower does: records the leader deleted go here too. `following`: the leader epoch of
        the fetch (FencedLeaderEpoch if we no longer follow in it: a leader keeps its own log start)."""
        snap = self.snapshot()
        if min(leader_log_start, snap.high_watermark) <= snap.log_start:
            return  # the common case: nothing to do, no lock taken
        with self._writing() as s:
            self._check_following(following)
            target = min(leader_log_start, s.high_watermark)
            if target > s.log_start:
                self._advance_log_start_locked(s, target)

    def _advance_log_start_locked(self, s: Snapshot, offset: int) -> int:
        """Move the log start up to `offset` (caller holds the lock). Crash points: the new log start is
        published (and fsynced) before any segment wholly below it is unlinked; recovery drops the segments
        it finds wholly below the state's log start, so one left behind goes at the next open."""
        if offset <= s.log_start:
            return s.log_start
        count = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        self.state.update(log_start=offset)
        self.epochs.truncate_from_start(offset)
        if count:
            self._delete_prefix(self.state.snapshot(), count)
        self.state.flush()
        return offset

    # ------------------------------------------------------------ log cleaner (cleaner/)

    def replace_with_cleaned(self, group: list[int], end: int, inodes: list[int], crash=lambda point: None) -> bool:
        """Swap in the cleaned segment the cleaner wrote for segments `group` (cleaner/segment_swap.py has the
        steps and crash points); False if the group changed meanwhile (the cleaned files are dropped)."""
        with self._writing() as s:
            if s.active_base in group:
                segment_swap.discard_cleaned(self.directory, group[0])
                return False
            if not segment_swap.swap_in(self.directory, group, end, inodes, self.state, crash):
                return False
            self.state.update(generation=self.state.get("generation") + 1, pending_op=IDLE)
            self._sync(self.state.snapshot())
            return True
