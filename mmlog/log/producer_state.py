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
"""

from __future__ import annotations

import os
import struct
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mmlog.errors import (
    InvalidProducerEpoch,
    InvalidRecord,
    OutOfOrderSequenceNumber,
    UnknownProducerId,
)
from mmlog.log.files import atomic_write

SUFFIX = ".snapshot"
MAX_CACHED = 5  # batches remembered per producer: Kafka's max.in.flight for idempotence
NO_PRODUCER = -1
_SEQ_WRAP = 1 << 31
_MAGIC = b"MMLOGPS1"
_ROW = 4 + 4 * MAX_CACHED  # pid, epoch, last timestamp, n, then (first seq, last seq, first offset, last offset) each


@dataclass
class ProducerEntry:
    """One producer's epoch and last batches: (first seq, last seq, first offset, last offset), oldest first."""

    epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=MAX_CACHED))
    last_timestamp: int = -1

    def last_seq(self) -> int:
        return self.batches[-1][1] if self.batches else -1


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


class ProducerState:
    """A process's copy of a partition's producer state, valid as of `upto` (the next offset to apply)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.producers: dict[int, ProducerEntry] = {}
        self.upto = -1  # -1: not loaded
        self.generation = -1

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
        expected = (entry.last_seq() + 1) % _SEQ_WRAP
        if first_seq != expected:
            raise OutOfOrderSequenceNumber(f"producer {pid} epoch {epoch}: sequence {first_seq}, expected {expected}")

    def apply(self, pid: int, epoch: int, first_seq: int, last_seq: int, first_offset: int, last_offset: int,
              timestamp: int) -> None:
        """A batch of an idempotent producer is in the log at [first_offset, last_offset]."""
        entry = self.producers.get(pid)
        if entry is None or epoch != entry.epoch:
            entry = self.producers[pid] = ProducerEntry(epoch)
        entry.batches.append((first_seq, last_seq, first_offset, last_offset))
        entry.last_timestamp = max(entry.last_timestamp, timestamp)
        self.upto = max(self.upto, last_offset + 1)

    def append(self, h, first_offset: int) -> None:
        """An idempotent producer's batch (its header) about to be appended at first_offset: check it
        (Duplicate or the leader's error) and, if it may go, apply it."""
        last_seq = _last_sequence(h)
        self.check(h.producer_id, h.producer_epoch, h.base_sequence, last_seq)
        self.apply(h.producer_id, h.producer_epoch, h.base_sequence, last_seq, first_offset,
                   first_offset + h.last_offset_delta, h.max_timestamp)

    def apply_headers(self, headers) -> None:
        """Apply stored batch headers, in log order."""
        for h in headers:
            if h.producer_id != NO_PRODUCER and not h.is_control:
                self.apply(h.producer_id, h.producer_epoch, h.base_sequence, _last_sequence(h), h.base_offset,
                           h.last_offset, h.max_timestamp)
            self.upto = h.next_offset

    # ------------------------------------------------------------ snapshots

    def load(self, log_end: int, log_start: int, now_ms: int, expiration_ms: int) -> int:
        """Reset to the newest snapshot at or below log_end (empty at log_start if none); returns its offset."""
        self.producers = {}
        offsets = [o for o in snapshot_offsets(self.directory) if o <= log_end]
        for offset in reversed(offsets):
            try:
                self.producers = _decode(snapshot_path(self.directory, offset).read_bytes())
            except (OSError, ValueError):
                continue  # a damaged snapshot: an older one, or the log from its start, serves
            self._expire(now_ms, expiration_ms)
            self.upto = offset
            return offset
        self.upto = log_start
        return log_start

    def write_snapshot(self, offset: int, now_ms: int, expiration_ms: int) -> None:
        """Keep the state as of `offset` (this state must be caught up to it)."""
        self._expire(now_ms, expiration_ms)
        atomic_write(snapshot_path(self.directory, offset), _encode(self.producers))

    def _expire(self, now_ms: int, expiration_ms: int) -> None:
        for pid in [p for p, e in self.producers.items() if now_ms - e.last_timestamp > expiration_ms]:
            del self.producers[pid]


def _last_sequence(h) -> int:
    """The sequence of a batch's last record (sequences wrap at 2^31)."""
    return (h.base_sequence + h.last_offset_delta) % _SEQ_WRAP


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
#   "MMLOGPS1", int64 count, then count rows of _ROW int64 (little-endian):
#   pid, epoch, last timestamp, n batches, then n × (first seq, last seq, first offset, last offset)


def _encode(producers: dict[int, ProducerEntry]) -> bytes:
    rows = np.full((len(producers), _ROW), -1, dtype="<i8")
    for i, (pid, e) in enumerate(sorted(producers.items())):
        rows[i, :4] = (pid, e.epoch, e.last_timestamp, len(e.batches))
        for j, batch in enumerate(e.batches):
            rows[i, 4 + 4 * j: 8 + 4 * j] = batch
    return _MAGIC + struct.pack("<q", len(producers)) + rows.tobytes()


def _decode(data: bytes) -> dict[int, ProducerEntry]:
    if data[:8] != _MAGIC or len(data) < 16:
        raise ValueError("not a producer state snapshot")
    (count,) = struct.unpack_from("<q", data, 8)
    if count < 0 or len(data) != 16 + count * _ROW * 8:
        raise ValueError("torn producer state snapshot")
    rows = np.frombuffer(data, dtype="<i8", offset=16).reshape(count, _ROW).tolist()
    out = {}
    for row in rows:
        entry = ProducerEntry(row[1], last_timestamp=row[2])
        for j in range(row[3]):
            entry.batches.append(tuple(row[4 + 4 * j: 8 + 4 * j]))
        out[row[0]] = entry
    return out


def check_single_batch(headers) -> None:
    """Kafka's rule: an idempotent producer's records field holds exactly one batch per partition."""
    if len(headers) > 1 and any(h.producer_id != NO_PRODUCER for h in headers):
        raise InvalidRecord("an idempotent producer's request must hold one batch per partition")
