"""Idempotent producers' state of one partition in a flat int64 array, for the compiled append.

The compiled append (append_kernel.py) checks an idempotent producer's batch against the state
producer_state.py keeps, and needs that state without the interpreter: this module holds it as
one array per partition (a *region*), a copy of what the process's `ProducerState` knows, caught
up from the log as `ProducerState` is. A region is `capacity` slots of SLOT_FIELDS int64:

    PID, EPOCH, COUNT, then COUNT <= MAX_CACHED batches, oldest first, 4 words each:
    (first sequence, last sequence, first offset, last offset)

Only what the check reads is kept (no timestamps, no transaction slots: an append while a
transaction is open falls back before any producer is looked at). The region is valid as of an
offset and the active segment's file position of it (the partition table row keeps both), so
catching up is reading the headers from that position to the log end, as `_catch_up_producers`
does, under the partition lock.

The region follows the Python copy: it is exported again whenever that copy is loaded anew (a roll,
another process's change of the segments, a failed append; the load is where producers expire, so the
region forgets them with it), and only partitions that met an idempotent batch get one.

What compiled code decides (`verdict`): ACCEPT a batch Python would append (the next sequence of
a known producer in its epoch, a new epoch's sequence 0, a producer's first batch at sequence 0);
REFUSE anything else (a duplicate, a sequence out of order, an older epoch, an unknown producer
past 0): the kernel falls back with nothing changed and Python answers it from the same bytes,
as rare cases where the answer is an error or another append's offsets.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from mmlog.log.producer_state import MAX_CACHED, NO_PRODUCER, SEQ_WRAP, ProducerState
from mmlog.protocol.records import CONTROL_BIT, HEADER_SIZE, TRANSACTIONAL_BIT
from mmlog.protocol.wire_kernels import be_i16, be_i32, be_i64
from mmlog.system import libc

PID, EPOCH, COUNT, BATCHES = 0, 1, 2, 3
SLOT_FIELDS = 24  # 3 + 4 * MAX_CACHED, and a spare word
FIRST_SEQ, LAST_SEQ, FIRST_OFFSET, LAST_OFFSET = 0, 1, 2, 3
ACCEPT, REFUSE = 0, 1
TXN_OR_CONTROL = TRANSACTIONAL_BIT | CONTROL_BIT  # attribute bits of a transactional or control batch
MIN_CAPACITY = 8


def export(state: ProducerState, spare: int = 1) -> np.ndarray:
    """A region holding `state`'s producers (their epochs and last batches), with room for more:
    twice as many slots as producers (at least MIN_CAPACITY, and `spare` free)."""
    producers = state.producers
    capacity = max(MIN_CAPACITY, 2 * len(producers), len(producers) + spare)
    region = np.zeros(capacity * SLOT_FIELDS, np.int64)
    for slot, (pid, entry) in enumerate(producers.items()):
        at = slot * SLOT_FIELDS
        region[at + PID] = pid
        region[at + EPOCH] = entry.epoch
        region[at + COUNT] = len(entry.batches)
        for j, batch in enumerate(entry.batches):
            region[at + BATCHES + 4 * j: at + BATCHES + 4 * j + 4] = batch
    return region


def entries(region: np.ndarray, n: int) -> dict[int, tuple[int, list]]:
    """{pid: (epoch, [(first seq, last seq, first offset, last offset)])} of a region's n slots (tests)."""
    out = {}
    for slot in range(n):
        at = slot * SLOT_FIELDS
        count = int(region[at + COUNT])
        out[int(region[at + PID])] = (int(region[at + EPOCH]), [
            tuple(int(v) for v in region[at + BATCHES + 4 * j: at + BATCHES + 4 * j + 4]) for j in range(count)])
    return out


@njit(cache=True, nogil=True)
def last_sequence(base_sequence, last_offset_delta):
    """The sequence of a batch's last record (sequences wrap at 2^31, as `_last_sequence`)."""
    return (base_sequence + last_offset_delta) % SEQ_WRAP


@njit(cache=True, nogil=True)
def find(region, n, pid):
    """The slot of pid among the first n, or -1."""
    for slot in range(n):
        if region[slot * SLOT_FIELDS + PID] == pid:
            return slot
    return -1


