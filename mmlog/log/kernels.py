"""Numba kernels for the byte-level work of the log, each beside its plain-Python reference.

The kernels run over numpy views of mmap-ed or pread buffers, so no Python code
loops per batch or per record on a hot path:

- `index_floor`:  binary search of an offset index (largest relative offset <= target);
- `time_floor`:   binary search of a time index (largest timestamp < target);
- `find_batch`:   batch-boundary scan to the batch holding an offset;
- `find_time`:    scan to the first record with timestamp >= target from an offset on (walks record varints);
- `scan_segment`: recovery validation of a whole segment (length, magic, CRC-32C,
                  offset continuity, or only increasing offsets in a compacted log), emitting the sparse
                  offset and time index entries as it goes;
- `crc32c`:       CRC-32C (Castagnoli): SSE4.2's crc32 instruction over three interleaved streams, or
                  slicing-by-8 tables on a CPU without it; for `scan_segment` and the compiled append;
- `check_records`: the records section of a (decompressed) batch against its header:
                  every record's length within the section, offset deltas 0, 1, 2, ...,
                  as many records as the header counts, nothing left over.

Every kernel has a `*_py` reference with the same signature; tests compare the two
on random input. `warm()` compiles everything once: call it before forking so that
workers inherit compiled code and no request pays for compilation (the on-disk
cache also spares later processes the compile).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from mmlog.errors import CorruptMessage
from mmlog.log import batch_walk
from mmlog.protocol import records as rec
from mmlog.protocol.wire_kernels import be_i32, be_i64, be_u32, varint
from mmlog.system import cpu

# scan_segment stop reasons
SCAN_END = 0  # every byte up to `end` is valid
SCAN_TORN = 1  # fewer bytes left than a header or the declared length needs
SCAN_BAD_LENGTH = 2  # batchLength smaller than a header
SCAN_BAD_MAGIC = 3
SCAN_BAD_CRC = 4
SCAN_BAD_OFFSET = 5  # baseOffset is not the expected next offset, or deltas out of range
SCAN_REASONS = ("end", "torn batch", "bad length", "bad magic", "bad CRC", "bad offset")

_MIN_BATCH_LENGTH = rec.HEADER_SIZE - rec.LOG_OVERHEAD


CRC_BLOCK = 256  # bytes of each of the three streams the SSE4.2 CRC interleaves in a step
SHIFT = 8  # rows SHIFT..SHIFT+3 of the tables: the CRC register carried over CRC_BLOCK zero bytes


def _crc_tables() -> np.ndarray:
    """Slicing-by-8 tables for the reflected Castagnoli polynomial 0x82F63B78 (rows 0-7), then the shift
    over CRC_BLOCK zero bytes (rows 8-11). The shift is linear in the register, so it is the xor of one
    entry per register byte: row SHIFT + k holds it for byte k alone."""
    t = np.zeros((SHIFT + 4, 256), dtype=np.uint32)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t[0, i] = c
    for i in range(256):
        c = int(t[0, i])
        for k in range(1, 8):
            c = (c >> 8) ^ int(t[0, c & 0xFF])
            t[k, i] = c
    regs = (np.arange(256, dtype=np.uint32)[None, :] << (8 * np.arange(4, dtype=np.uint32))[:, None]).ravel()
    for _ in range(CRC_BLOCK):  # one zero byte: reg = T0[reg & 0xFF] ^ (reg >> 8)
        regs = t[0, regs & 0xFF] ^ (regs >> np.uint32(8))
    t[SHIFT:] = regs.reshape(4, 256)
    return t


CRC_TABLES = _crc_tables()


# ---------------------------------------------------------------- CRC-32C


@njit(cache=True)
def crc32c_tables(buf, start, end, tables):
    """CRC-32C of buf[start:end] (slicing-by-8): for a CPU without SSE4.2."""
    crc = np.uint32(0xFFFFFFFF)
    p = start
    while p + 8 <= end:
        crc ^= np.uint32(buf[p]) | (np.uint32(buf[p + 1]) << 8) | (np.uint32(buf[p + 2]) << 16) | (
            np.uint32(buf[p + 3]) << 24
        )
        crc = (
            tables[7, crc & 0xFF]
            ^ tables[6, (crc >> 8) & 0xFF]
            ^ tables[5, (crc >> 16) & 0xFF]
            ^ tables[4, crc >> 24]
            ^ tables[3, buf[p + 4]]
            ^ tables[2, buf[p + 5]]
            ^ tables[1, buf[p + 6]]
            ^ tables[0, buf[p + 7]]
        )
        p += 8
    while p < end:
        crc = tables[0, (crc ^ np.uint32(buf[p])) & 0xFF] ^ (crc >> 8)
        p += 1
    return crc ^ np.uint32(0xFFFFFFFF)


@njit(cache=True)
def _shifted(crc, tables):
    """The CRC register `crc` carried over CRC_BLOCK zero bytes (rows SHIFT.. of the tables)."""
    c = np.uint32(crc)
    return np.uint64(tables[SHIFT, c & 0xFF] ^ tables[SHIFT + 1, (c >> 8) & 0xFF]
                     ^ tables[SHIFT + 2, (c >> 16) & 0xFF] ^ tables[SHIFT + 3, c >> 24])


@njit(cache=True)
def crc32c_sse42(buf, start, end, tables):
    """CRC-32C of buf[start:end] with SSE4.2's crc32 instruction, 8 bytes a step (4-5x the tables' speed).

    The instruction takes 3 cycles but can start every cycle, so three streams of CRC_BLOCK bytes run
    side by side, each from a zero register, and are joined: the register over A then B is A's carried
    over len(B) zero bytes xor B's from zero (the CRC is linear), one table lookup per register byte."""
    crc = np.uint64(0xFFFFFFFF)
    p = start
    while p + 3 * CRC_BLOCK <= end:
        one, two = np.uint64(0), np.uint64(0)
        for q in range(p, p + CRC_BLOCK, 8):
            crc = cpu.crc32c_u64(crc, cpu.load_u64(buf, q))
            one = cpu.crc32c_u64(one, cpu.load_u64(buf, q + CRC_BLOCK))
            two = cpu.crc32c_u64(two, cpu.load_u64(buf, q + 2 * CRC_BLOCK))
        crc = _shifted(_shifted(crc, tables) ^ one, tables) ^ two
        p += 3 * CRC_BLOCK
    while p + 8 <= end:
        crc = cpu.crc32c_u64(crc, cpu.load_u64(buf, p))
        p += 8
    c = np.uint32(crc)
    while p < end:
        c = cpu.crc32c_u8(c, buf[p])
        p += 1
    return c ^ np.uint32(0xFFFFFFFF)


