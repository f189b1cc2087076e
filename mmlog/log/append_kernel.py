"""The append of plain batches to a partition in compiled code: what `Partition.append_many` does, without
the interpreter, for the cases it covers; FALLBACK, having changed nothing, for every other.

`append(rows, row, buf, spans, n, now_ms, acks, out)` appends the records fields buf[start:start+length]
(spans[i] = (start, length), i < n: the produces of one connection for one partition, in order) to the
partition of `rows[row]` (partition_table.py), as `append_many` would: offsets assigned in place in buf
(and the leader epoch, when this broker leads), the index entries by the same interval rule, one write
at the log end (pwrite of the span, or of the group when its spans are adjacent in buf, else pwritev),
then the same seqlocked state stores, so the files end byte-identical to the Python path's. It returns
OK with out[i] = (base offset, last offset, log start offset) (and batches, records when out has 5
columns), or FALLBACK: then the Python path handles the same bytes as today.

Covered: magic-2 batches with valid lengths and CRC-32C, uncompressed, neither transactional nor control, of
producer id -1 or of an idempotent producer (alone in its records field), within max.message.bytes and
segment.bytes, on a partition that serves clients, is not compacted, keeps plain batches (compression.type
producer or uncompressed), needs no roll (`_should_roll`'s rule) nor flush (flush.messages; flush.ms is the
timer's), has no transaction open or unreplicated, with acks 0, 1 or -1 (for -1, an ISR of at least
min.insync.replicas: whether the answer waits for followers is the caller's to see, from the high watermark).
A group (n > 1) into an empty active segment falls back (Python appends it one buffer at a time).

Idempotent producers. An idempotent batch is appended only where producer_state.py's check lets it go (the
next sequence of a known producer in its epoch, a new epoch's or producer's sequence 0), against the row's
producer region (producer_table.py): exported from the process's ProducerState when the row is filled,
caught up under the lock from the headers past it (none read where the state page's PRODUCERS_END says
none is a producer's), moved past each compiled append. Anything else falls back unchanged (the region
restored) and Python answers from the same bytes. Python's own copy catches up from the log when it next
looks, so its checks and the snapshots of its rolls are as if it had appended the batch itself.

Every check reads only buf, the row and the state page; the state page under the partition's lock (the
robust mutex in the state page that log/lock.py's PartitionLock takes, at the row's LOCK_ADDR; several
partitions' in the order of their LOCK_INODE, as every process takes them), where a torn state, a partition
marked clean since the row was filled, a deleted partition, or a generation or active base other than the
row's falls back before any index is touched (the row's index addresses are valid only for them; another
process's roll or truncation changes the generation). The first store is PENDING_OP. The mutex keeps out
other threads of the process too, so the Python path's appends and these never overlap. The rows are the
filling process's (addresses of its mappings): a table is filled after the fork, in the process that calls.

Crash points and failures are an append's (partition.py): a write that fails or is short sets
PENDING_OP back to idle and falls back with nothing published (the offsets in buf and index entries past
the count are ignored and overwritten by the Python path's retry, which meets the error itself).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from mmlog.log import kernels, producer_table
from mmlog.log import partition_table as t
from mmlog.log.kernels import CRC_TABLES, crc32c
from mmlog.log.producer_state import NO_PRODUCER
from mmlog.log.state import (
    ACTIVE_BASE,
    ACTIVE_SIZE,
    CLEAN,
    DELETED,
    FIRST_UNDECIDED,
    FIRST_UNSTABLE,
    FLUSHED_AT_MS,
    GENERATION,
    HIGH_WATERMARK,
    INDEX_ENTRIES,
    LEADER_EPOCH,
    LOG_END,
    LOG_START,
    MAX_TIMESTAMP,
    N_ISR,
    N_REPLICAS,
    OFFSET_OF_MAX_TS,
    PENDING_OP,
    PRODUCERS_END,
    PRODUCERS_LAYOUT,
    PRODUCERS_LAYOUT_V1,
    ROLE,
    ROLLED_AT_MS,
    SEQ,
    SINCE_INDEX,
    STATE_SIZE,
    TIME_ENTRIES,
    UNFLUSHED,
    UNREPLICATED,
)
from mmlog.protocol.records import HEADER_SIZE
from mmlog.protocol.wire_kernels import be_i16, be_i32, be_i64, be_u32, put_i32, put_i64
from mmlog.system import libc
from mmlog.system.libc import EINTR, IOV_MAX

OK, FALLBACK = 0, 1

# Why a call fell back (kept in the row's FALLBACK_REASON).
(NONE, NOT_IN_TABLE, BAD_SPANS, CORRUPT, NOT_PLAIN, TOO_LARGE, ACKS, LOCK_FAILED, TORN, DELETED_LOG, STALE_ROW,
 NOT_SERVING, ISR, TRANSACTIONS, ROLL_DUE, FLUSH_DUE, INDEX_BLOCKS, WRITE_FAILED, GROUP_INTO_EMPTY, PRODUCERS_UNKNOWN,
 PRODUCER_REFUSED, PRODUCERS_FULL, PRODUCERS_BEHIND) = range(23)
REASONS = ("", "not in the table", "bad spans", "corrupt batch", "not a plain batch", "too large", "acks",
           "lock failed", "torn state", "deleted", "stale row", "not serving clients", "ISR",
           "transactions", "roll due", "flush due", "index blocks", "write failed", "group into an empty segment",
           "producers not in the table", "a producer's batch Python answers", "producer slots full",
           "producers behind the log")

_SLOTS = STATE_SIZE // 8
_APPEND, _IDLE, _LEADER = 1, 0, 1
_INT32_MAX = 2**31 - 1
_MIN_LENGTH = 49  # batchLength of a header without records
_COMPRESSION = 0x07


@njit(cache=True, nogil=True)
def check_span(buf, start, length, max_message_bytes, segment_bytes):
    """What `_validate`, `check_client_batches` and `check_single_batch` decide about one records field, for
    the batches the kernel covers: (reason, batches, offsets taken, records, producers' batches); reason NONE
    if covered. An idempotent producer's batch is covered alone in its field (one with others falls back:
    Python answers INVALID_RECORD, or appends it unchecked after a batch of producer id -1, as Kafka)."""
    if length <= 0 or start < 0 or start + length > buf.shape[0]:
        return BAD_SPANS if length != 0 else CORRUPT, 0, 0, 0, 0
    p = start
    end = start + length
    batches = offsets = records = producers = 0
    while p < end:
        if end - p < 12:
            return CORRUPT, 0, 0, 0, 0
        batch_length = be_i32(buf, p + 8)
        if batch_length < _MIN_LENGTH or batch_length + 12 > end - p:
            return CORRUPT, 0, 0, 0, 0
        size = batch_length + 12
        if buf[p + 16] != 2:
            return CORRUPT, 0, 0, 0, 0
        if crc32c(buf, p + 21, p + size, CRC_TABLES) != be_u32(buf, p + 17):
            return CORRUPT, 0, 0, 0, 0
        last_delta = be_i32(buf, p + 23)
        count = be_i32(buf, p + 57)
        if last_delta < 0 or count < 0:
            return CORRUPT, 0, 0, 0, 0
        attributes = buf[p + 22]  # the low byte: compression, timestamp type, transactional, control
        if attributes & _COMPRESSION or attributes & producer_table.TXN_OR_CONTROL:
            return NOT_PLAIN, 0, 0, 0, 0
        if be_i64(buf, p + 43) != NO_PRODUCER:
            producers += 1
        if count != last_delta + 1:
            return CORRUPT, 0, 0, 0, 0
        if size > max_message_bytes:
            return TOO_LARGE, 0, 0, 0, 0
        batches += 1
        offsets += last_delta + 1
        records += count
        p += size
    if producers and batches > 1:
        return NOT_PLAIN, 0, 0, 0, 0
    if length > segment_bytes:
        return TOO_LARGE, 0, 0, 0, 0
    return NONE, batches, offsets, records, producers


# pending: int64 [partitions, PENDING_FIELDS], what each phase of an append hands the next
(P_BYTES, P_BATCHES, P_OFFSETS, P_RECORDS, P_NEXT_OFFSET, P_AT, P_INDEX_ENTRIES, P_TIME_ENTRIES, P_MAX_TS,
 P_OFFSET_OF_MAX, P_SINCE, P_PRODUCERS, P_OLD_N, P_UNDO, P_UNDO_END, P_ADVANCE, P_LOCK_ORDER) = range(17)
PENDING_FIELDS = 17
# P_LOCK_ORDER: row i holds the index of the partition whose lock is taken i-th (`_lock_order`)
SORT_IN_PLACE = 16  # up to this many partitions, the lock order is an insertion sort in pending: no allocation
# P_PRODUCERS: idempotent batches among the spans; P_OLD_N, P_UNDO..P_UNDO_END: the producer slot count before
# the checks applied them and the undo rows saved (what `_undo_producers` restores if the append does not go
# ahead); P_ADVANCE: the row's producers are as of the log end, so the publish moves them past the append.


@njit(cache=True, nogil=True)
def append(rows, row, buf, spans, n, now_ms, acks, out):
    """Append the n records fields of spans to the partition of rows[row]: OK (out filled) or FALLBACK."""
    ids = np.full(1, row, np.int64)
    pending = np.zeros((1, PENDING_FIELDS), np.int64)
    return _append_all(rows, ids, 1, buf, spans, n, now_ms, acks, out, pending)


@njit(cache=True, nogil=True)
def append_partitions(rows, ids, k, buf, spans, now_ms, acks, out, pending):
    """Append the records field spans[i] to the partition of rows[ids[i]], for the k partitions of one
    request, all or none: OK (out[i] filled), or FALLBACK with nothing changed in any of them.

    All or none: every partition's lock is taken first (in the order of their lock files' inodes, which
    every process shares, so two processes never wait on each other), every check passes under them,
    every write succeeds (past each log end, where nothing reads), and only then is any of them
    published. A request naming one partition twice falls back (the Python path appends both)."""
    for i in range(k):
        for j in range(i):
            if ids[i] == ids[j]:
                return FALLBACK
    return _append_all(rows, ids, k, buf, spans, 1, now_ms, acks, out, pending)


@njit(cache=True, nogil=True)
def _append_all(rows, ids, k, buf, spans, n, now_ms, acks, out, pending):
    """k partitions of n spans each (k == 1, or n == 1); the reason of the first that falls back is kept in
    its row."""
    if k < 1 or pending.shape[0] < k or out.shape[0] < k * n or n < 1 or n > IOV_MAX or spans.shape[0] < k * n:
        return FALLBACK
    for i in range(k):
        if ids[i] < 0 or ids[i] >= rows.shape[0] or rows[ids[i], t.IN_USE] == 0:
            return FALLBACK
        reason = _check_spans(rows[ids[i]], buf, spans[i * n:(i + 1) * n], n, acks, pending[i])
        if reason != NONE:
            return _fell_back(rows[ids[i]], reason)
    _lock_order(rows, ids, k, pending)
    locked = 0
    reason = NONE
    failed = 0
    while locked < k:
        r = rows[ids[pending[locked, P_LOCK_ORDER]]]
        if libc.lock_mutex(r[t.LOCK_ADDR]) != 0:
            reason = LOCK_FAILED
            failed = pending[locked, P_LOCK_ORDER]
            break
        locked += 1
    if reason == NONE:
        for i in range(k):
            reason = _check_locked(rows[ids[i]], n, now_ms, acks, pending[i])
            if reason != NONE:
                failed = i
                break
    checked = 0  # partitions whose producers the checks applied (undone unless the append is published)
    if reason == NONE:
        total = 0
        for i in range(k):
            total += pending[i, P_PRODUCERS]
        # no idempotent batch (the common case): an empty view rather than an allocation each request
        undo = pending[:0] if total == 0 else np.empty((total, producer_table.SLOT_FIELDS + 1), np.int64)
        used = 0
        for i in range(k):
            reason, used = _check_producers(rows[ids[i]], buf, spans[i * n:(i + 1) * n], n, pending[i], undo, used)
            if reason != NONE:
                failed = i
                break
            checked += 1
    written = 0
    if reason == NONE:
        for i in range(k):
            if not _write_locked(rows[ids[i]], buf, spans[i * n:(i + 1) * n], n, out[i * n:(i + 1) * n], pending[i]):
                reason = WRITE_FAILED
                failed = i
                break
            written += 1
    if reason == NONE:
        for i in range(k):
            _publish(rows[ids[i]], now_ms, pending[i])
            if pending[i, P_ADVANCE]:
                rows[ids[i], t.PRODUCERS_UPTO] = pending[i, P_NEXT_OFFSET]
                rows[ids[i], t.PRODUCERS_POS] = pending[i, P_AT]
    else:
        for i in range(written):  # nothing of theirs was published: their bytes past the log end are ignored
            libc.view_i64(rows[ids[i], t.STATE_ADDR], _SLOTS)[PENDING_OP] = _IDLE
        for i in range(checked - 1, -1, -1):
            _undo_producers(rows[ids[i]], pending[i], undo)
    for i in range(locked):
        r = rows[ids[pending[i, P_LOCK_ORDER]]]
        libc.unlock_mutex(r[t.LOCK_ADDR])
    if reason != NONE:
        return _fell_back(rows[ids[failed]], reason)
    for i in range(k):
        rows[ids[i], t.APPENDS] += 1
        rows[ids[i], t.FALLBACK_REASON] = NONE
    return OK


@njit(cache=True, nogil=True)
def _lock_order(rows, ids, k, pending):
    """pending[:k, P_LOCK_ORDER]: the k partitions by their lock files' inodes, ties in request order (the order
    every process takes locks in). A few partitions, the common request, sort in place: no allocation."""
    if k > SORT_IN_PLACE:
        pending[:k, P_LOCK_ORDER] = np.argsort(rows[ids[:k], t.LOCK_INODE], kind="mergesort")
        return
    for i in range(k):
        inode = rows[ids[i], t.LOCK_INODE]
        j = i
        while j > 0 and rows[ids[pending[j - 1, P_LOCK_ORDER]], t.LOCK_INODE] > inode:
            pending[j, P_LOCK_ORDER] = pending[j - 1, P_LOCK_ORDER]
            j -= 1
        pending[j, P_LOCK_ORDER] = i


@njit(cache=True, nogil=True)
def _fell_back(r, reason):
    r[t.FALLBACK_REASON] = reason
    r[t.FALLBACKS] += 1
    if (reason == STALE_ROW or reason == INDEX_BLOCKS or reason == PRODUCERS_UNKNOWN or reason == PRODUCERS_FULL
            or reason == PRODUCERS_BEHIND):  # the row is filled again (ensure): it no longer serves as it is
        r[t.STALE] = 1
    return FALLBACK


@njit(cache=True, nogil=True)
def _check_spans(r, buf, spans, n, acks, pending):
    """What can be decided without the lock: the acks, the topic's config, every batch; the totals into pending."""
    if acks != 0 and acks != 1 and acks != -1:
        return ACKS
    if r[t.COMPACT] != 0 or r[t.PLAIN_BATCHES] == 0:
        return NOT_PLAIN
    nbytes = nbatches = noffsets = nrecords = nproducers = 0
    for i in range(n):
        reason, batches, offsets, records, producers = check_span(buf, spans[i, 0], spans[i, 1],
                                                                  r[t.MAX_MESSAGE_BYTES], r[t.SEGMENT_BYTES])
        if reason != NONE:
            return reason
        nbytes += spans[i, 1]
        nbatches += batches
        noffsets += offsets
        nrecords += records
        nproducers += producers
    pending[P_PRODUCERS] = nproducers
    pending[P_BYTES] = nbytes
    pending[P_BATCHES] = nbatches
    pending[P_OFFSETS] = noffsets
    pending[P_RECORDS] = nrecords
    return NONE


