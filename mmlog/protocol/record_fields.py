"""Where a record's fields lie in a batch: the kernel the client's and the Spark source's decoders share.

A record (in a v2 batch, uncompressed) is a run of zigzag varints and bytes:

    length | attributes (1 byte) | timestamp delta | offset delta | key length | key | value length | value
           | header count | headers (key length, key, value length, value)...

`at` reads them in two ways. The fast path takes the shape nearly every record has: a length, deltas and
lengths of one or two bytes each, and no headers or a few. It checks once that the record is long enough
for its first four varints, and that the value's length lies inside it, instead of bounds at every byte.
Anything else (a long varint, a record under 8 bytes, a field that runs past the record, an error)
goes to the general walk, `_at_general`, which reads every varint through `wire_kernels.varint`.

Why two paths: with the general varint (a loop that can fail) inlined at each of a record's seven
fields, numba's code for a record walk was several times slower than the short form alone (docs/
benchmarks.md, the decode kernel). The general walk is a separate call, made only for the records that
need it; the headers' walk is one too.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from mmlog.protocol.wire_kernels import varint

BAD = -1  # `at`'s end for a record that does not parse inside its batch
# The fast path's shortest record, and the bytes it reads at q before it knows the record's length: a length
# of 8 or more puts the attributes byte and the three varints after it (two bytes each at most) inside.
_SHORTEST = 8


@njit(cache=True, inline="always")
def _short(b, p):
    """The zigzag varint at p read as if it had at most two bytes: (value, next p, longer). Reads b[p] and,
    when b[p] says more follow, b[p + 1]: the caller has made sure both lie inside the record."""
    x = np.int64(b[p])
    if x < 0x80:
        return (x >> 1) ^ -(x & 1), p + 1, False
    y = np.int64(b[p + 1])
    v = (x & 0x7F) | ((y & 0x7F) << 7)
    return (v >> 1) ^ -(v & 1), p + 2, y >= 0x80


@njit(cache=True, inline="always")
def at(buf, q, stop):
    """The record at buf[q:], inside its batch's buf[:stop]: (end, timestamp delta, offset delta, key length,
    key start, value length, value start, header count, headers start). end is BAD when it does not parse."""
    if q + _SHORTEST <= stop:
        length, f, longer = _short(buf, q)
        end = f + length
        if not longer and length >= _SHORTEST and end <= stop:
            ts_delta, f, l1 = _short(buf, f + 1)
            off_delta, f, l2 = _short(buf, f)
            klen, f, l3 = _short(buf, f)
            kstart = f
            if klen > 0:
                f += klen
            if f + 2 <= end:
                vlen, f, l4 = _short(buf, f)
                vstart = f
                if vlen > 0:
                    f += vlen
                if f < end and not (l1 or l2 or l3 or l4) and klen >= -1 and vlen >= -1:
                    count = np.int64(buf[f])
                    if count == 0 and f + 1 == end:
                        return end, ts_delta, off_delta, klen, kstart, vlen, vstart, count, f + 1
                    headers = (count >> 1) ^ -(count & 1)  # a one-byte count; more go the general way
                    if 0 < count < 0x80 and _headers_end(buf, f + 1, end, headers) == end:
                        return end, ts_delta, off_delta, klen, kstart, vlen, vstart, headers, f + 1
    return _at_general(buf, q, stop)


@njit(cache=True, inline="always")
def _field(buf, f, end):
    """The length-prefixed field (a key or a value) at f: (length, start, where it ends), the end BAD when
    it does not parse; a null field (-1) is empty."""
    n, f = varint(buf, f, end)
    if f < 0 or n < -1:
        return n, f, BAD
    return n, f, f + max(n, 0)


@njit(cache=True)
def _headers_end(buf, f, end, count):
    """Where `count` headers starting at f end, inside buf[:end] (BAD if they do not parse)."""
    if count < 0:
        return BAD
    for _ in range(2 * count):  # each header's key, then its value
        _, _, f = _field(buf, f, end)
        if f < 0:
            return BAD
    return f


@njit(cache=True)
def _at_general(buf, q, stop):
    """`at` for any record, every varint read in full and bounded."""
    bad = (np.int64(BAD), np.int64(0), np.int64(0), np.int64(0), np.int64(0), np.int64(0), np.int64(0),
           np.int64(0), np.int64(0))
    length, q = varint(buf, q, stop)
    if q < 0 or length < 1 or q + length > stop:
        return bad
    end = q + length
    ts_delta, f = varint(buf, q + 1, end)  # + 1: the record's attributes byte
    if f < 0:
        return bad
    off_delta, f = varint(buf, f, end)
    if f < 0:
        return bad
    klen, kstart, f = _field(buf, f, end)
    if f < 0:
        return bad
    vlen, vstart, f = _field(buf, f, end)
    if f < 0:
        return bad
    count, f = varint(buf, f, end)
    if f < 0 or _headers_end(buf, f, end, count) != end:
        return bad
    return end, ts_delta, off_delta, klen, kstart, vlen, vstart, count, f


def at_py(buf, q: int, stop: int) -> tuple:
    """Reference for `at`, on `records.read_varint`."""
    from mmlog.errors import CorruptMessage
    from mmlog.protocol.records import read_varint

    data = bytes(buf[:stop])
    bad = (BAD, 0, 0, 0, 0, 0, 0, 0, 0)

    def field(record, f: int) -> tuple[int, int, int]:
        """A key's or value's (length, start, end); CorruptMessage for a length under -1."""
        n, f = read_varint(record, f)
        if n < -1:
            raise CorruptMessage("length under -1")
        return n, f, f + max(n, 0)

    try:
        length, q = read_varint(data, q)
        if length < 1 or q + length > stop:
            return bad
        end = q + length
        record = data[:end]
        ts_delta, f = read_varint(record, q + 1)
        off_delta, f = read_varint(record, f)
        klen, kstart, f = field(record, f)
        vlen, vstart, f = field(record, f)
        count, hstart = read_varint(record, f)
        if count < 0:
            return bad
        f = hstart
        for _ in range(2 * count):  # each header's key and value
            _, _, f = field(record, f)
    except CorruptMessage:
        return bad
    return (end, _int64(ts_delta), _int64(off_delta), klen, kstart, vlen, vstart, count, hstart) if f == end else bad


def _int64(v: int) -> int:
    """v as the kernels hold it: a ten-byte varint's bits past 64 are dropped."""
    return (v + (1 << 63)) % (1 << 64) - (1 << 63)
