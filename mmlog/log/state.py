"""Partition state: one shared, mmap-ed page that every process reads without a lock.

Layout: a 4 KiB file `partition.state` of native-endian int64 slots:

    0 MAGIC             'MMLOGST1'
    1 SEQ               seqlock sequence: odd while a writer is changing slots 2..
    2 GENERATION        bumped on every change of the segment set (roll, retention,
                        truncation, deletion): a process whose cached segment list
                        is from an older generation lists the directory again
    3 LOG_START         log start offset
    4 ACTIVE_BASE       base offset of the active segment
    5 RECOVERY_POINT    offsets below it are fsynced: recovery starts at its segment
    6 FLUSHED_AT_MS     wall-clock ms of the last fsync
    7 CLEAN             1 after a clean close, until the partition is opened again
    8 DELETED           1 once the partition is deleted
    9 LOG_END           log end offset (offset the next record gets)
   10 HIGH_WATERMARK    last offset + 1 that consumers may read
   11 ACTIVE_SIZE       committed bytes of the active .log; readers never go past it
   12 INDEX_ENTRIES     valid entries of the active offset index
   13 TIME_ENTRIES      valid entries of the active time index
   14 MAX_TIMESTAMP     largest timestamp in the active segment (-1: none)
   15 OFFSET_OF_MAX_TS  offset of that record
   16 SINCE_INDEX       bytes appended since the last index entry
   17 ROLLED_AT_MS      wall-clock ms when the active segment got its first batch
   18 UNFLUSHED         messages appended since the last fsync
   19 PENDING_OP        what the lock holder is doing (see Op); 0 when idle
   20 FIRST_UNSTABLE    the offset the last stable offset may not pass (-1: none); see below
   21 FIRST_UNDECIDED   first offset of the oldest open transaction at the log end (-1: none)
   22 LAST_ABORT        offset of the newest abort marker in the transaction index (-1: none)
   23 TXN_LAYOUT        TXN_LAYOUT_V1 once slots 20-22 and 128.. are kept (older pages: 0)
   24 PRODUCERS_END     no batch with a producer id lies at or past it (a bound: it may be higher)
   25 PRODUCERS_LAYOUT  PRODUCERS_LAYOUT_V1 once every appender keeps slot 24 (older pages: 0)

Slots 24-25 are read and written under the lock only. A process brings its producer state
to the log end (`_catch_up_producers`) by reading the batch headers it has not seen; when
PRODUCERS_END says none of them carries a producer, it skips them unread, so a roll under a
plain producer does not read a whole segment's headers. Every append of batches with a
producer id (the compiled one, the Python one, a follower's copy, a marker) raises it to its
new log end before the lock is let go; a page that did not keep it (layout 0) is taken as
bounded by its log end when first seen.

An append changes exactly slots 9-22, which is why they sit together: it
publishes them with one slice store (`publish_append`); one that carries
producers' batches raises slot 24 as well, before it publishes.

Transactions (Kafka's firstUnstableOffset). The last stable offset (LSO), how far
read_committed consumers may read, is min(HW, FIRST_UNSTABLE): readers compute it
from one snapshot (`Snapshot.last_stable_offset`). An offset is unstable while the
transaction holding it is open, and also after its marker is appended until the HW
passes the marker (Kafka's unreplicated transactions: the outcome is not durable
yet). So the writer keeps, at slot 128 on, the transactions whose marker is at or above
the HW: slot 128 holds their count, then (first offset, marker offset) pairs. Every
store that moves the HW, the first undecided offset or the log start recomputes
FIRST_UNSTABLE = max(log start, min(FIRST_UNDECIDED, first offsets of the pairs whose
marker is >= HW)) and drops the other pairs, inside the same seqlocked update. When
the pairs run out of room the two oldest merge (the smaller first offset, the larger
marker): the LSO then waits a little longer, never less. Only writers read the pairs.

The replication region (slots 32-53) says what this broker is for the partition,
as the control plane last applied it from the cluster's partition state:

   32 ROLE              Role: NONE (not serving), LEADER or FOLLOWER
   33 LEADER_ID         the leader's broker id (-1: none)
   34 LEADER_EPOCH      the current leader epoch as this broker knows it
   35 ISR_VERSION       version of the partition's state node (the leader's CAS base)
   36 N_REPLICAS        replicas, in assignment order (the first is the preferred leader)
   37 N_ISR             in-sync replicas
   38-45 REPLICAS       up to MAX_REPLICAS broker ids
   46-53 ISR            up to MAX_REPLICAS broker ids

It changes under the lock and the same seqlock; `replication()` reads it whole.

Follower progress (slots 64-95), kept by the leader: one row of four slots per
replica position i (its index in REPLICAS): the follower's log end offset (the
offset of its last fetch; -1 unknown), when it last fetched, when it was last caught
up, and the leader's log end when that fetch was answered. Whichever processor
serves the follower's fetch writes its row, without the lock: each slot is one
aligned 8-byte store, and one follower's fetches are answered one at a time.

Follower log starts (slots 96-103), kept by the leader: the log start offset each replica
position reported in its last fetch (-1 unknown). DeleteRecords answers once every live
replica's log start reached the asked offset (the partition's low watermark).

The writer lock (slots 104-109, lock.py): slot 104 holds the lock epoch the mutex at slots 105-109 (a
glibc pthread_mutex_t, 40 bytes) was initialised in; nothing else touches them.

Readers take a consistent snapshot of slots 2.. with the seqlock: read SEQ, copy
the slots, read SEQ again, retry if it changed or was odd. This relies on x86-64
ordering (stores are not reordered with stores, loads not with loads), which holds
on the machines mmlog targets.

Writers hold the partition lock (`lock.py`). Before a multi-step file operation a
writer sets PENDING_OP, and clears it in the same seqlocked update that publishes
the result. A writer that finds PENDING_OP set, or SEQ odd, when it takes the lock
knows its predecessor died mid-operation and repairs the partition from its files
(`log_recovery.py`) before doing anything else.
"""