@njit(cache=True, nogil=True)
def _check_locked(r, n, now_ms, acks, pending):
    """`_begin_write`'s checks, `_should_roll` and the flush rule (caller holds the lock)."""
    nbytes, nbatches, noffsets, nrecords = pending[P_BYTES], pending[P_BATCHES], pending[P_OFFSETS], pending[P_RECORDS]
    page = libc.view_i64(r[t.STATE_ADDR], _SLOTS)
    if page[SEQ] & 1 or page[PENDING_OP] != 0:
        return TORN  # a writer died mid-update: the Python path repairs
    if page[DELETED] != 0:
        return DELETED_LOG
    if page[GENERATION] != r[t.GENERATION] or page[ACTIVE_BASE] != r[t.ACTIVE_BASE] or page[CLEAN] != 0:
        # CLEAN: marked cleanly closed since the fill; `_begin_write` unmarks it (durably) before a write
        return STALE_ROW  # before any index access: the row's index addresses may be gone
    role = page[ROLE]
    if not (role == _LEADER or (role == 0 and page[N_REPLICAS] == 0)):
        return NOT_SERVING
    if acks == -1 and page[N_ISR] < r[t.MIN_INSYNC_REPLICAS]:
        return ISR  # NOT_ENOUGH_REPLICAS: Python's answer
    if page[FIRST_UNDECIDED] >= 0 or page[UNREPLICATED] != 0:
        return TRANSACTIONS
    log_end = page[LOG_END]
    active_size = page[ACTIVE_SIZE]
    idx_n = page[INDEX_ENTRIES]
    time_n = page[TIME_ENTRIES]
    index_capacity = r[t.OFFSET_INDEX_CAPACITY]
    time_capacity = r[t.TIME_INDEX_CAPACITY]
    if active_size == 0:
        if n > 1:
            return GROUP_INTO_EMPTY
    elif (active_size + nbytes > r[t.SEGMENT_BYTES] or now_ms - page[ROLLED_AT_MS] >= r[t.SEGMENT_MS]
          or idx_n + nbatches >= index_capacity or time_n + nbatches >= time_capacity - 1
          or log_end + noffsets - 1 - r[t.ACTIVE_BASE] > _INT32_MAX):
        return ROLL_DUE
    # `_append_locked` reserves blocks for idx_n + nbatches + 1 and time_n + nbatches + 2 entries first
    if (idx_n + nbatches + 1 > min(index_capacity, r[t.OFFSET_INDEX_RESERVED])
            or time_n + nbatches + 2 > min(time_capacity, r[t.TIME_INDEX_RESERVED])):
        return INDEX_BLOCKS
    if page[UNFLUSHED] + nrecords >= r[t.FLUSH_MESSAGES]:  # flush.ms is the flush timer's, off this path
        return FLUSH_DUE
    return NONE


