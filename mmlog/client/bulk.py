"""The consumer's fast path: a fetched chunk of record batches decoded into numpy arrays in one call.

A Fetch response carries, per partition, a *chunk*: record batches back to back,
exactly as the broker stored them, possibly ending in part of a batch (the broker
cuts at its byte limits) and starting with the batch that
*contains* the fetch offset, so records below it must be dropped. Decoding one
record at a time in Python (`mmlog.protocol.records.decode_records`) costs a few
microseconds per record. Here two numba kernels do the whole chunk:

- `scan_chunk` walks the batch headers only: where the whole batches end, the
  next offset to fetch (after the last whole batch, control batches included),
  how many records may lie at or above the fetch offset, and whether any batch
  is compressed. It is cheap enough to run before the next fetch is sent.
- `decode_chunk` walks every record of those batches and fills columns:

  ================  =======  ===================================================
  offsets           int64    absolute offset of each record
  timestamps        int64    ms since the epoch (CreateTime, or the batch's max
                             timestamp for LogAppendTime batches)
  timestamp_types   int8     0 CreateTime, 1 LogAppendTime
  key_starts        int64    position of the key in `buffer`
  key_lengths       int32    its length; -1 for a null key
  value_starts      int64    position of the value in `buffer`
  value_lengths     int32    its length; -1 for a null value
  header_starts     int64    position of the record's first header in `buffer`
  header_counts     int32    how many headers it has (decoded on demand)
  ================  =======  ===================================================

Control batches (attribute bit 5: transaction markers) are skipped, and so are
records below the fetch offset. A read_committed consumer also passes the fetch
response's aborted transactions (producer id, first offset): the batches of an
aborted transaction are skipped whole, by Kafka's consumer rule, per batch and
never per record (`aborted_batches`): a producer's transactional batches are
dropped from its aborted transaction's first offset until its next control batch
(the abort marker). The columns point into the chunk's own bytes
(`RecordArrays`, in record_arrays.py), so nothing is copied: `RecordArrays.value_view(i)` is a memoryview, `values()`
builds a list of bytes only when asked, `headers(i)` decodes one record's headers.
Consumers that want millions of records a second work on the columns
(``arrays.value_lengths.sum()``, ``arrays.offsets[-1]``) and never build a Python
object per record. `RecordArrays.iter_records()` / `records()` build
`ConsumerRecord` tuples from the columns with C-level iterators (map/zip over
the columns' lists, about 0.45 µs a record here, against about 3 µs for
`decode_records`); the consumer's iterator and `poll()` are built on them.

The kernel makes one pass over the records. Its loop carries one dependent load a record
(the record's length: the next record starts where this one ends), not one per field; each
record's fields are read by `record_fields.at`, the reader the Spark source's decoder shares.
Its nine columns are carved out of one numpy block (`columns`). `tools/bench_decode.py` times
it against walking every record's fields twice (docs/benchmarks.md: about two thirds of that).

Compressed batches (gzip always; snappy, lz4, zstd if their modules are
installed) are decompressed in Python first: the chunk is rewritten with each
compressed batch replaced by its header (compression bits cleared) and the
plain records, and the kernel runs on that copy.

CRC-32C: with ``check_crcs`` each batch's CRC is verified (the `crc32c`
package, hardware-accelerated, one call per batch) and a mismatch raises
CorruptMessage. `decode_chunk` leaves it off unless asked; the Consumer asks by
default, as Kafka's Java consumer does (check.crcs=true), because it catches
what went bad on disk after the broker validated the batch. It costs about
0.13 ms per MiB here (the kernel finds the batch bounds; the CRCs run from C-level
map()s). In 5 alternating runs of `mmlog perf consume --api iter` the medians
were 1.37 (checked) and 1.42 (not) million msg/s, inside the run-to-run spread.

Usage, from a consumer (`Consumer.poll_batch` returns one RecordArrays per partition and fetch)::

    for arrays in consumer.poll_batch(timeout=1.0):
        arrays.topic, arrays.partition, len(arrays)
        arrays.offsets, arrays.timestamps          # numpy int64
        arrays.value_lengths                       # numpy int32, -1 = null
        arrays.value_view(0), arrays.values()      # one memoryview, all as bytes (only when asked)
        arrays.headers(0)                          # one record's headers, decoded now
        arrays.header_columns()                    # every header as numpy columns (for Arrow builders)

or on raw fetched bytes::

    arrays = decode_chunk(records_bytes, fetch_offset, topic="t", partition=0)
    arrays.next_offset                             # where the next fetch starts

Every kernel has a plain-Python reference beside it (`scan_chunk_py`,
`decode_chunk_py`, built on `mmlog.protocol.records`); tests compare them on
random chunks. `warm()` compiles the kernels (or loads them from numba's on-disk
cache).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import numpy as np
from crc32c import crc32c
from numba import njit

from mmlog.client.record_arrays import RecordArrays, as_array
from mmlog.errors import CorruptMessage
from mmlog.protocol import record_fields
from mmlog.protocol import records as rec
from mmlog.protocol.wire_kernels import be_i32, be_i64

# scan/decode status
OK = 0  # whole batches decoded; anything after `end` is a partial trailing batch
TRUNCATED = 1  # bytes, but not one whole batch: the first batch is bigger than the fetch size
BAD_LENGTH = 2  # batchLength below the header size
BAD_MAGIC = 3  # magic other than 2
BAD_OFFSETS = 4  # negative lastOffsetDelta or recordsCount
BAD_RECORD = 5  # a record's fields disagree with its length or its batch
COMPRESSED = 6  # decode_chunk met a compressed batch (the caller decompresses first)
STATUS_TEXT = ("ok", "no whole batch", "bad batch length", "bad magic", "bad offset delta or record count",
               "bad record", "compressed batch")

_HEADER = rec.HEADER_SIZE  # 61
_MIN_LENGTH = rec.HEADER_SIZE - rec.LOG_OVERHEAD  # 49
_CONTROL = rec.CONTROL_BIT
_TRANSACTIONAL = rec.TRANSACTIONAL_BIT
_LOG_APPEND_TIME = rec.TIMESTAMP_TYPE_BIT
_CODEC = rec.COMPRESSION_MASK
_I32 = struct.Struct(">i")
# The columns' types in RecordArrays order, and the order they lie in their one block (widest first).
_TYPES = tuple(np.dtype(t) for t in (np.int64, np.int64, np.int8, np.int64, np.int32, np.int64, np.int32, np.int64,
                                     np.int32))
_COLUMN_TYPES = tuple(sorted(_TYPES, key=lambda t: -t.itemsize))
_BLOCK_ORDER = sorted(range(len(_TYPES)), key=lambda i: -_TYPES[i].itemsize)  # stable: ties keep their order
_COLUMN_ORDER = [_BLOCK_ORDER.index(i) for i in range(len(_TYPES))]
_ROW_BYTES = sum(t.itemsize for t in _TYPES)


class Scan(NamedTuple):
    """What `scan_chunk` found in a chunk's batch headers."""

    status: int
    end: int  # end of the last whole batch (start of a partial trailing one, if any)
    next_offset: int  # offset to fetch next: after the last whole batch, >= the fetch offset
    capacity: int  # records at or above the fetch offset, at most (control batches excluded)
    compressed: int  # compressed batches among those


