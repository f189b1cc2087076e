"""Idempotent producers' state in a partition: each producer id's epoch and its last five batches.

What it is for (Kafka's ProducerStateManager): a producer with idempotence on
numbers its batches per partition (producer id, epoch, base sequence). Before a
batch is appended the leader checks it against the producer's state:

- a duplicate of one of the producer's last 5 batches (same first and last
  sequence) is not appended again: it is answered with the offsets it got;
- a new epoch must start at sequence 0; an epoch older than the producer's is
  INVALID_PRODUCER_EPOCH (a zombie of a fenced producer);
- otherwise the batch must follow the last one (sequence + 1, wrapping at 2^31),
  else OUT_OF_ORDER_SEQUENCE_NUMBER; a producer we know nothing of (new, or its
  state expired after `producer.id.expiration.ms`) must start at 0, else
  UNKNOWN_PRODUCER_ID.

Where it lives. Every process appending to a partition needs the state as of the
log end, and appends from other processes change it. The state is a function of
the log, so each process keeps its own copy and catches up from the log under
the partition lock before it checks a batch: it reads the headers of the
batches appended since it last looked (61 bytes each, no records) and applies
those of idempotent producers. The log is the only shared truth, so there is no
second structure to repair after a crash.

Snapshots make catching up short: at each segment roll the rolling process
writes the state as of the new segment's base (`<base>.snapshot`, written
atomically), and a process that starts, or sees the partition's generation move
(a roll, a truncation, a repair, retention), reloads the latest snapshot at or
below the log end and reads the batches after it. Snapshots above a truncation
point are removed with it; snapshots below the log start go with their
segments, except the newest of them. Followers get the same state from the
batches they copy, so a new leader checks sequences as the old one did.

Transactions (Kafka's ProducerAppendInfo). A transactional producer's first
transactional batch on the partition opens its transaction there: the entry keeps
that batch's first offset (`txn_first`, Kafka's currentTxnFirstOffset) until a
transaction marker (a control batch, `records.build_end_txn_marker`) of the producer
ends it, and `ongoing` maps each producer with an open transaction to that offset:
the smallest of them is the first undecided offset, which bounds the last stable
offset. Rules, as Kafka's:

- a non-transactional batch of a producer whose transaction is open is
  INVALID_TXN_STATE; a transactional batch after a marker starts a new transaction;
- a marker of an epoch older than the producer's is INVALID_PRODUCER_EPOCH, one of a
  coordinator epoch older than the last marker's TRANSACTION_COORDINATOR_FENCED;
  a marker may bump the epoch (the coordinator aborting a fenced producer's
  transaction); a marker for a producer with no open transaction ends nothing;
- replayed batches (recovery, catching up, a follower's copies) are applied without
  checks: they were checked when first appended;
- a producer with an open transaction never expires.

A marker that ends a transaction yields a `Completed` (producer id, first offset,
marker offset, aborted); the partition writes aborted ones to the transaction index
(`txn_index.py`).

Snapshot format v2 (`MMLOGPS2`) adds each producer's coordinator epoch and open
transaction's first offset; a v1 snapshot (`MMLOGPS1`, written before transactions
existed here) still loads, with no open transaction and no coordinator epoch.
"""

from __future__ import annotations

import logging
import os
import struct
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np

from mmlog.errors import (
    InvalidProducerEpoch,
    InvalidRecord,
    InvalidTxnState,
    OutOfOrderSequenceNumber,
    TransactionCoordinatorFenced,
    UnknownProducerId,
)
from mmlog.system.files import atomic_write

log = logging.getLogger(__name__)

SUFFIX = ".snapshot"
MAX_CACHED = 5  # batches remembered per producer: Kafka's max.in.flight for idempotence
NO_PRODUCER = -1
SEQ_WRAP = 1 << 31
_TXN_BITS = 0x30  # transactional | control (records.TRANSACTIONAL_BIT | records.CONTROL_BIT)
_MAGIC_V1 = b"MMLOGPS1"
_MAGIC = b"MMLOGPS2"
_ROW_V1 = 4 + 4 * MAX_CACHED  # pid, epoch, last timestamp, n, then (first seq, last seq, first offset, last offset) each
_ROW = 6 + 4 * MAX_CACHED  # v2: pid, epoch, last timestamp, n, coordinator epoch, txn first offset, then the batches


@dataclass
class ProducerEntry:
    """One producer's epoch and last batches: (first seq, last seq, first offset, last offset), oldest first."""

    epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=MAX_CACHED))
    last_timestamp: int = -1
    coordinator_epoch: int = -1  # of the last transaction marker
    txn_first: int = -1  # first offset of its open transaction here (-1: none)

    def last_seq(self) -> int:
        return self.batches[-1][1] if self.batches else -1

    def set_epoch(self, epoch: int) -> None:
        """A new epoch forgets the old one's batches (its open transaction stays, as Kafka's)."""
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches.clear()


