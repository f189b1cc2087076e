"""LZ4 frames (KIP-57, the lz4 codec of Kafka batches) decoded by numba kernels, many at once.

Why: cramjam's frame decoder costs about 12 us a call whatever the size (it sets up a
frame context), which dominates when a log is made of many small lz4 batches (the
log cleaner decompresses every batch of a segment: a few hundred bytes each). These
kernels take a table of frames and decode them all in one call, without Python per
batch. The codec calls of `compression.py` stay the reference (tests compare).

Frame layout (lz4's frame format 1.6): magic 04 22 4D 18; FLG (version 01, bit 5
block independence, bit 4 block checksum, bit 3 content size, bit 2 content checksum,
bit 0 dictionary id); BD; [content size, 8 bytes]; [dict id, 4 bytes: not supported,
as Kafka clients never write one]; header checksum (1 byte). Then blocks: a
little-endian u32 size (0 = end mark; high bit = stored uncompressed), the block,
[its checksum, 4 bytes]; after the end mark [content checksum, 4 bytes]. Checksums
are skipped, not verified: the batch's CRC-32C, checked when it was produced, covers
these bytes. A match may reach back into earlier blocks of the same frame (linked
blocks), never before the frame's first byte.

`frame_sizes` is a first pass that measures each frame's decoded size (so the
caller allocates once and can refuse a decompression bomb before writing anything);
`decode_frames` then writes each frame at its place in one output buffer.
"""

from __future__ import annotations

import numpy as np
from numba import njit

MAGIC = 0x184D2204
OK, BAD_FRAME, BAD_BLOCK = 0, 1, 2


@njit(cache=True, inline="always")
def _le32(b, p):
    return np.int64(b[p]) | (np.int64(b[p + 1]) << 8) | (np.int64(b[p + 2]) << 16) | (np.int64(b[p + 3]) << 24)


@njit(cache=True)
def _header_end(src, p, end):
    """(position of the first block, FLG) of the frame at p; (-1, 0) if it is not a frame we read."""
    if p + 7 > end or _le32(src, p) != MAGIC:
        return -1, 0
    flg = np.int64(src[p + 4])
    if (flg >> 6) != 1 or flg & 0x01:  # version 01; no dictionary
        return -1, 0
    q = p + 6 + (8 if flg & 0x08 else 0) + 1  # FLG BD [content size] HC
    if q > end:
        return -1, 0
    return q, flg


@njit(cache=True, inline="always")
def _length(src, i, stop, n):
    """A token's 4-bit length n, extended by bytes while it is 15 and they are 255: (length, next i);
    next i = -1 if the block ends first."""
    if n == 15:
        while True:
            if i >= stop:
                return 0, -1
            b = np.int64(src[i])
            i += 1
            n += b
            if b != 255:
                break
    return n, i


@njit(cache=True)
def _block(src, i, stop, out, o, frame_start, write):
    """Decode the lz4 block src[i:stop] to out[o:] (only measure if not write); next o, or -1."""
    while i < stop:
        token = np.int64(src[i])
        i += 1
        lit, i = _length(src, i, stop, token >> 4)
        if i < 0 or i + lit > stop:
            return -1
        if write:
            out[o : o + lit] = src[i : i + lit]
        i += lit
        o += lit
        if i >= stop:  # the last sequence has literals only
            break
        if i + 2 > stop:
            return -1
        offset = np.int64(src[i]) | (np.int64(src[i + 1]) << 8)
        i += 2
        ml, i = _length(src, i, stop, token & 15)
        if i < 0:
            return -1
        ml += 4
        if offset == 0 or offset > o - frame_start:
            return -1
        if write:
            s = o - offset
            if offset >= ml:
                out[o : o + ml] = out[s : s + ml]
            else:
                for k in range(ml):  # overlapping: a byte at a time repeats the pattern
                    out[o + k] = out[s + k]
        o += ml
    return o


@njit(cache=True)
def _frame(src, p, end, out, o, write):
    """Decode (or measure) the frame src[p:end] to out[o:]: (status, next o)."""
    q, flg = _header_end(src, p, end)
    if q < 0:
        return BAD_FRAME, o
    start = o
    block_sum = 4 if flg & 0x10 else 0
    while True:
        if q + 4 > end:
            return BAD_FRAME, o
        size = _le32(src, q)
        q += 4
        if size == 0:
            break
        stored = size & 0x80000000
        size &= 0x7FFFFFFF
        if q + size + block_sum > end:
            return BAD_BLOCK, o
        if stored:
            if write:
                out[o : o + size] = src[q : q + size]
            o += size
        else:
            o = _block(src, q, q + size, out, o, start, write)
            if o < 0:
                return BAD_BLOCK, start
        q += size + block_sum
    return OK, o


@njit(cache=True)
def frame_sizes(src, starts, ends, sizes):
    """Each frame src[starts[i]:ends[i]]'s decoded size into sizes; the first bad frame's index, -1."""
    dummy = np.zeros(0, np.uint8)
    for i in range(len(starts)):
        status, n = _frame(src, starts[i], ends[i], dummy, 0, False)
        if status != OK:
            return i
        sizes[i] = n
    return -1


@njit(cache=True)
def decode_frames(src, starts, ends, out, out_starts):
    """Decode frame i to out[out_starts[i]:] (sizes from frame_sizes); the first bad frame's index, -1."""
    for i in range(len(starts)):
        status, _ = _frame(src, starts[i], ends[i], out, out_starts[i], True)
        if status != OK:
            return i
    return -1


def decompress(data: bytes) -> bytes:
    """One frame decoded (tests and small uses; the kernels above are the fast path)."""
    src = np.frombuffer(data, np.uint8)
    starts, ends, sizes = np.zeros(1, np.int64), np.full(1, len(src), np.int64), np.zeros(1, np.int64)
    if frame_sizes(src, starts, ends, sizes) >= 0:
        raise ValueError("not an lz4 frame this decoder reads")
    out = np.empty(int(sizes[0]), np.uint8)
    if decode_frames(src, starts, ends, out, np.zeros(1, np.int64)) >= 0:
        raise ValueError("the lz4 frame does not decode")
    return out.tobytes()
