"""The base of the sparse segment indexes: a preallocated, shared mmap of fixed-size pairs.

An index is an array of (key, value) pairs in a file named after its segment. The
active segment's index is preallocated to `segment.index.bytes` and mapped by every
process; how many entries are valid is not in the file but in the partition state
(`state.py`), which writers update after the entries, so a reader never sees an entry
that is half written. Rolling a segment trims its index to the entries it holds, after
which the file size alone says how many there are.

Crash behaviour: entries past the count in the state are garbage a dead writer may
have left; they are ignored and overwritten. An index that disagrees with its
segment is rebuilt from the log by recovery.
"""

from __future__ import annotations

import mmap
from pathlib import Path

import numpy as np

from mmlog.log.files import MappedFile
from mmlog.log.log_dirs import is_disk_full

RESERVE_CHUNK = 64 * 1024


class SparseIndex:
    """Pairs of `dtype` integers in a shared mapping; subclasses add the lookups."""

    DTYPE: np.dtype = np.dtype(np.int32)

    def __init__(self, path: Path, base_offset: int, preallocate: int | None = None, create: bool = True) -> None:
        self.base_offset = base_offset
        self.file = MappedFile(path, self.DTYPE, preallocate, create)
        self._reserved = 0  # bytes this process has made sure have blocks (files.py: disk blocks)

    def reserve(self, slots: int) -> None:
        """Disk blocks behind the first `slots` entries before they are written, 64 KiB at a time:
        one posix_fallocate per 8,192 entries (32 MiB of log at the default interval).

        Counted as reserved only once the allocation succeeded: an allocation that failed (ENOSPC)
        is tried again by the next append, whose entries would otherwise go into pages without
        blocks (SIGBUS) once the disk is full.

        Cost (timeit, 2 shared cores): the check every append makes, 0.25-0.4 µs per index (two per
        append); one posix_fallocate of a new 64 KiB chunk, 6-7 µs on ext4 and 28-30 µs on tmpfs
        (which zeroes its pages), so under 0.01 µs per append amortised. Appends of one 200-byte
        record with an entry for every batch (index.interval.bytes=0): 24-29 µs with the chunks,
        25-27 µs with no reservation at all (noise), 32-52 µs with one allocation per entry."""
        if slots * self.entry_size <= self._reserved:
            return  # the common case, every append: blocks are there already
        need = min(slots * self.entry_size, self.file.nbytes)
        if need > self._reserved:
            chunk = min(-(-need // RESERVE_CHUNK) * RESERVE_CHUNK, self.file.nbytes)
            try:
                self.file.reserve(chunk)
            except OSError as exc:
                if not is_disk_full(exc):
                    raise
                # A nearly full disk: the pages these entries need, if there is room for them alone.
                # Without this an append would wait for a whole chunk (16 pages) to be free at once.
                chunk = min(-(-need // mmap.PAGESIZE) * mmap.PAGESIZE, self.file.nbytes)
                self.file.reserve(chunk)  # ENOSPC again if not even that: KAFKA_STORAGE_ERROR
            self._reserved = chunk

    @property
    def reserved_entries(self) -> int:
        """How many entries from slot 0 have disk blocks (as this process reserved them)."""
        return min(self._reserved, self.file.nbytes) // self.entry_size

    @property
    def address(self) -> int:
        """The mapping's address (0 if the file is empty): valid until the file is mapped again or closed."""
        return self.file.view.ctypes.data if self.file.view.size else 0

    @property
    def path(self) -> Path:
        return self.file.path

    @property
    def entry_size(self) -> int:
        return 2 * self.DTYPE.itemsize

    @property
    def capacity(self) -> int:
        """How many entries the mapping holds (the count, once trimmed)."""
        return self.file.view.shape[0] // 2

    @property
    def flat(self) -> np.ndarray:
        """The flat view [k0, v0, k1, v1, ...] the kernels search."""
        return self.file.view

    def entry(self, slot: int) -> tuple[int, int]:
        view = self.file.view
        return int(view[2 * slot]), int(view[2 * slot + 1])

    def write(self, slot: int, key: int, value: int) -> None:
        view = self.file.view
        view[2 * slot] = key
        view[2 * slot + 1] = value

    def write_many(self, start_slot: int, pairs: np.ndarray) -> None:
        """Copy n entries (flat pairs) into slots start_slot .. start_slot + n - 1."""
        self.reserve(start_slot + pairs.shape[0] // 2)
        self.file.view[2 * start_slot : 2 * start_slot + pairs.shape[0]] = pairs

    def trim(self, entries: int) -> None:
        """Cut the file to exactly `entries` entries (on roll and close)."""
        self.file.resize(entries * self.entry_size)

    def preallocate(self, nbytes: int) -> None:
        """Grow the file back to nbytes (a trimmed index becoming active again)."""
        self.file.resize(nbytes - nbytes % self.entry_size)
        self._reserved = 0

    def flush(self) -> None:
        self.file.flush()

    def close(self) -> None:
        self.file.close()
