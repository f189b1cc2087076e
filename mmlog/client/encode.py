"""Record batches built by numba kernels from columns, for the producer's hot paths.

`records.build_batch` encodes one record at a time in Python: clear, and the
reference the tests compare against, but about 3 µs a record. Here whole runs of
records become v2 batches in one kernel call each, from *columns*:

    values   one uint8 buffer of every value back to back, a length per record
             (-1: null value) and, where records are taken out of order, a start;
    keys     the same, or none at all (every key null);
    headers  the same, each record's slice being its already-encoded header section
             (count varint, then the headers; a slower Python path, headers being rare),
             or none at all (written as a single 0 byte);
    stamps   each record's timestamp, ms since the epoch.

Two entry points:

- `build_runs(values, keys, headers, stamps)`: batches from the accumulator's
  lists (a list of lists per field, one per batch). `b"".join` and `map(len, ...)`
  turn the lists into columns in C, and one `encode_runs` call writes every batch:
  the sender encodes all the batches of a step at once. About 8 µs a batch of 50
  records of 200 bytes, of which the kernel is 2 µs; 5 µs for a batch of one
  record alone, under 1 µs each when sixteen of them go together. `build_lists`
  is the one-batch form.
- `build(values, keys, headers, stamps, order, bounds)`: `send_many`'s batches,
  records taken in `order` (grouped by partition) and cut by `bounds` (batch j holds
  order[bounds[j]:bounds[j+1]]), all written by one `encode_batches` call into one
  buffer. About 50 ns a record of 200 bytes.

The kernels write each batch's 61-byte header and its records (zigzag varints for
lengths and deltas, exactly as `records.encode_record` does); Python then fills
each CRC-32C with one call of the `crc32c` package over the batch body (hardware
CRC: 0.7 µs for 10 kB), so no Python code runs per record.

Layout and field meanings: see `mmlog/protocol/records.py`.
The base timestamp of a batch is the smallest timestamp in it, so timestamp deltas
are never negative and the bytes equal `build_batch(..., base_timestamp=None)`'s.
"""

from __future__ import annotations

import struct
from itertools import chain

import numpy as np
from crc32c import crc32c
from numba import njit

from mmlog.protocol import records as rec
from mmlog.protocol.wire_kernels import put_varint as _put_varint, varint_size as _varint_size

HEADER_SIZE = rec.HEADER_SIZE  # 61
RECORD_OVERHEAD_MAX = 5 + 1 + 10 + 5 + 5 + 5 + 5  # worst-case varints and attributes of one record
_CRC = struct.Struct(">I")
_EMPTY_U8 = np.zeros(0, dtype=np.uint8)
_EMPTY_I64 = np.zeros(0, dtype=np.int64)


# ---------------------------------------------------------------- kernels


@njit(cache=True, inline="always")
def _put_be(out, p, value, width):
    v = np.int64(value)
    for i in range(width):
        out[p + width - 1 - i] = np.uint8(v & 0xFF)
        v >>= 8


@njit(cache=True, inline="always")
def _copy(out, p, src, s, n):
    """out[p:p+n] = src[s:s+n] for n >= 0. Unsigned indices: numba then skips its negative-index
    wraparound test, and the loop vectorises (about 15x faster than signed ones for 200 bytes)."""
    dst = np.uint64(p)
    start = np.uint64(s)
    for j in range(np.uint64(n)):
        out[dst + j] = src[start + j]


@njit(cache=True, inline="always")
def _put_record(out, p, ts_delta, offset_delta, kbuf, ks, kl, vbuf, vs, vl, hbuf, hs, hl, has_headers):
    """One record (length-prefixed) at p; return the position after it."""
    size = 1 + _varint_size(ts_delta) + _varint_size(offset_delta)
    size += _varint_size(kl) + (kl if kl > 0 else 0)
    size += _varint_size(vl) + (vl if vl > 0 else 0)
    size += hl if has_headers else 1
    p = _put_varint(out, p, size)
    out[p] = 0  # record attributes
    p = _put_varint(out, p + 1, ts_delta)
    p = _put_varint(out, p, offset_delta)
    p = _put_varint(out, p, kl)
    if kl > 0:
        _copy(out, p, kbuf, ks, kl)
        p += kl
    p = _put_varint(out, p, vl)
    if vl > 0:
        _copy(out, p, vbuf, vs, vl)
        p += vl
    if has_headers:
        _copy(out, p, hbuf, hs, hl)
        p += hl
    else:
        out[p] = 0  # no headers
        p += 1
    return p


