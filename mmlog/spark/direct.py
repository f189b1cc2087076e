"""A fetched chunk decoded straight into the Arrow buffers of the source's columns, in one pass.

The general path decodes a chunk into positions and lengths (`bulk.decode_chunk`: nine columns), then
gathers keys and values into Arrow's back-to-back layout (`arrow.binary_array`) and converts the fixed
columns (timestamps to microseconds, timestamp types to int32): three passes over the records and a
dozen temporary arrays. `decode_columns` walks the records once and writes what Spark takes: offsets,
timestamps in microseconds, int32 timestamp types, the int32 Arrow offsets, validity bitmaps and bytes
of keys and values (each copied the moment its length is read, while its bytes are in cache), and
where each record's headers start for the headers column.

It reads each record with `record_fields.at`, as `bulk._decode` does, checks it the same way and hands
back its status; it declines (returns None) a chunk with compressed batches, and the caller then takes
the general path, which also raises the errors. `tests/spark/test_direct.py` runs both paths on the same
chunks and compares the batches.
"""

from __future__ import annotations

from typing import Iterator, NamedTuple

import numpy as np
import pyarrow as pa
from numba import njit

from mmlog.client import bulk
from mmlog.client.record_arrays import header_columns
from mmlog.protocol import record_fields
from mmlog.protocol import records as rec
from mmlog.spark import arrow
from mmlog.spark.arrow import _copy, _fixed, headers_array
from mmlog.spark.fetch import KeptBuffers, Scanned, head

_HEADER = rec.HEADER_SIZE


class Columns(NamedTuple):
    """One chunk's records as Arrow buffers (numpy arrays), `n` records long."""

    n: int
    offsets: np.ndarray  # int64
    timestamps: np.ndarray  # int64, microseconds
    timestamp_types: np.ndarray  # int32
    key_offsets: np.ndarray  # int32, n + 1
    key_validity: np.ndarray | None  # uint8 bitmap, None when no key is null
    key_nulls: int
    key_data: np.ndarray  # uint8
    value_offsets: np.ndarray
    value_validity: np.ndarray | None
    value_nulls: int
    value_data: np.ndarray
    header_starts: np.ndarray  # int64: where each record's headers start in the chunk
    header_counts: np.ndarray  # int32


@njit(cache=True, nogil=True)
def _decode_columns(buf, end, fetch_offset, stop_offset, skip, offsets, timestamps, ts_types, key_offsets, key_valid,
                    key_data, value_offsets, value_valid, value_data, header_starts, header_counts):
    """The records of the whole batches in buf[:end] at offsets [fetch_offset, stop_offset) into the columns
    (room for every record; the data arrays room for every byte of the batches; the bitmaps zeroed).
    Checks every record as `bulk._decode` does, those past stop_offset too.

    Returns (status, position, n, key nulls, value nulls, key bytes, value bytes)."""
    capacity = len(offsets)
    n = 0
    status = bulk.OK
    p = 0
    k = 0
    key_at = 0
    value_at = 0
    key_nulls = 0
    value_nulls = 0
    key_offsets[0] = 0
    value_offsets[0] = 0
    while p < end:
        verdict, stop, k, base, log_append, base_ts, max_ts, count = bulk._batch_at(buf, p, fetch_offset, skip, k)
        if verdict != bulk.OK:
            if verdict == bulk.COMPRESSED:
                status = bulk.COMPRESSED
                break
            p = stop  # passed over
            continue
        q = p + _HEADER
        for _ in range(count):
            rend, ts_delta, off_delta, klen, kstart, vlen, vstart, hcount, hstart = record_fields.at(buf, q, stop)
            if rend < 0:
                status = bulk.BAD_RECORD
                break
            q = rend
            offset = base + off_delta
            if offset < fetch_offset or offset >= stop_offset:
                continue
            if n >= capacity:
                status = bulk.BAD_RECORD
                break
            offsets[n] = offset
            if log_append:
                timestamps[n] = max_ts * 1000
                ts_types[n] = 1
            else:
                timestamps[n] = (base_ts + ts_delta) * 1000
                ts_types[n] = 0
            if klen >= 0:
                key_valid[n >> 3] |= np.uint8(1 << (n & 7))
                if klen > 0:
                    _copy(key_data, np.int64(key_at), buf, np.int64(kstart), np.int64(klen))
                    key_at += klen
            else:
                key_nulls += 1
            key_offsets[n + 1] = key_at
            if vlen >= 0:
                value_valid[n >> 3] |= np.uint8(1 << (n & 7))
                if vlen > 0:
                    _copy(value_data, np.int64(value_at), buf, np.int64(vstart), np.int64(vlen))
                    value_at += vlen
            else:
                value_nulls += 1
            value_offsets[n + 1] = value_at
            header_starts[n] = hstart
            header_counts[n] = hcount
            n += 1
        if status != bulk.OK:
            break
        p = stop
    return status, p, n, key_nulls, value_nulls, key_at, value_at


class Kept(NamedTuple):
    """The buffers a read's chunks are decoded into, kept from chunk to chunk: the fixed-width columns and
    bitmaps, the keys' bytes, the values' bytes. Three of each: the batch Spark last wrote (its writer
    still holds it while it asks for the next), the one being made, and a spare."""

    fixed: KeptBuffers
    keys: KeptBuffers
    values: KeptBuffers

    @classmethod
    def new(cls, keep: int = 3) -> "Kept":
        return cls(KeptBuffers(keep), KeptBuffers(keep), KeptBuffers(keep))