class Completed(NamedTuple):
    """A transaction a marker ended: its producer, first offset, the marker's offset, and how it ended."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


class Duplicate(Exception):
    """The batch was appended before: answer with its offsets (first, last) instead of appending."""

    def __init__(self, first_offset: int, last_offset: int) -> None:
        super().__init__(first_offset, last_offset)
        self.first_offset = first_offset
        self.last_offset = last_offset


def snapshot_path(directory: Path, offset: int) -> Path:
    return Path(directory) / f"{offset:020d}{SUFFIX}"


def snapshot_offsets(directory: Path) -> list[int]:
    return sorted(int(e.name[: -len(SUFFIX)]) for e in os.scandir(directory)
                  if e.name.endswith(SUFFIX) and e.name[: -len(SUFFIX)].isdigit())


REPLAY_LIMIT = 1024  # offsets a reload may read the headers of rather than a snapshot being written


class ProducerState:
    """A process's copy of a partition's producer state, valid as of `upto` (the next offset to apply)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.producers: dict[int, ProducerEntry] = {}
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self.upto = -1  # -1: not loaded
        self.generation = -1
        self.loaded_at = -1  # the offset a reload starts from: the newest snapshot's, or the log start

    def first_undecided(self) -> int:
        """The first offset of the oldest open transaction (-1: none open)."""
        return min(self.ongoing.values()) if self.ongoing else -1

    def stable_after(self, completed: Completed) -> int:
        """The last stable offset once `completed` is decided (Kafka's lastStableOffset(completedTxn)):
        the first offset of another producer's open transaction, else just past the marker."""
        others = [first for pid, first in self.ongoing.items() if pid != completed.producer_id]
        return min(others) if others else completed.last_offset + 1

    # ------------------------------------------------------------ checking and applying

    def check(self, pid: int, epoch: int, first_seq: int, last_seq: int) -> None:
        """Raise Duplicate (with its offsets) or the error a leader answers; return if the batch may go."""
        entry = self.producers.get(pid)
        if entry is None:
            if first_seq != 0:
                raise UnknownProducerId(f"producer {pid} is unknown here (new, or its state expired) and its "
                                        f"batch starts at sequence {first_seq}, not 0")
            return
        if epoch < entry.epoch:
            raise InvalidProducerEpoch(f"producer {pid} epoch {epoch} is older than its current epoch {entry.epoch}")
        if epoch > entry.epoch:
            if first_seq != 0:
                raise OutOfOrderSequenceNumber(f"producer {pid}: a new epoch {epoch} starts at sequence {first_seq}, "
                                               "not 0")
            return
        for f_seq, l_seq, f_off, l_off in entry.batches:
            if f_seq == first_seq and l_seq == last_seq:
                raise Duplicate(f_off, l_off)
        expected = (entry.last_seq() + 1) % SEQ_WRAP
        if first_seq != expected:
            raise OutOfOrderSequenceNumber(f"producer {pid} epoch {epoch}: sequence {first_seq}, expected {expected}")

    def apply(self, pid: int, epoch: int, first_seq: int, last_seq: int, first_offset: int, last_offset: int,
              timestamp: int, transactional: bool = False) -> None:
        """A batch of an idempotent producer is in the log at [first_offset, last_offset]; a
        transactional one opens the producer's transaction if none is open."""
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerEntry(epoch)
        else:
            entry.set_epoch(epoch)
        entry.batches.append((first_seq, last_seq, first_offset, last_offset))
        entry.last_timestamp = max(entry.last_timestamp, timestamp)
        if transactional and entry.txn_first < 0:
            entry.txn_first = self.ongoing[pid] = first_offset
        self.upto = max(self.upto, last_offset + 1)

    def append(self, h, first_offset: int) -> None:
        """An idempotent producer's batch (its header) about to be appended at first_offset: check it
        (Duplicate or the leader's error) and, if it may go, apply it."""
        last_seq = _last_sequence(h)
        pid = h.producer_id
        self.check(pid, h.producer_epoch, h.base_sequence, last_seq)
        transactional = h.is_transactional
        entry = self.producers.get(pid)
        if entry is not None and entry.txn_first >= 0 and not transactional:
            raise InvalidTxnState(f"producer {pid} wrote a non-transactional batch while its transaction "
                                  f"(from offset {entry.txn_first}) is open")
        self.apply(pid, h.producer_epoch, h.base_sequence, last_seq, first_offset,
                   first_offset + h.last_offset_delta, h.max_timestamp, transactional)

    def check_marker(self, pid: int, epoch: int, coordinator_epoch: int) -> None:
        """Raise the error a leader answers for a marker it must not append (Kafka's
        checkProducerEpoch and checkCoordinatorEpoch); return if it may go."""
        entry = self.producers.get(pid)
        if entry is None:
            return
        if epoch < entry.epoch:
            raise InvalidProducerEpoch(f"marker for producer {pid} of epoch {epoch}, older than its current "
                                       f"epoch {entry.epoch}")
        if coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFenced(f"marker for producer {pid} from coordinator epoch "
                                               f"{coordinator_epoch}, older than {entry.coordinator_epoch}")

    def apply_marker(self, pid: int, epoch: int, marker, offset: int, timestamp: int) -> Completed | None:
        """A transaction marker (records.EndTxnMarker) of producer pid is in the log at `offset`: its
        open transaction, if any, ends (returned as Completed)."""
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerEntry(epoch)
        completed = None
        if entry.txn_first >= 0:
            completed = Completed(pid, entry.txn_first, offset, not marker.commit)
        entry.set_epoch(epoch)
        entry.coordinator_epoch = marker.coordinator_epoch
        entry.last_timestamp = timestamp
        entry.txn_first = -1
        self.ongoing.pop(pid, None)
        self.upto = max(self.upto, offset + 1)
        return completed

    def append_marker(self, pid: int, epoch: int, marker, offset: int, timestamp: int) -> Completed | None:
        """A marker about to be appended at `offset`: check it (the leader's error) and apply it."""
        self.check_marker(pid, epoch, marker.coordinator_epoch)
        return self.apply_marker(pid, epoch, marker, offset, timestamp)

    def apply_batch(self, h, base_offset: int, marker=None) -> Completed | None:
        """Apply one batch in the log at base_offset (no checks: it was checked when first appended).
        A control batch needs its records.EndTxnMarker (None: not a transaction marker); a marker
        that ends a transaction returns it."""
        pid = h.producer_id
        if pid == NO_PRODUCER:
            return None
        if not h.is_control:
            self.apply(pid, h.producer_epoch, h.base_sequence, _last_sequence(h), base_offset,
                       base_offset + h.last_offset_delta, h.max_timestamp, h.is_transactional)
            return None
        if marker is None:
            if not h.records_count:  # a marker the cleaner emptied: kept for its producer's epoch
                self._keep_epoch(pid, h.producer_epoch, h.max_timestamp)
            return None
        return self.apply_marker(pid, h.producer_epoch, marker, base_offset, h.max_timestamp)

    def _keep_epoch(self, pid: int, epoch: int, timestamp: int) -> None:
        """A producer's epoch as an emptied marker holds it (the cleaner keeps the last one of a
        producer with no data batch in its epoch so that a restart still fences older epochs)."""
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerEntry(epoch)
        entry.set_epoch(max(entry.epoch, epoch))
        entry.last_timestamp = max(entry.last_timestamp, timestamp)

    def apply_batches(self, batches, on_complete: Callable[[Completed], None] | None = None) -> None:
        """Apply stored batches, (header, marker or None) in log order; each transaction a marker
        ends goes to on_complete."""
        for h, marker in batches:
            done = self.apply_batch(h, h.base_offset, marker)
            if done is not None and on_complete is not None:
                on_complete(done)
            self.upto = h.next_offset

    # ------------------------------------------------------------ snapshots

    def load(self, log_end: int, log_start: int, now_ms: int, expiration_ms: int) -> int:
        """Reset to the newest snapshot at or below log_end (empty at log_start if none); returns its offset."""
        self.producers = {}
        self.ongoing = {}
        offsets = [o for o in snapshot_offsets(self.directory) if o <= log_end]
        for offset in reversed(offsets):
            path = snapshot_path(self.directory, offset)
            try:
                producers = _decode(path.read_bytes())
            except FileNotFoundError:
                continue  # removed by retention or a truncation since we listed
            except (OSError, ValueError) as exc:
                # A torn or zero-filled snapshot (a power loss after a version that renamed before fsync):
                # an older one, or the log from its start, serves, as in Kafka. Removed so that it is
                # reported once; every snapshot name holds a whole file (atomic_write), so no writer's is.
                log.warning("%s/%s: %s; producer state is rebuilt from an older snapshot or the log",
                            self.directory.name, path.name, exc)
                path.unlink(missing_ok=True)
                continue
            self.producers = producers
            self.ongoing = {pid: e.txn_first for pid, e in producers.items() if e.txn_first >= 0}
            self._expire(now_ms, expiration_ms)
            self.upto = self.loaded_at = offset
            return offset
        self.upto = self.loaded_at = log_start
        return log_start

    def write_snapshot(self, offset: int, now_ms: int, expiration_ms: int, sync: bool = True) -> None:
        """Keep the state as of `offset` (this state must be caught up to it); `sync=False`: the caller
        syncs the file system before relying on it."""
        self._expire(now_ms, expiration_ms)
        atomic_write(snapshot_path(self.directory, offset), _encode(self.producers), sync=sync)
        self.loaded_at = max(self.loaded_at, offset)

    def worth_a_snapshot(self, now_ms: int, expiration_ms: int) -> bool:
        """Whether a snapshot at `upto` would spare a later reload anything: producers to keep, or more
        than REPLAY_LIMIT offsets of batch headers to read again. An empty state over a short stretch is
        what a reload from the older snapshot rebuilds anyway (its producers expired, or none), for less
        than the file would cost to make (a clean stop of many partitions makes thousands)."""
        self._expire(now_ms, expiration_ms)
        return bool(self.producers) or self.upto - self.loaded_at > REPLAY_LIMIT

    def _expire(self, now_ms: int, expiration_ms: int) -> None:
        for pid in [p for p, e in self.producers.items()
                    if e.txn_first < 0 and now_ms - e.last_timestamp > expiration_ms]:
            del self.producers[pid]