@njit(cache=True, nogil=True)
def _check_producers(r, buf, spans, n, pending, undo, used):
    """`_check_producers` of transaction_state.py, for the cases compiled code takes (caller holds the lock,
    `_check_locked` passed, so no transaction is open): the row's producers caught up to the log end, then
    each idempotent batch checked and applied in order, as the Python path applies them, each slot it
    changes saved in undo first. (reason, undo rows used): anything but ACCEPT falls back, the slots restored."""
    pending[P_ADVANCE] = 0
    pending[P_OLD_N] = r[t.PRODUCERS_N]
    pending[P_UNDO] = used
    pending[P_UNDO_END] = used
    capacity = r[t.PRODUCERS_CAPACITY]
    if capacity == 0:
        if pending[P_PRODUCERS] == 0:
            return NONE, used
        r[t.PRODUCERS_WANTED] = 1  # the next fill exports the process's producer state
        return PRODUCERS_UNKNOWN, used
    page = libc.view_i64(r[t.STATE_ADDR], _SLOTS)
    log_end = page[LOG_END]
    region = libc.view_i64(r[t.PRODUCERS_ADDR], capacity * producer_table.SLOT_FIELDS)
    if r[t.PRODUCERS_UPTO] != log_end:
        if pending[P_PRODUCERS] == 0:
            return NONE, used  # nothing to check: caught up when a producer's batch comes
        # Python's rule for reloading (another generation is a stale row, met before): a log start past it
        upto, pos = r[t.PRODUCERS_UPTO], r[t.PRODUCERS_POS]
        if upto > log_end or upto < page[LOG_START] or pos > page[ACTIVE_SIZE]:
            r[t.PRODUCERS_CAPACITY] = 0
            r[t.PRODUCERS_WANTED] = 1
            return PRODUCERS_BEHIND, used
        if page[PRODUCERS_LAYOUT] == PRODUCERS_LAYOUT_V1 and page[PRODUCERS_END] <= upto:
            count, pos, upto = r[t.PRODUCERS_N], page[ACTIVE_SIZE], log_end  # no producer's batch since: none to read
        else:
            count, pos, upto = producer_table.catch_up(region, capacity, r[t.PRODUCERS_N], np.int32(r[t.LOG_FD]),
                                                       pos, page[ACTIVE_SIZE], upto, log_end,
                                                       np.empty(HEADER_SIZE, np.uint8))
        if count < 0:  # a transaction's batch or marker, or no free slot: Python catches up and exports again
            r[t.PRODUCERS_CAPACITY] = 0
            r[t.PRODUCERS_WANTED] = 1
            return PRODUCERS_BEHIND, used
        r[t.PRODUCERS_N] = count
        r[t.PRODUCERS_POS] = pos
        r[t.PRODUCERS_UPTO] = upto
        pending[P_OLD_N] = count  # an undo keeps what the log holds: back to the caught-up count
    offset = log_end
    width = producer_table.SLOT_FIELDS
    for i in range(n):
        p = spans[i, 0]
        end = p + spans[i, 1]
        pid = be_i64(buf, p + 43)
        if pid != NO_PRODUCER:  # alone in its field (check_span)
            last_delta = be_i32(buf, p + 23)
            epoch = be_i16(buf, p + 51)
            first_seq = be_i32(buf, p + 53)
            last_seq = producer_table.last_sequence(first_seq, last_delta)
            count = r[t.PRODUCERS_N]
            reason = NONE
            if producer_table.verdict(region, count, pid, epoch, first_seq, last_seq) != producer_table.ACCEPT:
                reason = PRODUCER_REFUSED
            else:
                slot = producer_table.find(region, count, pid)
                undo[used, 0] = slot
                if slot >= 0:
                    undo[used, 1:] = region[slot * width:(slot + 1) * width]
                count = producer_table.apply(region, capacity, count, pid, epoch, first_seq, last_seq, offset,
                                             offset + last_delta)
                if count < 0:
                    r[t.PRODUCERS_WANTED] = 1  # a larger region at the next fill
                    reason = PRODUCERS_FULL
                else:
                    used += 1
                    pending[P_UNDO_END] = used
                    r[t.PRODUCERS_N] = count
            if reason != NONE:
                _undo_producers(r, pending, undo)
                return reason, used
        while p < end:
            offset += be_i32(buf, p + 23) + 1
            p += be_i32(buf, p + 8) + 12
    pending[P_ADVANCE] = 1
    return NONE, used