@njit(cache=True, inline="always")
def _put_header(out, start, end, count, base_ts, max_ts, partition_leader_epoch):
    """The 61-byte header of the batch out[start:end], CRC left 0."""
    _put_be(out, start + rec.BASE_OFFSET, 0, 8)
    _put_be(out, start + rec.BATCH_LENGTH, end - start - rec.LOG_OVERHEAD, 4)
    _put_be(out, start + rec.PARTITION_LEADER_EPOCH, partition_leader_epoch, 4)
    out[start + rec.MAGIC_OFFSET] = rec.MAGIC
    _put_be(out, start + rec.CRC_OFFSET, 0, 4)
    _put_be(out, start + rec.ATTRIBUTES, 0, 2)
    _put_be(out, start + rec.LAST_OFFSET_DELTA, count - 1, 4)
    _put_be(out, start + rec.BASE_TIMESTAMP, base_ts, 8)
    _put_be(out, start + rec.MAX_TIMESTAMP, max_ts, 8)
    _put_be(out, start + rec.PRODUCER_ID, -1, 8)
    _put_be(out, start + rec.PRODUCER_EPOCH, -1, 2)
    _put_be(out, start + rec.BASE_SEQUENCE, -1, 4)
    _put_be(out, start + rec.RECORDS_COUNT, count, 4)


def _encode_batches(out, vbuf, vstart, vlen, kbuf, kstart, klen, has_keys, hbuf, hstart, hlen, has_headers,
                    stamps, order, bounds, partition_leader_epoch):
    """Write the batches into `out` (large enough: see `bound`); return their positions (nb+1).

    Every header field is written except the CRC (bytes 17-20 are left 0).
    """
    nb = bounds.shape[0] - 1
    positions = np.empty(nb + 1, dtype=np.int64)
    p = 0
    for j in range(nb):
        a = bounds[j]
        b = bounds[j + 1]
        start = p
        positions[j] = start
        base_ts = stamps[order[a]]
        max_ts = base_ts
        for r in range(a, b):
            t = stamps[order[r]]
            if t < base_ts:
                base_ts = t
            if t > max_ts:
                max_ts = t
        p = start + HEADER_SIZE
        for r in range(a, b):
            i = order[r]
            p = _put_record(out, p, stamps[i] - base_ts, r - a,
                            kbuf, kstart[i] if has_keys else 0, klen[i] if has_keys else -1,
                            vbuf, vstart[i], vlen[i],
                            hbuf, hstart[i] if has_headers else 0, hlen[i] if has_headers else 0, has_headers)
        _put_header(out, start, p, b - a, base_ts, max_ts, partition_leader_epoch)
    positions[nb] = p
    return positions


# Two compilations of one kernel: send_many's big runs let other threads (the I/O
# thread) run meanwhile; a small batch keeps the GIL, because giving it up costs a
# wait of up to the 5 ms switch interval to get it back when another thread is busy.
encode_batches = njit(cache=True)(_encode_batches)
encode_batches_nogil = njit(cache=True, nogil=True)(_encode_batches)
NOGIL_BYTES = 256 * 1024  # runs at least this big release the GIL