def _last_sequence(h) -> int:
    """The sequence of a batch's last record (sequences wrap at 2^31)."""
    return (h.base_sequence + h.last_offset_delta) % SEQ_WRAP


def remove_snapshots_above(directory: Path, offset: int) -> None:
    """A truncation to `offset`: snapshots of states beyond it describe records that are gone."""
    for o in snapshot_offsets(directory):
        if o > offset:
            snapshot_path(directory, o).unlink(missing_ok=True)


def remove_snapshots_below(directory: Path, log_start: int) -> None:
    """Retention moved the log start: snapshots before it go, except the newest of them (a state to start from)."""
    old = [o for o in snapshot_offsets(directory) if o < log_start]
    for o in old[:-1]:
        snapshot_path(directory, o).unlink(missing_ok=True)


# ---------------------------------------------------------------- the snapshot file
#
#   "MMLOGPS2", int64 count, then count rows of _ROW int64 (little-endian):
#   pid, epoch, last timestamp, n batches, coordinator epoch, open transaction's first offset (-1: none),
#   then n × (first seq, last seq, first offset, last offset)
#   ("MMLOGPS1", before transactions: the same rows without the two transaction slots)


def _encode(producers: dict[int, ProducerEntry]) -> bytes:
    rows = np.full((len(producers), _ROW), -1, dtype="<i8")
    for i, (pid, e) in enumerate(sorted(producers.items())):
        rows[i, :6] = (pid, e.epoch, e.last_timestamp, len(e.batches), e.coordinator_epoch, e.txn_first)
        for j, batch in enumerate(e.batches):
            rows[i, 6 + 4 * j: 10 + 4 * j] = batch
    return _MAGIC + struct.pack("<q", len(producers)) + rows.tobytes()