crc32c = crc32c_sse42 if cpu.HAS_SSE42 else crc32c_tables  # CRC-32C of buf[start:end], what every kernel calls


def crc32c_py(buf, start, end, tables=None) -> int:
    """Reference: the `crc32c` package over the same bytes."""
    from crc32c import crc32c as c

    return c(memoryview(buf)[start:end])


# ---------------------------------------------------------------- index searches


@njit(cache=True)
def index_floor(entries, n, target):
    """Slot of the last of n (relative offset, position) pairs with relative offset <= target, or -1.

    `entries` is the flat int32 view of an offset index: [rel0, pos0, rel1, pos1, ...].
    """
    lo, hi = 0, n - 1
    found = -1
    while lo <= hi:
        mid = (lo + hi) >> 1
        if entries[2 * mid] <= target:
            found = mid
            lo = mid + 1
        else:
            hi = mid - 1
    return found


def index_floor_py(entries, n, target) -> int:
    import bisect

    rels = [int(entries[2 * i]) for i in range(n)]
    return bisect.bisect_right(rels, target) - 1


@njit(cache=True)
def index_floor_many(entries, n, targets, out):
    """index_floor for many targets at once (bulk lookups for benchmarks and batch reads)."""
    for i in range(targets.shape[0]):
        out[i] = index_floor(entries, n, targets[i])


@njit(cache=True)
def time_floor(entries, n, target):
    """Slot of the last of n (timestamp, relative offset) pairs with timestamp < target, or -1.

    `entries` is the flat int64 view of a time index. Timestamps in it only grow, and
    every record before an entry's offset has a timestamp <= the entry's, so the first
    record with timestamp >= target lies after the returned entry's offset.
    """
    lo, hi = 0, n - 1
    found = -1
    while lo <= hi:
        mid = (lo + hi) >> 1
        if entries[2 * mid] < target:
            found = mid
            lo = mid + 1
        else:
            hi = mid - 1
    return found


