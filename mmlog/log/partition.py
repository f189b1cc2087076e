"""A partition log: segments + shared state + writer lock, usable from many processes at once.

Any number of processes open the same partition directory. Readers take no lock:
they snapshot the shared state (`state.py`), find the segment and batch through the
shared indexes and return a file slice. Writers serialise on the partition lock
(`lock.py`), append with pwrite at the committed size, add index entries, then
publish the new log end in the state; a reader sees an append all at once or not
at all. A process that sees a new state generation lists the directory again, so
everyone notices a roll, a retention deletion or a truncation made elsewhere.

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

Crash points of an append (PENDING_OP = APPEND during steps 1-2):
  1. bytes written past ACTIVE_SIZE: invisible to readers; the next writer writes
     over them (and recovery truncates them, or keeps a whole batch that was never
     acknowledged, which is harmless);
  2. index entries written past INDEX_ENTRIES: ignored and overwritten;
  3. the seqlocked state update publishes everything at once.
A group commit (`append_many`: the pipelined produces of one connection) is one such
append of several buffers, written with one pwritev: the same crash points hold.
Roll, retention and truncation likewise publish last; whoever next takes the lock
and finds PENDING_OP set (or the seqlock odd) runs recovery over the tail first.

A write or read that fails (OSError) is KafkaStorageError: a full disk (ENOSPC) for
that request only, a failing one (EIO...) also takes the partition's log dir offline
for every process of the broker (`log_dirs.py`).

Durability: a broker (process) crash loses nothing that was published, because the
bytes are in the page cache and the state is a shared mapping; a machine crash loses
at most `flush.messages` messages or `flush.ms` of them, which is when appends fsync,
and never more than the active segment: a segment that rolls is fsynced right after,
off the append path (`rolled_flush.py`), as Kafka does (docs/durability.md).

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

Transactions (docs/transactions.md). A transactional producer's batches open its
transaction on the partition; a transaction marker (`append_marker`, the leader's
answer to WriteTxnMarkers) ends it. The producer state (`producer_state.py`) tracks
the open transactions; every append that holds a transactional or control batch
publishes, in the same seqlocked store, the first undecided offset, and for a marker
the decided transaction (state.py: the last stable offset, LSO, is min(HW, first
unstable offset)), and writes an aborted transaction to its segment's transaction
index (`txn_index.py`) before publishing. A follower does the same for the batches it
copies, so its LSO and indexes match the leader's. `read(committed=True)` stops at the
LSO; `aborted_transactions` answers what a read_committed fetch must drop. Recovery
rebuilds the indexes of the rescanned segments and the transaction slots from the log.

Crash points of replication's steps: a role change is one seqlocked publish (and,
for a new leader, one atomic rewrite of the epoch cache before it); a follower's
append has the crash points of any append, and its HW moves after (a crash between
leaves the HW behind, which the next fetch corrects); after an unclean stop the HW
is min(the HW in the state page, the recovered LEO), so a restart never exposes
more than was committed.
"""

from __future__ import annotations

import bisect
import logging
import os
import shutil
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, NamedTuple

from mmlog.config.settings import LogConfig
from mmlog.errors import (
    CorruptMessage,
    FencedLeaderEpoch,
    InvalidRecord,
    KafkaError,
    KafkaStorageError,
    MessageTooLarge,
    NotLeaderOrFollower,
    OffsetOutOfRange,
    RecordListTooLarge,
    UnknownTopicOrPartition,
)
from mmlog.log import (
    compressed,
    flush_timing,
    log_dirs,
    producer_state,
    recovery,
    retention,
    rolled_flush,
    txn_index,
)
from mmlog.log.cleaner import segment_swap
from mmlog.log.files import INDEX_SUFFIX, LOG_SUFFIX, TIMEINDEX_SUFFIX, delete_segment_files, log_size, segment_bases, segment_file
from mmlog.system.files import fsync_dir
from mmlog.log.leader_epochs import UNDEFINED, CorruptCheckpoint, LeaderEpochCache
from mmlog.log.producer_state import NO_PRODUCER, ProducerState
from mmlog.log.lock import PartitionLock
from mmlog.log.segment import FileSlice, Segment
from mmlog.log.state import LEADER_EPOCH as _LEADER_EPOCH
from mmlog.log.state import N_ISR as _N_ISR
from mmlog.log.state import ROLE as _ROLE
from mmlog.log.state import TXN_LAYOUT_V1, FollowerProgress, Op, PartitionState, Replication, Role, Snapshot, TornState
from mmlog.protocol import records

log = logging.getLogger(__name__)

