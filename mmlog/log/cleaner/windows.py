"""A segment read a window at a time for the cleaner: whole batches of at most WINDOW_BYTES and WINDOW_RECORDS
(a larger batch alone), their batch table and record rows, and their compressed batches decompressed
(cleaner.py's docstring, "Memory" and "Decompression", tells why and how much).
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mmlog.log.cleaner import kernels as ck
from mmlog.log.files import LOG_SUFFIX, segment_file
from mmlog.protocol import compression, lz4_frame

DECOMPRESS_LIMIT = 256 << 20
# A segment is read and rewritten this many bytes and records of whole batches at a time (cleaner.py, "Memory").
WINDOW_BYTES = 16 << 20
WINDOW_RECORDS = 1 << 18


@dataclass
class Rows:
    """One segment's batch table and record rows (compaction_kernels.py)."""

    batches: np.ndarray
    h1: np.ndarray
    h2: np.ndarray
    offsets: np.ndarray
    flags: np.ndarray
    rstart: np.ndarray
    rend: np.ndarray

    def batch_of_row(self) -> np.ndarray:
        return np.repeat(np.arange(len(self.batches)), self.batches[:, ck.COUNT])


class Source:
    """A segment's .log mmap-ed read-only (the inode the swap checks against), read a window at a time."""

    def __init__(self, directory: Path, base: int) -> None:
        self.base = base
        self.path = segment_file(directory, base, LOG_SUFFIX)
        self.file = open(self.path, "rb")
        st = os.fstat(self.file.fileno())
        self.inode, self.size, self.mtime_ns = st.st_ino, st.st_size, st.st_mtime_ns
        self.mm = mmap.mmap(self.file.fileno(), self.size, prot=mmap.PROT_READ) if self.size else None
        self.buf = np.frombuffer(self.mm, dtype=np.uint8) if self.mm is not None else np.zeros(0, np.uint8)

    def windows(self, limit: int, max_records: int) -> Iterator["Window"]:
        """The segment as consecutive runs of whole batches of at most `limit` bytes and `max_records`
        records each (a larger batch alone), in log order, up to where its batches stop parsing (as
        count_batches stops)."""
        lo = 0
        while lo < self.size:
            hi = int(ck.window_end(self.buf, lo, self.size, limit, max_records))
            if hi == lo:
                return
            yield Window(self, lo, hi)
            lo = hi

    def close(self) -> None:
        self.buf = np.zeros(0, np.uint8)
        if self.mm is not None:
            try:
                self.mm.close()
            except BufferError:  # a view still alive (a traceback's frame): unmapped when it is collected
                pass
        self.file.close()


class Window:
    """Whole batches source.buf[lo:hi] of one segment: their rows, and their compressed batches
    decompressed, held while the window is cleaned (positions are the segment's own)."""

    def __init__(self, source: Source, lo: int, hi: int) -> None:
        self.source, self.lo, self.hi = source, lo, hi
        self.size = hi - lo
        self.packed = np.zeros(0, np.int64)  # rows(): the compressed batches, decompressed into plain
        self.plain = np.zeros(0, np.uint8)
        self.plain_starts = np.zeros(1, np.int64)

    def rows(self) -> Rows:
        """Walk every batch and record. Compressed batches are decompressed once each, into
        `self.plain` (each as its 61-byte header then its records, batch i of `self.packed` at
        plain_starts[i]); their rows point into it, and a rebuild reads it again (no second
        decompression)."""
        buf, path = self.source.buf, self.source.path
        nb, nr, _ = ck.count_batches(buf, self.lo, self.hi)
        r = Rows(np.zeros((nb, ck.NCOLS), np.int64), np.zeros(nr, np.uint64), np.zeros(nr, np.uint64),
                  np.zeros(nr, np.int64), np.zeros(nr, np.int64), np.zeros(nr, np.int64), np.zeros(nr, np.int64))
        status, walked = ck.walk_segment(buf, self.lo, self.hi, r.batches, r.h1, r.h2, r.offsets, r.flags,
                                         r.rstart, r.rend)
        if status != ck.WALK_OK:
            raise ValueError(f"{path}: batch {walked} does not parse")
        self.packed = np.nonzero(r.batches[:, ck.ATTRS] & 0x07)[0]
        if len(self.packed):
            self._decompress(r.batches[self.packed])
            t = r.batches[self.packed]
            bad = ck.walk_plain_batches(self.plain, self.plain_starts, t[:, ck.COUNT], t[:, ck.BASE],
                                        t[:, ck.FIRST_ROW], r.h1, r.h2, r.offsets, r.flags, r.rstart, r.rend)
            if bad >= 0:
                raise ValueError(f"{path}: compressed batch at {t[bad, ck.POS]} does not parse")
        return r

    def _decompress(self, table: np.ndarray) -> None:
        """Fill self.plain and self.plain_starts from the compressed batches of `table`: lz4 ones all
        at once by numba kernels (`lz4_frame.py`), the other codecs one codec call a batch."""
        buf, mm, path = self.source.buf, self.source.mm, self.source.path
        pos, size, codec = table[:, ck.POS], table[:, ck.SIZE], table[:, ck.ATTRS] & 0x07
        lengths = np.zeros(len(table), np.int64)
        lz4 = np.nonzero(codec == compression.LZ4)[0]
        if len(lz4):
            starts, ends = pos[lz4] + 61, pos[lz4] + size[lz4]
            sizes = np.zeros(len(lz4), np.int64)
            if lz4_frame.frame_sizes(buf, starts, ends, sizes) >= 0:
                lz4 = lz4[:0]  # a frame these kernels do not read: the codec call decides, below
            else:
                lengths[lz4] = sizes
        bodies = {}
        for i in np.setdiff1d(np.arange(len(table)), lz4).tolist():  # one codec call a batch
            p, n = int(pos[i]), int(size[i])
            bodies[i] = bytes(compression.decompress(int(codec[i]), mm[p + 61 : p + n], DECOMPRESS_LIMIT))
            lengths[i] = len(bodies[i])
        if lengths.max() > DECOMPRESS_LIMIT:
            raise ValueError(f"{path}: a batch expands past {DECOMPRESS_LIMIT:,} bytes")
        self.plain_starts = np.zeros(len(table) + 1, np.int64)
        np.cumsum(lengths + 61, out=self.plain_starts[1:])
        self.plain = np.empty(int(self.plain_starts[-1]), np.uint8)
        ck.gather(buf, pos, np.full(len(table), 61, np.int64), self.plain, self.plain_starts[:-1])
        if len(lz4) and lz4_frame.decode_frames(buf, pos[lz4] + 61, pos[lz4] + size[lz4], self.plain,
                                                self.plain_starts[lz4] + 61) >= 0:
            raise ValueError(f"{path}: an lz4 batch does not decompress")
        for i, body in bodies.items():
            at = int(self.plain_starts[i]) + 61
            self.plain[at : at + len(body)] = np.frombuffer(body, np.uint8)