def decode_columns(data, fetch_offset: int, stop_offset: int, scan: bulk.Scan, aborted=None,
                   kept: Kept | None = None) -> Columns | None:
    """The records at offsets [fetch_offset, stop_offset) in a scanned chunk as Arrow buffers (CRCs not
    checked here), in buffers taken from `kept` (fresh ones without it); None when the chunk needs the
    general path (compressed batches, or anything `bulk.decode_chunk` would raise for)."""
    status, end, _, capacity, compressed = scan
    if status not in (bulk.OK, bulk.TRUNCATED) or compressed:
        return None
    buf = bulk.as_array(data)
    bits = (capacity + 7) // 8
    layout = ((np.int64, capacity), (np.int64, capacity), (np.int64, capacity), (np.int32, capacity),
              (np.int32, capacity), (np.int32, capacity + 1), (np.int32, capacity + 1))
    size = sum(np.dtype(t).itemsize * count for t, count in layout)
    # One block for the fixed-width columns (widest first, so each is aligned) and the two bitmaps after them.
    fixed = np.empty(size + 2 * bits, np.uint8) if kept is None else kept.fixed.take(size + 2 * bits)
    at = 0
    columns = []
    for dtype, count in layout:
        n_bytes = count * np.dtype(dtype).itemsize
        columns.append(fixed[at:at + n_bytes].view(dtype))
        at += n_bytes
    offsets, timestamps, header_starts, ts_types, header_counts, key_offsets, value_offsets = columns
    validity = fixed[size:size + 2 * bits]
    validity[:] = 0
    key_valid, value_valid = validity[:bits], validity[bits:]
    # Keys and values together are fewer bytes than the batches holding them: each gets room for all.
    key_data = np.empty(end, np.uint8) if kept is None else kept.keys.take(end)
    value_data = np.empty(end, np.uint8) if kept is None else kept.values.take(end)
    status, _, n, key_nulls, value_nulls, key_bytes, value_bytes = _decode_columns(
        buf, end, fetch_offset, stop_offset, bulk._skips(buf, end, aborted), offsets, timestamps, ts_types,
        key_offsets, key_valid, key_data, value_offsets, value_valid, value_data, header_starts, header_counts)
    if status != bulk.OK:
        return None
    return Columns(n, offsets[:n], timestamps[:n], ts_types[:n], key_offsets[:n + 1],
                   key_valid[:(n + 7) // 8] if key_nulls else None, key_nulls, key_data[:key_bytes],
                   value_offsets[:n + 1], value_valid[:(n + 7) // 8] if value_nulls else None, value_nulls,
                   value_data[:value_bytes], header_starts[:n], header_counts[:n])


def record_batch(columns: Columns, buffer, topic: str, partition: int, schema: pa.Schema) -> pa.RecordBatch:
    """The decoded columns as a batch of the source's schema (binary values): what `arrow.record_batch` makes
    of the same records. `buffer` is the chunk (the headers column's bytes are gathered from it)."""
    n = columns.n
    arrays = {
        "key": _binary(schema.field("key").type, n, columns.key_validity, columns.key_nulls, columns.key_offsets,
                       columns.key_data),
        "value": _binary(schema.field("value").type, n, columns.value_validity, columns.value_nulls,
                         columns.value_offsets, columns.value_data),
        "topic": pa.repeat(pa.scalar(topic, schema.field("topic").type), n),
        "partition": _fixed(np.full(n, partition, np.int32), schema.field("partition").type),
        "offset": _fixed(columns.offsets, schema.field("offset").type),
        "timestamp": _fixed(columns.timestamps, schema.field("timestamp").type),
        "timestampType": _fixed(columns.timestamp_types, schema.field("timestampType").type),
    }
    if "headers" in schema.names:
        arrays["headers"] = headers_array(bulk.as_array(buffer),
                                          header_columns(buffer, columns.header_starts, columns.header_counts),
                                          columns.header_counts, schema.field("headers").type)
    return pa.RecordBatch.from_arrays([arrays[name] for name in schema.names], schema=schema)


def _binary(type: pa.DataType, n: int, validity, nulls: int, offsets: np.ndarray, data: np.ndarray) -> pa.Array:
    return pa.Array.from_buffers(type, n, [None if validity is None else pa.py_buffer(validity),
                                           pa.py_buffer(offsets), pa.py_buffer(data)], nulls)


def batches(chunks: Iterator[Scanned], end: int, topic: str, partition: int, schema: pa.Schema,
            values=None) -> Iterator[pa.RecordBatch]:
    """The records of fetched chunks at offsets below end, one Arrow batch per chunk that holds any: straight
    from the chunk's bytes (`decode_columns`) when it can, else through `bulk.decode_chunk` and
    `arrow.record_batch` (compressed batches, typed values, and every error, which that path raises)."""
    kept = Kept.new()
    for chunk in chunks:
        data, offset, scan, aborted = chunk
        columns = None
        if values is None and not scan.compressed:
            if scan.end:
                bulk._check_crcs(data, bulk.as_array(data), scan.end, topic, partition)
            columns = decode_columns(data, offset, end, scan, aborted, kept)
        if columns is not None:
            if columns.n:
                yield record_batch(columns, data, topic, partition, schema)
            continue
        arrays = bulk.decode_chunk(data, offset, topic=topic, partition=partition, check_crcs=True, scan=scan,
                                   aborted=aborted)
        keep = int(np.searchsorted(arrays.offsets, end))
        if keep:
            yield arrow.record_batch(arrays if keep == len(arrays) else head(arrays, keep), schema, values)
