"""One Produce request served in compiled code: decode, find the partitions, append, answer.

The same steps as dispatch.handle_produce_group and handlers/produce.py take for a request
whose partitions all append cleanly, and nothing else: `serve_frame` returns -1 (having
changed nothing) for every request it does not cover, which the Python handlers then serve
from the same bytes. Covered: Produce v3-v8 without a transactional id, acks 0, 1 or -1, up to
MAX_PARTS partitions, each named once, that the processor's partition table holds, records the
append kernel takes (log/append_kernel.py says which: batches of producer id -1, and idempotent
producers' in-sequence batches): all of them appended, or none. A duplicate or a refused producer
batch is Python's (the duplicate's offsets, or the error).
Everything that answers an error is Python's: so is every error metric.

acks=-1 where the ISR holds followers: the records are appended here and the answer waits until the
high watermark passes them, in Python's purgatory with every other waiting Produce (its timeout, its
errors when leadership moves or the ISR shrinks are handlers/produce.py's `AwaitingReplicas`).
`serve_frame` then answers HELD, with each partition's (base offset, last offset, log start offset,
waits) in the scratch's held rows from its held count on: the loop hands the connection to Python with
the frame, which builds that answer from them (path.py). A partition whose high watermark passed its records
already is answered at once, as the Python path does.

After an append, what `Processor.appended` does in Python: other processors with parked
fetches are woken through their eventfds (the wake board's counts, read after a full fence:
ipc/wake_board.py has the argument); this processor's own are looked at again by the loop
(counters[APPENDED]: its parked fetches at once, the Python purgatory's when it returns).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from mmlog.ipc import metrics_block
from mmlog.ipc.memory_fence import full_fence
from mmlog.ipc.quota_block import record_rate
from mmlog.log import append_kernel, partition_table
from mmlog.log.state import HIGH_WATERMARK, STATE_SIZE
from mmlog.protocol import produce_kernels as pk
from mmlog.system import libc

API_KEY = 0
MAX_PARTS = 4096  # partitions a decoded request may name before it is left to Python (a keyed producer's names many)
HELD = -2  # serve_frame's answer for a request appended whose answer waits for followers
HELD_ROWS = 4096  # held partitions one loop call may pass to Python (a request that finds no room is Python's)
BASE, LAST, LOG_START, WAITS = range(4)  # a held row
HELD_ROWS_AT, HELD_COUNT = 7, 8  # the scratch's held rows and their count (the loop's and path.py's way in)
# scratch: (header, parts, results, spans, appended, ids, pending, held, held count) arrays of the sizes
# `make_scratch` gives; appended rows are the append kernel's (base offset, last offset, log start offset,
# batches, records)
# shared: (metrics words, parked-fetch counts per slot, eventfd per slot, [this slot], the quota block's ids and
# values, [its window ms, this processor's writer row]) (ipc/quota_block.py)
_SLOTS = STATE_SIZE // 8
_BYTES_IN, _MESSAGES_IN = metrics_block.SCALAR["bytes_in"], metrics_block.SCALAR["messages_in"]


def make_scratch() -> tuple:
    """The arrays one decode, append and answer work in (reused by every request)."""
    return (np.zeros(pk.HEADER_FIELDS, np.int64), np.zeros((MAX_PARTS, pk.PART_FIELDS), np.int64),
            np.zeros((MAX_PARTS, pk.RESULT_FIELDS), np.int64), np.zeros((MAX_PARTS, 2), np.int64),
            np.zeros((MAX_PARTS, 5), np.int64), np.zeros(MAX_PARTS, np.int64),
            np.zeros((MAX_PARTS, append_kernel.PENDING_FIELDS), np.int64), np.zeros((HELD_ROWS, 4), np.int64),
            np.zeros(1, np.int64))


@njit(cache=True, nogil=True)
def serve_frame(buf, start, end, wbuf, wpos, counters, scratch, table, shared, who, quota_slot, quota_limit,
                holding):
    """Serve the Produce frame buf[start:end] (no size prefix); the response's end in wbuf (wpos if
    acks=0), HELD when it is appended and its answer waits for followers, or -1 when the Python
    handlers must serve it. who: the connection's principal bit (partition_table.permits; 0: no authoriser).
    quota_slot, quota_limit: its produce quota's sensor and bytes/s x 1000 (slot -1: none). holding: an
    earlier request of the read was HELD, so this one's answer must wait behind it: only an acks=-1 request
    is served then, and HELD whatever its high watermark."""
    header, parts, results, spans, appended, ids, pending, held, held_count = scratch
    n = pk.decode_produce(buf, start, end, header, parts)
    if n < 1 or header[pk.TRANSACTIONAL_ID_LEN] != -1:
        return -1
    acks = header[pk.ACKS]
    if (acks != 0 and acks != 1 and acks != -1) or (holding and acks != -1):
        return -1
    if acks == -1 and held_count[0] + n > held.shape[0]:
        return -1
    slots, rows, names = table
    nbytes = 0
    for i in range(n):
        length = parts[i, pk.RECORDS_LEN]
        if length <= 0:
            return -1
        row = partition_table.lookup(slots, rows, names, buf, parts[i, pk.NAME_START], parts[i, pk.NAME_LEN],
                                     parts[i, pk.PARTITION])
        if row < 0 or not partition_table.permits(rows, row, partition_table.WRITE_KNOWN, who):
            return -1  # not in the table, or WRITE not known to be allowed: Python decides (and answers a refusal)
        ids[i] = row
        spans[i, 0] = parts[i, pk.RECORDS_START]
        spans[i, 1] = length
        nbytes += length
    if acks != 0 and wpos + pk.response_size(header[pk.API_VERSION], parts, n) > wbuf.shape[0]:
        return -1  # no room for the answer: known before the append, never after it (Python would append again)
    now_ms = libc.wall_ms()
    if quota_slot >= 0 and _over_quota(shared, quota_slot, quota_limit, now_ms, end - start):
        return -1  # Python records it and answers with the throttle time (processors/quotas.py)
    if append_kernel.append_partitions(rows, ids, n, buf, spans, now_ms, acks, appended,
                                       pending) != append_kernel.OK:
        return -1
    if quota_slot >= 0:
        _record(shared, quota_slot, now_ms, end - start)
    records = 0
    for i in range(n):
        records += appended[i, 4]
        results[i, 0] = 0
        results[i, 1] = appended[i, 0]
        results[i, 2] = appended[i, 2]
    _appended(counters, shared, nbytes, records)
    if acks == 0:
        return wpos
    if acks == -1 and _hold(rows, ids, n, appended, held, held_count, holding):
        return HELD
    return pk.encode_produce_response(wbuf, wpos, header[pk.API_VERSION], header[pk.CORRELATION_ID], 0, buf,
                                      parts, n, results)


@njit(cache=True, nogil=True)
def _hold(rows, ids, n, appended, held, held_count, holding):
    """Whether an acks=-1 request's answer waits: for followers (some partition's high watermark is not past
    its records, read after the append's publish; a follower's fetch moves it), or behind a held request
    (`holding`). If so, its partitions' results go to held rows from held_count on."""
    waits = False
    at = held_count[0]
    for i in range(n):
        page = libc.view_i64(rows[ids[i], partition_table.STATE_ADDR], _SLOTS)
        row = held[at + i]
        row[BASE] = appended[i, 0]
        row[LAST] = appended[i, 1]
        row[LOG_START] = appended[i, 2]
        row[WAITS] = page[HIGH_WATERMARK] <= appended[i, 1]
        waits |= row[WAITS] != 0
    if waits or holding:
        held_count[0] = at + n
    return waits or holding


