"""What the bulk decoder hands over: one fetched chunk's records as numpy columns over its bytes.

`bulk.decode_chunk` fills a `RecordArrays`; this module turns the columns into Python objects
only when asked (views, bytes, headers, `ConsumerRecord` tuples built by C-level iterators).
bulk.py's docstring has the columns and the costs."""

from __future__ import annotations

import contextlib
import gc
import itertools
from functools import partial
from typing import Iterator, NamedTuple

import numpy as np
from numba import njit

from mmlog.client.records import ConsumerRecord
from mmlog.protocol import records as rec
from mmlog.protocol.wire_kernels import varint


def as_array(data) -> np.ndarray:
    if isinstance(data, np.ndarray):
        return data
    return np.frombuffer(data, dtype=np.uint8)


_new_record = partial(tuple.__new__, ConsumerRecord)

_EMPTY_I64 = np.empty(0, np.int64)


class RecordArrays:
    """The records of one fetched chunk of one partition, as numpy columns over the chunk's bytes.

    Columns (numpy arrays, one entry per record, in offset order): `offsets`,
    `timestamps`, `timestamp_types`, `key_starts`, `key_lengths`,
    `value_starts`, `value_lengths`, `header_starts`, `header_counts`; a length
    of -1 means null. Positions index `buffer` (the chunk's bytes, or a
    decompressed copy). `next_offset` is the offset after the chunk.
    """

    __slots__ = ("topic", "partition", "buffer", "next_offset", "offsets", "timestamps", "timestamp_types",
                 "key_starts", "key_lengths", "value_starts", "value_lengths", "header_starts", "header_counts",
                 "_bytes")

    def __init__(self, topic: str, partition: int, buffer, next_offset: int, columns) -> None:
        self.topic = topic
        self.partition = partition
        self.buffer = buffer
        self.next_offset = next_offset
        (self.offsets, self.timestamps, self.timestamp_types, self.key_starts, self.key_lengths,
         self.value_starts, self.value_lengths, self.header_starts, self.header_counts) = columns
        self._bytes: bytes | None = None

    @classmethod
    def empty(cls, topic: str = "", partition: int = -1, next_offset: int = -1) -> "RecordArrays":
        i32 = np.empty(0, np.int32)
        return cls(topic, partition, b"", next_offset,
                   (_EMPTY_I64, _EMPTY_I64, np.empty(0, np.int8), _EMPTY_I64, i32, _EMPTY_I64, i32, _EMPTY_I64,
                    i32))

    def __len__(self) -> int:
        return len(self.offsets)

    def __repr__(self) -> str:
        first = f" offsets {self.offsets[0]}..{self.offsets[-1]}" if len(self) else ""
        return f"<RecordArrays {self.topic}-{self.partition}: {len(self)} records{first}, next {self.next_offset}>"

    # ---- one record at a time, without copies

    def value_view(self, i: int) -> memoryview | None:
        """Record i's value as a memoryview into the fetched bytes (None if null)."""
        return self._view(self.value_starts, self.value_lengths, i)

    def key_view(self, i: int) -> memoryview | None:
        """Record i's key as a memoryview into the fetched bytes (None if null)."""
        return self._view(self.key_starts, self.key_lengths, i)

    def _view(self, starts, lengths, i: int) -> memoryview | None:
        n = int(lengths[i])
        if n < 0:
            return None
        s = int(starts[i])
        return memoryview(self.buffer)[s : s + n]

    def value(self, i: int) -> bytes | None:
        view = self.value_view(i)
        return None if view is None else bytes(view)

    def key(self, i: int) -> bytes | None:
        view = self.key_view(i)
        return None if view is None else bytes(view)

    def headers(self, i: int) -> tuple[tuple[str, bytes | None], ...]:
        """Record i's headers, decoded now."""
        count = int(self.header_counts[i])
        if count == 0:
            return ()
        return decode_headers(self.buffer, int(self.header_starts[i]), count)

    # ---- whole columns as Python objects, only when asked

    def _data(self) -> bytes:
        """The chunk as one bytes object (copied once), so that slicing it yields bytes."""
        if self._bytes is None:
            self._bytes = bytes(self.buffer)
        return self._bytes

    def values(self) -> list[bytes | None]:
        """Every value as bytes (None for null)."""
        return _slices(self._data(), self.value_starts, self.value_lengths)

    def keys(self) -> list[bytes | None]:
        """Every key as bytes (None for null)."""
        return _slices(self._data(), self.key_starts, self.key_lengths)

    def all_headers(self) -> list[tuple]:
        if not len(self) or not self.header_counts.any():
            return [()] * len(self)
        data = self._data()
        return [decode_headers(data, s, c) if c else () for s, c in
                zip(self.header_starts.tolist(), self.header_counts.tolist())]

    def header_columns(self) -> "HeaderColumns":
        """Every record's headers as numpy columns, found by a kernel (no Python code per header), for
        builders of columnar data (Arrow) that must not decode headers one record at a time."""
        return header_columns(self.buffer, self.header_starts, self.header_counts)

    @property
    def nbytes(self) -> int:
        """Bytes of keys and values (nulls count 0)."""
        return int(np.maximum(self.value_lengths, 0).sum(dtype=np.int64)
                   + np.maximum(self.key_lengths, 0).sum(dtype=np.int64))

    def iter_records(self) -> Iterator[ConsumerRecord]:
        """Every record as a ConsumerRecord, built lazily from the columns by C-level iterators.

        Nothing per record runs in Python bytecode, and a record the caller drops
        before taking the next is freed at once, so the cyclic GC never runs.
        """
        return self._record_iterator()[0]

    def records(self) -> list[ConsumerRecord]:
        """Every record as a ConsumerRecord, in a list."""
        with gc_paused():
            return list(self._record_iterator()[0])

    def _record_iterator(self) -> tuple[Iterator[ConsumerRecord], list]:
        """(lazy record iterator, the offsets list it zips over). Clearing that list ends the iterator
        at its next record (a list iterator re-checks the length): the consumer's way to stop
        yielding a chunk that a seek made stale, at no cost per record."""
        if not len(self):
            return iter(()), []
        data = self._data()
        repeat = itertools.repeat
        values = _lazy_slices(data, self.value_starts, self.value_lengths)
        keys = repeat(None) if self.key_lengths.max() < 0 else _lazy_slices(data, self.key_starts, self.key_lengths)
        headers = self.all_headers() if self.header_counts.any() else repeat(())
        ts_types = self.timestamp_types.tolist() if self.timestamp_types.any() else repeat(0)
        offsets = self.offsets.tolist()
        it = map(_new_record, zip(repeat(self.topic), repeat(self.partition), offsets, self.timestamps.tolist(),
                                  keys, values, headers, ts_types))
        return it, offsets