@njit(cache=True)
def encode_runs(out, vbuf, vlen, kbuf, klen, has_keys, hbuf, hlen, has_headers, stamps, runs,
                partition_leader_epoch):
    """Batches of consecutive records from columns laid out back to back (starts implied by the
    lengths; -1 = null): batch j holds the next runs[j] records. The accumulator's case.
    Overwrites runs[j] with where batch j ends in out (batches are back to back from 0);
    CRCs left 0. (No array is returned: boxing one would cost a microsecond.)"""
    k = runs.shape[0]
    p = 0
    i = 0
    vs = 0
    ks = 0
    hs = 0
    for j in range(k):
        n = runs[j]
        start = p
        base_ts = stamps[i]
        max_ts = base_ts
        for r in range(i, i + n):
            t = stamps[r]
            if t < base_ts:
                base_ts = t
            if t > max_ts:
                max_ts = t
        p = start + HEADER_SIZE
        for r in range(n):
            x = i + r
            kl = klen[x] if has_keys else -1
            vl = vlen[x]
            hl = hlen[x] if has_headers else 0
            p = _put_record(out, p, stamps[x] - base_ts, r, kbuf, ks, kl, vbuf, vs, vl, hbuf, hs, hl, has_headers)
            vs += vl if vl > 0 else 0
            ks += kl if kl > 0 else 0
            hs += hl
        _put_header(out, start, p, n, base_ts, max_ts, partition_leader_epoch)
        runs[j] = p
        i += n


# ---------------------------------------------------------------- columns


class Column:
    """One field of many records: a uint8 buffer, a start and a length per record (-1: null)."""

    __slots__ = ("buf", "starts", "lengths", "payload")

    def __init__(self, buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, payload: int) -> None:
        self.buf = buf
        self.starts = starts
        self.lengths = lengths
        self.payload = payload  # bytes of all the non-null items

    def __len__(self) -> int:
        return len(self.lengths)

    @classmethod
    def from_list(cls, items: list, all_null_ok: bool = False) -> "Column | None":
        """From a list of bytes-like objects and Nones; None if every item is None (unless all_null_ok).

        No Python loop unless the list mixes None and bytes (`b"".join` and
        `map(len, ...)` run in C).
        """
        nulls = items.count(None)
        if nulls == len(items) and not all_null_ok:
            return None
        data, lengths = _joined(items)
        sizes = np.maximum(lengths, 0) if nulls else lengths
        starts = np.cumsum(sizes)
        starts -= sizes
        return cls(np.frombuffer(data, dtype=np.uint8), starts, lengths, len(data))

    @classmethod
    def from_fixed(cls, array: np.ndarray) -> "Column":
        """From a 2-D uint8 array: one fixed-size item per row."""
        array = np.ascontiguousarray(array, dtype=np.uint8)
        n, size = array.shape
        return cls(array.reshape(-1), np.arange(n, dtype=np.int64) * size, np.full(n, size, dtype=np.int64), n * size)

    @classmethod
    def from_offsets(cls, buf, offsets) -> "Column":
        """From one buffer and n+1 boundaries: item i is buf[offsets[i]:offsets[i+1]]."""
        data = np.frombuffer(buf, dtype=np.uint8) if not isinstance(buf, np.ndarray) else buf.reshape(-1).view(np.uint8)
        offsets = np.asarray(offsets, dtype=np.int64)
        if offsets.ndim != 1 or len(offsets) < 1 or offsets[0] < 0 or offsets[-1] > len(data) \
                or np.any(np.diff(offsets) < 0):
            raise ValueError("offsets must be n+1 non-decreasing positions within the buffer")
        return cls(data, offsets[:-1].copy(), np.diff(offsets), int(offsets[-1] - offsets[0]))


def encode_header_section(headers) -> bytes:
    """One record's header section: count varint, then each (key, value) (Python; headers are rare)."""
    out = bytearray()
    rec.write_varint(out, len(headers))
    for hkey, hvalue in headers:
        if hkey is None:
            raise TypeError("a header key cannot be None")
        rec._write_nullable(out, hkey)
        rec._write_nullable(out, hvalue)
    return bytes(out)


def bound(n: int, values: Column, keys: Column | None, headers: Column | None, batches: int) -> int:
    """An upper bound of the bytes `encode_batches` writes."""
    extra = (keys.payload if keys is not None else 0) + (headers.payload if headers is not None else 0)
    return values.payload + extra + n * RECORD_OVERHEAD_MAX + batches * HEADER_SIZE