INT32_MAX = 2**31 - 1
IDLE, APPEND, ROLL, DELETE_SEGMENTS, TRUNCATE, SWAP = (int(op) for op in Op)  # plain ints: cheap on the append path
SWAP_WAIT_S = 0.05  # a reader that meets a swap this long takes the lock (repairing a dead cleaner's)
LEADER, FOLLOWER = int(Role.LEADER), int(Role.FOLLOWER)
# Kafka's producer.id.expiration.ms default: a producer silent this long is forgotten at the next snapshot.
PRODUCER_EXPIRATION_MS = 24 * 3600 * 1000
_TXN_BITS = records.TRANSACTIONAL_BIT | records.CONTROL_BIT  # batches that open or end transactions


def now_ms() -> int:
    return int(time.time() * 1000)


class SegmentGone(FileNotFoundError):
    """An older segment a lock-free read opened had gone since its snapshot (retention, a swap). A
    FileNotFoundError, as opening it was before segments opened lazily: whoever handled that still does."""


def _records(headers: list) -> int:
    """Offsets the batches take (lastOffsetDelta + 1 each)."""
    if len(headers) == 1:
        return headers[0].last_offset_delta + 1
    return sum(h.last_offset_delta + 1 for h in headers)


class AppendInfo(NamedTuple):
    """Where an append landed (a tuple: a group commit makes one per produce request)."""

    base_offset: int
    last_offset: int
    log_start_offset: int
    batches: int
    records: int


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