# ---------------------------------------------------------------- scan


@njit(cache=True, nogil=True)
def _scan(buf, start, end, fetch_offset):
    p = start
    next_offset = fetch_offset
    capacity = 0
    compressed = 0
    whole = 0
    while end - p >= 12:
        length = be_i32(buf, p + 8)
        if length < _MIN_LENGTH:
            return BAD_LENGTH, p, next_offset, capacity, compressed
        size = 12 + length
        if p + size > end:
            break
        if buf[p + 16] != 2:
            return BAD_MAGIC, p, next_offset, capacity, compressed
        delta = be_i32(buf, p + 23)
        count = be_i32(buf, p + 57)
        if delta < 0 or count < 0:
            return BAD_OFFSETS, p, next_offset, capacity, compressed
        last = be_i64(buf, p) + delta
        attributes = (np.int64(buf[p + 21]) << 8) | np.int64(buf[p + 22])
        if last >= fetch_offset and not attributes & _CONTROL:
            capacity += count
            if attributes & _CODEC:
                compressed += 1
        if last + 1 > next_offset:
            next_offset = last + 1
        whole += 1
        p += size
    status = OK if whole > 0 or p == end else TRUNCATED
    return status, p, next_offset, capacity, compressed


def scan_chunk(data, fetch_offset: int) -> Scan:
    """Walk the batch headers of a fetched chunk (bytes-like or uint8 array); see `Scan`."""
    buf = as_array(data)
    return Scan(*_scan(buf, 0, len(buf), fetch_offset))