def _decode(data: bytes) -> dict[int, ProducerEntry]:
    magic = data[:8]
    if magic not in (_MAGIC, _MAGIC_V1) or len(data) < 16:
        raise ValueError("not a producer state snapshot")
    width, first_batch = (_ROW, 6) if magic == _MAGIC else (_ROW_V1, 4)
    (count,) = struct.unpack_from("<q", data, 8)
    if count < 0 or len(data) != 16 + count * width * 8:
        raise ValueError("torn producer state snapshot")
    rows = np.frombuffer(data, dtype="<i8", offset=16).reshape(count, width).tolist()
    out = {}
    for row in rows:
        entry = ProducerEntry(row[1], last_timestamp=row[2])
        if magic == _MAGIC:
            entry.coordinator_epoch, entry.txn_first = row[4], row[5]
        for j in range(row[3]):
            entry.batches.append(tuple(row[first_batch + 4 * j: first_batch + 4 + 4 * j]))
        out[row[0]] = entry
    return out


def check_client_batches(headers) -> None:
    """What Kafka refuses in a client's produce (INVALID_RECORD): control batches (only a leader
    writes transaction markers) and a transactional batch without a producer id."""
    for h in headers:
        if h.attributes & _TXN_BITS:
            if h.is_control:
                raise InvalidRecord("clients may not write control batches")
            if h.producer_id == NO_PRODUCER:
                raise InvalidRecord("a transactional batch needs a producer id")


def check_single_batch(headers) -> None:
    """Kafka's rule: an idempotent producer's records field holds exactly one batch per partition."""
    if len(headers) > 1 and any(h.producer_id != NO_PRODUCER for h in headers):
        raise InvalidRecord("an idempotent producer's request must hold one batch per partition")