class Partition:
    """One partition's log, open in this process."""

    def __init__(self, directory: Path, config: LogConfig | None = None, *, recover: bool = True,
                 checkpoint_hw: int | None = None, broker_id: int = 0) -> None:
        """Open a partition directory (creating it if recover is true).

        `recover=True` is for the process that owns start-up (the broker's main
        process, or a lone user): it validates the files unless the last close was
        clean. `recover=False` attaches to a partition someone already opened.
        `checkpoint_hw` is the log dir's replication-offset-checkpoint entry: the HW
        to start from if the state page itself is lost.
        """
        self.directory = Path(directory)
        self.config = config or LogConfig()
        # A partition this open creates holds nothing anyone was told is stored, so its new files need
        # not reach the disk now (a topic creation waits on no fsync per partition for them): after a crash
        # before they do, the next open finds a missing or partial directory and recovery makes it again,
        # empty. What says the topic exists is the catalogue, written durably after its partitions. Synced
        # at once all the same: the leader-epoch checkpoint (`become_leader`, as every checkpoint), and the
        # directory's name in its log dir, or a power loss could drop the directory with every record later
        # fsynced into it (the catalogue's sync covers only the first log dir, and only when it follows).
        self.fresh = recover and not self.directory.exists()
        if recover:
            self.directory.mkdir(parents=True, exist_ok=True)
            if self.fresh:
                fsync_dir(self.directory.parent)
        elif not (self.directory / "partition.state").exists():
            raise UnknownTopicOrPartition(f"{self.directory} is not an open partition")
        self.state = PartitionState(self.directory)
        self.lock = PartitionLock(self.directory)
        self._segments: dict[int, Segment] = {}
        self._bases: list[int] = []
        self._generation = -1
        self._active_base = -1
        self._preallocated = None  # (generation, active base, index bytes) the active indexes were sized for
        self.recovered_notes: list[str] = []
        self.recovered = False  # whether opening had to scan (no clean close before)
        self._owner = recover
        self._checkpoint_hw = checkpoint_hw
        self.broker_id = broker_id
        self._follower_hw = 0  # the leader's HW as our last fetch saw it (followers)
        self.epochs = LeaderEpochCache(self.directory)
        self.producers = ProducerState(self.directory)
        if recover:
            with self.lock:
                self._load()
        self.snapshot()

    # ------------------------------------------------------------ opening

    def _load(self) -> None:
        """Under the lock at open: trust a clean close, or recover the tail of the log."""
        epochs_lost = self._drop_unreadable_epochs()
        self._load_state()
        if epochs_lost:
            self._rebuild_epochs()

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
        names = set(os.listdir(self.directory))
        bases = segment_bases(self.directory, names)
        if not bases or bases[-1] != s.active_base:
            return False
        if any(segment_file(self.directory, b, suffix).name not in names
               for b in bases for suffix in (INDEX_SUFFIX, TIMEINDEX_SUFFIX)):
            return False
        active_log = segment_file(self.directory, s.active_base, LOG_SUFFIX)
        size = os.stat(active_log).st_size
        if size < s.active_size:
            return False
        if size > s.active_size:
            os.truncate(active_log, s.active_size)
        return True

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

    def _recover_transactions(self, scanned_from: int, sync: bool) -> None:
        """After recovery (lock held): rebuild the transaction indexes of the segments from
        scanned_from on, cut the others' to the log end, and publish the transaction slots,
        all from the producer state replayed from the newest snapshot at or below scanned_from."""
        s = self.state.snapshot()
        self._sync(s)
        directory = self.directory
        for base in self._bases:
            if base >= scanned_from:
                txn_index.reset(directory, base)
            else:
                txn_index.truncate(directory, base, s.log_end)
        producers = self.producers
        producers.load(scanned_from, s.log_start, now_ms(), PRODUCER_EXPIRATION_MS)
        hw = s.high_watermark
        decided = []  # (first, marker) of transactions whose marker the HW has not passed
        touched = set()

        def on_complete(done) -> None:
            if done.last_offset >= hw:
                decided.append((done.first_offset, done.last_offset))
            if done.aborted and done.last_offset >= scanned_from:
                base = self._bases[bisect.bisect_right(self._bases, done.last_offset) - 1]
                txn_index.append(directory, base, txn_index.AbortedTxn(
                    done.producer_id, done.first_offset, done.last_offset, producers.stable_after(done)))
                touched.add(base)

        if producers.upto < s.log_end:
            producers.apply_batches(self._stored_batches(s, producers.upto), on_complete)
        producers.upto = s.log_end
        producers.generation = s.generation
        if sync:
            for base in touched:
                txn_index.flush(directory, base)
        self.state.publish_transactions(producers.first_undecided(), txn_index.last_abort(directory, self._bases),
                                        decided)

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
            if snap.generation != self._generation:
                self._sync(snap)
            sized = (snap.generation, snap.active_base, self.config.segment_index_bytes)
            if self._preallocated != sized:
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

    # ------------------------------------------------------------ appending

    def append(self, buf) -> AppendInfo:
        """Validate and append one or more whole batches; assign their offsets in place.

        `buf` must be writable (bytearray or a writable memoryview): baseOffset is
        rewritten in it, and the same bytes then go to the file.
        """
        outcome = self.append_many([buf])[0]
        if outcome.__class__ is not AppendInfo:
            raise outcome
        return outcome

    def append_many(self, bufs: list) -> list:
        """Append several buffers of batches in order, as `append` would one by one, but under one
        lock hold, with one pwritev and one state publish (group commit of pipelined produces).

        Returns, per buffer, its AppendInfo or the exception that rejected it (bad CRC, too
        large...: the others are appended all the same, with dense offsets). The files end up
        exactly as after one `append` per buffer. A failure of the partition itself (deleted,
        I/O error) raises; if a roll split the group, what was published before stays
        (at-least-once, as for any failed produce).
        """
        out: list = [None] * len(bufs)
        items = []  # (index in bufs, buf, headers) of the valid buffers
        idempotent = False
        nbytes = nbatches = nrecords = 0
        for i, buf in enumerate(bufs):
            try:
                buf, headers = self._validate(buf)
                producer_state.check_client_batches(headers)
                if headers[0].producer_id != NO_PRODUCER:
                    producer_state.check_single_batch(headers)
                    idempotent = True
            except (CorruptMessage, InvalidRecord, MessageTooLarge, RecordListTooLarge) as exc:
                out[i] = exc
                continue
            items.append((i, buf, headers))
            nbytes += len(buf)
            nbatches += len(headers)
            nrecords += _records(headers)
        if not items:
            return out
        try:
            snap = self._begin_write()
        except OSError as exc:  # a repair after a dead writer (recovery) that met a full or failing disk
            raise self._storage_error(exc) from exc
        try:
            if not self.state.serves_clients():
                raise NotLeaderOrFollower(f"{self.directory.name}: not the leader here")
            if idempotent:
                kept = self._check_producers(snap, items, out)
                if len(kept) < len(items):  # duplicates and refusals are not appended
                    items = kept
                    if not items:
                        return out
                    nbytes = sum(len(buf) for _, buf, _ in items)
                    nbatches = sum(len(headers) for _, _, headers in items)
                    nrecords = sum(_records(headers) for _, _, headers in items)
            now = now_ms()
            # Appended together only if no append of the group, made alone, would roll first: the
            # group's totals cannot roll (they bound what each append would see, as long as the
            # segment holds something: an empty one never rolls before its first batch, but may
            # before its second).
            if (snap.active_size or len(items) == 1) and not self._should_roll(snap, nbytes, nbatches, nrecords, now):
                self._append_locked(snap, items, now, out)
            else:  # a roll inside the group (once a segment): one append at a time, as alone
                for item in items:
                    if self._should_roll(snap, len(item[1]), len(item[2]), _records(item[2]), now):
                        snap = self._roll(snap)  # the producer state is then as of the roll: each
                        # transactional append after it brings the state along (_write_locked)
                    self._append_locked(snap, [item], now, out)
                    snap = self.state.snapshot()
        except OSError as exc:  # a roll's files or producer snapshot: KAFKA_STORAGE_ERROR as for the append
            self.producers.upto = -1
            raise self._storage_error(exc) from exc
        except BaseException:
            self.producers.upto = -1  # checked against appends that may not have happened: reload
            raise
        finally:
            self.lock.release()
        return out

    # ------------------------------------------------------------ idempotent producers

    def _check_producers(self, s: Snapshot, items: list, out: list) -> list:
        """The items that may be appended, in order: a duplicate batch gets its first append's
        offsets in `out`, a batch out of sequence or of a fenced epoch its error (producer_state.py).
        Each accepted batch is applied at once, so the next one of the same producer sees it."""
        self._catch_up_producers(s)
        producers = self.producers
        kept = []
        next_offset = s.log_end
        for item in items:
            i, _, headers = item
            h = headers[0]
            if h.producer_id != NO_PRODUCER and not h.is_control:
                try:
                    producers.append(h, next_offset)
                except producer_state.Duplicate as dup:
                    out[i] = AppendInfo(dup.first_offset, dup.last_offset, s.log_start, 1, h.records_count)
                    continue
                except KafkaError as exc:
                    out[i] = exc
                    continue
            next_offset += _records(headers)
            kept.append(item)
        producers.upto = next_offset
        return kept

    def _catch_up_producers(self, s: Snapshot) -> None:
        """Under the lock: bring this process's producer state to the log end (producer_state.py)."""
        producers = self.producers
        if producers.generation != s.generation or not s.log_start <= producers.upto <= s.log_end:
            producers.load(s.log_end, s.log_start, now_ms(), PRODUCER_EXPIRATION_MS)
            producers.generation = s.generation
        if producers.upto < s.log_end:
            producers.apply_batches(self._stored_batches(s, producers.upto))
            producers.upto = s.log_end

    def _stored_batches(self, s: Snapshot, offset: int, lock_free: bool = False) -> Iterator:
        """(header, transaction marker or None) of the stored batches from the one holding `offset` to
        the log end: 61 bytes read each, the whole batch for a control one (about 80 bytes)."""
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
            while pos + records.HEADER_SIZE <= end:
                h = records.read_header(os.pread(fd, records.HEADER_SIZE, pos))
                if h.base_offset >= s.log_end:
                    return
                yield h, (records.read_end_txn_marker(os.pread(fd, h.size, pos)) if h.is_control else None)
                pos += h.size

    # ------------------------------------------------------------ transactions

    def append_marker(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int) -> AppendInfo:
        """Leader: end producer_id's transaction here with a marker (a control batch; Kafka's
        WriteTxnMarkers append). Raises NotLeaderOrFollower off the leader, INVALID_PRODUCER_EPOCH
        or TRANSACTION_COORDINATOR_FENCED for a stale marker (producer_state.py). A marker for a
        producer with no open transaction here is appended all the same and ends nothing."""
        buf = records.build_end_txn_marker(producer_id, producer_epoch, commit, coordinator_epoch)
        header = records.read_header(buf)
        snap = self._begin_write()
        try:
            if not self.state.serves_clients():
                raise NotLeaderOrFollower(f"{self.directory.name}: not the leader here")
            self._catch_up_producers(snap)
            self.producers.check_marker(producer_id, producer_epoch, coordinator_epoch)
            now = now_ms()
            if self._should_roll(snap, len(buf), 1, 1, now):
                snap = self._roll(snap)
            out: list = [None]
            self._append_locked(snap, [(0, buf, [header])], now, out)
            return out[0]
        finally:
            self.lock.release()

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list:
        """The aborted transactions (txn_index.AbortedTxn) overlapping [fetch_offset, upper_bound):
        the transaction indexes from the segment holding fetch_offset on, until one says no later
        abort can reach below the bound (Kafka's collectAbortedTransactions)."""
        snap = self.snapshot()
        if fetch_offset > snap.last_abort:
            return []
        bases = self._bases
        found = []
        for base in bases[max(bisect.bisect_right(bases, fetch_offset) - 1, 0):]:
            txns, complete = txn_index.collect(txn_index.read(self.directory, base), fetch_offset, upper_bound)
            found += txns
            if complete:
                break
        return found

    def last_records_of_producers(self) -> dict[int, tuple[int, int]]:
        """{producer id: (last data offset, -1 if none in its epoch; epoch)} as of the log end (Kafka's
        lastRecordsOfActiveProducers, what the cleaner keeps empty batches for). Built in a private
        ProducerState from the newest snapshot and the batches after it, without the lock."""
        return self._lock_free(self._last_records_of_producers_once)

    def _last_records_of_producers_once(self) -> dict[int, tuple[int, int]]:
        snap = self.snapshot()
        state = ProducerState(self.directory)
        state.load(snap.log_end, snap.log_start, now_ms(), PRODUCER_EXPIRATION_MS)
        state.apply_batches(self._stored_batches(snap, state.upto, lock_free=True))
        return {pid: (e.batches[-1][3] if e.batches else -1, e.epoch) for pid, e in state.producers.items()}

    @property
    def last_stable_offset(self) -> int:
        return self.snapshot().last_stable_offset

    def _next_base(self, base: int) -> int:
        i = bisect.bisect_right(self._bases, base)
        return self._bases[i] if i < len(self._bases) else 1 << 62

    # ------------------------------------------------------------ replication

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

    def append_replica(self, buf, leader_high_watermark: int | None = None, *,
                       epoch: int | None = None, headers: list | None = None) -> AppendInfo | None:
        """Follower: append the leader's batches as they are (offsets, epochs, bytes), then take
        min(leader's HW, our LEO) as our HW. Batches wholly below our log end are skipped (a
        fetch answered twice); a gap raises OffsetOutOfRange. None if nothing was new.

        `epoch`: the leader epoch the fetch was made in; if we no longer follow in it (a
        fetch answered after a leader change), FencedLeaderEpoch and nothing is appended.
        `headers`: buf's batch headers if the caller validated them already
        (`records.validate_whole_batches`, dense=False)."""
        if headers is None:
            headers = records.validate_batches(buf, dense=False)  # the leader's bytes, as they are
        headers = self._check_sizes(buf, headers)
        with self._writing() as s:
            self._check_following(epoch)
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

    def set_follower_high_watermark(self, leader_high_watermark: int, *, epoch: int | None = None) -> None:
        """Follower: HW = min(leader's HW, our LEO) (`epoch` as for append_replica)."""
        with self._writing() as s:
            self._check_following(epoch)
            self._follower_hw = leader_high_watermark
            self._set_follower_hw_locked(s)

    def _check_following(self, epoch: int | None) -> None:
        """Under the lock: still a follower in `epoch` (None: no check)?"""
        if epoch is not None:
            rep = self.state.replication()
            if rep.role != FOLLOWER or rep.leader_epoch != epoch:
                raise FencedLeaderEpoch(f"{self.directory.name}: no longer following in epoch {epoch}")

    def _set_follower_hw_locked(self, s: Snapshot) -> None:
        hw = min(self._follower_hw, s.log_end)
        if hw != s.high_watermark:
            self.state.update(high_watermark=hw)

    def latest_epoch(self) -> int:
        return self.epochs.latest_epoch()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetsForLeaderEpoch (leader_epochs.end_offset_for)."""
        return self.epochs.end_offset_for(epoch, self.snapshot().log_end)

    def truncate_to_leader_epoch(self, asked: int, epoch: int, end_offset: int) -> bool:
        """One round of a follower's truncation (KIP-101, KIP-279) before it fetches.

        The leader answered OffsetsForLeaderEpoch for `asked` (our latest epoch) with
        (epoch, end_offset). Truncates what the leader does not hold; returns True when done,
        False when the leader only knew an older epoch: ask again with our new latest epoch
        (each round drops our later epochs, so the rounds end). A leader that knows no epoch
        at all (UNDEFINED) leaves us at our high watermark, the pre-epoch rule.
        """
        if epoch == UNDEFINED:
            self.truncate_to(min(self.high_watermark, self.log_end_offset))
            return True
        if epoch == asked:
            self.truncate_to(min(end_offset, self.log_end_offset))
            return True
        _, own_end = self.end_offset_for_epoch(epoch)
        cut = min(end_offset, self.log_end_offset) if own_end == UNDEFINED else min(end_offset, own_end)
        self.truncate_to(min(cut, self.log_end_offset))
        return False

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Follower behind the leader's log start: drop everything, start empty at `offset`."""
        with self._writing() as s:
            self.state.set_pending(TRUNCATE)
            self.state.update(generation=s.generation + 1, log_start=offset, recovery_point=offset,
                              high_watermark=offset)
            for base in list(self._bases):
                self._delete_segment(base)
            producer_state.remove_snapshots_above(self.directory, -1)
            self.epochs.clear()
            self._recover(full=True)
            self._sync(self.state.snapshot())

    def _validate(self, buf) -> tuple:
        """(buf, its batch headers): checked (CRC, magic, length; compressed records too), within the
        size limits, and recompressed to the topic's compression.type (a new buffer) if it asks."""
        config = self.config
        buf, headers = compressed.prepare(buf, records.validate_batches(buf), config.compression_type,
                                          config.compression_level, config.max_message_bytes)
        if config.compact:
            compressed.check_keys(buf, headers, config.max_message_bytes)
        return buf, self._check_sizes(buf, headers)

    def _check_sizes(self, buf, headers: list) -> list:
        config = self.config
        if len(headers) == 1:  # one batch: its size is the buffer's
            if len(buf) > config.max_message_bytes:
                raise MessageTooLarge(f"batch of {len(buf)} bytes > max.message.bytes {config.max_message_bytes}")
        else:
            for h in headers:
                if h.size > config.max_message_bytes:
                    raise MessageTooLarge(f"batch of {h.size} bytes > max.message.bytes {config.max_message_bytes}")
        if len(buf) > config.segment_bytes:
            raise RecordListTooLarge(f"{len(buf)} bytes do not fit a segment of {config.segment_bytes}")
        return headers

    def _should_roll(self, s: Snapshot, nbytes: int, nbatches: int, nrecords: int, now: int) -> bool:
        """Whether appending nbytes in nbatches batches of nrecords offsets needs a new segment first."""
        if s.active_size == 0:
            return False
        active = self._segments[s.active_base]
        return (
            s.active_size + nbytes > self.config.segment_bytes
            or now - s.rolled_at_ms >= self.config.segment_ms
            or s.index_entries + nbatches >= active.offset_index.capacity
            or s.time_entries + nbatches >= active.time_index.capacity - 1  # room for the final entry
            or s.log_end + nrecords - 1 - s.active_base > INT32_MAX
        )

    def _append_locked(self, s: Snapshot, items: list, now: int, out: list, copy: bool = False) -> None:
        """`_write_locked`, with the index pages it may touch given disk blocks first; a failed write
        (ENOSPC, EIO) is KAFKA_STORAGE_ERROR with nothing published (the crash points of an append
        say what its partial bytes are: ignored), so the next append needs no repair."""
        batches = sum(len(headers) for _, _, headers in items)
        active = self._segments[s.active_base]
        try:
            active.offset_index.reserve(s.index_entries + batches + 1)
            active.time_index.reserve(s.time_entries + batches + 2)
            self._write_locked(s, items, now, out, copy)
        except OSError as exc:
            if self.state.get("pending_op") == APPEND:
                self.state.set_pending(IDLE)
            self.producers.upto = -1  # it may hold batches that were not published: reload
            raise self._storage_error(exc) from exc

    def _storage_error(self, exc: OSError) -> KafkaStorageError:
        """KAFKA_STORAGE_ERROR for a failed write or read; a failing disk (EIO...) takes the whole log
        dir offline for every process of the broker (log_dirs.py), a full disk does not."""
        offline = log_dirs.report(self.directory, exc)
        return KafkaStorageError(f"{self.directory.name}: {exc.strerror or exc}"
                                 + ("; its log dir is offline" if offline else ""))

    def _write_locked(self, s: Snapshot, items: list, now: int, out: list, copy: bool = False) -> None:
        """Write buffers of batches at the log end, index them, publish once; out[i] = AppendInfo.

        items: [(i, buf, headers)], appended in order: offsets run on densely from one buffer
        to the next, and the buffers go to the file with one pwritev. A leader's append assigns
        the offsets and stamps its epoch in place; a follower's (`copy`) keeps the leader's, which
        `append_replica` checked run on densely from the log end.
        """
        active = self._segments[s.active_base]
        set_base_offset = records.set_base_offset
        slots = self.state._q
        role = slots[_ROLE]
        epoch = slots[_LEADER_EPOCH] if role == LEADER and not copy else None
        set_epoch = records.set_leader_epoch
        self.state.set_pending(APPEND)
        next_offset = s.log_end
        pos = s.active_size
        idx_n, time_n, since = s.index_entries, s.time_entries, s.since_index
        max_ts, off_max = s.max_timestamp, s.offset_of_max_ts
        last_time_ts = None  # the time index's last timestamp, read once an entry may be written
        interval = self.config.index_interval_bytes
        at = pos  # file position of the batch at hand
        count = 0
        producer_batches = []  # (offset, header, buf, position) of producers' batches
        txn = False  # whether any opens or ends a transaction
        for i, buf, headers in items:
            first = next_offset
            batch_pos = 0
            records_in = 0
            for h in headers:  # per batch, never per record
                if not copy:
                    set_base_offset(buf, next_offset, batch_pos)
                    if epoch is not None:
                        set_epoch(buf, epoch, batch_pos)
                else:
                    next_offset = h.base_offset  # the leader's: past a gap its cleaner left, if any
                if h.producer_id != NO_PRODUCER:
                    producer_batches.append((next_offset, h, buf, batch_pos))
                    if h.attributes & _TXN_BITS:
                        txn = True
                last = next_offset + h.last_offset_delta
                if h.max_timestamp > max_ts:
                    max_ts, off_max = h.max_timestamp, last
                if since >= interval and at > 0:
                    active.offset_index.write(idx_n, next_offset - s.active_base, at)
                    idx_n += 1
                    if last_time_ts is None:
                        last_time_ts = active.time_index.last(time_n)[0]
                    if max_ts > last_time_ts:
                        active.time_index.write(time_n, max_ts, off_max - s.active_base)
                        last_time_ts = max_ts
                        time_n += 1
                    since = 0
                size = h.batch_length + records.LOG_OVERHEAD
                since += size
                batch_pos += size
                at += size
                records_in += h.records_count
                next_offset = last + 1
            count += records_in
            out[i] = AppendInfo(first, next_offset - 1, s.log_start, len(headers), records_in)
        if len(items) == 1:
            active.write_at(pos, items[0][1])
        else:
            active.write_all_at(pos, [buf for _, buf, _ in items])
        undecided = last_abort = None
        decided = ()
        if txn:
            undecided, last_abort, decided = self._apply_transactions(s, producer_batches, next_offset)
        unflushed = s.unflushed + count
        if copy:
            high_watermark = min(self._follower_hw, next_offset)
        elif role == LEADER and slots[_N_ISR] > 1:
            high_watermark = s.high_watermark  # followers' fetches move it
        else:
            high_watermark = next_offset
        oldest_unflushed = s.flushed_at_ms
        if not s.unflushed:
            # flush.ms counts from the oldest unflushed message: this one. Counted from the last flush,
            # a partition written less often than flush.ms fsyncs on every append, in the processor's
            # loop (10,000 partitions written in turn: every request waited for an fsync); now such a
            # partition is left to the flush timer, off the data path.
            oldest_unflushed = now
            self.state.update(flushed_at_ms=now)
        self.state.publish_append(
            next_offset, high_watermark, at, idx_n, time_n, max_ts, off_max, since,
            s.rolled_at_ms if s.active_size else now, unflushed, undecided, last_abort, decided,
        )
        if unflushed >= self.config.flush_messages or now - oldest_unflushed >= self.config.flush_ms:
            self._flush_locked()

    def _apply_transactions(self, s: Snapshot, batches: list, next_offset: int) -> tuple:
        """Before an append that opens or ends transactions is published (lock held, bytes written):
        bring the producer state to its end, write the aborted transactions its markers end to the
        active segment's index, and return (first undecided offset, newest abort marker or None,
        [(first offset, marker offset)] decided) for the publish.

        The state is already there when the leader's checks applied the batches (`_check_producers`);
        otherwise (a follower's copy, a marker, a group split by a roll) it is caught up to the log
        end and these batches are applied to it. A failure leaves no index entry behind and makes
        the next append reload the state."""
        producers = self.producers
        decided, last_abort, written = [], None, None
        try:
            if producers.upto != next_offset:
                if producers.upto != s.log_end or producers.generation != s.generation:
                    self._catch_up_producers(s)
                for offset, h, buf, pos in batches:
                    marker = records.read_end_txn_marker(buf, pos) if h.is_control else None
                    done = producers.apply_batch(h, offset, marker)
                    if done is None:
                        continue
                    decided.append((done.first_offset, done.last_offset))
                    if done.aborted:
                        size = txn_index.append(self.directory, s.active_base, txn_index.AbortedTxn(
                            done.producer_id, done.first_offset, done.last_offset, producers.stable_after(done)))
                        written = size if written is None else written
                        last_abort = done.last_offset
                producers.upto = next_offset
        except BaseException:
            producers.upto = -1
            if written is not None:
                txn_index.cut(self.directory, s.active_base, written)
            raise
        return producers.first_undecided(), last_abort, decided

    def _roll(self, s: Snapshot) -> Snapshot:
        """Seal the active segment and start a new one at the log end (caller holds the lock).

        The producer state as of the new base is kept first (`<base>.snapshot`): a state ahead
        of the log end (a group checked before this roll) is rebuilt to it."""
        if self.producers.upto > s.log_end:
            self.producers.generation = -1
        self._catch_up_producers(s)
        self.producers.write_snapshot(s.log_end, now_ms(), PRODUCER_EXPIRATION_MS)
        self.state.set_pending(ROLL)
        old = self._segments[s.active_base]
        old.make_inactive(s.index_entries, s.time_entries, s.max_timestamp, s.offset_of_max_ts)
        new = Segment(self.directory, s.log_end, create=True, index_bytes=self.config.segment_index_bytes)
        fsync_dir(self.directory)
        self._segments[s.log_end] = new
        self.state.update(
            generation=s.generation + 1, active_base=s.log_end, active_size=0, index_entries=0,
            time_entries=0, max_timestamp=-1, offset_of_max_ts=-1, since_index=0, rolled_at_ms=0,
            pending_op=IDLE,
        )
        # Our own cache is already right: the old active segment is mapped again when it is read.
        self._segments.pop(s.active_base).close()
        # Only the active segment is at risk in a power loss, whatever the flush policy: the sealed one is
        # fsynced soon by this process's flusher thread, off this append's latency (rolled_flush.py).
        rolled_flush.submit(self.directory, s.active_base)
        self._bases = [*self._bases, s.log_end]
        self._generation, self._active_base = s.generation + 1, s.log_end
        return self.state.snapshot()

    def roll(self) -> None:
        """Roll now, if the active segment holds anything."""
        with self._writing() as snap:
            if snap.active_size:
                self._roll(snap)

    def maybe_roll(self) -> bool:
        """Roll an active segment older than segment.ms (the housekeeping timer calls this)."""
        snap = self.snapshot()
        if not snap.active_size or now_ms() - snap.rolled_at_ms < self.config.segment_ms:
            return False
        with self._writing() as snap:
            if snap.active_size and now_ms() - snap.rolled_at_ms >= self.config.segment_ms:
                self._roll(snap)
                return True
        return False

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

    # ------------------------------------------------------------ flushing

    def flush(self) -> None:
        """fsync everything appended so far; the recovery point moves to the log end."""
        with self._writing():
            self._flush_locked()

    def maybe_flush(self) -> bool:
        """Flush if flush.ms has passed since the last flush with messages pending."""
        snap = self.snapshot()
        if not snap.unflushed or now_ms() - snap.flushed_at_ms < self.config.flush_ms:
            return False
        self.flush()
        return True

    def _flush_locked(self) -> None:
        started = time.monotonic()
        s = self.state.snapshot()
        first = max((b for b in self._bases if b <= s.recovery_point), default=self._bases[0])
        for base in self._bases:
            if base >= first:
                self._segment(base).flush()
                if s.last_abort >= base:
                    txn_index.flush(self.directory, base)
        self.state.update(recovery_point=s.log_end, unflushed=0, flushed_at_ms=now_ms())
        self.state.flush()
        flush_timing.observed(time.monotonic() - started)

    # ------------------------------------------------------------ retention and truncation

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

    def follow_log_start(self, leader_log_start: int) -> None:
        """Follower: take the leader's log start offset (from its Fetch answer) as ours, up to our HW, as
        Kafka's follower does: records the leader deleted go here too."""
        snap = self.snapshot()
        if min(leader_log_start, snap.high_watermark) <= snap.log_start:
            return  # the common case: nothing to do, no lock taken
        with self._writing() as s:
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

    def truncate_to(self, offset: int) -> None:
        """Remove every record at or after `offset` (a batch holding it goes whole)."""
        with self._writing() as s:
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

    # ------------------------------------------------------------ log cleaner (cleaner.py)

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

    # ------------------------------------------------------------ closing

    def close(self, clean: bool | None = None) -> None:
        """Close this process's view; a clean close (the owner's, by default) flushes and marks the state.

        Only the process that opened with recovery may mark the partition clean: it
        closes last, after every attached process has stopped appending.
        """
        if self._owner if clean is None else clean:
            try:
                with self._writing() as s:
                    if s.unflushed or s.recovery_point != s.log_end:  # else the files hold nothing unsynced
                        self._flush_locked()
                    if s.log_end > s.active_base:  # the restart then reads no batch header to know its producers
                        self._catch_up_producers(s)
                        self.producers.write_snapshot(s.log_end, now_ms(), PRODUCER_EXPIRATION_MS)
                    self.state.update(clean=1)
                    self.state.flush()
            except UnknownTopicOrPartition:
                pass
        self._close_segments()
        self.state.close()
        self.lock.close()

    def delete(self) -> None:
        """Delete the partition: mark it deleted for every process, then remove its directory."""
        with self._writing() as s:
            self.state.update(deleted=1, generation=s.generation + 1)
            self.state.flush()
        self._close_segments()
        self.state.close()
        self.lock.close()
        doomed = self.directory.with_name(f"{self.directory.name}.{uuid.uuid4().hex}-delete")
        os.rename(self.directory, doomed)
        fsync_dir(self.directory.parent)
        shutil.rmtree(doomed, ignore_errors=True)

    def __enter__(self) -> "Partition":
        return self

    def __exit__(self, *exc) -> None:
        self.close(clean=self._owner and exc[0] is None)


__all__ = ["Partition", "AppendInfo", "LogRead"]
