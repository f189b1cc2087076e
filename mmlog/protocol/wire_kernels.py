"""Numba helpers that read Kafka's wire integers out of uint8 arrays.

Shared by every kernel that walks record batches or frames: the log's scans
(`mmlog/log/kernels.py`), the client's bulk decoder (`mmlog/client/bulk.py`) and
the compiled request codecs (`produce_kernels.py`). Big-endian fixed-width
integers as in batch headers and request fields, their writers, and the zigzag
varints of record fields. They are inlined into their callers, so a call costs nothing.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, inline="always")
def be_i16(b, p):
    """Signed big-endian int16 at b[p:p+2]."""
    v = (np.int64(b[p]) << 8) | np.int64(b[p + 1])
    return v - (np.int64(1) << 16) if v >= (np.int64(1) << 15) else v


@njit(cache=True, inline="always")
def be_i32(b, p):
    """Signed big-endian int32 at b[p:p+4]."""
    v = (np.int64(b[p]) << 24) | (np.int64(b[p + 1]) << 16) | (np.int64(b[p + 2]) << 8) | np.int64(b[p + 3])
    return v - (np.int64(1) << 32) if v >= (np.int64(1) << 31) else v


@njit(cache=True, inline="always")
def be_u32(b, p):
    """Unsigned big-endian uint32 at b[p:p+4]."""
    return (np.uint32(b[p]) << 24) | (np.uint32(b[p + 1]) << 16) | (np.uint32(b[p + 2]) << 8) | np.uint32(b[p + 3])


@njit(cache=True, inline="always")
def be_i64(b, p):
    """Signed big-endian int64 at b[p:p+8]."""
    v = np.uint64(0)
    for i in range(8):
        v = (v << np.uint64(8)) | np.uint64(b[p + i])
    return np.int64(v)


@njit(cache=True, inline="always")
def put_i16(out, p, v):
    """Write the low 16 bits of v big-endian at out[p:p+2]; return the next position."""
    v = np.int64(v)
    out[p] = np.uint8((v >> 8) & 0xFF)
    out[p + 1] = np.uint8(v & 0xFF)
    return p + 2


@njit(cache=True, inline="always")
def put_i32(out, p, v):
    """Write the low 32 bits of v big-endian at out[p:p+4]; return the next position."""
    v = np.int64(v)
    out[p] = np.uint8((v >> 24) & 0xFF)
    out[p + 1] = np.uint8((v >> 16) & 0xFF)
    out[p + 2] = np.uint8((v >> 8) & 0xFF)
    out[p + 3] = np.uint8(v & 0xFF)
    return p + 4


@njit(cache=True, inline="always")
def put_i64(out, p, v):
    """Write v big-endian at out[p:p+8]; return the next position."""
    u = np.uint64(np.int64(v))
    for i in range(7, -1, -1):
        out[p + i] = np.uint8(u & np.uint64(0xFF))
        u >>= np.uint64(8)
    return p + 8


@njit(cache=True, inline="always")
def put_topic(out, p, buf, name, name_len):
    """A response's topic entry head at out[p:]: its name (int16 length, then buf[name:name+name_len]) and
    room for its partition count; (the next position, where the count goes)."""
    p = put_i16(out, p, name_len)
    out[p:p + name_len] = buf[name:name + name_len]
    p += name_len
    return p + 4, p


@njit(cache=True, inline="always")
def varint(b, p, end):
    """Zigzag varint at p, not reading at or past end: (value, next p); next p = -1 if it runs out."""
    if p < end:
        x = b[p]
        if x < 0x80:  # one byte: every length and delta under 64, the common case
            v = np.int64(x)
            return (v >> 1) ^ -(v & 1), p + 1
    u = np.uint64(0)
    shift = np.uint64(0)
    while p < end:
        x = np.uint64(b[p])
        p += 1
        u |= (x & np.uint64(0x7F)) << shift
        if x < np.uint64(0x80):
            return np.int64(u >> np.uint64(1)) ^ -np.int64(u & np.uint64(1)), p
        shift += np.uint64(7)
        if shift > np.uint64(63):
            return np.int64(0), -1
    return np.int64(0), -1


@njit(cache=True, inline="always")
def varint_size(n):
    """Bytes of the zigzag varint of a signed 64-bit n."""
    u = np.uint64((n << 1) ^ (n >> 63))
    size = 1
    while u >= np.uint64(0x80):
        u >>= np.uint64(7)
        size += 1
    return size


@njit(cache=True, inline="always")
def put_varint(out, p, n):
    """Write n as a zigzag varint at out[p]; return the next position."""
    u = np.uint64((n << 1) ^ (n >> 63))
    while u >= np.uint64(0x80):
        out[p] = np.uint8((u & np.uint64(0x7F)) | np.uint64(0x80))
        u >>= np.uint64(7)
        p += 1
    out[p] = np.uint8(u)
    return p + 1


@njit(cache=True)
def utf8_valid(b, p, end):
    """Whether b[p:end] is what Python's strict UTF-8 decoder accepts: no overlong forms, no
    surrogates (U+D800-U+DFFF), nothing past U+10FFFF, no stray or missing continuation bytes."""
    while p < end:
        c = b[p]
        if c < 0x80:
            p += 1
            continue
        # (continuation bytes after the lead, bounds of the first continuation byte)
        if 0xC2 <= c <= 0xDF:
            n, lo, hi = 1, 0x80, 0xBF
        elif c == 0xE0:
            n, lo, hi = 2, 0xA0, 0xBF  # below: overlong
        elif c == 0xED:
            n, lo, hi = 2, 0x80, 0x9F  # above: surrogates
        elif 0xE1 <= c <= 0xEF:
            n, lo, hi = 2, 0x80, 0xBF
        elif c == 0xF0:
            n, lo, hi = 3, 0x90, 0xBF  # below: overlong
        elif 0xF1 <= c <= 0xF3:
            n, lo, hi = 3, 0x80, 0xBF
        elif c == 0xF4:
            n, lo, hi = 3, 0x80, 0x8F  # above: past U+10FFFF
        else:
            return False
        if p + n >= end:  # the last continuation byte would be at p + n
            return False
        if not lo <= b[p + 1] <= hi:
            return False
        for i in range(2, n + 1):
            if not 0x80 <= b[p + i] <= 0xBF:
                return False
        p += n + 1
    return True


@njit(cache=True, inline="always")
def read_string(b, p, end, nullable):
    """A string (int16 length, -1 null if nullable, UTF-8) at p, not reading at or past end, as the
    codec's reader takes it: (start, length or -1 for null, next p); next p = -1 if it is malformed."""
    if p + 2 > end:
        return 0, 0, -1
    n = be_i16(b, p)
    p += 2
    if n >= 0:
        if p + n > end or not utf8_valid(b, p, p + n):
            return 0, 0, -1
        return p, n, p + n
    if n == -1 and nullable:
        return p, -1, p
    return 0, 0, -1
