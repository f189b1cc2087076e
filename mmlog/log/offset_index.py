"""Offset index: sparse map from a segment's relative offsets to positions in its .log.

Layout: 8-byte entries, native-endian int32 relative offset (batch base offset
minus the segment's base offset), int32 byte position of that batch in the .log.
An entry is written for a batch once `index.interval.bytes` of log have passed
since the previous entry (never for the segment's first batch, which is at 0), so
a lookup leaves at most one interval of batch headers to scan.

Invariants: relative offsets and positions strictly increase; every entry points at
a batch boundary. `check` verifies the first and the bounds when a segment is
loaded (reading every page to verify the second would cost a full scan at start-up);
an entry that misses a boundary is caught when a read scans from it
(`CorruptSegment`), and recovery rebuilds every index after an unclean stop.
"""

from __future__ import annotations

import numpy as np

from mmlog.log import kernels
from mmlog.log.index import SparseIndex


class CorruptIndex(Exception):
    """An index that disagrees with its segment; recovery rebuilds it."""


class OffsetIndex(SparseIndex):
    DTYPE = np.dtype(np.int32)

    def lookup(self, offset: int, entries: int) -> tuple[int, int]:
        """(base offset, position) of the last indexed batch starting at or before offset; (base, 0) if none."""
        slot = kernels.index_floor(self.file.view, entries, offset - self.base_offset)
        if slot < 0:
            return self.base_offset, 0
        rel, pos = self.entry(slot)
        return self.base_offset + rel, pos

    def check(self, entries: int, log_size: int) -> None:
        """Raise CorruptIndex unless the first `entries` entries are increasing and inside the log."""
        if entries == 0:
            return
        pairs = self.file.view[: 2 * entries].reshape(entries, 2)
        if entries > 1 and not (np.all(np.diff(pairs[:, 0]) > 0) and np.all(np.diff(pairs[:, 1]) > 0)):
            raise CorruptIndex(f"{self.path}: entries are not increasing")
        if pairs[0, 0] <= 0 or pairs[0, 1] <= 0 or pairs[-1, 1] >= log_size:
            raise CorruptIndex(f"{self.path}: entry outside the segment")
