"""Numba kernels of the log cleaner: list a segment's batches and records, and rewrite the batches.

`walk_segment` walks the batches of a segment buffer (an mmap) once, filling a
batch table and, for every record of an uncompressed batch, one row:

    batch table (int64, one row per batch):  POS SIZE BASE LAST ATTRS COUNT PID FIRST_ROW
                                             EPOCH BASE_TS (producer epoch, base timestamp)
    record rows (arrays, one entry per record, a batch's records at FIRST_ROW ...):
        h1, h2   the key's 128-bit hash (offset_map.hash_key); 0, 0 without a key
        offset   baseOffset + offsetDelta
        flags    HAS_KEY | NULL_VALUE (a tombstone has a key and a null value)
        rstart, rend   the record's bytes (its length varint included) in the buffer

The rows of a compressed batch are reserved (recordsCount of them) but left for
the caller, who decompresses the batch and runs `walk_records` over its records
section (one Python step per compressed batch, never per record).

`rewrite` then writes the cleaned batches, batch by batch, by action:

    DROP     nothing (every record removed)
    COPY     the batch's bytes unchanged (every record kept)
    REBUILD  the header, then only the kept records; recordsCount, batchLength and
             CRC-32C redone. baseOffset and lastOffsetDelta stay (Kafka keeps the
             last offset so that a producer's last sequence survives), so kept
             records keep their offsets and offset deltas may have gaps
    EMPTY    the header alone, no records (Kafka's empty batch: it keeps an
             idempotent producer's last sequence, or a group's end offset); no
             codec and no delete horizon bit (Kafka's writeEmptyHeader)
    SIDE     bytes the caller built (a compressed batch rebuilt and recompressed)

A REBUILD may also stamp the batch with a delete horizon (KIP-534; `horizons[b]`
>= 0): attribute bit 6 set and the base timestamp replaced by the horizon, each
kept record's timestamp delta rewritten against it (so every record keeps its
timestamp: delta' = old base + delta - horizon; its length varint redone). Kafka
stamps a batch the first time the cleaner keeps a tombstone or an empty
transaction's marker in it, and removes those once a cleaning runs past it.

Every kernel has a `*_py` reference; tests compare them on random segments.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from mmlog.log.kernels import CRC_TABLES, crc32c
from mmlog.log.cleaner.offset_map import hash_key, hash_key_py
from mmlog.protocol import records as rec
from mmlog.protocol.wire_kernels import be_i32, be_i64, put_varint, varint, varint_size

POS, SIZE, BASE, LAST, ATTRS, COUNT, PID, FIRST_ROW, EPOCH, BASE_TS = range(10)
NCOLS = 10
DELETE_HORIZON_BIT = rec.DELETE_HORIZON_BIT  # attributes bit 6 (KIP-534): the base timestamp is the delete horizon
_NO_CODEC_NO_HORIZON = 0xFF & ~(0x07 | DELETE_HORIZON_BIT)
HAS_KEY, NULL_VALUE = 1, 2
DROP, COPY, REBUILD, EMPTY, SIDE = range(5)
# walk statuses
WALK_OK, WALK_BAD_BATCH, WALK_BAD_RECORD = 0, 1, 2

_HEADER = rec.HEADER_SIZE
_MIN_LENGTH = rec.HEADER_SIZE - rec.LOG_OVERHEAD


@njit(cache=True)
def count_batches(buf, start, end):
    """(batches, records, next offset) of the whole batches in buf[start:end] (records: their
    recordsCount sum; next offset: after the last batch's last offset, -1 if none)."""
    p = start
    n = 0
    records = 0
    next_offset = np.int64(-1)
    while p + _HEADER <= end:
        length = be_i32(buf, p + 8)
        if length < _MIN_LENGTH or p + 12 + length > end:
            break
        n += 1
        records += max(be_i32(buf, p + 57), 0)
        next_offset = be_i64(buf, p) + be_i32(buf, p + 23) + 1
        p += 12 + length
    return n, records, next_offset


@njit(cache=True)
def window_end(buf, start, end, limit, max_records):
    """Where the run of whole batches from `start` ends, at most `limit` bytes and `max_records` records
    of them (the first batch alone if it is larger): the cleaner's windows. Stops where count_batches
    stops (a batch that does not parse, or one cut by `end`); `start` if no whole batch begins there."""
    p = start
    records = 0
    while p + _HEADER <= end:
        length = be_i32(buf, p + 8)
        if length < _MIN_LENGTH or p + 12 + length > end:
            break
        records += max(be_i32(buf, p + 57), 0)
        if p > start and (p + 12 + length - start > limit or records > max_records):
            break
        p += 12 + length
    return p


def window_end_py(buf, start, end, limit, max_records):
    """Reference for window_end, on records.iter_batches."""
    p, records = start, 0
    for pos, header in rec.iter_batches(bytes(buf[:end]), start):
        records += max(header.records_count, 0)
        if pos > start and (pos + header.size - start > limit or records > max_records):
            break
        p = pos + header.size
    return p


@njit(cache=True)
def walk_records(buf, p, end, count, base, row, h1, h2, offsets, flags, rstart, rend):
    """Fill rows row .. row + count - 1 from the records in buf[p:end]; WALK_OK or WALK_BAD_RECORD."""
    for i in range(count):
        length, q = varint(buf, p, end)
        if q < 0 or length < 0 or q + length > end:
            return WALK_BAD_RECORD
        stop = q + length
        _, r = varint(buf, q + 1, stop)  # attributes byte, then the timestamp delta
        if r < 0:
            return WALK_BAD_RECORD
        delta, r = varint(buf, r, stop)
        if r < 0:
            return WALK_BAD_RECORD
        klen, r = varint(buf, r, stop)
        if r < 0 or r + max(klen, 0) > stop:
            return WALK_BAD_RECORD
        f = 0
        if klen >= 0:
            f |= HAS_KEY
            h1[row + i], h2[row + i] = hash_key(buf, r, klen)
            r += klen
        else:
            h1[row + i] = 0
            h2[row + i] = 0
        vlen, r = varint(buf, r, stop)
        if r < 0:
            return WALK_BAD_RECORD
        if vlen < 0:
            f |= NULL_VALUE
        offsets[row + i] = base + delta
        flags[row + i] = f
        rstart[row + i] = p
        rend[row + i] = stop
        p = stop
    return WALK_OK


@njit(cache=True)
def walk_segment(buf, start, end, batches, h1, h2, offsets, flags, rstart, rend):
    """Fill the batch table and the rows of uncompressed batches (see the module docstring).

    Returns (status, batches walked): WALK_BAD_RECORD names a batch whose records do not parse."""
    p = start
    n = 0
    row = 0
    while p + _HEADER <= end and n < batches.shape[0]:
        length = be_i32(buf, p + 8)
        size = 12 + length
        if length < _MIN_LENGTH or p + size > end:
            return WALK_BAD_BATCH, n
        base = be_i64(buf, p)
        attrs = (np.int64(buf[p + 21]) << 8) | np.int64(buf[p + 22])
        count = max(be_i32(buf, p + 57), 0)
        batches[n, POS] = p
        batches[n, SIZE] = size
        batches[n, BASE] = base
        batches[n, LAST] = base + be_i32(buf, p + 23)
        batches[n, ATTRS] = attrs
        batches[n, COUNT] = count
        batches[n, PID] = be_i64(buf, p + 43)
        batches[n, FIRST_ROW] = row
        batches[n, EPOCH] = (np.int64(buf[p + 51]) << 8) | np.int64(buf[p + 52])
        batches[n, BASE_TS] = be_i64(buf, p + 27)
        if not attrs & 0x07:
            if walk_records(buf, p + _HEADER, p + size, count, base, row, h1, h2, offsets, flags, rstart,
                            rend) != WALK_OK:
                return WALK_BAD_RECORD, n
        row += count
        n += 1
        p += size
    return WALK_OK, n


@njit(cache=True)
def walk_plain_batches(plain, starts, counts, bases, first_rows, h1, h2, offsets, flags, rstart, rend):
    """walk_records over many decompressed batches laid out in `plain` (each one's 61-byte header
    then its records, from starts[i] to starts[i + 1]): one call for a segment's compressed batches.
    Returns the index of the first batch whose records do not parse, -1 if all do."""
    for i in range(len(counts)):
        end = starts[i + 1]
        if walk_records(plain, starts[i] + _HEADER, end, counts[i], bases[i], first_rows[i], h1, h2, offsets,
                        flags, rstart, rend) != WALK_OK:
            return i
    return -1


@njit(cache=True)
def gather(src, src_starts, lengths, dst, dst_starts):
    """Copy src[src_starts[i]:+lengths[i]] to dst[dst_starts[i]:] for every i (batch headers, say)."""
    for i in range(len(lengths)):
        n = lengths[i]
        dst[dst_starts[i] : dst_starts[i] + n] = src[src_starts[i] : src_starts[i] + n]


@njit(cache=True)
def batch_positions(buf, end, out):
    """The position of each whole batch in buf[:end] (written to out); their number."""
    p = 0
    n = 0
    while p + _HEADER <= end and n < len(out):
        out[n] = p
        n += 1
        p += 12 + be_i32(buf, p + 8)
    return n


def walk_segment_py(buf, start, end, batches, h1, h2, offsets, flags, rstart, rend):
    """Reference for walk_segment (records.py decodes the records)."""
    data = bytes(buf[:end])
    n, row = 0, 0
    for pos, h in rec.iter_batches(data[: end], start):
        if n >= batches.shape[0]:
            break
        batches[n] = (pos, h.size, h.base_offset, h.last_offset, h.attributes, max(h.records_count, 0),
                      h.producer_id, row, h.producer_epoch & 0xFFFF, h.base_timestamp)
        if not h.compression:
            if walk_records_py(data, pos + _HEADER, pos + h.size, h.records_count, h.base_offset, row, h1, h2,
                               offsets, flags, rstart, rend) != WALK_OK:
                return WALK_BAD_RECORD, n
        row += max(h.records_count, 0)
        n += 1
    return WALK_OK, n


def walk_records_py(buf, p, end, count, base, row, h1, h2, offsets, flags, rstart, rend):
    """Reference for walk_records, on read_varint."""
    data = bytes(buf[:end])
    try:
        for i in range(count):
            length, q = rec.read_varint(data, p)
            stop = q + length
            if length < 0 or stop > end:
                return WALK_BAD_RECORD
            _, r = rec.read_varint(data[:stop], q + 1)
            delta, r = rec.read_varint(data[:stop], r)
            klen, r = rec.read_varint(data[:stop], r)
            f = 0
            if klen >= 0:
                if r + klen > stop:
                    return WALK_BAD_RECORD
                f |= HAS_KEY
                h1[row + i], h2[row + i] = hash_key_py(data[r : r + klen])
                r += klen
            else:
                h1[row + i] = h2[row + i] = 0
            vlen, r = rec.read_varint(data[:stop], r)
            if vlen < 0:
                f |= NULL_VALUE
            offsets[row + i], flags[row + i], rstart[row + i], rend[row + i] = base + delta, f, p, stop
            p = stop
    except Exception:  # noqa: BLE001 - a varint cut short, however read_varint says it
        return WALK_BAD_RECORD
    return WALK_OK


@njit(cache=True)
def _put_i32(buf, p, v):
    for k in range(4):
        buf[p + k] = (v >> (24 - 8 * k)) & 0xFF


@njit(cache=True)
def _finish(out, o, q, count, tables):
    """Set batchLength and recordsCount of the batch written at out[o:q], then its CRC."""
    _put_i32(out, o + 8, q - o - 12)
    _put_i32(out, o + 57, count)
    _put_i32(out, o + 17, np.int64(crc32c(out, o + 21, q, tables)))


@njit(cache=True)
def _put_i64(buf, p, v):
    u = np.uint64(v)
    for k in range(8):
        buf[p + k] = np.uint8((u >> np.uint64(56 - 8 * k)) & np.uint64(0xFF))


@njit(cache=True)
def _restamped_record(src, start, end, shift, out, q):
    """Copy the record src[start:end] to out[q] with its timestamp delta plus `shift`; next q."""
    _, a = varint(src, start, end)  # the length varint, redone below
    delta, r = varint(src, a + 1, end)
    new_delta = delta + shift
    body = 1 + varint_size(new_delta) + (end - r)
    q = put_varint(out, q, body)
    out[q] = src[a]
    q = put_varint(out, q + 1, new_delta)
    n = end - r
    out[q : q + n] = src[r:end]
    return q + n


@njit(cache=True)
def rewrite(src, batches, actions, keep, rstart, rend, side, side_start, side_len, horizons, out, tables):
    """Write each batch by its action into out (see the module docstring); return the bytes written.
    out needs room for the source plus side bytes plus 10 bytes a stamped record (its longer varints)."""
    o = 0
    for b in range(batches.shape[0]):
        action = actions[b]
        pos = batches[b, POS]
        if action == COPY:
            size = batches[b, SIZE]
            out[o : o + size] = src[pos : pos + size]
            o += size
        elif action == REBUILD:
            out[o : o + _HEADER] = src[pos : pos + _HEADER]
            horizon = horizons[b]
            shift = np.int64(0)
            if horizon >= 0:
                out[o + 22] = out[o + 22] | DELETE_HORIZON_BIT
                _put_i64(out, o + 27, horizon)
                shift = batches[b, BASE_TS] - horizon
            q = o + _HEADER
            kept = 0
            first = batches[b, FIRST_ROW]
            for r in range(first, first + batches[b, COUNT]):
                if keep[r]:
                    if horizon >= 0:
                        q = _restamped_record(src, rstart[r], rend[r], shift, out, q)
                    else:
                        n = rend[r] - rstart[r]
                        out[q : q + n] = src[rstart[r] : rend[r]]
                        q += n
                    kept += 1
            _finish(out, o, q, kept, tables)
            o = q
        elif action == EMPTY:
            out[o : o + _HEADER] = src[pos : pos + _HEADER]
            out[o + 22] = out[o + 22] & _NO_CODEC_NO_HORIZON  # no records: no codec, nothing to delete
            _finish(out, o, o + _HEADER, 0, tables)
            o += _HEADER
        elif action == SIDE:
            n = side_len[b]
            out[o : o + n] = side[side_start[b] : side_start[b] + n]
            o += n
    return o


def rewrite_py(src, batches, actions, keep, rstart, rend, side, side_start, side_len, horizons, out, tables=None):
    """Reference for rewrite, assembling bytes objects (records re-encoded with records.py's varints)."""
    from crc32c import crc32c as c

    parts = []
    for b in range(len(batches)):
        pos, size = int(batches[b, POS]), int(batches[b, SIZE])
        action = actions[b]
        if action == COPY:
            parts.append(bytes(src[pos : pos + size]))
            continue
        if action in (REBUILD, EMPTY):
            header = bytearray(src[pos : pos + _HEADER])
            body = bytearray()
            kept = 0
            if action == REBUILD:
                horizon = int(horizons[b])
                if horizon >= 0:
                    header[22] |= DELETE_HORIZON_BIT
                    header[27:35] = horizon.to_bytes(8, "big", signed=True)
                first = int(batches[b, FIRST_ROW])
                rows = [r for r in range(first, first + int(batches[b, COUNT])) if keep[r]]
                for r in rows:
                    record = bytes(src[rstart[r] : rend[r]])
                    if horizon >= 0:
                        _, a = rec.read_varint(record, 0)
                        delta, rest = rec.read_varint(record, a + 1)
                        inner = bytearray(record[a : a + 1])
                        rec.write_varint(inner, delta + int(batches[b, BASE_TS]) - horizon)
                        inner += record[rest:]
                        record = bytearray()
                        rec.write_varint(record, len(inner))
                        record += inner
                    body += record
                kept = len(rows)
            else:
                header[22] &= _NO_CODEC_NO_HORIZON
            batch = header + body
            batch[8:12] = (len(batch) - 12).to_bytes(4, "big")
            batch[57:61] = kept.to_bytes(4, "big")
            batch[17:21] = c(bytes(batch[21:])).to_bytes(4, "big")
            parts.append(bytes(batch))
        elif action == SIDE:
            parts.append(bytes(side[side_start[b] : side_start[b] + side_len[b]]))
    data = b"".join(parts)
    out[: len(data)] = np.frombuffer(data, dtype=np.uint8)
    return len(data)


def warm() -> None:
    """Compile the kernels (and the offset map's) before forking."""
    from mmlog.log.cleaner import offset_map
    from mmlog.protocol import compression, lz4_frame

    offset_map.warm()
    lz4_frame.decompress(compression.compress(compression.LZ4, b"warm"))
    buf = np.asarray(rec.build_batch([(b"k", b"v")]), dtype=np.uint8)
    nb, nr, _ = count_batches(buf, 0, len(buf))
    batches = np.zeros((nb, NCOLS), np.int64)
    h1, h2 = np.zeros(nr, np.uint64), np.zeros(nr, np.uint64)
    offsets, flags = np.zeros(nr, np.int64), np.zeros(nr, np.int64)
    rstart, rend = np.zeros(nr, np.int64), np.zeros(nr, np.int64)
    walk_segment(buf, 0, len(buf), batches, h1, h2, offsets, flags, rstart, rend)
    out = np.zeros(len(buf) + 10 * nr, np.uint8)
    gather(buf, np.zeros(1, np.int64), np.ones(1, np.int64), out, np.zeros(1, np.int64))
    batch_positions(buf, len(buf), np.zeros(2, np.int64))
    window_end(buf, 0, len(buf), 1 << 20, 1 << 20)
    for action, horizon in ((COPY, -1), (REBUILD, 1)):
        rewrite(buf, batches, np.full(nb, action, np.int64), np.ones(nr, np.bool_), rstart, rend,
                np.zeros(0, np.uint8), np.zeros(nb, np.int64), np.zeros(nb, np.int64), np.full(nb, horizon, np.int64),
                out, CRC_TABLES)