@njit(cache=True, nogil=True)
def _undo_producers(r, pending, undo):
    """Restore the producer slots `_check_producers` changed (newest first) and their count."""
    if r[t.PRODUCERS_CAPACITY] == 0:
        return
    width = producer_table.SLOT_FIELDS
    region = libc.view_i64(r[t.PRODUCERS_ADDR], r[t.PRODUCERS_CAPACITY] * width)
    for j in range(pending[P_UNDO_END] - 1, pending[P_UNDO] - 1, -1):
        slot = undo[j, 0]
        if slot >= 0:  # a new producer's slot is dropped with the count
            region[slot * width:(slot + 1) * width] = undo[j, 1:]
    r[t.PRODUCERS_N] = pending[P_OLD_N]
    pending[P_UNDO_END] = pending[P_UNDO]


@njit(cache=True, nogil=True)
def _write_locked(r, buf, spans, n, out, pending):
    """`_write_locked` up to the publish: PENDING_OP, offsets (and the leader epoch) in buf, index entries
    past the count, the write past the log end. False if the write failed (nothing is published)."""
    page = libc.view_i64(r[t.STATE_ADDR], _SLOTS)
    page[PENDING_OP] = _APPEND
    active_base = r[t.ACTIVE_BASE]
    active_size = page[ACTIVE_SIZE]
    idx_n = page[INDEX_ENTRIES]
    time_n = page[TIME_ENTRIES]
    stamp = page[ROLE] == _LEADER
    epoch = page[LEADER_EPOCH]
    log_start = page[LOG_START]
    offset_index = libc.view_i32(r[t.OFFSET_INDEX_ADDR], 2 * r[t.OFFSET_INDEX_CAPACITY])
    time_index = libc.view_i64(r[t.TIME_INDEX_ADDR], 2 * r[t.TIME_INDEX_CAPACITY])
    interval = r[t.INDEX_INTERVAL_BYTES]
    since = page[SINCE_INDEX]
    max_ts = page[MAX_TIMESTAMP]
    off_max = page[OFFSET_OF_MAX_TS]
    last_time_ts = np.int64(-1)
    last_time_known = False
    next_offset = page[LOG_END]
    at = active_size
    for i in range(n):
        first = next_offset
        p = spans[i, 0]
        end = p + spans[i, 1]
        batches = records = 0
        while p < end:
            size = be_i32(buf, p + 8) + 12
            put_i64(buf, p, next_offset)
            if stamp:
                put_i32(buf, p + 12, epoch)
            last = next_offset + be_i32(buf, p + 23)
            batch_max_ts = be_i64(buf, p + 35)
            if batch_max_ts > max_ts:
                max_ts = batch_max_ts
                off_max = last
            if since >= interval and at > 0:
                offset_index[2 * idx_n] = np.int32(next_offset - active_base)
                offset_index[2 * idx_n + 1] = np.int32(at)
                idx_n += 1
                if not last_time_known:
                    last_time_ts = time_index[2 * (time_n - 1)] if time_n > 0 else np.int64(-1)
                    last_time_known = True
                if max_ts > last_time_ts:
                    time_index[2 * time_n] = max_ts
                    time_index[2 * time_n + 1] = off_max - active_base
                    last_time_ts = max_ts
                    time_n += 1
                since = 0
            since += size
            at += size
            batches += 1
            records += be_i32(buf, p + 57)
            next_offset = last + 1
            p += size
        out[i, 0] = first
        out[i, 1] = next_offset - 1
        out[i, 2] = log_start
        if out.shape[1] >= 5:
            out[i, 3] = batches
            out[i, 4] = records
    pending[P_NEXT_OFFSET] = next_offset
    pending[P_AT] = at
    pending[P_INDEX_ENTRIES] = idx_n
    pending[P_TIME_ENTRIES] = time_n
    pending[P_MAX_TS] = max_ts
    pending[P_OFFSET_OF_MAX] = off_max
    pending[P_SINCE] = since
    return _write(np.int32(r[t.LOG_FD]), buf, spans, n, active_size, pending[P_BYTES])