def build(values: Column, keys: Column | None, headers: Column | None, stamps: np.ndarray,
          order: np.ndarray, bounds: np.ndarray, partition_leader_epoch: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Encode batches (CRC included); return (buffer, positions): batch j is buf[pos[j]:pos[j+1]]."""
    nb = len(bounds) - 1
    out = np.empty(bound(len(order), values, keys, headers, nb), dtype=np.uint8)
    kernel = encode_batches_nogil if len(out) >= NOGIL_BYTES else encode_batches
    positions = kernel(
        out, values.buf, values.starts, values.lengths,
        keys.buf if keys is not None else _EMPTY_U8, keys.starts if keys is not None else _EMPTY_I64,
        keys.lengths if keys is not None else _EMPTY_I64, keys is not None,
        headers.buf if headers is not None else _EMPTY_U8, headers.starts if headers is not None else _EMPTY_I64,
        headers.lengths if headers is not None else _EMPTY_I64, headers is not None,
        stamps, order, bounds, partition_leader_epoch)
    view = memoryview(out)
    for j in range(nb):  # one C call per batch
        a = int(positions[j])
        b = int(positions[j + 1])
        _CRC.pack_into(view, a + rec.CRC_OFFSET, crc32c(view[a + rec.CRC_START:b]))
    return out, positions


def build_one(values: Column, keys: Column | None, headers: Column | None, stamps: np.ndarray) -> memoryview:
    """One batch of every record, in order; its bytes as a memoryview (through `build`)."""
    n = len(values)
    out, positions = build(values, keys, headers, stamps, np.arange(n, dtype=np.int64),
                           np.array([0, n], dtype=np.int64))
    return memoryview(out)[: int(positions[1])]


def build_lists(values: list, keys: list | None, headers: list | None, stamps: list,
                partition_leader_epoch: int = 0) -> memoryview:
    """One batch from the accumulator's lists (values and keys: bytes or None; headers: encoded
    header sections or None for none at all; stamps: ms). C-level list work, then `encode_runs`."""
    return build_runs([values], [keys], [headers], [stamps], partition_leader_epoch)[0]


def _joined(items: list) -> tuple[bytes, np.ndarray]:
    """A list of bytes-like and None as (bytes back to back, lengths with -1 for None); C loops."""
    if items.count(None):
        return (b"".join([x for x in items if x is not None]),
                np.array([-1 if x is None else len(x) for x in items], dtype=np.int64))
    return b"".join(items), np.fromiter(map(len, items), dtype=np.int64, count=len(items))


def build_runs(values: list, keys: list, headers: list, stamps: list, partition_leader_epoch: int = 0) -> list:
    """Batches from the accumulator's lists, all in one `encode_runs` call: batch j from values[j],
    keys[j], headers[j], stamps[j] (as for `build_lists`; keys[j] / headers[j] None: none in
    that batch). Returns each batch's bytes as a memoryview of one buffer, CRCs filled.

    The sender encodes every batch of a step this way: the kernel call and the numpy set-up
    cost about 3 µs whatever they encode, so five one-record batches cost one call, not five.
    """
    k = len(values)
    if k == 1:
        flat, flat_stamps = values[0], stamps[0]
        runs = np.array([len(flat)], dtype=np.int64)
    else:
        flat = list(chain.from_iterable(values))
        flat_stamps = list(chain.from_iterable(stamps))
        runs = np.fromiter(map(len, values), dtype=np.int64, count=k)
    vdata, vlen = _joined(flat)
    size = len(vdata) + len(flat) * RECORD_OVERHEAD_MAX + k * HEADER_SIZE
    kbuf, klen, hbuf, hlen = _EMPTY_U8, _EMPTY_I64, _EMPTY_U8, _EMPTY_I64
    if keys.count(None) != k:
        kdata, klen = _joined(_flat(keys, values, None) if k > 1 else keys[0])
        kbuf = np.frombuffer(kdata, dtype=np.uint8)
        size += len(kdata)
    if headers.count(None) != k:
        hdata, hlen = _joined(_flat(headers, values, b"\x00") if k > 1 else headers[0])  # b"\x00": no headers
        hbuf = np.frombuffer(hdata, dtype=np.uint8)
        size += len(hdata)
    out = bytearray(size)
    encode_runs(np.frombuffer(out, dtype=np.uint8), np.frombuffer(vdata, dtype=np.uint8), vlen,
                kbuf, klen, kbuf is not _EMPTY_U8, hbuf, hlen, hbuf is not _EMPTY_U8,
                np.array(flat_stamps, dtype=np.int64), runs, partition_leader_epoch)
    view = memoryview(out)
    batches = []
    start = 0
    for end in runs.tolist():  # one C call per batch
        batch = view[start:end]
        _CRC.pack_into(batch, rec.CRC_OFFSET, crc32c(batch[rec.CRC_START:]))
        batches.append(batch)
        start = end
    return batches


def _flat(lists: list, values: list, fill) -> list:
    """Every batch's keys (or header sections) in one list, `fill` for each record of a batch without."""
    return list(chain.from_iterable(x if x is not None else [fill] * len(v) for x, v in zip(lists, values)))


