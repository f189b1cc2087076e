"""A partition's opening and repair: trust a clean close, or recover the tail of the log and publish it.

On disk: reads every file of the partition; through `recovery.recover` (recovery.py) it
truncates the `<base>.log` and index files at the first invalid byte and deletes the
segments after it, then publishes the recovered offsets and sizes in `partition.state`
with the HW clamped to the recovered log end. It trims the leader-epoch-checkpoint
(leader_epochs.py) and the producer snapshots (`<offset>.snapshot`) above the log end,
and the transaction layer rebuilds its indexes (`_recover_transactions`,
transaction_state.py). A clean close's state is trusted only if the files still agree
with it (`_clean_files_ok`), cutting an active `.log` longer than its committed size.

The clean mark means "nothing written since the flushed clean close": the first writer
after it, in any process, clears it (msynced) before changing anything (segment_view.py,
`_begin_write`), so the owner's start may also leave a clean partition closed without
opening it (`clean_files_ok` is then its whole check: open_partitions.py, `_adopt_clean`).

Runs under the lock: when the owner opens the partition (`Partition(recover=True)`),
and when a writer finds that its predecessor died mid-operation (PENDING_OP set, or the
seqlock odd: `_begin_write`).

Crash points: recovery only truncates files and deletes whole later segments, each
step leaving a valid prefix, and the state is published last (generation bumped,
PENDING_OP cleared), so a crash during it leaves what the next holder of the lock
recovers again from the start. After an unclean stop the HW is min(the HW in the state
page, or the log dir's checkpoint if the page is lost, the recovered LEO): a restart
never exposes more than was committed.
"""

from __future__ import annotations

import os

from mmlog.log import producer_state, recovery, txn_index
from mmlog.log.files import INDEX_SUFFIX, LOG_SUFFIX, TIMEINDEX_SUFFIX, segment_bases
from mmlog.log.segment_view import IDLE, SegmentView, now_ms
from mmlog.log.state import TXN_LAYOUT_V1, Snapshot


class LogRecovery(SegmentView):
    """Opening and repairing a partition (a part of Partition)."""

    recovered_notes: list[str]
    recovered: bool
    fresh: bool
    _checkpoint_hw: int | None

    def _load(self) -> None:
        """Under the lock at open: trust a clean close, or recover the tail of the log."""
        epochs_lost = self._drop_unreadable_epochs()
        self._load_state()
        if epochs_lost:
            self._rebuild_epochs()

    def _load_state(self) -> None:
        s = self.state.snapshot() if not self.state.is_torn() else None
        clean = s is not None and s.clean and not s.pending_op and not s.deleted and self._clean_files_ok(s)
        if clean:
            self.state.update(clean=0, generation=s.generation + 1)
            if s.txn_layout != TXN_LAYOUT_V1:  # a page from before transactions: fill its slots in
                s = self.state.snapshot()
                self._catch_up_producers(s)
                self.state.publish_transactions(self.producers.first_undecided(),
                                                txn_index.last_abort(self.directory, segment_bases(self.directory)), ())
            self.state.flush()
            return
        self._recover(full=s is None or s.generation == 0, sync=not self.fresh)

    def _clean_files_ok(self, s: Snapshot) -> bool:
        """After a clean close the state is the truth, if the files still agree with it."""
        return clean_files_ok(self.directory, s)

    def _recover(self, full: bool = False, sync: bool = True) -> None:
        """Run recovery (caller holds the lock) and publish its result as the new state."""
        if self.state.is_torn():
            self.state.reset_seq()
        gen = self.state.get("generation")
        log_start = self.state.get("log_start")
        recovery_point = 0 if full else self.state.get("recovery_point")
        self._close_segments()
        found = recovery.recover(self.directory, self.config, log_start, recovery_point, sync)
        # Never expose more than was committed: the HW the state page (or the checkpoint) held. But where
        # appends move the HW themselves (no replication, or an ISR of the leader alone), a whole batch a
        # dead writer left is as committed as if it had published it: held below the log end, the HW would
        # wait for the next new append, and a retry of that batch (a duplicate, not appended) would wait
        # with acks=all for a HW past it, holding up its connection's later produces with it.
        known_hw = self.state.get("high_watermark") if not full else self._checkpoint_hw
        high_watermark = found.log_end if known_hw is None else min(known_hw, found.log_end)
        if not full and self.state.serves_clients() and self.state.isr_size() <= 1:
            high_watermark = found.log_end
        self.epochs.truncate_from_end(found.log_end)
        producer_state.remove_snapshots_above(self.directory, found.log_end)
        self.recovered = True
        self.recovered_notes = found.truncated
        for seg in found.segments:
            seg.close()
        self.state.raise_producers_end(found.log_end)  # a dead writer's kept batch may carry a producer
        self.state.update(
            generation=gen + 1,
            log_start=found.log_start,
            log_end=found.log_end,
            high_watermark=high_watermark,
            active_base=found.active.base_offset,
            active_size=found.active_size,
            index_entries=found.index_entries,
            time_entries=found.time_entries,
            max_timestamp=found.max_timestamp,
            offset_of_max_ts=found.offset_of_max_ts,
            rolled_at_ms=now_ms() if found.active_size else 0,
            since_index=found.since_index,
            recovery_point=found.log_end,
            unflushed=0,
            flushed_at_ms=now_ms(),
            clean=0,
            deleted=0,
            pending_op=IDLE,
        )
        self._recover_transactions(found.scanned_from, sync)
        if sync:
            self.state.flush()


def clean_files_ok(directory, s: Snapshot, names: set | None = None) -> bool:
    """Whether a partition's files agree with its clean state (`s`): every segment has both indexes, the
    last is the active one, and its .log holds at least the committed size (a longer one is cut to it).
    `names`: the directory's entries, if the caller listed it already. (Names as strings, no Path: the
    owner's start runs this for every partition closed cleanly.)"""
    names = set(os.listdir(directory)) if names is None else names
    bases = segment_bases(directory, names)
    if not bases or bases[-1] != s.active_base:
        return False
    for b in bases:
        stem = f"{b:020d}"
        if stem + INDEX_SUFFIX not in names or stem + TIMEINDEX_SUFFIX not in names:
            return False
    active_log = os.path.join(directory, f"{s.active_base:020d}{LOG_SUFFIX}")
    size = os.stat(active_log).st_size
    if size < s.active_size:
        return False
    if size > s.active_size:
        os.truncate(active_log, s.active_size)
    return True