@njit(cache=True, nogil=True)
def verdict(region, n, pid, epoch, first_seq, last_seq):
    """ProducerState.check's decision: ACCEPT where it returns, REFUSE where it raises (Duplicate or an error)."""
    slot = find(region, n, pid)
    if slot < 0:
        return ACCEPT if first_seq == 0 else REFUSE  # else UNKNOWN_PRODUCER_ID
    at = slot * SLOT_FIELDS
    current = region[at + EPOCH]
    if epoch < current:
        return REFUSE  # INVALID_PRODUCER_EPOCH
    if epoch > current:
        return ACCEPT if first_seq == 0 else REFUSE  # else OUT_OF_ORDER_SEQUENCE_NUMBER
    count = region[at + COUNT]
    for j in range(count):
        b = at + BATCHES + 4 * j
        if region[b + FIRST_SEQ] == first_seq and region[b + LAST_SEQ] == last_seq:
            return REFUSE  # a duplicate: Python answers with its first append's offsets
    last = region[at + BATCHES + 4 * (count - 1) + LAST_SEQ] if count else -1
    return ACCEPT if first_seq == (last + 1) % SEQ_WRAP else REFUSE


@njit(cache=True, nogil=True)
def apply(region, capacity, n, pid, epoch, first_seq, last_seq, first_offset, last_offset):
    """ProducerState.apply of a non-transactional batch: the producer's slot (made if new; a new epoch
    forgets the old one's batches), its batch appended, the oldest of MAX_CACHED dropped. Returns the
    slot count after, or -1 (nothing changed) when a new producer finds no free slot."""
    slot = find(region, n, pid)
    if slot < 0:
        if n >= capacity:
            return -1
        slot = n
        n += 1
        at = slot * SLOT_FIELDS
        region[at + PID] = pid
        region[at + EPOCH] = epoch
        region[at + COUNT] = 0
    at = slot * SLOT_FIELDS
    if region[at + EPOCH] != epoch:
        region[at + EPOCH] = epoch
        region[at + COUNT] = 0
    count = region[at + COUNT]
    if count == MAX_CACHED:
        for k in range(4 * (MAX_CACHED - 1)):
            region[at + BATCHES + k] = region[at + BATCHES + 4 + k]
        count -= 1
    b = at + BATCHES + 4 * count
    region[b + FIRST_SEQ] = first_seq
    region[b + LAST_SEQ] = last_seq
    region[b + FIRST_OFFSET] = first_offset
    region[b + LAST_OFFSET] = last_offset
    region[at + COUNT] = count + 1
    return n


@njit(cache=True, nogil=True)
def catch_up(region, capacity, n, fd, pos, end, upto, log_end, header):
    """Apply the batches of the log file fd from position pos (offset upto) to end (offset log_end),
    reading their headers only (header: HEADER_SIZE bytes of scratch). Returns (slot count, position,
    offset) reached, or a slot count of -1 when Python must catch up instead: a transactional or
    control batch of a producer (markers and open transactions are not kept here), a new producer
    with no free slot, a short read, or batches that do not end at log_end."""
    while pos < end:
        if libc.pread(fd, header.ctypes.data, HEADER_SIZE, pos) != HEADER_SIZE:
            return -1, pos, upto
        base = be_i64(header, 0)
        size = be_i32(header, 8) + 12
        last_delta = be_i32(header, 23)
        if base != upto or size < HEADER_SIZE or pos + size > end:
            return -1, pos, upto
        pid = be_i64(header, 43)
        if pid != NO_PRODUCER:
            if header[22] & TXN_OR_CONTROL:
                return -1, pos, upto
            first_seq = be_i32(header, 53)
            n = apply(region, capacity, n, pid, be_i16(header, 51), first_seq, last_sequence(first_seq, last_delta),
                      base, base + last_delta)
            if n < 0:
                return -1, pos, upto
        pos += size
        upto = base + last_delta + 1
    if upto != log_end:
        return -1, pos, upto
    return n, pos, upto


def warm() -> None:
    """Compile (or load) the kernels before any fork."""
    region = np.zeros(MIN_CAPACITY * SLOT_FIELDS, np.int64)
    apply(region, MIN_CAPACITY, 0, 1, 0, 0, 0, 0, 0)
    verdict(region, 1, 1, 0, 1, 1)
    catch_up(region, MIN_CAPACITY, 1, np.int32(-1), 0, 0, 0, 0, np.zeros(HEADER_SIZE, np.uint8))