def build_py(values: list, keys: list | None, headers: list | None, stamps: list) -> bytearray:
    """Reference: the same batch through `records.build_batch`, one record at a time."""
    n = len(values)
    keys = keys if keys is not None else [None] * n
    headers = headers if headers is not None else [[]] * n
    records = [rec.Record(v, k, list(h), t) for v, k, h, t in zip(values, keys, headers, stamps)]
    return rec.build_batch(records, base_timestamp=min(stamps))


def warm(bulk: bool = False) -> None:
    """Compile (or load from the on-disk cache) the kernels for the usual argument types:
    `build_lists`'s always, `build`'s (send_many) too if `bulk`.

    Each new combination of array types (read-only or not) and flags is compiled on
    first use, once per machine thanks to the on-disk cache (seconds, the first time;
    about 0.1 s to load from the cache).
    """
    for keys in ([b"k", None], None):
        for headers in ([b"\x00", b"\x00"], None):
            build_lists([b"v", None], keys, headers, [0, 0])
            build_runs([[b"v"], [b"w"]], [keys and keys[:1], None], [headers and headers[:1], None], [[0], [0]])
    if not bulk:
        return
    rows = NOGIL_BYTES // 64 + 1
    many_keys = Column.from_list([b"k"] * rows)
    for big in (np.zeros((rows, 64), dtype=np.uint8), np.frombuffer(bytes(rows * 64), np.uint8).reshape(rows, 64)):
        column = Column.from_fixed(big)
        for k in (None, many_keys):
            for n in (rows, 2):  # the GIL-releasing kernel (big runs) and the other one
                build(column, k, None, np.zeros(rows, dtype=np.int64), np.arange(n, dtype=np.int64),
                      np.array([0, 1, n], dtype=np.int64))
    cut_batches(np.ones(3, dtype=np.int64), np.array([0, 3], dtype=np.int64), 2, 2)


# ---------------------------------------------------------------- cutting runs into batches


@njit(cache=True)
def cut_batches(sizes, groups, limit, max_records):
    """Batch boundaries (into the same index space as sizes): each group [groups[g], groups[g+1])
    is cut greedily into batches of at most `limit` estimated bytes and `max_records` records
    (a record bigger than `limit` gets a batch of its own)."""
    n = sizes.shape[0]
    out = np.empty(n + 1, dtype=np.int64)
    nb = 0
    for g in range(groups.shape[0] - 1):
        a = groups[g]
        b = groups[g + 1]
        i = a
        while i < b:
            out[nb] = i
            nb += 1
            total = sizes[i]
            count = 1
            i += 1
            while i < b and count < max_records and total + sizes[i] <= limit:
                total += sizes[i]
                count += 1
                i += 1
    out[nb] = n
    return out[:nb + 1].copy()


def cut_batches_py(sizes, groups, limit, max_records) -> np.ndarray:
    out = []
    for g in range(len(groups) - 1):
        i, b = int(groups[g]), int(groups[g + 1])
        while i < b:
            out.append(i)
            total, count = int(sizes[i]), 1
            i += 1
            while i < b and count < max_records and total + int(sizes[i]) <= limit:
                total += int(sizes[i])
                count += 1
                i += 1
    out.append(len(sizes))
    return np.array(out, dtype=np.int64)
