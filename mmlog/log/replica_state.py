"""A partition's replica state: its role, the high watermark, followers' progress, leader epochs, truncation.

Replication (docs/replication.md). The state page says whether this broker leads
the partition, follows it or does not serve it (`Role`). The high watermark (HW) is
what consumers may read: on a leader, the smallest log end offset (LEO) over the
ISR, moved by `maybe_advance_high_watermark` as followers' fetches report their
LEOs (`record_follower_fetch`); an append moves it only when the ISR is the leader
alone. A leader stamps its leader epoch into every batch it appends; a follower
copies the leader's batches unchanged (`append_replica`: same offsets, same epochs,
same bytes) and takes min(leader's HW, its LEO) as its HW. The leader epoch cache
(`leader_epochs.py`) records where each epoch began; a follower truncates to the
leader's answer for its latest epoch before it fetches (`truncate_to`), which trims
the cache and clamps the HW too.

This module keeps the state and applies it; the rules of who leads and who is in the
ISR are not here: they are `mmlog/replication/election.py` and `isr.py`, which the
controller and the leader's ISR checks (`mmlog/cluster/`) apply through `become_leader`, `become_follower`, `set_isr` and
`stop_serving`, and the replica fetcher (`mmlog/replication/`) drives a follower's
truncation and appends. (The storage layer sits below both, so it cannot call them.)

On disk: the replication region of `partition.state` (role, leader, leader epoch, ISR
version, replicas, ISR) and its follower progress table (each follower's fetch offset,
fetch time, caught-up time, log start), both changed under the lock and the seqlock
(state.py); the HW slot; and `leader-epoch-checkpoint` (leader_epochs.py), rewritten
atomically on every change. The log dir's `replication-offset-checkpoint` (the HW to
start from if a state page is lost) is the log manager's (housekeeping.py).

Crash points: a role change is one seqlocked publish (and, for a new leader, one
atomic rewrite of the epoch cache before it); a follower's append has the crash
points of any append (partition.py), and its HW moves after (a crash between leaves
the HW behind, which the next fetch corrects). A truncation moves the recovery point
below the cut first, so that a repair rescans the cut segment, then cuts it and
deletes later segments newest first (recovery drops any left, as they no longer
follow), then runs recovery, which trims the epoch cache and publishes; a truncation
to start anew (`truncate_fully_and_start_at`) publishes the new log start before it
deletes anything. An epoch checkpoint that does not parse after a power loss is
rebuilt from the epochs stamped in the log (`_rebuild_epochs`), never fatal.
"""

from __future__ import annotations

import bisect
import logging

from mmlog.errors import NotLeaderOrFollower, OffsetOutOfRange
from mmlog.log import producer_state
from mmlog.log.append_info import AppendInfo
from mmlog.log.leader_epochs import UNDEFINED, CorruptCheckpoint, LeaderEpochCache
from mmlog.log.segment_view import FOLLOWER, LEADER, TRUNCATE, SegmentView, now_ms
from mmlog.log.state import FollowerProgress, Replication, Role, Snapshot
from mmlog.protocol import records
from mmlog.system.files import fsync_dir

log = logging.getLogger(__name__)


