"""A partition log: segments + shared state + writer lock, usable from many processes at once.

Any number of processes open the same partition directory. Readers take no lock:
they snapshot the shared state (`state.py`), find the segment and batch through the
shared indexes and return a file slice. Writers serialise on the partition lock
(`lock.py`), append with pwrite at the committed size, add index entries, then
publish the new log end in the state; a reader sees an append all at once or not
at all.

`Partition` is this module's write core (opening, appending, rolling, flushing,
closing) over parts that each hold one concern, with their files and crash points:
  segment_view.py        the segments as this process sees them, the lock, lock-free reads
  log_recovery.py        trusting a clean close at open, or recovering the tail
  segment_deletion.py    retention, DeleteRecords, a follower's log start, the cleaner's swap
  replica_state.py       role, high watermark, followers' progress, leader epochs, truncation
  transaction_state.py   idempotent producers, transactions, the last stable offset
They are classes Partition inherits, so the append and read paths call their methods
on `self` with no object in between.

On disk (the partition directory): `partition.state` and `.lock`, which every part
shares; per segment `<base>.log`, `<base>.index` and `<base>.timeindex`, which this
module writes (appends, rolls) and the parts above trim or delete; the rest
(`leader-epoch-checkpoint`, `<offset>.snapshot`, `<base>.txnindex`) is the replica and
transaction parts'.

Crash points of an append (PENDING_OP = APPEND during steps 1-2):
  1. bytes written past ACTIVE_SIZE: invisible to readers; the next writer writes
     over them (and recovery truncates them, or keeps a whole batch that was never
     acknowledged, which is harmless);
  2. index entries written past INDEX_ENTRIES: ignored and overwritten;
  3. the seqlocked state update publishes everything at once.
A group commit (`append_many`: the pipelined produces of one connection) is one such
append of several buffers, written with one pwritev: the same crash points hold.
A roll writes the producer snapshot, creates the new segment's files and fsyncs the
directory before it publishes (PENDING_OP = ROLL meanwhile). Roll, retention and
truncation likewise publish last; whoever next takes the lock and finds PENDING_OP
set (or the seqlock odd) runs recovery over the tail first.

A write that fails (OSError) is KafkaStorageError: a full disk (ENOSPC) for that
request only, a failing one (EIO...) also takes the partition's log dir offline for
every process of the broker (`log_dirs.py`).

Durability: a broker (process) crash loses nothing that was published, because the
bytes are in the page cache and the state is a shared mapping; a machine crash loses
at most `flush.messages` messages (an append that reaches them fsyncs) or `flush.ms` of them
plus the flush timer's period (`flush`, which fsyncs outside the lock), and never more than the
active segment: a segment that rolls is fsynced right after, off the append path
(`rolled_flush.py`), as Kafka does (docs/durability.md).
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from pathlib import Path

from mmlog.config.settings import LogConfig
from mmlog.errors import (
    CorruptMessage,
    InvalidRecord,
    MessageTooLarge,
    NotLeaderOrFollower,
    RecordListTooLarge,
    UnknownTopicOrPartition,
)
from mmlog.log import compressed, flush_timing, producer_state, rolled_flush, txn_index
from mmlog.log.append_info import AppendInfo, offsets_taken
from mmlog.log.leader_epochs import LeaderEpochCache
from mmlog.log.lock import PartitionLock
from mmlog.log.log_recovery import LogRecovery
from mmlog.log.producer_state import NO_PRODUCER, ProducerState
from mmlog.log.replica_state import ReplicaState
from mmlog.log.segment import Segment
from mmlog.log.segment_deletion import SegmentDeletion
from mmlog.log.segment_view import APPEND, IDLE, LEADER, ROLL, now_ms
from mmlog.log.state import LEADER_EPOCH as _LEADER_EPOCH
from mmlog.log.state import N_ISR as _N_ISR
from mmlog.log.state import ROLE as _ROLE
from mmlog.log.state import PartitionState, Snapshot
from mmlog.log.transaction_state import PRODUCER_EXPIRATION_MS, TransactionState
from mmlog.protocol import records
from mmlog.system.files import fsync_dir

INT32_MAX = 2**31 - 1
_TXN_BITS = records.TRANSACTIONAL_BIT | records.CONTROL_BIT  # batches that open or end transactions


class Partition(ReplicaState, TransactionState, SegmentDeletion, LogRecovery):
    """One partition's log, open in this process."""

    used = 0  # when a LogManager last looked it up (its counter): the least recently used close first

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
        self._watchers = []
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
        self.lock = PartitionLock(self.directory, self.state)
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
            nrecords += offsets_taken(headers)
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
                    nrecords = sum(offsets_taken(headers) for _, _, headers in items)
            now = now_ms()
            # Appended together only if no append of the group, made alone, would roll first: the
            # group's totals cannot roll (they bound what each append would see, as long as the
            # segment holds something: an empty one never rolls before its first batch, but may
            # before its second).
            if (snap.active_size or len(items) == 1) and not self._should_roll(snap, nbytes, nbatches, nrecords, now):
                self._append_locked(snap, items, now, out)
            else:  # a roll inside the group (once a segment): one append at a time, as alone
                for item in items:
                    if self._should_roll(snap, len(item[1]), len(item[2]), offsets_taken(item[2]), now):
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
        if producer_batches:
            self.state.raise_producers_end(next_offset)  # before the publish: see state.py, PRODUCERS_END
        if not s.unflushed:
            # flush.ms counts from the oldest unflushed message: this one. Only the flush timer acts on
            # it (`maybe_flush`, outside this lock), as Kafka's scheduler does: an fsync in the append
            # would stall every connection of the appending processor for as long as the disk takes.
            self.state.update(flushed_at_ms=now)
        self.state.publish_append(
            next_offset, high_watermark, at, idx_n, time_n, max_ts, off_max, since,
            s.rolled_at_ms if s.active_size else now, unflushed, undecided, last_abort, decided,
        )
        if unflushed >= self.config.flush_messages:
            self._flush_locked()

    def _roll(self, s: Snapshot) -> Snapshot:
        """Seal the active segment and start a new one at the log end (caller holds the lock).

        The producer state as of the new base is kept first (`<base>.snapshot`): a state ahead
        of the log end (a group checked before this roll) is rebuilt to it. Nothing here waits for the
        disk: the snapshot, the sealed segment and the directory naming the new one are fsynced by the
        flusher thread (rolled_flush.py), and a flush fsyncs the directory before its recovery point
        passes a record of the new segment (`_sync_new_names`)."""
        if self.producers.upto > s.log_end:
            self.producers.generation = -1
        self._catch_up_producers(s)
        self.producers.write_snapshot(s.log_end, now_ms(), PRODUCER_EXPIRATION_MS, sync=False)
        self.state.set_pending(ROLL)
        self._mappings_changed()  # the active segment's indexes are trimmed, and it is closed
        old = self._segments[s.active_base]
        old.make_inactive(s.index_entries, s.time_entries, s.max_timestamp, s.offset_of_max_ts)
        new = Segment(self.directory, s.log_end, create=True, index_bytes=self.config.segment_index_bytes)
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
        rolled_flush.submit(self.directory, s.active_base, snapshot=s.log_end)
        self._bases = [*self._bases, s.log_end]
        self._generation, self._active_base = s.generation + 1, s.log_end
        # Our producer state is caught up to the new base and no record left the log: it stays valid in
        # the new generation (else the next catch-up would reload it from the snapshot just written)
        self.producers.generation = s.generation + 1
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

    # ------------------------------------------------------------ flushing

    def flush(self) -> None:
        """fsync everything appended so far; the recovery point moves to that log end.

        The fsyncs run outside the partition lock, so appends go on meanwhile (Kafka's flush does
        the same). Crash points: the log end, the segments from the recovery point's and the unflushed
        count are read under the lock; the files are synced by path (each descriptor of this process
        may be closed by another thread's roll meanwhile), which covers every byte and index entry
        published by then, the indexes' mapped pages included; only then, under the lock again, does
        the recovery point move to that log end. A changed segment set meanwhile (a roll, retention, a
        truncation or a swap: the generation moves) makes no such claim: the flush is done again under
        the lock, as an append's flush.messages flush is."""
        with self._writing() as s:
            if not s.unflushed and s.recovery_point == s.log_end:
                return
            bases = self._unflushed_bases(s)
            started, started_ms = time.monotonic(), now_ms()  # under the lock: before any append it leaves out
        for base in bases:
            rolled_flush.sync_files(self.directory, base)  # one deleted meanwhile: the generation moved
        self._sync_new_names(s)
        with self._writing() as now:
            if now.generation != s.generation:
                self._flush_locked()
                return
            flushed_more = now.recovery_point > s.recovery_point  # an append's flush.messages flush meanwhile
            unflushed = now.unflushed if flushed_more else max(now.unflushed - s.unflushed, 0)
            self.state.update(recovery_point=max(now.recovery_point, s.log_end), unflushed=unflushed,
                              flushed_at_ms=started_ms if unflushed else now_ms())
        self.state.flush()
        flush_timing.observed(time.monotonic() - started)

    def maybe_flush(self) -> bool:
        """Flush if the oldest unflushed message is flush.ms old (the flush timer)."""
        snap = self.snapshot()
        if not snap.unflushed or now_ms() - snap.flushed_at_ms < self.config.flush_ms:
            return False
        self.flush()
        return True

    def _sync_new_names(self, s: Snapshot) -> None:
        """fsync the directory if the active segment was created since the recovery point last moved (a roll
        does not wait for it): the recovery point may pass a record of a segment only once its name is
        durable, or a power loss could take the whole file with records a flush had claimed."""
        if s.active_base >= s.recovery_point:
            fsync_dir(self.directory)

    def _unflushed_bases(self, s: Snapshot) -> list[int]:
        """The segments a flush syncs: the one holding the recovery point and every later one."""
        first = max((b for b in self._bases if b <= s.recovery_point), default=self._bases[0])
        return [b for b in self._bases if b >= first]

    def _flush_locked(self) -> None:
        started = time.monotonic()
        s = self.state.snapshot()
        for base in self._unflushed_bases(s):
            self._segment(base).flush()
            if s.last_abort >= base:
                txn_index.flush(self.directory, base)
        self._sync_new_names(s)
        self.state.update(recovery_point=s.log_end, unflushed=0, flushed_at_ms=now_ms())
        self.state.flush()
        flush_timing.observed(time.monotonic() - started)

    # ------------------------------------------------------------ closing

    def close(self, clean: bool | None = None) -> None:
        """Close this process's view; a clean close (the owner's, by default) flushes and marks the state.

        Only the process that opened with recovery may mark the partition clean: it
        closes last, after every attached process has stopped appending.
        """
        if (self._owner if clean is None else clean) and not self._still_clean():
            try:
                with self._writing() as s:
                    if s.unflushed or s.recovery_point != s.log_end:  # else the files hold nothing unsynced
                        self._flush_locked()
                    self._keep_producers(s, sync=True)
                    self.state.update(clean=1)
                    self.state.flush()
            except UnknownTopicOrPartition:
                pass
        self._close_segments()
        self.state.close()
        self.lock.close()

    def prepare_clean_close(self) -> bool:
        """The first half of a clean close whose fsyncs one syncfs of the log dir's file system replaces
        (the manager's stop, mmlog/system/syncfs.py): the producer snapshot written and the recovery point
        moved to the log end, nothing synced. False when the state page is already marked clean (the
        second half has nothing to mark). The caller closes this view unclean, syncs, and then marks the
        state page clean (`state.mark_clean`)."""
        if self._still_clean():
            return False
        with self._writing() as s:
            self._keep_producers(s, sync=False)
            self.state.update(recovery_point=s.log_end, unflushed=0, flushed_at_ms=now_ms())
        return True

    def _keep_producers(self, s: Snapshot, sync: bool) -> None:
        """At a clean close: the producer state as of the log end, kept where a restart would otherwise
        read many batch headers to know it (the roll's snapshot covers an empty active segment)."""
        if s.log_end > s.active_base:
            self._catch_up_producers(s)
            if self.producers.worth_a_snapshot(now_ms(), PRODUCER_EXPIRATION_MS):
                self.producers.write_snapshot(s.log_end, now_ms(), PRODUCER_EXPIRATION_MS, sync=sync)

    def _still_clean(self) -> bool:
        """Whether the state page is marked clean (nothing written since the last clean close: closing it
        clean again would write nothing new)."""
        try:
            return bool(self.state.snapshot().clean)
        except Exception:  # noqa: BLE001 - torn or gone: the clean close's own path repairs or skips it
            return False

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
