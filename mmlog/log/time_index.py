"""Time index: sparse map from timestamps to the relative offsets that reach them.

Layout: 16-byte entries, native-endian int64 timestamp (the largest timestamp of
the segment so far), int64 relative offset of the record that carries it. Entries
are written beside offset index entries, only when the timestamp has grown, and
once more when a segment is rolled, so the last entry of an inactive segment holds
its largest timestamp (what retention by time reads).

Invariants: timestamps strictly increase; every record before an entry's offset has
a timestamp no larger than the entry's.
"""

from __future__ import annotations

import numpy as np

from mmlog.log import kernels
from mmlog.log.index import SparseIndex
from mmlog.log.offset_index import CorruptIndex


class TimeIndex(SparseIndex):
    DTYPE = np.dtype(np.int64)

    def lookup(self, timestamp: int, entries: int) -> int:
        """Offset from which to scan for the first record with timestamp >= `timestamp`."""
        slot = kernels.time_floor(self.file.view, entries, timestamp)
        if slot < 0:
            return self.base_offset
        return self.base_offset + self.entry(slot)[1]

    def last(self, entries: int) -> tuple[int, int]:
        """(largest timestamp, its absolute offset), or (-1, -1) for no entry."""
        if entries == 0:
            return -1, -1
        ts, rel = self.entry(entries - 1)
        return ts, self.base_offset + rel

    def check(self, entries: int) -> None:
        if entries > 1:
            pairs = self.file.view[: 2 * entries].reshape(entries, 2)
            if not (np.all(np.diff(pairs[:, 0]) > 0) and np.all(np.diff(pairs[:, 1]) >= 0)):
                raise CorruptIndex(f"{self.path}: entries are not increasing")