def scan_chunk_py(data, fetch_offset: int) -> Scan:
    """Reference for scan_chunk, on `records.read_header`."""
    data = bytes(data)
    p = 0
    next_offset, capacity, compressed, whole = fetch_offset, 0, 0, 0
    while len(data) - p >= 12:
        length = int.from_bytes(data[p + 8 : p + 12], "big", signed=True)
        if length < _MIN_LENGTH:
            return Scan(BAD_LENGTH, p, next_offset, capacity, compressed)
        if p + 12 + length > len(data):
            break
        h = rec.read_header(data, p)
        if h.magic != 2:
            return Scan(BAD_MAGIC, p, next_offset, capacity, compressed)
        if h.last_offset_delta < 0 or h.records_count < 0:
            return Scan(BAD_OFFSETS, p, next_offset, capacity, compressed)
        if h.last_offset >= fetch_offset and not h.is_control:
            capacity += h.records_count
            compressed += bool(h.compression)
        next_offset = max(next_offset, h.next_offset)
        whole += 1
        p += h.size
    return Scan(OK if whole or p == len(data) else TRUNCATED, p, next_offset, capacity, compressed)


# ---------------------------------------------------------------- decode


@njit(cache=True, nogil=True)
def aborted_batches(buf, end, pids, firsts):
    """Positions of the batches in buf[:end] that belong to aborted transactions (Kafka's consumer rule).

    pids/firsts: the fetch response's aborted transactions, sorted by first offset. Walking
    the batches in order, a transaction becomes aborted-active once a batch at or past its
    first offset shows up; a producer's transactional data batches are dropped while it is
    active, and its next control batch (the abort marker) ends it.
    """
    n_batches = 0
    p = 0
    while p < end:
        n_batches += 1
        p += 12 + be_i32(buf, p + 8)
    out = np.empty(n_batches, np.int64)
    active = np.empty(len(pids), np.int64)
    n_active = 0
    i = 0
    n = 0
    p = 0
    while p < end:
        base = be_i64(buf, p)
        pid = be_i64(buf, p + 43)
        attributes = (np.int64(buf[p + 21]) << 8) | np.int64(buf[p + 22])
        while i < len(pids) and firsts[i] <= base:
            active[n_active] = pids[i]
            n_active += 1
            i += 1
        if attributes & _CONTROL:
            for j in range(n_active):
                if active[j] == pid:
                    active[j] = active[n_active - 1]
                    n_active -= 1
                    break
        elif attributes & _TRANSACTIONAL:
            for j in range(n_active):
                if active[j] == pid:
                    out[n] = p
                    n += 1
                    break
        p += 12 + be_i32(buf, p + 8)
    return out[:n]


def aborted_batches_py(data, end: int, aborted) -> list[int]:
    """Reference for aborted_batches, on `records.iter_batches`; aborted is [(producer id, first offset)]."""
    queue = sorted(aborted, key=lambda t: t[1])
    active: set[int] = set()
    out = []
    for pos, h in rec.iter_batches(bytes(data)[:end]):
        while queue and queue[0][1] <= h.base_offset:
            active.add(queue.pop(0)[0])
        if h.is_control:
            active.discard(h.producer_id)
        elif h.is_transactional and h.producer_id in active:
            out.append(pos)
    return out


_NO_SKIP = np.empty(0, np.int64)


def _skips(buf, end: int, aborted) -> np.ndarray:
    """The positions aborted_batches gives, for the response's aborted transactions (any iterable of
    objects with producer_id and first_offset, or (producer id, first offset) pairs)."""
    if not aborted:
        return _NO_SKIP
    pairs = sorted(((a.producer_id, a.first_offset) if hasattr(a, "producer_id") else tuple(a) for a in aborted),
                   key=lambda t: t[1])
    pids = np.array([p for p, _ in pairs], np.int64)
    firsts = np.array([f for _, f in pairs], np.int64)
    return aborted_batches(buf, end, pids, firsts)


def columns(capacity: int) -> list[np.ndarray]:
    """The nine empty columns of `capacity` records, in `RecordArrays` order, carved out of one numpy block:
    one allocation (a block of 4 MB or more is backed by huge pages, so a large chunk's columns cost a
    few page faults, not one every 4 KiB), the 8-byte columns first so that every column is aligned."""
    block = np.empty(capacity * _ROW_BYTES, np.uint8)
    out = []
    at = 0
    for dtype in _COLUMN_TYPES:
        size = capacity * dtype.itemsize
        out.append(block[at:at + size].view(dtype))
        at += size
    return [out[i] for i in _COLUMN_ORDER]