@njit(cache=True, nogil=True)
def _publish(r, now_ms, pending):
    """The stores that make a written append visible, as `_write_locked` ends (PENDING_OP back to idle)."""
    page = libc.view_i64(r[t.STATE_ADDR], _SLOTS)
    unflushed = page[UNFLUSHED]
    active_size = page[ACTIVE_SIZE]
    next_offset = pending[P_NEXT_OFFSET]
    if not unflushed:  # `state.update(flushed_at_ms=now)`: its own seqlocked store
        seq = page[SEQ]
        page[SEQ] = (seq + 1) | 1
        libc.fence()
        page[FLUSHED_AT_MS] = now_ms
        libc.fence()
        page[SEQ] = (seq + 2) & ~1
    if pending[P_PRODUCERS] and page[PRODUCERS_END] < next_offset:
        page[PRODUCERS_END] = next_offset  # `raise_producers_end`, before the publish (state.py)
    if page[ROLE] == _LEADER and page[N_ISR] > 1:
        high_watermark = page[HIGH_WATERMARK]  # followers' fetches move it
    else:
        high_watermark = next_offset
    # `publish_append` with no transaction near: slots LOG_END..LAST_ABORT, PENDING_OP back to idle
    seq = page[SEQ]
    page[SEQ] = (seq + 1) | 1
    libc.fence()
    page[LOG_END] = next_offset
    page[HIGH_WATERMARK] = high_watermark
    page[ACTIVE_SIZE] = pending[P_AT]
    page[INDEX_ENTRIES] = pending[P_INDEX_ENTRIES]
    page[TIME_ENTRIES] = pending[P_TIME_ENTRIES]
    page[MAX_TIMESTAMP] = pending[P_MAX_TS]
    page[OFFSET_OF_MAX_TS] = pending[P_OFFSET_OF_MAX]
    page[SINCE_INDEX] = pending[P_SINCE]
    page[ROLLED_AT_MS] = page[ROLLED_AT_MS] if active_size else now_ms
    page[UNFLUSHED] = unflushed + pending[P_RECORDS]
    page[PENDING_OP] = _IDLE
    page[FIRST_UNSTABLE] = -1
    # FIRST_UNDECIDED (-1) and LAST_ABORT are stored unchanged by publish_append
    libc.fence()
    page[SEQ] = (seq + 2) & ~1