def time_floor_py(entries, n, target) -> int:
    import bisect

    stamps = [int(entries[2 * i]) for i in range(n)]
    return bisect.bisect_left(stamps, target) - 1


# ---------------------------------------------------------------- batch scans


@njit(cache=True)
def find_batch(buf, start, end, target):
    """Scan batch headers in buf[start:end] for the first batch whose last offset >= target.

    Returns (status, position): status 0 = found at position; 1 = not in this buffer,
    continue the scan at position (the next batch start, possibly past `end`);
    2 = the header at position is cut off by `end` (read more from position).
    """
    p = start
    while p + rec.HEADER_SIZE <= end:
        length = be_i32(buf, p + 8)
        if length < _MIN_BATCH_LENGTH:
            return 3, p
        last = be_i64(buf, p) + be_i32(buf, p + 23)
        if last >= target:
            return 0, p
        p += 12 + length
    if p >= end:
        return 1, p
    return 2, p


def find_batch_py(buf, start, end, target):
    p = start
    while p + rec.HEADER_SIZE <= end:
        h = rec.read_header(bytes(buf[p : p + rec.HEADER_SIZE]))
        if h.batch_length < _MIN_BATCH_LENGTH:
            return 3, p
        if h.last_offset >= target:
            return 0, p
        p += h.size
    return (1, p) if p >= end else (2, p)


@njit(cache=True)
def find_time(buf, start, end, target, min_offset):
    """First record with timestamp >= target and offset >= min_offset in the whole batches of buf[start:end].

    Returns (status, position, offset, timestamp): status 0 = found (position of its
    batch, the record's offset and timestamp; a compressed batch is the finest grain:
    its base offset and max timestamp); 1 = none in the whole batches here, continue
    at position; 2 = batch at position is cut off; 3 = no batch header at position.
    """
    p = start
    while p + rec.HEADER_SIZE <= end:
        length = be_i32(buf, p + 8)
        if length < _MIN_BATCH_LENGTH:
            return 3, p, -1, -1
        size = 12 + length
        max_ts = be_i64(buf, p + 35)
        base = be_i64(buf, p)
        last = base + be_i32(buf, p + 23)
        if max_ts >= target and last >= min_offset:
            if p + size > end:
                return 2, p, -1, -1
            attributes = (np.int64(buf[p + 21]) << 8) | np.int64(buf[p + 22])
            if attributes & 0x07 or attributes & 0x08:
                return 0, p, max(base, min_offset), max_ts  # compressed or LogAppendTime
            base_ts = be_i64(buf, p + 27)
            count = be_i32(buf, p + 57)
            q = p + rec.HEADER_SIZE
            stop = p + size
            for _ in range(count):
                rlen, q = varint(buf, q, stop)
                if q < 0:
                    return 0, p, last, max_ts
                rend = q + rlen
                ts_delta, r = varint(buf, q + 1, stop)
                if r < 0:
                    return 0, p, last, max_ts
                off_delta, r = varint(buf, r, stop)
                if r < 0:
                    return 0, p, last, max_ts
                if base_ts + ts_delta >= target and base + off_delta >= min_offset:
                    return 0, p, base + off_delta, base_ts + ts_delta
                q = rend
        p += size
    if p >= end:
        return 1, p, -1, -1
    return 2, p, -1, -1


def find_time_py(buf, start, end, target, min_offset):
    p = start
    while p + rec.HEADER_SIZE <= end:
        h = rec.read_header(bytes(buf[p : p + rec.HEADER_SIZE]))
        if h.batch_length < _MIN_BATCH_LENGTH:
            return 3, p, -1, -1
        if h.max_timestamp >= target and h.last_offset >= min_offset:
            if p + h.size > end:
                return 2, p, -1, -1
            if h.compression or h.timestamp_type:
                return 0, p, max(h.base_offset, min_offset), h.max_timestamp
            for r in rec.decode_records(bytes(buf[p : p + h.size])):
                if r.timestamp >= target and r.offset >= min_offset:
                    return 0, p, r.offset, r.timestamp
        p += h.size
    return (1, p, -1, -1) if p >= end else (2, p, -1, -1)


# ---------------------------------------------------------------- recovery scan