_PASSED = -1  # _batch_at: a batch whose records no reader gets


@njit(cache=True, nogil=True)
def _batch_at(buf, p, fetch_offset, skip, k):
    """The whole batch at p as the decoders take it: (the verdict, where it ends, the index in `skip` to
    look at next, its base offset, whether its timestamps are the log's append time, its base and max
    timestamps, its record count). The verdict is _PASSED for a control batch, one wholly below
    fetch_offset or one in `skip` (an aborted transaction's: positions, ascending); COMPRESSED for a
    compressed batch (the caller decompresses first); OK for one whose records are read."""
    stop = p + 12 + be_i32(buf, p + 8)
    base = be_i64(buf, p)
    last = base + be_i32(buf, p + 23)
    attributes = (np.int64(buf[p + 21]) << 8) | np.int64(buf[p + 22])
    while k < len(skip) and skip[k] < p:
        k += 1
    verdict = OK
    if attributes & _CONTROL or last < fetch_offset or (k < len(skip) and skip[k] == p):
        verdict = _PASSED
    elif attributes & _CODEC:
        verdict = COMPRESSED
    log_append = (attributes & _LOG_APPEND_TIME) != 0
    return verdict, stop, k, base, log_append, be_i64(buf, p + 27), be_i64(buf, p + 35), be_i32(buf, p + 57)


@njit(cache=True, nogil=True)
def _decode(buf, start, end, fetch_offset, skip, offsets, timestamps, ts_types, key_starts, key_lengths,
            value_starts, value_lengths, header_starts, header_counts):
    """Decode the records of the whole batches in buf[start:end] into the columns (see the module docstring),
    which have room for every record (`columns(capacity)`). Batches at the positions in `skip` (ascending:
    aborted transactions' batches) are left out.

    Returns (status, position, n): on a status other than OK, position is the batch at fault and the
    first n entries are valid.
    """
    capacity = len(offsets)
    n = 0
    status = OK
    p = start
    k = 0
    while p < end:
        verdict, stop, k, base, log_append, base_ts, max_ts, count = _batch_at(buf, p, fetch_offset, skip, k)
        if verdict != OK:
            if verdict == COMPRESSED:
                status = COMPRESSED
                break
            p = stop  # passed over
            continue
        q = p + _HEADER
        for _ in range(count):
            rend, ts_delta, off_delta, klen, kstart, vlen, vstart, hcount, hstart = record_fields.at(buf, q, stop)
            if rend < 0:
                status = BAD_RECORD
                break
            q = rend
            offset = base + off_delta
            if offset < fetch_offset:
                continue
            if n >= capacity:
                status = BAD_RECORD
                break
            offsets[n] = offset
            if log_append:
                timestamps[n] = max_ts
                ts_types[n] = 1
            else:
                timestamps[n] = base_ts + ts_delta
                ts_types[n] = 0
            key_starts[n] = kstart
            key_lengths[n] = klen
            value_starts[n] = vstart
            value_lengths[n] = vlen
            header_starts[n] = hstart
            header_counts[n] = hcount
            n += 1
        if status != OK:
            break
        p = stop
    return status, p, n


def decode_chunk(data, fetch_offset: int, *, topic: str = "", partition: int = -1, check_crcs: bool = False,
                 scan: Scan | None = None, aborted=None) -> RecordArrays:
    """Decode the records at or above fetch_offset in a fetched chunk into a RecordArrays.

    `data` is bytes-like (a memoryview into the response is not copied). `scan`
    is the chunk's `scan_chunk` result if the caller has it already. `aborted`: a
    read_committed fetch's aborted transactions (their records are left out). Raises
    CorruptMessage for a malformed batch or record (or a CRC mismatch with
    check_crcs); a chunk with no whole batch decodes to no records with
    `next_offset` = fetch_offset (the caller must fetch more bytes).
    """
    buf = as_array(data)
    if scan is None:
        scan = Scan(*_scan(buf, 0, len(buf), fetch_offset))
    status, end, next_offset, capacity, compressed = scan
    if status not in (OK, TRUNCATED):
        raise CorruptMessage(f"{_where(topic, partition)}batch at byte {end}: {STATUS_TEXT[status]}")
    if check_crcs and end:
        _check_crcs(data, buf, end, topic, partition)
    if compressed:
        data = _decompressed(data, end, fetch_offset)
        buf = np.frombuffer(data, dtype=np.uint8)
        end = len(buf)
        capacity = Scan(*_scan(buf, 0, end, fetch_offset)).capacity
    cols = columns(capacity)
    status, at, n = _decode(buf, 0, end, fetch_offset, _skips(buf, end, aborted), *cols)
    if status != OK:
        raise CorruptMessage(f"{_where(topic, partition)}batch at byte {at}: {STATUS_TEXT[status]}")
    if n < capacity:
        cols = [c[:n] for c in cols]
    return RecordArrays(topic, partition, data, next_offset, cols)


