"""Numba helpers that read Kafka's wire integers out of uint8 arrays.

Shared by every kernel that walks record batches: the log's scans
(`mmlog/log/kernels.py`) and the client's bulk decoder (`mmlog/client/bulk.py`).
Big-endian fixed-width integers as in batch headers, and the zigzag varints of
record fields. They are inlined into their callers, so a call costs nothing.
"""

from __future__ import annotations

import numpy as np
from numba import njit


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