@njit(cache=True)
def scan_segment(buf, start, end, segment_base, next_offset, interval, check_crc, tables, index_out, time_out,
                 gaps=False):
    """Validate the batches of a segment and rebuild its sparse indexes in one pass.

    Walks buf[start:end] batch by batch, checking the length, magic, CRC-32C
    (if check_crc) and that each batch starts at the expected next offset (with
    `gaps`, at it or after: the log cleaner removes whole batches) with a
    relative offset that fits an int32. Every `interval` bytes it writes an offset
    index entry (relative base offset, position) into index_out (flat int32) and,
    when the max timestamp grew, a time index entry (max timestamp so far, its
    relative offset) into time_out (flat int64), stopping quietly when either is full.

    Returns (status, valid_end, next_offset, batches, n_index, n_time, max_ts,
    offset_of_max_ts, bytes_since_index): everything before valid_end is intact.
    """
    p = start
    n_idx = 0
    n_time = 0
    batches = 0
    since = 0
    max_ts = np.int64(-1)
    off_max = np.int64(-1)
    last_time_ts = np.int64(-1)
    idx_cap = index_out.shape[0] // 2
    time_cap = time_out.shape[0] // 2
    status = SCAN_END
    while p < end:
        if p + 12 > end:
            status = SCAN_TORN
            break
        length = be_i32(buf, p + 8)
        if length < _MIN_BATCH_LENGTH:
            status = SCAN_BAD_LENGTH
            break
        size = 12 + length
        if p + size > end:
            status = SCAN_TORN
            break
        if buf[p + 16] != 2:
            status = SCAN_BAD_MAGIC
            break
        if check_crc and crc32c(buf, p + 21, p + size, tables) != be_u32(buf, p + 17):
            status = SCAN_BAD_CRC
            break
        base = be_i64(buf, p)
        delta = be_i32(buf, p + 23)
        if (base != next_offset and not (gaps and base > next_offset)) or delta < 0 \
                or base + delta - segment_base > 2147483647:
            status = SCAN_BAD_OFFSET
            break
        batch_max_ts = be_i64(buf, p + 35)
        if batch_max_ts > max_ts:
            max_ts = batch_max_ts
            off_max = base + delta
        if since >= interval and batches > 0:
            if n_idx < idx_cap:
                index_out[2 * n_idx] = np.int32(base - segment_base)
                index_out[2 * n_idx + 1] = np.int32(p)
                n_idx += 1
            if max_ts > last_time_ts and n_time < time_cap:
                time_out[2 * n_time] = max_ts
                time_out[2 * n_time + 1] = off_max - segment_base
                last_time_ts = max_ts
                n_time += 1
            since = 0
        since += size
        next_offset = base + delta + 1
        batches += 1
        p += size
    return status, p, next_offset, batches, n_idx, n_time, max_ts, off_max, since


def scan_segment_py(buf, start, end, segment_base, next_offset, interval, check_crc, tables, index_out, time_out,
                    gaps=False):
    """Reference for scan_segment, built on records.py and the crc32c package."""
    p, n_idx, n_time, batches, since = start, 0, 0, 0, 0
    max_ts, off_max, last_time_ts = -1, -1, -1
    idx_cap, time_cap = len(index_out) // 2, len(time_out) // 2
    data = bytes(buf[:end])
    status = SCAN_END
    while p < end:
        if p + 12 > end:
            status = SCAN_TORN
            break
        length = int.from_bytes(data[p + 8 : p + 12], "big", signed=True)
        if length < _MIN_BATCH_LENGTH:
            status = SCAN_BAD_LENGTH
            break
        if p + 12 + length > end:
            status = SCAN_TORN
            break
        h = rec.read_header(data, p)
        if h.magic != 2:
            status = SCAN_BAD_MAGIC
            break
        if check_crc and crc32c_py(data, p + 21, p + h.size) != h.crc:
            status = SCAN_BAD_CRC
            break
        follows = h.base_offset == next_offset or (gaps and h.base_offset > next_offset)
        if not follows or h.last_offset_delta < 0 or h.last_offset - segment_base > 2**31 - 1:
            status = SCAN_BAD_OFFSET
            break
        if h.max_timestamp > max_ts:
            max_ts, off_max = h.max_timestamp, h.last_offset
        if since >= interval and batches > 0:
            if n_idx < idx_cap:
                index_out[2 * n_idx], index_out[2 * n_idx + 1] = h.base_offset - segment_base, p
                n_idx += 1
            if max_ts > last_time_ts and n_time < time_cap:
                time_out[2 * n_time], time_out[2 * n_time + 1] = max_ts, off_max - segment_base
                last_time_ts = max_ts
                n_time += 1
            since = 0
        since += h.size
        next_offset = h.next_offset
        batches += 1
        p += h.size
    return status, p, next_offset, batches, n_idx, n_time, max_ts, off_max, since