@njit(cache=True, nogil=True)
def _over_quota(shared, slot, limit, now_ms, nbytes):
    """Whether recording a request's nbytes would put its client over its produce quota (quotas.py records, then
    throttles if the rate is over: such a request is Python's; any other is recorded here after its append)."""
    qids, qvalues, qparams = shared[4], shared[5], shared[6]
    rate, span = record_rate(qids, qvalues, slot, qparams[1], now_ms, qparams[0], 0.0)
    return (rate + nbytes * 1000.0 / span) * 1000.0 > limit


@njit(cache=True, nogil=True)
def _record(shared, slot, now_ms, nbytes):
    qids, qvalues, qparams = shared[4], shared[5], shared[6]
    record_rate(qids, qvalues, slot, qparams[1], now_ms, qparams[0], float(nbytes))


def no_quota_block() -> tuple:
    """The quota block's part of `shared` for a processor without one: (ids, values, [window ms, writer])."""
    return np.zeros((1, 1, 2), np.int64), np.zeros((1, 1, 2)), np.array([1000, 0], np.int64)


@njit(cache=True, nogil=True)
def _appended(counters, shared, nbytes, records):
    """Count an append (metrics' bytes and messages in) and wake the other processors' parked fetches."""
    words, parked, wake_fds, slot = shared[0], shared[1], shared[2], shared[3]
    counters[0] += 1  # loop.APPENDED
    counters[3] += nbytes  # loop.BYTES_IN
    counters[4] += records  # loop.MESSAGES_IN
    words[_BYTES_IN] += nbytes
    words[_MESSAGES_IN] += records
    full_fence()  # the append's stores before the counts' loads (ipc/wake_board.py)
    for other in range(parked.shape[0]):
        if parked[other] and other != slot[0]:
            one = np.ones(1, np.uint64)
            libc.write(np.int32(wake_fds[other]), one.ctypes.data, 8)  # EAGAIN: saturated, awake anyway