class ReplicaState(SegmentView):
    """Leading or following a partition (a part of Partition)."""

    broker_id: int
    epochs: LeaderEpochCache
    _follower_hw: int  # the leader's HW as our last fetch saw it (followers)

    # ------------------------------------------------------------ leader epochs

    def _drop_unreadable_epochs(self) -> bool:
        """Remove a leader-epoch-checkpoint that does not parse; True if there was one (rebuild it).

        A file renamed before its data reached the disk comes back from a power loss empty or
        zero-filled. The cache is derived from the log, so it is rebuilt from it, with one WARNING:
        refusing to start would take the whole broker down for a file the log can replace."""
        try:
            self.epochs.reload()
            return False
        except CorruptCheckpoint as exc:
            log.warning("%s/%s does not parse (%s): rebuilding it from the log", self.directory.name,
                        self.epochs.path.name, exc)
            self.epochs.path.unlink()
            fsync_dir(self.directory)
            self.epochs.reload()
            return True

    def _rebuild_epochs(self) -> None:
        """The epoch cache from the leader epochs stamped in the log's batches (lock held, state loaded):
        each epoch starts at the first batch that carries it, as Kafka's recovery assigns them."""
        s = self.state.snapshot()
        entries: list[tuple[int, int]] = []
        for h, _ in self._stored_batches(s, s.log_start):
            if h.partition_leader_epoch >= 0 and (not entries or h.partition_leader_epoch > entries[-1][0]):
                entries.append((h.partition_leader_epoch, h.base_offset))
        rep = self.state.replication()
        if rep.role == LEADER and rep.leader_epoch >= 0 and (not entries or rep.leader_epoch > entries[-1][0]):
            entries.append((rep.leader_epoch, s.log_end))  # a leader's epoch that has no batch yet
        self.epochs.rebuild(entries)

    # ------------------------------------------------------------ roles and the high watermark

    def replication(self) -> Replication:
        return self.state.replication()

    def _hw_is_log_end(self) -> bool:
        """Whether the HW simply follows the log end: the ISR is this broker alone (or no roles yet)."""
        role = self.state.role()
        return role != FOLLOWER and not (role == LEADER and self.state.isr_size() > 1)

    def become_leader(self, epoch: int, replicas, isr, isr_version: int, *, leader_id: int | None = None,
                      now: int | None = None) -> None:
        """Lead the partition in `epoch` (as `leader_id`, by default this broker): the epoch starts at
        our log end, and followers' progress is unknown until they fetch."""
        now = now_ms() if now is None else now
        leader_id = self.broker_id if leader_id is None else leader_id
        with self._writing() as s:
            rep = self.state.replication()
            self.epochs.assign(epoch, s.log_end)
            if not (rep.role == LEADER and rep.leader_epoch == epoch and tuple(rep.replicas) == tuple(replicas)):
                for i in range(len(replicas)):  # a new epoch, or a new replica set (rows are by position)
                    self.state.set_follower(i, -1, 0, now, -1)
                    self.state.set_follower_log_start(i, -1)
            self.state.publish_replication(LEADER, leader_id, epoch, isr_version, tuple(replicas), tuple(isr))
            if len(isr) <= 1 and s.high_watermark != s.log_end:
                self.state.update(high_watermark=s.log_end)

    def become_follower(self, leader_id: int, epoch: int, replicas, isr, isr_version: int) -> None:
        """Follow `leader_id` in `epoch` (the fetcher truncates before it fetches)."""
        with self._writing():
            self.state.publish_replication(FOLLOWER, leader_id, epoch, isr_version, replicas, isr)

    def stop_serving(self, replicas=None) -> None:
        """Neither lead nor follow (the partition has no leader, is not ours any more, or waits for
        its first state): appends and fetches are refused until a role comes."""
        with self._writing():
            rep = self.state.replication()
            self.state.publish_replication(int(Role.NONE), -1, rep.leader_epoch, rep.isr_version,
                                           rep.replicas if replicas is None else tuple(replicas), ())

    def set_isr(self, isr, isr_version: int) -> None:
        """The ISR changed within the same leader epoch."""
        with self._writing() as s:
            rep = self.state.replication()
            self.state.publish_replication(rep.role, rep.leader_id, rep.leader_epoch, isr_version, rep.replicas, isr)
            if rep.role == LEADER and len(isr) <= 1 and s.high_watermark != s.log_end:
                self.state.update(high_watermark=s.log_end)

    def record_follower_fetch(self, replica_id: int, fetch_offset: int, now: int | None = None) -> bool:
        """A follower fetched from fetch_offset: keep its progress (Kafka's caught-up rule).

        Caught up now if it asked for our log end; caught up at its previous fetch if it
        asked for at least what our log end was then. Returns whether the HW may move.
        Raises NotLeaderOrFollower if replica_id is not a replica of this partition.
        """
        rep = self.state.replication()
        snap = self.snapshot()
        self._record_progress(rep, snap, self._replica_position(rep, replica_id), fetch_offset, now)
        return fetch_offset > snap.high_watermark and replica_id in rep.isr

    def follower_fetched(self, replica_id: int, fetch_offset: int, log_start: int, now: int | None = None) -> bool:
        """Leader: a follower's fetch, in one look at the state (what a follower fetch costs the leader):
        record its progress (`record_follower_fetch`) and log start (`record_follower_log_start`),
        and move the HW if the ISR now holds more (`maybe_advance_high_watermark`). True if the HW
        or its log start moved: parked acks=all produces or DeleteRecords should check again."""
        rep = self.state.replication()
        snap = self.snapshot()
        i = self._replica_position(rep, replica_id)
        self._record_progress(rep, snap, i, fetch_offset, now)
        moved = False
        if self.state.follower_log_start(i) != log_start:
            self.state.set_follower_log_start(i, log_start)
            moved = True
        if (fetch_offset > snap.high_watermark and replica_id in rep.isr and rep.role == LEADER
                and self._isr_high_watermark(rep, snap.log_end) > snap.high_watermark):
            moved |= self._advance_high_watermark()
        return moved

    def _replica_position(self, rep: Replication, replica_id: int) -> int:
        """replica_id's row in the progress table (NotLeaderOrFollower if it is no replica here)."""
        try:
            return rep.replicas.index(replica_id)
        except ValueError:
            raise NotLeaderOrFollower(f"broker {replica_id} is not a replica of {self.directory.name}") from None

    def _record_progress(self, rep: Replication, snap: Snapshot, i: int, fetch_offset: int, now: int | None) -> None:
        now = now_ms() if now is None else now
        old = self.state.follower(i)
        caught_up = old.last_caught_up_ms
        if fetch_offset >= snap.log_end:
            caught_up = max(caught_up, now)
        elif fetch_offset >= old.leo_at_last_fetch >= 0:
            caught_up = max(caught_up, old.last_fetch_ms)
        self.state.set_follower(i, fetch_offset, now, caught_up, snap.log_end)

    def record_follower_log_start(self, replica_id: int, log_start: int) -> bool:
        """A follower's fetch reported its log start offset; True if it moved (DeleteRecords may be done)."""
        rep = self.state.replication()
        try:
            i = rep.replicas.index(replica_id)
        except ValueError:
            return False
        if self.state.follower_log_start(i) == log_start:
            return False
        self.state.set_follower_log_start(i, log_start)
        return True

    def low_watermark(self, live) -> int:
        """Leader: the smallest log start offset over this replica and the live followers (-1 for one not
        heard of since this epoch began): what DeleteRecords reports, as Kafka's lowWatermarkIfLeader."""
        rep = self.state.replication()
        low = self.snapshot().log_start
        for i, r in enumerate(rep.replicas):
            if r != rep.leader_id and r in live:
                low = min(low, self.state.follower_log_start(i))
        return low

    def followers(self) -> list[tuple[int, FollowerProgress]]:
        """(broker id, progress) of every replica but the leader, as this leader saw them."""
        rep = self.state.replication()
        return [(r, self.state.follower(i)) for i, r in enumerate(rep.replicas) if r != rep.leader_id]

    def _isr_high_watermark(self, rep: Replication, log_end: int) -> int:
        """min(our LEO, every other ISR member's LEO): what the whole ISR holds."""
        hw = log_end
        for i, r in enumerate(rep.replicas):
            if r != rep.leader_id and r in rep.isr:
                hw = min(hw, self.state.follower_log_end(i))
        return hw

    def maybe_advance_high_watermark(self) -> bool:
        """Leader: move the HW up to what every ISR member holds; True if it moved."""
        rep = self.state.replication()
        if rep.role != LEADER:
            return False
        snap = self.snapshot()
        if self._isr_high_watermark(rep, snap.log_end) <= snap.high_watermark:
            return False
        return self._advance_high_watermark()

    def _advance_high_watermark(self) -> bool:
        """Under the lock, with the state read again: move the HW to what the ISR holds; True if it moved."""
        with self._writing() as s:
            rep = self.state.replication()
            hw = self._isr_high_watermark(rep, s.log_end)
            if rep.role != LEADER or hw <= s.high_watermark:
                return False
            self.state.update(high_watermark=hw)
            return True

    # ------------------------------------------------------------ following

    def append_replica(self, buf, leader_high_watermark: int | None = None, *,
                       following: int | None = None, headers: list | None = None) -> AppendInfo | None:
        """Follower: append the leader's batches as they are (offsets, epochs, bytes), then take
        min(leader's HW, our LEO) as our HW. Batches wholly below our log end are skipped (a
        fetch answered twice); a gap raises OffsetOutOfRange. None if nothing was new.

        `following`: the leader epoch the fetch was made in; if we no longer follow in it (a
        fetch answered after a leader change), FencedLeaderEpoch and nothing is appended.
        `headers`: buf's batch headers if the caller validated them already
        (`records.validate_whole_batches`, dense=False)."""
        if headers is None:
            headers = records.validate_batches(buf, dense=False)  # the leader's bytes, as they are
        headers = self._check_sizes(buf, headers)
        with self._writing() as s:
            self._check_following(following)
            if leader_high_watermark is not None:
                self._follower_hw = leader_high_watermark
            else:
                self._follower_hw = s.high_watermark
            pos, skip = 0, 0
            while skip < len(headers) and headers[skip].last_offset < s.log_end:
                pos += headers[skip].size
                skip += 1
            headers = headers[skip:]
            if not headers:
                self._set_follower_hw_locked(s)
                return None
            expected = s.log_end
            gaps = self.config.compact  # a compacted leader's batches skip the offsets its cleaner removed
            for h in headers:
                if h.base_offset != expected and not (gaps and h.base_offset > expected):
                    raise OffsetOutOfRange(f"{self.directory.name}: leader's batch at {h.base_offset}, "
                                           f"expected {expected}")
                expected = h.next_offset
            view = memoryview(buf)[pos:]
            latest = self.epochs.latest_epoch()  # one look (a stat) per append, not per batch
            if headers[-1].partition_leader_epoch > latest:  # epochs never go down along a log
                for h in headers:
                    if h.partition_leader_epoch > latest:
                        self.epochs.assign(h.partition_leader_epoch, h.base_offset)
                        latest = h.partition_leader_epoch
            out: list = [None]
            now = now_ms()
            first = s.log_end
            size = len(view)
            if not self._should_roll(s, size, len(headers), headers[-1].next_offset - s.log_end, now):
                # the common case: no prefix of the batches needs a roll if all of them together do not
                self._append_locked(s, [(0, view, headers)], now, out, copy=True)
                return AppendInfo(first, expected - 1, self.state.get("log_start"), len(headers),
                                  sum(h.records_count for h in headers))
            at, start = 0, 0
            run: list = []
            for h in headers:  # roll where a leader appending these batches one by one would
                spanned = h.next_offset - s.log_end  # offsets from the run's start through this batch
                if self._should_roll(s, (at - start) + h.size, len(run) + 1, spanned, now) and (run or s.active_size):
                    if run:
                        self._append_locked(s, [(0, view[start:at], run)], now, out, copy=True)
                        s = self.state.snapshot()
                    s = self._roll(s)
                    start, run = at, []
                run.append(h)
                at += h.size
            self._append_locked(s, [(0, view[start:at], run)], now, out, copy=True)
            last = expected - 1
            return AppendInfo(first, last, self.state.get("log_start"), len(headers), sum(h.records_count for h in headers))

    def set_follower_high_watermark(self, leader_high_watermark: int, *, following: int | None = None) -> None:
        """Follower: HW = min(leader's HW, our LEO) (`following` as for append_replica)."""
        with self._writing() as s:
            self._check_following(following)
            self._follower_hw = leader_high_watermark
            self._set_follower_hw_locked(s)

    def _set_follower_hw_locked(self, s: Snapshot) -> None:
        hw = min(self._follower_hw, s.log_end)
        if hw != s.high_watermark:
            self.state.update(high_watermark=hw)

    def latest_epoch(self) -> int:
        return self.epochs.latest_epoch()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetsForLeaderEpoch (leader_epochs.end_offset_for)."""
        return self.epochs.end_offset_for(epoch, self.snapshot().log_end)

    # ------------------------------------------------------------ truncation

    def truncate_to_leader_epoch(self, asked: int, epoch: int, end_offset: int, *,
                                 following: int | None = None) -> bool:
        """One round of a follower's truncation (KIP-101, KIP-279) before it fetches.

        The leader answered OffsetsForLeaderEpoch for `asked` (our latest epoch) with
        (epoch, end_offset). Truncates what the leader does not hold; returns True when done,
        False when the leader only knew an older epoch: ask again with our new latest epoch
        (each round drops our later epochs, so the rounds end). A leader that knows no epoch
        at all (UNDEFINED) leaves us at our high watermark, the pre-epoch rule.

        `following`: the leader epoch the answer was asked in. If we no longer follow in it (the
        main process made us leader while the question was on the wire), FencedLeaderEpoch and
        nothing is cut: the answer speaks of another leader's log, and cutting ours by it would
        drop records we appended and acknowledged as leader, and our new epoch's start.
        """
        if epoch == UNDEFINED:
            self.truncate_to(min(self.high_watermark, self.log_end_offset), following=following)
            return True
        if epoch == asked:
            self.truncate_to(min(end_offset, self.log_end_offset), following=following)
            return True
        _, own_end = self.end_offset_for_epoch(epoch)
        cut = min(end_offset, self.log_end_offset) if own_end == UNDEFINED else min(end_offset, own_end)
        self.truncate_to(min(cut, self.log_end_offset), following=following)
        return False

    def truncate_fully_and_start_at(self, offset: int, *, following: int | None = None) -> None:
        """Follower behind the leader's log start: drop everything, start empty at `offset`
        (`following` as for truncate_to_leader_epoch)."""
        with self._writing() as s:
            self._check_following(following)
            self.state.set_pending(TRUNCATE)
            self.state.update(generation=s.generation + 1, log_start=offset, recovery_point=offset,
                              high_watermark=offset)
            for base in list(self._bases):
                self._delete_segment(base)
            producer_state.remove_snapshots_above(self.directory, -1)
            self.epochs.clear()
            self._recover(full=True)
            self._sync(self.state.snapshot())

    def truncate_to(self, offset: int, *, following: int | None = None) -> None:
        """Remove every record at or after `offset` (a batch holding it goes whole); `following`: the
        leader epoch a follower's fetcher decided it in (FencedLeaderEpoch if we no longer follow in it)."""
        with self._writing() as s:
            self._check_following(following)
            if offset >= s.log_end:
                # No record goes, but epochs that began there do (they hold nothing): Kafka's
                # truncateFromEnd. A deposed leader's empty epoch would otherwise be asked about forever.
                self.epochs.truncate_from_end(offset)
                return
            if offset < s.log_start:
                raise OffsetOutOfRange(f"cannot truncate to {offset}, below the log start {s.log_start}")
            i = max(bisect.bisect_right(self._bases, offset) - 1, 0)
            seg = self._segment(self._bases[i])
            end = s.active_size if seg.base_offset == s.active_base else seg.file_size()
            found = seg.find_batch(offset, seg.offset_index.capacity if seg.base_offset != s.active_base
                                   else s.index_entries, end)
            cut = found[0] if found else end
            # Crash points: the recovery point moves below the cut first, so that a
            # repair rescans this segment; the segment is cut; then later segments go,
            # newest first, and recovery drops any left because they no longer follow.
            # The epoch cache is trimmed by the recovery below (and again by any repair).
            self.state.set_pending(TRUNCATE)
            self.state.update(recovery_point=min(s.recovery_point, seg.base_offset))
            producer_state.remove_snapshots_above(self.directory, offset)
            seg.truncate(cut)
            for base in reversed(self._bases[i + 1 :]):
                self._delete_segment(base)
            self._recover()
            self._sync(self.state.snapshot())