class HeaderColumns(NamedTuple):
    """The headers of a RecordArrays: record i's are entries bounds[i]:bounds[i + 1] of the other columns,
    which give each header's key and value as a position in the chunk's buffer and a length (-1: null)."""

    bounds: np.ndarray  # int64, len(records) + 1
    key_starts: np.ndarray  # int64
    key_lengths: np.ndarray  # int32
    value_starts: np.ndarray  # int64
    value_lengths: np.ndarray  # int32


def header_columns(buffer, header_starts: np.ndarray, header_counts: np.ndarray) -> HeaderColumns:
    """The headers of the records whose header sections start at header_starts in buffer (validated by the
    decoder), as numpy columns."""
    if not len(header_counts) or not header_counts.any():
        i32 = np.empty(0, np.int32)
        return HeaderColumns(np.zeros(len(header_counts) + 1, np.int64), _EMPTY_I64, i32, _EMPTY_I64, i32)
    return HeaderColumns(*_header_columns(as_array(buffer), header_starts, header_counts))


@njit(cache=True, nogil=True)
def _header_columns(buf, header_starts, header_counts):
    """The header columns of records whose header sections `_decode` has validated already."""
    n = len(header_counts)
    bounds = np.zeros(n + 1, np.int64)
    for i in range(n):
        bounds[i + 1] = bounds[i] + header_counts[i]
    total = bounds[n]
    key_starts = np.empty(total, np.int64)
    key_lengths = np.empty(total, np.int32)
    value_starts = np.empty(total, np.int64)
    value_lengths = np.empty(total, np.int32)
    end = len(buf)
    j = 0
    for i in range(n):
        q = header_starts[i]
        for _ in range(header_counts[i]):
            klen, q = varint(buf, q, end)
            key_starts[j] = q
            key_lengths[j] = klen
            if klen > 0:
                q += klen
            vlen, q = varint(buf, q, end)
            value_starts[j] = q
            value_lengths[j] = vlen
            if vlen > 0:
                q += vlen
            j += 1
    return bounds, key_starts, key_lengths, value_starts, value_lengths


@contextlib.contextmanager
def gc_paused():
    """Hold off the cyclic GC while a list of many small tuples is built.

    Each record is a tracked tuple; a list of 5,000 of them triggered seven
    generation-0 collections that traversed the growing list, which more than
    doubled the cost (about 1.0 µs against 0.45 µs per record here). Records
    hold only bytes, ints, str and tuples of those, so they cannot form cycles.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _lazy_slices(data: bytes, starts: np.ndarray, lengths: np.ndarray) -> Iterator[bytes | None]:
    ends = (starts + lengths).tolist()
    if lengths.min() >= 0:
        return map(data.__getitem__, map(slice, starts.tolist(), ends))
    return (data[s:e] if n >= 0 else None for s, e, n in zip(starts.tolist(), ends, lengths.tolist()))


def _slices(data: bytes, starts: np.ndarray, lengths: np.ndarray) -> list[bytes | None]:
    """data[s:s+n] for each (s, n), None where n < 0, without a Python-level loop when nothing is null."""
    if not len(starts):
        return []
    ends = (starts + lengths).tolist()
    if lengths.min() >= 0:
        return list(map(data.__getitem__, map(slice, starts.tolist(), ends)))
    return [data[s:e] if n >= 0 else None for s, e, n in zip(starts.tolist(), ends, lengths.tolist())]


def decode_headers(buf, pos: int, count: int) -> tuple[tuple[str, bytes | None], ...]:
    """The `count` headers of a record, starting at pos."""
    out = []
    for _ in range(count):
        n, pos = rec.read_varint(buf, pos)
        if n < 0:  # Kafka never writes a null header key; decode_records reads it as None
            hkey = None
        else:
            hkey = bytes(buf[pos : pos + n]).decode()
            pos += n
        n, pos = rec.read_varint(buf, pos)
        if n < 0:
            hvalue = None
        else:
            hvalue = bytes(buf[pos : pos + n])
            pos += n
        out.append((hkey, hvalue))
    return tuple(out)