from __future__ import annotations

import enum
import os
import struct
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np

from mmlog.log import touched
from mmlog.log.files import MappedFile

STATE_FILE = "partition.state"
STATE_SIZE = 4096
MAGIC = int.from_bytes(b"MMLOGST1", "little", signed=True)

(MAGIC_SLOT, SEQ, GENERATION, LOG_START, ACTIVE_BASE, RECOVERY_POINT, FLUSHED_AT_MS, CLEAN, DELETED,
 LOG_END, HIGH_WATERMARK, ACTIVE_SIZE, INDEX_ENTRIES, TIME_ENTRIES, MAX_TIMESTAMP, OFFSET_OF_MAX_TS,
 SINCE_INDEX, ROLLED_AT_MS, UNFLUSHED, PENDING_OP, FIRST_UNSTABLE, FIRST_UNDECIDED, LAST_ABORT,
 TXN_LAYOUT, PRODUCERS_END, PRODUCERS_LAYOUT) = range(26)
FIRST, LAST = GENERATION, TXN_LAYOUT  # what a snapshot copies (slots 24-25 are the lock holder's)
TXN_LAYOUT_V1 = 1
PRODUCERS_LAYOUT_V1 = 1
# Transactions decided but not yet below the HW (see the module docstring).
UNREPLICATED = 128  # after the follower log starts (96-103)
MAX_UNREPLICATED = (STATE_SIZE // 8 - UNREPLICATED - 1) // 2

# The replication region and the follower progress rows (see the module docstring).
ROLE, LEADER_ID, LEADER_EPOCH, ISR_VERSION, N_REPLICAS, N_ISR = range(32, 38)
MAX_REPLICAS = 8
REPLICAS = 38
ISR_SLOT = REPLICAS + MAX_REPLICAS
REPLICATION_END = ISR_SLOT + MAX_REPLICAS
PROGRESS, PROGRESS_WIDTH = 64, 4
FOLLOWER_LOG_START = PROGRESS + PROGRESS_WIDTH * MAX_REPLICAS  # 96: one slot per replica position
LOCK_EPOCH, LOCK_MUTEX = 104, 105  # the writer lock (lock.py): its epoch, then its 40-byte mutex (105-109)
LOCK_SLOTS = slice(LOCK_EPOCH, LOCK_MUTEX + 5)  # a run's, not the log's: no two runs' pages hold the same

_NAMES = {
    GENERATION: "generation", LOG_START: "log_start", ACTIVE_BASE: "active_base",
    RECOVERY_POINT: "recovery_point", FLUSHED_AT_MS: "flushed_at_ms", CLEAN: "clean", DELETED: "deleted",
    LOG_END: "log_end", HIGH_WATERMARK: "high_watermark", ACTIVE_SIZE: "active_size",
    INDEX_ENTRIES: "index_entries", TIME_ENTRIES: "time_entries", MAX_TIMESTAMP: "max_timestamp",
    OFFSET_OF_MAX_TS: "offset_of_max_ts", SINCE_INDEX: "since_index", ROLLED_AT_MS: "rolled_at_ms",
    UNFLUSHED: "unflushed", PENDING_OP: "pending_op", FIRST_UNSTABLE: "first_unstable",
    FIRST_UNDECIDED: "first_undecided", LAST_ABORT: "last_abort", TXN_LAYOUT: "txn_layout",
}
_SLOT = {name: slot for slot, name in _NAMES.items()}
_APPEND_SLOTS = struct.Struct(f"={LAST_ABORT - LOG_END + 1}q")  # slots LOG_END..LAST_ABORT, native int64
_CLEAN_MARK = struct.pack("=q", 1)  # the CLEAN slot's value after a clean close


# Stores that move the first unstable offset.
_TXN_INPUTS = frozenset({"high_watermark", "first_undecided", "log_start"})


class Op(enum.IntEnum):
    """Multi-step operations whose interruption the next lock holder must repair."""

    IDLE = 0
    APPEND = 1
    ROLL = 2
    DELETE_SEGMENTS = 3
    TRUNCATE = 4
    SWAP = 5  # the log cleaner replacing segments (cleaner/segment_swap.py); readers wait it out


class Role(enum.IntEnum):
    """What this broker is for a partition."""

    NONE = 0
    LEADER = 1
    FOLLOWER = 2


LEADER_ROLE = int(Role.LEADER)


class Replication(NamedTuple):
    """The replication region, as one reader saw it."""

    role: int
    leader_id: int
    leader_epoch: int
    isr_version: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


class FollowerProgress(NamedTuple):
    """A follower's fetch progress, as the leader saw it."""

    log_end: int
    last_fetch_ms: int
    last_caught_up_ms: int
    leo_at_last_fetch: int


class Snapshot(NamedTuple):
    """A consistent copy of the state slots, as one reader saw them."""

    generation: int
    log_start: int
    active_base: int
    recovery_point: int
    flushed_at_ms: int
    clean: int
    deleted: int
    log_end: int
    high_watermark: int
    active_size: int
    index_entries: int
    time_entries: int
    max_timestamp: int
    offset_of_max_ts: int
    since_index: int
    rolled_at_ms: int
    unflushed: int
    pending_op: int
    first_unstable: int
    first_undecided: int
    last_abort: int
    txn_layout: int

    @property
    def last_stable_offset(self) -> int:
        """How far read_committed consumers may read: min(HW, first unstable offset)."""
        fu = self.first_unstable
        return fu if 0 <= fu < self.high_watermark else self.high_watermark


_make_snapshot = Snapshot._make


class TornState(Exception):
    """The seqlock stayed odd: a writer died mid-update and nobody has repaired it yet."""


class PartitionState:
    """The shared state page of one partition."""

    def __init__(self, directory: Path) -> None:
        directory = Path(directory)
        self.file = MappedFile(directory / STATE_FILE, np.int64, STATE_SIZE)
        # every publish stamps the partition on its log dir's board, for the owner's timers (touched.py)
        self._board, self._board_slot = touched.board_for(directory.parent), touched.slot_of(directory.name)
        # Blocks before the first access (files.py: disk blocks); on tmpfs even reading a hole
        # faults a page in. A no-op for a page that has its block.
        try:
            self.file.reserve(STATE_SIZE)
        except OSError:
            self.file.close()
            raise
        self._attach()
        if self._slots[MAGIC_SLOT] == 0:  # a new partition: every slot starts at 0, but no transaction is -1
            self._slots[FIRST_UNSTABLE : TXN_LAYOUT + 1] = (-1, -1, -1, TXN_LAYOUT_V1)
            self._slots[PRODUCERS_LAYOUT] = PRODUCERS_LAYOUT_V1  # and no producer's batch yet: PRODUCERS_END 0
            self._slots[MAGIC_SLOT] = MAGIC
        elif self._slots[MAGIC_SLOT] != MAGIC:
            raise ValueError(f"{self.file.path}: not a partition state file")

    @classmethod
    def copied(cls, directory: Path, tries: int = 50) -> "PartitionState":
        """A copy of an existing partition's state page, read (pread) between two writers' updates, for
        reading only: no file made, nothing mapped or written (the metrics scrape's view of a closed
        partition). FileNotFoundError if there is
        none, ValueError if it is not one, TornState if every read caught a writer mid-update."""
        path = Path(directory) / STATE_FILE
        fd = os.open(path, os.O_RDONLY)
        try:
            for _ in range(tries):
                page = bytearray(os.pread(fd, STATE_SIZE, 0))
                if len(page) < STATE_SIZE:
                    raise ValueError(f"{path}: not a partition state file")
                slots = np.frombuffer(page, dtype=np.int64)
                if slots[MAGIC_SLOT] != MAGIC:
                    raise ValueError(f"{path}: not a partition state file")
                # the seqlock, as `snapshot` keeps it: even before the copy (its slot comes first) and
                # the same after it (read again), so no writer changed the slots the copy holds
                if not slots[SEQ] & 1 and os.pread(fd, 8, SEQ * 8) == page[SEQ * 8:SEQ * 8 + 8]:
                    self = cls.__new__(cls)
                    self.file = None
                    self._attach(slots)
                    return self
                time.sleep(0)
        finally:
            os.close(fd)
        raise TornState(str(path))

    def _attach(self, slots=None) -> None:
        self._slots = self.file.view if slots is None else slots
        # The same slots as a memoryview: one slot read or written through it is a Python int in
        # ~50 ns, through numpy ~160 ns; the append path touches a dozen. Both pin the mapping alike.
        self._q = memoryview(self._slots)
        self._bytes = self._q.cast("B")

    @property
    def is_new(self) -> bool:
        return self._slots[GENERATION] == 0

    def snapshot(self, spins: int = 2000) -> Snapshot:
        """A consistent snapshot, taken without a lock.

        TornState if the sequence stays odd for `spins` tries (a few milliseconds): the
        writer died mid-update, or is descheduled. The caller then takes the partition
        lock, which waits out a live writer and repairs after a dead one.
        """
        slots = self._q
        for i in range(spins):
            seq = slots[SEQ]
            if not seq & 1:
                values = slots[FIRST : LAST + 1].tolist()
                if slots[SEQ] == seq:
                    return _make_snapshot(values)
            if i > 100:
                time.sleep(0)
        raise TornState(str(self.file.path))

    def replication(self, spins: int = 2000) -> Replication:
        """A consistent copy of the replication region, taken without a lock (TornState as `snapshot`)."""
        slots = self._slots
        for i in range(spins):
            seq = slots[SEQ]
            if not seq & 1:
                v = slots[ROLE:REPLICATION_END].tolist()
                if slots[SEQ] == seq:
                    n_rep, n_isr = v[N_REPLICAS - ROLE], v[N_ISR - ROLE]
                    return Replication(v[0], v[1], v[2], v[3], tuple(v[REPLICAS - ROLE: REPLICAS - ROLE + n_rep]),
                                       tuple(v[ISR_SLOT - ROLE: ISR_SLOT - ROLE + n_isr]))
            if i > 100:
                time.sleep(0)
        raise TornState(str(self.file.path))

    def role(self) -> int:
        """The role slot alone (one aligned load: no seqlock needed)."""
        return self._q[ROLE]

    def leader_epoch(self) -> int:
        """The leader epoch slot alone (one aligned load, as `role`)."""
        return int(self._slots[LEADER_EPOCH])

    def log_end(self) -> int:
        """The log end slot alone (one aligned load, as `role`): has anything been appended since?"""
        return int(self._slots[LOG_END])

    def serves_clients(self) -> bool:
        """Leader, or a log never given roles (no replicas: a log used alone, as tools and tests do):
        who may take appends and serve consumers."""
        slots = self._q
        return slots[ROLE] == LEADER_ROLE or (slots[ROLE] == 0 and slots[N_REPLICAS] == 0)

    def isr_size(self) -> int:
        return self._q[N_ISR]

    def publish_replication(self, role: int, leader_id: int, leader_epoch: int, isr_version: int,
                            replicas, isr) -> None:
        """Publish a new replication region (caller holds the lock)."""
        if len(replicas) > MAX_REPLICAS or len(isr) > MAX_REPLICAS:
            raise ValueError(f"at most {MAX_REPLICAS} replicas per partition")
        slots = self._slots
        seq = int(slots[SEQ])
        slots[SEQ] = seq + 1 | 1
        region = [role, leader_id, leader_epoch, isr_version, len(replicas), len(isr)]
        region += list(replicas) + [-1] * (MAX_REPLICAS - len(replicas))
        region += list(isr) + [-1] * (MAX_REPLICAS - len(isr))
        slots[ROLE:REPLICATION_END] = region
        slots[SEQ] = seq + 2 & ~1
        self._board.stamp(self._board_slot)

    def follower(self, i: int) -> FollowerProgress:
        row = PROGRESS + PROGRESS_WIDTH * i
        return FollowerProgress(*self._slots[row : row + PROGRESS_WIDTH].tolist())

    def set_follower(self, i: int, log_end: int, last_fetch_ms: int, last_caught_up_ms: int,
                     leo_at_last_fetch: int) -> None:
        """Write follower row i (lock-free: see the module docstring)."""
        row = PROGRESS + PROGRESS_WIDTH * i
        slots = self._slots
        slots[row + 1] = last_fetch_ms
        slots[row + 2] = last_caught_up_ms
        slots[row + 3] = leo_at_last_fetch
        slots[row] = log_end  # last: the HW reads this one

    def follower_log_end(self, i: int) -> int:
        """Follower row i's log end alone (one aligned load, the slot `set_follower` writes last)."""
        return int(self._slots[PROGRESS + PROGRESS_WIDTH * i])

    def follower_log_start(self, i: int) -> int:
        return int(self._slots[FOLLOWER_LOG_START + i])

    def set_follower_log_start(self, i: int, log_start: int) -> None:
        """Replica position i's log start (lock-free, one aligned store, as the progress rows)."""
        self._slots[FOLLOWER_LOG_START + i] = log_start

    def producers_end(self) -> int:
        """Under the lock: no batch with a producer id lies at or past this offset (slot 24). A page that
        did not keep it (layout 0) is first bounded by its log end, which every batch lies below."""
        slots = self._slots
        if slots[PRODUCERS_LAYOUT] != PRODUCERS_LAYOUT_V1:
            slots[PRODUCERS_END] = max(int(slots[PRODUCERS_END]), int(slots[LOG_END]))
            slots[PRODUCERS_LAYOUT] = PRODUCERS_LAYOUT_V1
        return int(slots[PRODUCERS_END])

    def raise_producers_end(self, offset: int) -> None:
        """Under the lock, before the append (or repair) that may hold producers' batches below `offset`
        is published: slot 24 is at least `offset`."""
        if self._slots[PRODUCERS_END] < offset:
            self._slots[PRODUCERS_END] = offset

    def get(self, name: str) -> int:
        """One slot, read without the seqlock (for writers, who hold the lock)."""
        return self._q[_SLOT[name]]

    def update(self, **values: int) -> None:
        """Publish new values of named slots atomically for readers (caller holds the lock)."""
        slots = self._slots
        seq = int(slots[SEQ])
        slots[SEQ] = seq + 1 | 1  # odd: readers retry
        for name, value in values.items():
            slots[_SLOT[name]] = value
        if not _TXN_INPUTS.isdisjoint(values) and slots[TXN_LAYOUT] == TXN_LAYOUT_V1:
            slots[FIRST_UNSTABLE] = self._first_unstable(int(slots[HIGH_WATERMARK]), int(slots[FIRST_UNDECIDED]),
                                                         int(slots[LOG_START]))
        slots[SEQ] = seq + 2 & ~1
        self._board.stamp(self._board_slot)

    def publish_append(self, log_end: int, high_watermark: int, active_size: int, index_entries: int,
                       time_entries: int, max_timestamp: int, offset_of_max_ts: int, since_index: int,
                       rolled_at_ms: int, unflushed: int, first_undecided: int | None = None,
                       last_abort: int | None = None, decided=()) -> None:
        """Publish an append: slots LOG_END..LAST_ABORT in one store, PENDING_OP back to idle.

        first_undecided / last_abort: the transaction slots after it (None: unchanged);
        decided: (first offset, marker offset) of the transactions its markers ended."""
        slots = self._q
        seq = slots[SEQ]
        slots[SEQ] = seq + 1 | 1
        undecided = slots[FIRST_UNDECIDED] if first_undecided is None else first_undecided
        aborted = slots[LAST_ABORT] if last_abort is None else last_abort
        if decided:
            self._add_unreplicated(decided)
        if undecided < 0 and not slots[UNREPLICATED]:
            unstable = -1  # the common case: no transaction anywhere near
        else:
            unstable = self._first_unstable(high_watermark, undecided, slots[LOG_START])
        _APPEND_SLOTS.pack_into(self._bytes, LOG_END * 8, log_end, high_watermark, active_size, index_entries,
                                time_entries, max_timestamp, offset_of_max_ts, since_index, rolled_at_ms,
                                unflushed, 0, unstable, undecided, aborted)
        slots[SEQ] = seq + 2 & ~1
        self._board.stamp(self._board_slot)

    # ------------------------------------------------------------ transactions (writers only)

    def unreplicated(self) -> list[tuple[int, int]]:
        """The (first offset, marker offset) pairs of decided transactions not yet below the HW."""
        n = int(self._slots[UNREPLICATED])
        return [tuple(p) for p in self._slots[UNREPLICATED + 1: UNREPLICATED + 1 + 2 * n].reshape(n, 2).tolist()]

    def publish_transactions(self, first_undecided: int, last_abort: int, unreplicated) -> None:
        """Replace the transaction slots wholesale (recovery, truncation, an upgraded page)."""
        slots = self._slots
        seq = int(slots[SEQ])
        slots[SEQ] = seq + 1 | 1
        slots[UNREPLICATED] = 0
        self._add_unreplicated(unreplicated)
        slots[FIRST_UNDECIDED] = first_undecided
        slots[LAST_ABORT] = last_abort
        slots[TXN_LAYOUT] = TXN_LAYOUT_V1
        slots[FIRST_UNSTABLE] = self._first_unstable(int(slots[HIGH_WATERMARK]), first_undecided, int(slots[LOG_START]))
        slots[SEQ] = seq + 2 & ~1
        self._board.stamp(self._board_slot)

    def _add_unreplicated(self, pairs) -> None:
        current = self.unreplicated() + [tuple(p) for p in pairs]
        while len(current) > MAX_UNREPLICATED:  # merge the two oldest: the LSO only waits longer
            (f1, m1), (f2, m2) = current[0], current[1]
            current[:2] = [(min(f1, f2), max(m1, m2))]
        self._store_unreplicated(current)

    def _store_unreplicated(self, pairs: list) -> None:
        slots = self._slots
        if pairs:
            slots[UNREPLICATED + 1: UNREPLICATED + 1 + 2 * len(pairs)] = [v for p in pairs for v in p]
        slots[UNREPLICATED] = len(pairs)

    def _first_unstable(self, high_watermark: int, first_undecided: int, log_start: int) -> int:
        """FIRST_UNSTABLE for this HW (drops the pairs the HW has passed); caller holds the seqlock odd."""
        pairs = self.unreplicated()
        if pairs:
            kept = [p for p in pairs if p[1] >= high_watermark]
            if len(kept) != len(pairs):
                self._store_unreplicated(kept)
            pairs = kept
        firsts = [f for f, _ in pairs]
        if first_undecided >= 0:
            firsts.append(first_undecided)
        return max(min(firsts), log_start) if firsts else -1

    def set_pending(self, op: int) -> None:
        """Mark the start of a multi-step operation (readers ignore this slot)."""
        self._q[PENDING_OP] = op

    def is_torn(self) -> bool:
        slots = self._q
        return bool(slots[SEQ] & 1) or slots[PENDING_OP] != 0

    def reset_seq(self) -> None:
        """Make the seqlock even again after a repair (caller holds the lock)."""
        self._slots[SEQ] = int(self._slots[SEQ]) + 1 & ~1

    def flush(self) -> None:
        self.file.flush()

    def slots_view(self) -> np.ndarray:
        """The page's int64 slots, one numpy view of the mapping (pinned while it is held): the writer
        lock's (lock.py)."""
        return self.file.view

    def close(self) -> None:
        if self.file is not None:
            self.file.close()


def mark_clean(directory: Path) -> None:
    """Mark a closed partition's state page clean: the last step of the owner's synced stop, once
    everything the page points at is durable; every other process has exited, so no writer races it.
    Durable at the caller's next sync.

    One aligned 8-byte write of the CLEAN slot, not a mapping of the page: nothing reads the page
    while it is written, so the seqlock has nothing to guard, and a stop marks thousands of pages."""
    fd = os.open(Path(directory) / STATE_FILE, os.O_WRONLY)
    try:
        if os.pwrite(fd, _CLEAN_MARK, CLEAN * 8) != 8:
            raise OSError(f"{directory}: short write of the clean mark")
    finally:
        os.close(fd)