@njit(cache=True, nogil=True)
def _write(fd, buf, spans, n, position, nbytes):
    """All nbytes at position: one pwrite when the spans lie back to back in buf, else one pwritev.
    False for a failed or short write."""
    adjacent = True
    for i in range(1, n):
        if spans[i, 0] != spans[i - 1, 0] + spans[i - 1, 1]:
            adjacent = False
            break
    base = np.int64(buf.ctypes.data)  # an address is uintp: int64 arithmetic with the offsets
    while True:
        if adjacent:
            written = libc.pwrite(fd, base + spans[0, 0], nbytes, position)
        else:
            iov = np.empty(2 * n, dtype=np.int64)
            for i in range(n):
                iov[2 * i] = base + spans[i, 0]
                iov[2 * i + 1] = spans[i, 1]
            written = libc.pwritev(fd, iov.ctypes.data, np.int32(n), position)
        if written >= 0 or libc.errno() != EINTR:
            return written == nbytes


def warm() -> None:
    """Compile (or load) the kernel and the table's lookup before any fork."""
    kernels.warm()
    libc.warm()
    producer_table.warm()
    rows = np.zeros((1, t.ROW_FIELDS), dtype=np.int64)
    buf = np.zeros(64, dtype=np.uint8)
    append(rows, 0, buf, np.zeros((1, 2), dtype=np.int64), 1, 0, 1, np.zeros((1, 3), dtype=np.int64))
    append(rows, 0, buf, np.zeros((1, 2), dtype=np.int64), 1, 0, 1, np.zeros((1, 5), dtype=np.int64))
    append_partitions(rows, np.zeros(1, np.int64), 1, buf, np.zeros((1, 2), dtype=np.int64), 0, 1,
                      np.zeros((1, 5), dtype=np.int64), np.zeros((1, PENDING_FIELDS), np.int64))
    check_span(buf, 0, 64, 1 << 20, 1 << 30)
    t.lookup(np.full(8, t.EMPTY, dtype=np.int64), rows, buf, buf, 0, 1, 0)
    t.key_hash(buf, 0, 1, 0)
