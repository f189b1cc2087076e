"""A partition's segments as one process sees them, the writer lock, and the reads that take no lock.

On disk (the partition directory, files.py): `partition.state`, the shared state page
(state.py: offsets, sizes, the pending operation, the seqlock); `.lock`, the writers'
flock (lock.py); and per segment `<base>.log` with its `<base>.index` and
`<base>.timeindex`. This module writes none of them: it lists and maps them, and
hands the lock holder a repaired, listed state (`_writing`).

Any number of processes open the same partition directory. Readers take no lock:
they snapshot the shared state, find the segment and batch through the shared
indexes and return a file slice. A process that sees a new state generation lists
the directory again, so everyone notices a roll, a retention deletion or a
truncation made elsewhere.

Open files. A process keeps the active segment open, and of the older ones only the
one it read last (`_segment`): a partition of fifty segments costs a processor the
descriptors and mappings of two, however old the data its consumers read, so the
log manager's open-partition budget holds whatever the segment count. An older
segment opened without the lock can be gone (retention, or the cleaner's swap, after
our snapshot), or be mid-swap: the lock-free reads (`_read`, `lookup_timestamp`,
`last_records_of_producers`) check that the generation held still while they opened
it, and otherwise list the segments again and retry (`SegmentGone`); writers hold the
lock, under which no segment goes. The price: a timestamp lookup or a retention pass
over many old segments maps them one after another.

Crash points: a reader changes nothing, so a crash of one leaves nothing. A writer
that died left PENDING_OP set or the seqlock odd; whoever next takes the lock
(`_begin_write`, or a reader that meets the torn state) runs recovery over the tail
first (log_recovery.py), and a reader that meets a swap a dead cleaner left takes the
lock to finish it.

A read that fails (OSError) is KafkaStorageError: a failing disk (EIO...) also takes
the partition's log dir offline for every process of the broker (`log_dirs.py`).
"""

from __future__ import annotations

import bisect
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Generator, Iterator

import numpy as np

from mmlog.config.settings import LogConfig
from mmlog.errors import FencedLeaderEpoch, KafkaStorageError, OffsetOutOfRange, UnknownTopicOrPartition
from mmlog.log import batch_walk, log_dirs
from mmlog.log.files import log_size, segment_bases
from mmlog.log.lock import PartitionLock
from mmlog.log.segment import FileSlice, Segment
from mmlog.log.state import Op, PartitionState, Role, Snapshot, TornState
from mmlog.protocol import records

IDLE, APPEND, ROLL, DELETE_SEGMENTS, TRUNCATE, SWAP = (int(op) for op in Op)  # plain ints: cheap on the append path
PRODUCER_BATCHES_A_CALL = 1024  # positions a compiled walk hands back at a time
SWAP_WAIT_S = 0.05  # a reader that meets a swap this long takes the lock (repairing a dead cleaner's)
LEADER, FOLLOWER = int(Role.LEADER), int(Role.FOLLOWER)


def now_ms() -> int:
    return int(time.time() * 1000)


class SegmentGone(FileNotFoundError):
    """An older segment a lock-free read opened had gone since its snapshot (retention, a swap). A
    FileNotFoundError, as opening it was before segments opened lazily: whoever handled that still does."""


@dataclass(frozen=True, slots=True)
class LogRead:
    """A fetch's answer from one partition: the bytes to send and the offsets around them."""

    slice: FileSlice
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    last_stable_offset: int = -1
    upper_bound: int = -1  # every record in the slice is below it (for aborted_transactions)
    last_abort: int = -1  # the newest abort marker's offset (-1: none): fetches above it skip the index


class _WatchedConfig:
    """`Partition.config`: a new config tells the mapping watchers (`watch_mappings`), who cached the old
    one. Only a setter: a read finds the instance's own attribute at full speed, as a plain one."""

    def __set__(self, obj, config: LogConfig) -> None:
        obj.__dict__["config"] = config
        obj._mappings_changed()


