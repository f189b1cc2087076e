"""One consumer's Fetch served in compiled code: decode, read each partition's state, answer around the records.

The same steps as handlers/fetch.py's `read` takes for a consumer's fetch that reads the active segments
of partitions this processor's table holds, and nothing else: `serve_fetch` returns -1 (having changed
nothing: a read has no side effects) for every request it does not cover, which the Python handler then
serves from the same bytes. Covered: Fetch v4-v11 of a consumer (replica_id < 0), every partition in
the table, led here (or a log without roles) in the epoch asked for (-1: any), its fetch offset in
[log start, log end] and at or past the active segment's base, the state page's generation the row's;
read_uncommitted, or read_committed when the answer needs no aborted transactions (no records, or a
fetch offset past the last abort marker). An answer of fewer than min_bytes with max_wait_ms > 0 is a
long poll: `serve_fetch` says PARK, and the loop keeps the frame and serves it again when records may
have come or its wait is over (`final`: then it is answered with what there is), as the Python
purgatory does with its own (loop.py, parked fetches). Fetch sessions: the Python handler answers every fetch in full
with session id 0 whatever it asked, and so does this (a non-empty forgotten_topics_data is Python's).

The bytes are those of `Partition.read` (log/segment_view.py): from the batch holding the fetch offset
(the offset index's floor entry, then a batch header scan) to the high watermark's batch (the LSO's for
read_committed), at most max(limit, first batch) where limit is min(partition_max_bytes, what is left of
max_bytes); after the first partition with records, one over its limit, or any once max_bytes is used
up, answers no records (KIP-74). They are not copied: each becomes a piece of the connection's send plan
(loop.py), a range of the row's LOG_FD that the loop sends with sendfile at the gap the encoder left.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from mmlog.ipc import metrics_block
from mmlog.log import kernels
from mmlog.log import partition_table as t
from mmlog.log.segment import SCAN_CHUNK
from mmlog.log.state import (
    ACTIVE_BASE,
    ACTIVE_SIZE,
    DELETED,
    FIRST_UNSTABLE,
    GENERATION,
    HIGH_WATERMARK,
    INDEX_ENTRIES,
    LAST_ABORT,
    LEADER_EPOCH,
    LOG_END,
    LOG_START,
    N_REPLICAS,
    ROLE,
    SEQ,
    Role,
)
from mmlog.protocol import fetch_kernels as fk
from mmlog.protocol.wire_kernels import be_i32
from mmlog.system import libc

API_KEY = 1
PARK = -3  # serve_fetch's answer for a long poll to keep until records come or its wait is over
MAX_PARTS = 1024  # partitions a request may name before it is left to Python
_LEADER = int(Role.LEADER)
_PAGE = N_REPLICAS + 1  # the state slots read: 0 .. N_REPLICAS (the replication region's head)
_SPINS = 1000  # seqlock retries before a torn page is left to Python (whose snapshot repairs it)
_NO_MAX = 0x7FFFFFFF
_BYTES_OUT = metrics_block.SCALAR["bytes_out"]
# plan: int64 [rows, PLAN_FIELDS] (loop.py): a file range to send at a position of wbuf
GAP, PLAN_FD, PLAN_OFFSET, PLAN_LEN = range(4)
PLAN_FIELDS = 4


def make_scratch() -> tuple:
    """(header, parts, results, aborted, gaps, spans, page, scan): the arrays one fetch works in."""
    return (np.zeros(fk.FETCH_HEADER_FIELDS, np.int64), np.zeros((MAX_PARTS, fk.FETCH_PART_FIELDS), np.int64),
            np.zeros((MAX_PARTS, fk.FETCH_RESULT_FIELDS), np.int64), np.zeros((1, 2), np.int64),
            np.zeros(MAX_PARTS, np.int64), np.zeros((MAX_PARTS, 2), np.int64), np.zeros(_PAGE, np.int64),
            np.zeros(SCAN_CHUNK, np.uint8))


@njit(cache=True, nogil=True)
def _snapshot(address, page):
    """Copy the state page's slots 0.._PAGE-1 at a moment no writer was in them (the seqlock); False if
    the sequence stayed odd or kept moving (a dead or slow writer: Python's snapshot deals with it)."""
    slots = libc.view_i64(address, _PAGE)
    for _ in range(_SPINS):
        libc.fence()
        seq = slots[SEQ]
        if seq & 1:
            continue
        libc.fence()
        page[:] = slots[:]
        libc.fence()
        if slots[SEQ] == seq:
            return True
    return False


@njit(cache=True, nogil=True)
def _find_batch(r, offset, entries, end, scan):
    """Segment.find_batch on the row's active segment: (1, position, size) of the first batch in [0, end)
    whose last offset >= offset, (0, end, 0) if none, (-1, 0, 0) for what Python raises on (a header that
    does not parse, a failed read)."""
    capacity = r[t.OFFSET_INDEX_CAPACITY]
    pos = 0
    n = min(entries, capacity)
    if n > 0:
        index = libc.view_i32(r[t.OFFSET_INDEX_ADDR], 2 * capacity)
        slot = kernels.index_floor(index, n, offset - r[t.ACTIVE_BASE])
        if slot >= 0:
            pos = np.int64(index[2 * slot + 1])
    fd = np.int32(r[t.LOG_FD])
    while pos < end:
        got = libc.pread(fd, scan.ctypes.data, min(scan.shape[0], end - pos), pos)
        if got <= 0:
            return -1, 0, 0
        status, at = kernels.find_batch(scan, 0, got, offset)
        if status == 0:
            return 1, pos + at, 12 + be_i32(scan, at + 8)
        if status == 3 or (status == 2 and at == 0):
            return -1, 0, 0
        pos += at
    return 0, end, 0


@njit(cache=True, nogil=True)
def serve_fetch(buf, start, end, wbuf, wpos, plan, n_plan, scratch, table, words, who, final):
    """Serve the Fetch frame buf[start:end] (no size prefix): (the response's end in wbuf, the plan rows
    used) with its records as plan rows from n_plan on, (PARK, n_plan) for a long poll to wait (unless
    `final`: its wait is over), or (-1, n_plan) when the Python handler must.
    who: the connection's principal bit (partition_table.permits; 0: no authoriser)."""
    header, parts, results, aborted, gaps, spans, page, scan = scratch
    n = fk.decode_fetch(buf, start, end, header, parts)
    if n < 1 or header[fk.REPLICA_ID] >= 0:
        return -1, n_plan
    committed = header[fk.ISOLATION_LEVEL] == 1
    remaining = header[fk.MAX_BYTES] if header[fk.MAX_BYTES] > 0 else _NO_MAX
    slots, rows, names = table
    first_with_data = True
    available = 0
    with_records = 0
    for i in range(n):
        row = t.lookup(slots, rows, names, buf, parts[i, fk.NAME_START], parts[i, fk.NAME_LEN], parts[i, fk.PARTITION])
        if row < 0 or not t.permits(rows, row, t.READ_KNOWN, who):
            return -1, n_plan  # not in the table, or READ not known to be allowed: Python decides
        r = rows[row]
        if not _snapshot(r[t.STATE_ADDR], page):
            return -1, n_plan
        if page[DELETED] != 0 or page[GENERATION] != r[t.GENERATION] or page[ACTIVE_BASE] != r[t.ACTIVE_BASE]:
            return -1, n_plan  # deleted, or segments this row does not describe: Python lists them again
        if not (page[ROLE] == _LEADER or (page[ROLE] == 0 and page[N_REPLICAS] == 0)):
            return -1, n_plan  # NOT_LEADER_OR_FOLLOWER
        epoch = parts[i, fk.CURRENT_LEADER_EPOCH]
        if epoch >= 0 and epoch != page[LEADER_EPOCH]:
            return -1, n_plan  # FENCED_ or UNKNOWN_LEADER_EPOCH
        offset = parts[i, fk.FETCH_OFFSET]
        log_end = page[LOG_END]
        if offset < page[LOG_START] or offset > log_end or offset < page[ACTIVE_BASE]:
            return -1, n_plan  # OFFSET_OUT_OF_RANGE, or an older segment's bytes
        hw = page[HIGH_WATERMARK]
        unstable = page[FIRST_UNSTABLE]
        lso = unstable if 0 <= unstable < hw else hw
        upto = lso if committed else hw
        limit = min(parts[i, fk.PARTITION_MAX_BYTES], remaining)
        active_size = page[ACTIVE_SIZE]
        entries = page[INDEX_ENTRIES]
        pos = active_size
        size = 0
        if offset < upto:
            found, at, first = _find_batch(r, offset, entries, active_size, scan)
            if found < 0:
                return -1, n_plan  # CorruptSegment or KAFKA_STORAGE_ERROR
            if found:
                stop = active_size
                if upto < log_end:  # a consumer behind the log end: the bytes stop at the HW's (LSO's) batch
                    ended, there, _ = _find_batch(r, upto, entries, active_size, scan)
                    if ended < 0:
                        return -1, n_plan
                    stop = there
                pos = at
                size = min(stop - at, max(max(limit, 0), first))
        if size and (size > limit and not first_with_data or remaining <= 0):
            size = 0  # only the first partition with data may exceed its limit
        if size and committed and offset <= page[LAST_ABORT]:
            return -1, n_plan  # aborted transactions to list: the transaction index is Python's
        res = results[i]
        res[fk.ERROR_CODE] = 0
        res[fk.HIGH_WATERMARK] = hw
        res[fk.LAST_STABLE_OFFSET] = lso
        res[fk.RESULT_LOG_START_OFFSET] = page[LOG_START]
        res[fk.ABORTED_COUNT] = 0 if committed else -1  # read_uncommitted: null, as Kafka answers
        res[fk.RECORDS_SIZE] = size
        if size:
            spans[i, 0] = r[t.LOG_FD]
            spans[i, 1] = pos
            remaining -= size
            available += size
            first_with_data = False
            with_records += 1
    if available < header[fk.MIN_BYTES] and header[fk.MAX_WAIT_MS] > 0 and not final:
        return PARK, n_plan  # a long poll: the loop keeps it
    if n_plan + with_records > plan.shape[0]:
        return -1, n_plan
    w = fk.encode_fetch_response(wbuf, wpos, header[fk.API_VERSION], header[fk.CORRELATION_ID], 0, 0, 0, buf,
                                 parts, n, results, aborted, gaps)
    if w < 0:
        return -1, n_plan
    for i in range(n):
        size = results[i, fk.RECORDS_SIZE]
        if size > 0:
            plan[n_plan, GAP] = gaps[i]
            plan[n_plan, PLAN_FD] = spans[i, 0]
            plan[n_plan, PLAN_OFFSET] = spans[i, 1]
            plan[n_plan, PLAN_LEN] = size
            n_plan += 1
    words[_BYTES_OUT] += available
    return w, n_plan