# check_records outcomes
RECORDS_OK = 0
RECORDS_BAD_LENGTH = 1  # a record's length varint is bad or runs past the section
RECORDS_BAD_DELTA = 2  # a record's offset delta is not its index
RECORDS_LEFT_OVER = 3  # bytes after the last record the header counts
RECORDS_REASONS = ("ok", "a record runs past the batch", "offset deltas out of order", "bytes after the last record")


@njit(cache=True)
def check_records(data, n, count):
    """Walk `count` records of data[:n]: (status, records walked). Offset deltas must run 0, 1, ..."""
    p = 0
    for i in range(count):
        length, q = varint(data, p, n)
        if q < 0 or length < 0 or q + length > n:
            return RECORDS_BAD_LENGTH, i
        end = q + length
        _, r = varint(data, q + 1, end)  # + 1: the record's attributes byte; then the timestamp delta
        if r < 0:
            return RECORDS_BAD_LENGTH, i
        delta, r = varint(data, r, end)
        if r < 0 or delta != i:
            return RECORDS_BAD_DELTA, i
        p = end
    if p != n:
        return RECORDS_LEFT_OVER, count
    return RECORDS_OK, count


@njit(cache=True)
def first_null_key(data, n, count):
    """The index of the first of `count` records in data[:n] whose key is null (-1: none; -2: a record
    that does not parse, which check_records reports)."""
    p = 0
    for i in range(count):
        length, q = varint(data, p, n)
        if q < 0 or length < 0 or q + length > n:
            return -2
        end = q + length
        _, r = varint(data, q + 1, end)  # the timestamp delta, after the attributes byte
        if r < 0:
            return -2
        _, r = varint(data, r, end)  # the offset delta
        if r < 0:
            return -2
        key_length, r = varint(data, r, end)
        if r < 0:
            return -2
        if key_length < 0:
            return i
        p = end
    return -1


def check_records_py(data, n, count):
    p = 0
    for i in range(count):
        try:
            length, q = rec.read_varint(data, p)
        except (IndexError, ValueError, CorruptMessage):
            return RECORDS_BAD_LENGTH, i
        if length < 0 or q + length > n or q > n:
            return RECORDS_BAD_LENGTH, i
        end = q + length
        try:
            _, r = rec.read_varint(data[:end], q + 1)
            delta, r = rec.read_varint(data[:end], r)
        except (IndexError, ValueError, CorruptMessage):
            return RECORDS_BAD_LENGTH, i
        if delta != i:
            return RECORDS_BAD_DELTA, i
        p = end
    if p != n:
        return RECORDS_LEFT_OVER, count
    return RECORDS_OK, count


def warm() -> None:
    """Compile every kernel now (or load it from the on-disk cache), before any fork."""
    buf = np.asarray(rec.build_batch([(b"k", b"v")]), dtype=np.uint8)
    idx = np.zeros(4, dtype=np.int32)
    tix = np.zeros(4, dtype=np.int64)
    crc32c(buf, 0, len(buf), CRC_TABLES)
    index_floor(idx, 0, 0)
    index_floor_many(idx, 0, np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64))
    time_floor(tix, 0, 0)
    find_batch(buf, 0, len(buf), 0)
    find_time(buf, 0, len(buf), 0, 0)
    scan_segment(buf, 0, len(buf), 0, 0, 4096, True, CRC_TABLES, idx, tix)
    scan_segment(buf, 0, len(buf), 0, 0, 4096, True, CRC_TABLES, idx, tix, True)
    check_records(buf[rec.HEADER_SIZE:], len(buf) - rec.HEADER_SIZE, 1)
    first_null_key(buf[rec.HEADER_SIZE:], len(buf) - rec.HEADER_SIZE, 1)
    batch_walk.warm()  # the producer-state walk (batch_walk.py)