class SegmentView:
    """The segments of a partition open in this process, and its lock-free reads (a part of Partition:
    the attributes below are set by `Partition.__init__`)."""

    directory: Path
    config: LogConfig = _WatchedConfig()  # type: ignore[assignment]
    state: PartitionState
    lock: PartitionLock
    _segments: dict[int, Segment]  # open segments: the active one, and the older one read last
    _bases: list[int]  # every segment's base offset, as of _generation
    _generation: int
    _active_base: int
    _preallocated: tuple | None
    _watchers: list  # told before this process's mappings of the partition close or move

    def watch_mappings(self, watcher) -> None:
        """Call watcher(partition) once, before any mapping or descriptor of the active segment or the state
        page this object holds closes or moves (a roll, a listing after another process's change, a
        repair, closing, deleting), the config changes, or the producer state is loaded anew: whoever keeps
        their addresses or a copy (the compiled append's partition table, log/partition_table.py) forgets
        them then. Watching again re-arms it."""
        if watcher not in self._watchers:
            self._watchers.append(watcher)

    def _mappings_changed(self) -> None:
        watchers = self.__dict__.get("_watchers")
        if watchers:
            self._watchers = []
            for watcher in watchers:
                watcher(self)

    def snapshot(self) -> Snapshot:
        """The current state, with this process's segment list brought up to date."""
        try:
            snap = self.state.snapshot()
        except TornState:
            with self._writing() as snap:  # repairs what the dead writer left
                return snap
        if snap.deleted:
            raise UnknownTopicOrPartition(f"{self.directory.name} was deleted")
        swap_wait = 0.0
        for _ in range(100):
            if snap.generation == self._generation:
                return snap
            if snap.pending_op == SWAP:  # the cleaner is renaming files (cleaner/segment_swap.py): never list halfway
                if swap_wait >= SWAP_WAIT_S:
                    with self._writing() as snap:  # a dead cleaner's swap: the lock holder finishes it
                        return snap
                time.sleep(0.001)
                swap_wait += 0.001
                snap = self.state.snapshot()
                continue
            try:
                self._sync(snap)
                snap = self.state.snapshot()  # moved while we listed (a swap began)? list again
            except FileNotFoundError:  # a segment went while we listed: the state has moved on too
                snap = self.state.snapshot()
            except ValueError:  # mapped an index while a roll trimmed it: the roll publishes in a moment
                time.sleep(0.002)
                snap = self.state.snapshot()
        raise TornState(f"{self.directory}: segments keep changing under the reader")

    def _sync(self, snap: Snapshot) -> None:
        """List the segments again after another process changed them (new generation); the active one
        is opened now, older ones when they are read."""
        self._mappings_changed()
        bases = segment_bases(self.directory)
        bases = [b for b in bases if b <= snap.active_base]
        for base, segment in list(self._segments.items()):
            moved = (base == self._active_base) != (base == snap.active_base)
            if base not in bases or moved or segment.replaced():
                self._segments.pop(base).close()  # deleted, rolled or active again, or a new file
        if snap.active_base not in self._segments:
            self._segments[snap.active_base] = Segment(self.directory, snap.active_base)
        self._bases = bases
        self._generation = snap.generation
        self._active_base = snap.active_base

    def _segment(self, base: int, lock_free: bool = False) -> Segment:
        """The segment at `base`, opened if it is not (an older one closes the older one open before it).

        SegmentGone: its files went after our snapshot, or (`lock_free`: a reader without the lock) the
        segments changed while it opened them. A swap (cleaner/segment_swap.py) bumps the generation before its
        first rename, so files opened before the generation is seen unchanged are one segment's, never an
        old .log with the cleaned indexes."""
        seg = self._segments.get(base)
        if seg is not None:
            return seg
        try:
            seg = Segment(self.directory, base)
        except (FileNotFoundError, ValueError) as exc:  # ValueError: an index trimmed as we mapped it
            raise SegmentGone(f"{self.directory.name}: segment {base} went ({exc})") from exc
        if lock_free:
            try:
                now = self.state.snapshot()
            except TornState:  # a writer died mid-update: the retry's snapshot repairs it
                now = None
            if now is None or now.generation != self._generation or now.pending_op == SWAP:
                seg.close()
                raise SegmentGone(f"{self.directory.name}: segments changed while segment {base} was opened")
        if base != self._active_base:
            for other in [b for b in self._segments if b != self._active_base]:
                self._segments.pop(other).close()  # a FileSlice being sent keeps its own file open
        self._segments[base] = seg
        return seg

    def _older_size(self, base: int) -> int:
        """Bytes of an older segment's log, without opening it (0 if it went meanwhile)."""
        seg = self._segments.get(base)
        if seg is not None:
            return seg.file_size()
        try:
            return log_size(self.directory, base)
        except FileNotFoundError:
            return 0

    def _max_timestamp(self, snap: Snapshot, base: int, lock_free: bool = False) -> int:
        """The largest timestamp in segment `base` (-1 for none): the state's for the active one, the last
        time index entry of an older one."""
        if base == snap.active_base:
            return snap.max_timestamp
        seg = self._segment(base, lock_free)
        return seg.time_index.last(seg.time_index.capacity)[0]

    def _lock_free(self, read):
        """Run a read that takes no lock, again after listing the segments anew if one it opened had gone."""
        for _ in range(100):
            try:
                return read()
            except SegmentGone:
                self._generation = -1  # the state has moved on: the next snapshot lists the segments again
        raise TornState(f"{self.directory}: segments keep going under the reader")

    def _close_segments(self) -> None:
        self._mappings_changed()
        for seg in self._segments.values():
            seg.close()
        self._segments.clear()
        self._bases = []
        self._generation = -1
        self._active_base = -1
        self._preallocated = None  # (generation, active base, index bytes) the active indexes were sized for

    def _begin_write(self) -> Snapshot:
        """Take the lock; repair, sync the segments and ready the active one. Caller releases."""
        self.lock.acquire()
        try:
            if self.state.is_torn():
                self._recover()
            snap = self.state.snapshot()
            if snap.deleted:
                raise UnknownTopicOrPartition(f"{self.directory.name} was deleted")
            if snap.clean:
                # The first write since the clean close, in whichever process: unmarked (durably) before
                # anything changes, so "clean" on disk always means "nothing written since the clean close",
                # which lets the owner's start leave such partitions closed, unchecked (manager.py, load).
                self.state.update(clean=0)
                self.state.flush()
                snap = self.state.snapshot()
            if snap.generation != self._generation:
                self._sync(snap)
            sized = (snap.generation, snap.active_base, self.config.segment_index_bytes)
            if self._preallocated != sized:
                self._mappings_changed()  # the indexes may be mapped again
                # Once per active segment: the indexes' full size (every change to the segment
                # set, a roll or a truncation, bumps the generation and asks again).
                self._segment(snap.active_base).preallocate(sized[2])
                self._preallocated = sized
            return snap
        except BaseException:
            self.lock.release()
            raise

    @contextmanager
    def _writing(self) -> Iterator[Snapshot]:
        """Hold the lock with the state repaired, the segments in sync and the active one writable."""
        snap = self._begin_write()
        try:
            yield snap
        finally:
            self.lock.release()

    def _check_following(self, epoch: int | None) -> None:
        """Under the lock: a follower's fetcher acts on what the leader of `epoch` answered; are we still
        following in it (None: no check)? The main process changes roles while the answer is on the wire."""
        if epoch is not None:
            rep = self.state.replication()
            if rep.role != FOLLOWER or rep.leader_epoch != epoch:
                raise FencedLeaderEpoch(f"{self.directory.name}: no longer following in epoch {epoch}")

    def _stored_batches(self, s: Snapshot, offset: int, lock_free: bool = False,
                        producers_only: bool = False) -> Iterator:
        """(header, transaction marker or None) of the stored batches from the one holding `offset` to
        the log end: 61 bytes read each, the whole batch for a control one (about 80 bytes).
        `producers_only`: only the batches that carry a producer id (all that producer state reads),
        found by a walk in compiled code (batch_walk.py)."""
        if s.generation != self._generation:  # the segment set changes only with the generation
            self._sync(s)
        for base in self._bases:
            active = base == s.active_base
            if not active and self._next_base(base) <= offset:
                continue
            seg = self._segment(base, lock_free)
            end = s.active_size if active else seg.file_size()
            found = seg.find_batch(offset, s.index_entries if active else seg.offset_index.capacity, end)
            pos = found[0] if found else end
            fd = seg.file.fileno()
            if producers_only:
                pos = yield from self._producer_batches(fd, pos, end, s.log_end)
                if pos < 0:
                    return
            while pos + records.HEADER_SIZE <= end:
                h, marker = self._stored_batch_at(fd, pos)
                if h.base_offset >= s.log_end:
                    return
                yield h, marker
                pos += h.size

    @staticmethod
    def _producer_batches(fd: int, pos: int, end: int, log_end: int) -> Generator:
        """Yield the batches with a producer id from pos to end, as `_stored_batches` does; returns where the
        Python walk goes on (end, or a position compiled code left to it), or -1 at the log end."""
        header, out = np.empty(records.HEADER_SIZE, np.uint8), np.empty(PRODUCER_BATCHES_A_CALL, np.int64)
        while True:
            n, pos, why = batch_walk.producer_batches(np.int32(fd), pos, end, log_end, header, out)
            for at in out[:n].tolist():
                yield SegmentView._stored_batch_at(fd, at)
            if why == batch_walk.LOG_END:
                return -1
            if why != batch_walk.FULL:
                return pos

    @staticmethod
    def _stored_batch_at(fd: int, pos: int) -> tuple:
        """(header, transaction marker or None) of the batch at pos: its header, and a control batch whole."""
        h = records.read_header(os.pread(fd, records.HEADER_SIZE, pos))
        return h, (records.read_end_txn_marker(os.pread(fd, h.size, pos)) if h.is_control else None)

    def _next_base(self, base: int) -> int:
        i = bisect.bisect_right(self._bases, base)
        return self._bases[i] if i < len(self._bases) else 1 << 62

    def _storage_error(self, exc: OSError) -> KafkaStorageError:
        """KAFKA_STORAGE_ERROR for a failed write or read; a failing disk (EIO...) takes the whole log
        dir offline for every process of the broker (log_dirs.py), a full disk does not."""
        offline = log_dirs.report(self.directory, exc)
        return KafkaStorageError(f"{self.directory.name}: {exc.strerror or exc}"
                                 + ("; its log dir is offline" if offline else ""))

    # ------------------------------------------------------------ reading

    def read(self, offset: int, max_bytes: int, *, upto_log_end: bool = False, committed: bool = False) -> LogRead:
        """Bytes from the batch holding `offset` on, at most max_bytes but the first batch whole.

        Raises OffsetOutOfRange below the log start or above the log end. A consumer's read
        stops at the high watermark (a read_committed one's, `committed`, at the last stable
        offset; a follower's, `upto_log_end`, at the log end): from there the slice is empty,
        as Kafka answers a consumer whose position a new leader's HW has not reached yet. A
        slice stays within one segment. A failed read (EIO) is KAFKA_STORAGE_ERROR.
        """
        try:
            return self._read(offset, max_bytes, upto_log_end, committed)
        except OSError as exc:
            raise self._storage_error(exc) from exc

    def _read(self, offset: int, max_bytes: int, upto_log_end: bool, committed: bool) -> LogRead:
        return self._lock_free(lambda: self._read_once(offset, max_bytes, upto_log_end, committed))

    def _read_once(self, offset: int, max_bytes: int, upto_log_end: bool, committed: bool) -> LogRead:
        snap = self.snapshot()
        if offset < snap.log_start or offset > snap.log_end:
            raise OffsetOutOfRange(f"offset {offset} outside [{snap.log_start}, {snap.log_end}] of "
                                   f"{self.directory.name}")
        lso = snap.last_stable_offset
        limit = snap.log_end if upto_log_end else lso if committed else snap.high_watermark
        if offset < self._bases[0]:
            # Retention elsewhere deleted segments after our snapshot and before _sync listed them.
            raise OffsetOutOfRange(f"offset {offset} is below the log start of {self.directory.name}")
        i = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        while offset < limit and i < len(self._bases):
            seg = self._segment(self._bases[i], lock_free=True)
            active = seg.base_offset == snap.active_base
            entries = snap.index_entries if active else seg.offset_index.capacity
            end = snap.active_size if active else seg.file_size()
            found = seg.find_batch(offset, entries, end)
            if found is not None:
                pos, first = found
                if limit < snap.log_end:  # a consumer behind the log end: the bytes stop at the HW's batch
                    end = self._position_of(seg, limit, entries, end)
                size = min(end - pos, max(max_bytes, first))
                upper = min(limit, self._bases[i + 1]) if i + 1 < len(self._bases) else limit
                return LogRead(FileSlice(seg.file, pos, size), snap.high_watermark, snap.log_start, snap.log_end,
                               lso, upper, snap.last_abort)
            i += 1
        empty = FileSlice(self._segments[snap.active_base].file, snap.active_size, 0)
        return LogRead(empty, snap.high_watermark, snap.log_start, snap.log_end, lso, offset, snap.last_abort)

    @staticmethod
    def _position_of(seg: Segment, offset: int, entries: int, end: int) -> int:
        """File position where the batch starting at `offset` begins in seg (end if it is past seg).

        The HW always falls on a batch boundary: it is some replica's log end; so does the LSO:
        a transaction's first offset is a batch's base offset."""
        if offset < seg.base_offset:
            return 0
        found = seg.find_batch(offset, entries, end)
        return end if found is None else found[0]

    def offset_for_timestamp(self, timestamp: int) -> int | None:
        """Offset of the first record with timestamp >= timestamp, or None (ListOffsets' -1)."""
        found = self.lookup_timestamp(timestamp)
        return None if found is None else found[0]

    def lookup_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after the log start with timestamp >= timestamp."""
        return self._lock_free(lambda: self._lookup_timestamp_once(timestamp))

    def _lookup_timestamp_once(self, timestamp: int) -> tuple[int, int] | None:
        snap = self.snapshot()
        for base in self._bases:
            if self._max_timestamp(snap, base, lock_free=True) < timestamp:
                continue
            seg = self._segment(base, lock_free=True)
            active = base == snap.active_base
            idx_n = snap.index_entries if active else seg.offset_index.capacity
            time_n = snap.time_entries if active else seg.time_index.capacity
            end = snap.active_size if active else seg.file_size()
            found = seg.find_time(timestamp, idx_n, time_n, end, snap.log_start)
            if found is not None:
                return found
        return None

    @property
    def log_start_offset(self) -> int:
        return self.snapshot().log_start

    @property
    def log_end_offset(self) -> int:
        return self.snapshot().log_end

    @property
    def high_watermark(self) -> int:
        return self.snapshot().high_watermark

    def segment_bases(self) -> list[int]:
        self.snapshot()
        return list(self._bases)

    def size_bytes(self) -> int:
        snap = self.snapshot()
        return sum(
            snap.active_size if b == snap.active_base else self._older_size(b) for b in self._bases
        )