def _where(topic: str, partition: int) -> str:
    return f"{topic}-{partition}: " if topic else ""


@njit(cache=True, nogil=True)
def _crc_ranges(buf, end):
    """For each whole batch in buf[:end] (as scanned): start of the CRC-covered bytes, their end, stored CRC."""
    n = 0
    p = 0
    while p < end:
        n += 1
        p += 12 + be_i32(buf, p + 8)
    starts = np.empty(n, np.int64)
    stops = np.empty(n, np.int64)
    stored = np.empty(n, np.uint32)
    p = 0
    for i in range(n):
        starts[i] = p + rec.CRC_START
        stops[i] = p + 12 + be_i32(buf, p + 8)
        stored[i] = np.uint32(be_i32(buf, p + 17) & 0xFFFFFFFF)
        p = stops[i]
    return starts, stops, stored


def _check_crcs(data, buf: np.ndarray, end: int, topic: str, partition: int) -> None:
    """CRC-32C of every whole batch: the hardware-accelerated `crc32c` package called from C-level map()s
    over batch bounds the kernel found (a Python loop reading each header cost twice the CRCs themselves)."""
    starts, stops, stored = _crc_ranges(buf, end)
    view = memoryview(data).cast("B") if not isinstance(data, np.ndarray) else memoryview(data)
    actual = np.fromiter(map(crc32c, map(view.__getitem__, map(slice, starts.tolist(), stops.tolist()))),
                         np.uint32, len(starts))
    bad = np.flatnonzero(actual != stored)
    if len(bad):
        i = int(bad[0])
        pos = int(starts[i]) - rec.CRC_START
        h = rec.read_header(view, pos)
        raise CorruptMessage(f"{_where(topic, partition)}batch at byte {pos} (offset {h.base_offset}): "
                             f"CRC-32C {int(actual[i]):#010x} != stored {h.crc:#010x}")


def _decompressed(data, end: int, fetch_offset: int) -> bytearray:
    """The whole batches of data[:end], with each compressed batch that matters replaced by its plain form."""
    view = memoryview(data)
    out = bytearray()
    for pos, h in rec.iter_batches(view[:end]):
        raw = view[pos : pos + h.size]
        if not h.compression or h.is_control or h.last_offset < fetch_offset:
            out += raw
            continue
        body = rec.decompress(h.compression, raw[_HEADER:])
        at = len(out)
        out += raw[:_HEADER]
        out += body
        _I32.pack_into(out, at + rec.BATCH_LENGTH, _MIN_LENGTH + len(body))
        out[at + rec.ATTRIBUTES + 1] &= ~_CODEC & 0xFF  # compression bits: low byte of the int16 attributes
    return out


def decode_chunk_py(data, fetch_offset: int, aborted=()) -> tuple[list[rec.Record], Scan]:
    """Reference for decode_chunk: `records.decode_records` on each whole batch, records below fetch_offset,
    control batches and aborted transactions' batches dropped. Returns (records, scan) where records carry
    absolute offsets and timestamps."""
    data = bytes(data)
    scan = scan_chunk_py(data, fetch_offset)
    dropped = set(aborted_batches_py(data, scan.end, aborted))
    out: list[rec.Record] = []
    for pos, h in rec.iter_batches(data[: scan.end]):
        if h.is_control or h.last_offset < fetch_offset or pos in dropped:
            continue
        out.extend(r for r in rec.decode_records(data, pos) if r.offset >= fetch_offset)
    return out, scan


def warm() -> None:
    """Compile the kernels now (or load them from the on-disk cache), for writable and read-only buffers."""
    batch = rec.build_batch([(b"k", b"v", [("h", b"x")])])
    for data in (batch, bytes(batch)):
        decode_chunk(data, 0, check_crcs=True).header_columns()
        decode_chunk(data, 0, aborted=[(1, 0)])
