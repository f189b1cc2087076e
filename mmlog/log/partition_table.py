"""The partitions a processor's compiled append (append_kernel.py) may write to: numpy arrays only.

Compiled code finds a partition by (topic name bytes, partition) with `lookup`, an open-addressing
hash index (linear probing; `slots` holds row numbers, EMPTY or GONE), the names kept in a byte
arena (`names`). Each row of `rows` (int64, ROW_FIELDS wide) holds what the kernel needs of one
open `Partition` of this process, taken by `fill` under the partition lock: the addresses of the
state page and of the active segment's two index mappings, the lock and log descriptors, the
generation and active base they belong to, the index entries whose disk blocks are reserved, and
the config the append reads; for a partition idempotent producers write to, the address of its
producers' region (producer_table.py, an array the table keeps alive while the row is).

Lifetime. A row's addresses and descriptors are the Partition object's: the table forgets the row
before they close or move. `fill` subscribes to the Partition (`watch_mappings`), which calls back
before a roll, a repair, a truncation, a listing after another process's change, closing or
deleting (so every way a LogManager lets go of a partition: eviction, deletion, reassignment, an
offline log dir, shutdown), and when its config is replaced. What another process does (a roll,
retention, truncation) bumps the generation in the state page, which the kernel compares with the
row's before it touches an index; it then falls back and marks the row STALE, as it does when the
index blocks reserved here run out: `ensure` fills such a row again.

The arrays are replaced when the table grows (`version` counts that): compiled code takes
`arrays()` anew after any call of `fill` or `ensure`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from mmlog.log import producer_table
from mmlog.log.index import RESERVE_CHUNK
from mmlog.protocol import compression

EMPTY, GONE = -1, -2  # slots: never used (a probe stops), forgotten (a probe goes on)

(IN_USE, HASH, PARTITION, NAME_START, NAME_LEN, STATE_ADDR, LOCK_ADDR, LOG_FD, GENERATION, ACTIVE_BASE,
 OFFSET_INDEX_ADDR, OFFSET_INDEX_CAPACITY, OFFSET_INDEX_RESERVED, TIME_INDEX_ADDR, TIME_INDEX_CAPACITY,
 TIME_INDEX_RESERVED, SEGMENT_BYTES, SEGMENT_MS, MAX_MESSAGE_BYTES, INDEX_INTERVAL_BYTES, FLUSH_MESSAGES,
 MIN_INSYNC_REPLICAS, PLAIN_BATCHES, COMPACT, STALE, FALLBACK_REASON, APPENDS,
 FALLBACKS, LOCK_INODE, PRODUCERS_ADDR, PRODUCERS_CAPACITY, PRODUCERS_N, PRODUCERS_UPTO, PRODUCERS_POS,
 PRODUCERS_WANTED, WRITE_KNOWN, WRITE_ALLOWED, READ_KNOWN, READ_ALLOWED) = range(39)
ROW_FIELDS = 39
# PLAIN_BATCHES: compression.type keeps uncompressed batches as they are (producer, uncompressed).
# STALE: the kernel met a state the row no longer describes (another generation, index blocks used up).
# LOCK_ADDR: the address of the partition's writer lock, the mutex in its state page (log/lock.py), ready for this
# run's lock epoch (the fill took it). LOCK_INODE: the partition directory's inode, the order every process takes
# several partitions' locks in.
# FALLBACK_REASON: why the last call fell back (append_kernel.REASONS); APPENDS, FALLBACKS: counts.
# PRODUCERS_*: the idempotent producers' region (producer_table.py: its address, slots, slots used), valid as
# of the offset PRODUCERS_UPTO at the active segment's file position PRODUCERS_POS; a capacity of 0: none
# exported. The kernel sets PRODUCERS_WANTED (and STALE) when it meets a producer's batch on a row without
# them: the next fill exports the process's ProducerState (only partitions that see such batches pay for it).
# WRITE_KNOWN .. READ_ALLOWED: the ACL decisions of the processor's authoriser on the partition's topic, one bit
# per principal its connections hold (processors/compiled/principals.py): known, and allowed if known. Zero in a
# filled row: compiled code asks Python (a handoff) until a decision is entered (`permits`).


@njit(cache=True, nogil=True)
def key_hash(data, start, length, partition):
    """FNV-1a of the name bytes data[start:start+length], then the partition mixed in; non-negative."""
    h = np.uint64(0xCBF29CE484222325)
    for i in range(length):
        h = (h ^ np.uint64(data[start + i])) * np.uint64(0x100000001B3)
    h = (h ^ np.uint64(partition & 0xFFFFFFFF)) * np.uint64(0x9E3779B97F4A7C15)
    h ^= h >> np.uint64(29)
    return np.int64(h >> np.uint64(1))


@njit(cache=True, nogil=True)
def lookup(slots, rows, names, buf, name_start, name_len, partition):
    """The row of (buf[name_start:name_start+name_len], partition), or -1."""
    mask = slots.shape[0] - 1
    h = key_hash(buf, name_start, name_len, partition)
    i = h & mask
    for _ in range(slots.shape[0]):
        r = slots[i]
        if r == EMPTY:
            return -1
        if r >= 0 and rows[r, HASH] == h and rows[r, PARTITION] == partition and rows[r, NAME_LEN] == name_len:
            at = rows[r, NAME_START]
            same = True
            for k in range(name_len):
                if names[at + k] != buf[name_start + k]:
                    same = False
                    break
            if same:
                return r
        i = (i + 1) & mask
    return -1


@njit(cache=True, nogil=True)
def permits(rows, row, known, who):
    """Whether the decision of column `known` (WRITE_KNOWN, READ_KNOWN) for principal bit `who` is made and
    allows; `who` 0: no authoriser, everything is allowed."""
    return who == 0 or ((rows[row, known] & who) != 0 and (rows[row, known + 1] & who) != 0)


def plain_batches_kept(compression_type: str) -> bool:
    """Whether compression.type appends an uncompressed batch as it came (compressed.prepare)."""
    if compression_type == "producer":
        return True
    try:
        return compression.codec_of(compression_type) == 0
    except ValueError:
        return False


class PartitionTable:
    """A processor's table of the partitions its compiled append may write to (one thread uses it)."""

    def __init__(self, capacity: int = 64) -> None:
        capacity = max(4, capacity)
        self.rows = np.zeros((capacity, ROW_FIELDS), dtype=np.int64)
        self.slots = np.full(_slot_count(capacity), EMPTY, dtype=np.int64)
        self.names = np.zeros(capacity * 32, dtype=np.uint8)
        self.version = 0  # bumped whenever the arrays are replaced
        self._names_used = 0
        self._row_of: dict[tuple[str, int], int] = {}
        self._key_of: dict[int, tuple[str, int]] = {}
        self._part_of: dict[int, object] = {}  # row -> the Partition whose mappings it holds
        self._rows_of: dict[int, set[int]] = {}  # id of such a Partition -> its rows (one, but for odd callers)
        self._regions: dict[int, np.ndarray] = {}  # row -> its producers' region (kept alive while the row is)
        self._idempotent: set[tuple[str, int]] = set()  # partitions whose fill exports their producers
        self._free = list(range(capacity - 1, -1, -1))
        self._gone = 0  # GONE slots

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(slots, rows, names): what `lookup` and the kernel take."""
        return self.slots, self.rows, self.names

    def __len__(self) -> int:
        return len(self._row_of)

    def row_of(self, topic: str, partition: int) -> int:
        return self._row_of.get((topic, partition), -1)

    def stale(self, row: int) -> bool:
        return bool(self.rows[row, STALE])

    def ensure(self, topic: str, partition: int, part) -> int:
        """The partition's row, filled first if it has none, a stale one, or one of another Partition object."""
        row = self._row_of.get((topic, partition))
        if row is not None and not self.rows[row, STALE] and self._part_of[row] is part:
            return row
        return self.fill(topic, partition, part)

    def producers(self, row: int) -> dict:
        """The producers the row's region holds ({pid: (epoch, batches)}), or None if none are exported."""
        if not self.rows[row, PRODUCERS_CAPACITY]:
            return None
        return producer_table.entries(self._regions[row], int(self.rows[row, PRODUCERS_N]))

    def fill(self, topic: str, partition: int, part) -> int:
        """(Re)fill the row of an open Partition, prepared for writing as `_begin_write` prepares it (repaired,
        segments listed, indexes preallocated), with the index blocks reserved a chunk ahead, and, for a
        partition that has met idempotent producers' batches, their state (the process's ProducerState, caught
        up to the log end first, as an append would). Returns the row. Raises what taking the partition for
        writing raises (deleted, a storage error); the row is gone then."""
        key = (topic, partition)
        wanted = key in self._idempotent or (key in self._row_of and self.rows[self._row_of[key], PRODUCERS_WANTED])
        if wanted:
            self._idempotent.add(key)
        self.forget(topic, partition)
        snap = part._begin_write()  # may call back _unmapped: nothing of this partition is in the table now
        region = None
        try:
            if wanted and snap.first_undecided < 0:
                part._catch_up_producers(snap)  # reads the log past what it knew (lists segments: call-backs)
                region = producer_table.export(part.producers)
            active = part._segments[snap.active_base]
            oi, ti = active.offset_index, active.time_index
            # A chunk of index blocks ahead, so the kernel seldom falls back to reserve more.
            oi.reserve(snap.index_entries + RESERVE_CHUNK // oi.entry_size)
            ti.reserve(snap.time_entries + RESERVE_CHUNK // ti.entry_size)
            config = part.config
            values = {
                STATE_ADDR: part.state._slots.ctypes.data, LOCK_ADDR: part.lock.mutex_address,
                LOCK_INODE: part.lock._inode,
                LOG_FD: active.file.fileno(), GENERATION: snap.generation, ACTIVE_BASE: snap.active_base,
                OFFSET_INDEX_ADDR: oi.address, OFFSET_INDEX_CAPACITY: oi.capacity,
                OFFSET_INDEX_RESERVED: oi.reserved_entries, TIME_INDEX_ADDR: ti.address,
                TIME_INDEX_CAPACITY: ti.capacity, TIME_INDEX_RESERVED: ti.reserved_entries,
                SEGMENT_BYTES: config.segment_bytes, SEGMENT_MS: config.segment_ms,
                MAX_MESSAGE_BYTES: config.max_message_bytes, INDEX_INTERVAL_BYTES: config.index_interval_bytes,
                FLUSH_MESSAGES: min(config.flush_messages, 2**63 - 1),
                MIN_INSYNC_REPLICAS: config.min_insync_replicas,
                PLAIN_BATCHES: plain_batches_kept(config.compression_type), COMPACT: config.compact,
            }
            if region is not None:
                values.update({
                    PRODUCERS_ADDR: region.ctypes.data, PRODUCERS_CAPACITY: region.shape[0] // producer_table.SLOT_FIELDS,
                    PRODUCERS_N: len(part.producers.producers), PRODUCERS_UPTO: snap.log_end,
                    PRODUCERS_POS: snap.active_size,
                })
        finally:
            part.lock.release()
        row = self._add(key)
        r = self.rows[row]
        for field, value in values.items():
            r[field] = value
        self._part_of[row] = part
        self._rows_of.setdefault(id(part), set()).add(row)
        if region is not None:
            self._regions[row] = region
        part.watch_mappings(self._unmapped)
        return row

    def forget(self, topic: str, partition: int) -> None:
        """Drop the partition's row (a no-op if it has none)."""
        row = self._row_of.pop((topic, partition), None)
        if row is None:
            return
        del self._key_of[row]
        part = self._part_of.pop(row)
        rows = self._rows_of[id(part)]
        rows.discard(row)
        if not rows:
            del self._rows_of[id(part)]
        h = self.rows[row, HASH]
        mask = self.slots.shape[0] - 1
        i = h & mask
        while self.slots[i] != row:
            i = (i + 1) & mask
        self.slots[i] = GONE
        self._gone += 1
        self._regions.pop(row, None)
        self.rows[row] = 0
        self._free.append(row)

    def clear(self) -> None:
        for topic, partition in list(self._row_of):
            self.forget(topic, partition)
        self._idempotent.clear()

    def _unmapped(self, part) -> None:
        """A Partition's watcher: its mappings are about to close or move, or its config changed."""
        for row in list(self._rows_of.get(id(part), ())):
            self.forget(*self._key_of[row])

    def _add(self, key: tuple[str, int]) -> int:
        name = key[0].encode()
        if not self._free:
            self._grow_rows()
        if self._names_used + len(name) > self.names.shape[0]:
            self._compact_names(len(name))
        if 2 * (len(self._row_of) + 1 + self._gone) > self.slots.shape[0]:
            self._rehash(self.slots.shape[0] * (2 if 4 * (len(self._row_of) + 1) > self.slots.shape[0] else 1))
        row = self._free.pop()
        start = self._names_used
        self.names[start:start + len(name)] = np.frombuffer(name, dtype=np.uint8)
        self._names_used += len(name)
        r = self.rows[row]
        r[:] = 0
        r[IN_USE] = 1
        r[HASH] = key_hash(self.names, start, len(name), key[1])
        r[PARTITION] = key[1]
        r[NAME_START] = start
        r[NAME_LEN] = len(name)
        self._place(row)
        self._row_of[key] = row
        self._key_of[row] = key
        return row

    def _place(self, row: int) -> None:
        mask = self.slots.shape[0] - 1
        i = self.rows[row, HASH] & mask
        while self.slots[i] >= 0:
            i = (i + 1) & mask
        if self.slots[i] == GONE:
            self._gone -= 1
        self.slots[i] = row

    def _rehash(self, size: int) -> None:
        self.slots = np.full(size, EMPTY, dtype=np.int64)
        self._gone = 0
        for row in self._key_of:
            self._place(row)
        self.version += 1

    def _grow_rows(self) -> None:
        old = self.rows.shape[0]
        self.rows = np.concatenate([self.rows, np.zeros((old, ROW_FIELDS), dtype=np.int64)])
        self._free.extend(range(2 * old - 1, old - 1, -1))
        self._rehash(_slot_count(2 * old))

    def _compact_names(self, more: int) -> None:
        """Keep only the live names (forgotten ones leave holes), in a larger arena if they need it."""
        live = {row: bytes(self.names[self.rows[row, NAME_START]:self.rows[row, NAME_START] + self.rows[row, NAME_LEN]])
                for row in self._key_of}
        size = self.names.shape[0]
        while sum(map(len, live.values())) + more > size // 2:
            size *= 2
        self.names = np.zeros(size, dtype=np.uint8)
        at = 0
        for row, name in live.items():
            self.names[at:at + len(name)] = np.frombuffer(name, dtype=np.uint8)
            self.rows[row, NAME_START] = at
            at += len(name)
        self._names_used = at
        self.version += 1


def _slot_count(capacity: int) -> int:
    """A power of two at least four times the rows (probes stay short at a load of 1/4 to 1/2)."""
    n = 8
    while n < 4 * capacity:
        n *= 2
    return n
