"""A segment: one `.log` file of record batches and its two sparse indexes.

Files: `<base>.log` holds batches exactly as they came off the wire (offsets
assigned); `<base>.index` and `<base>.timeindex` are the offset and time indexes
(`offset_index.py`, `time_index.py`). Only the active (last) segment grows. How
much of its `.log` is committed is not the file size but ACTIVE_SIZE in the
partition state: bytes past it are an append in progress, or the leftovers of a
writer that died, and are overwritten by the next append.

Reads return a `FileSlice` (file, position, size) and never copy log bytes; the
processors send slices with `os.sendfile`. A slice keeps its file object alive, so
a segment deleted by retention while a reader still holds a slice stays readable
until the slice is dropped (the kernel keeps an unlinked file while it is open).
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mmlog.log import kernels
from mmlog.log.files import INDEX_SUFFIX, LOG_SUFFIX, TIMEINDEX_SUFFIX, delete_segment_files, segment_file
from mmlog.log.offset_index import OffsetIndex
from mmlog.log.time_index import TimeIndex

# Bytes read per step of a header scan. An index entry every 4 KiB leaves at most
# about 4 KiB of batches between it and the target, so one 8 KiB read nearly
# always reaches the target's header (a 16 KiB pread costs 3.6 us, 512 B 0.8 us).
SCAN_CHUNK = 8 * 1024


class CorruptSegment(Exception):
    """A committed part of a segment that does not parse; recovery truncates it."""


@dataclass(frozen=True, slots=True)
class FileSlice:
    """A byte range of a segment file: what a fetch sends with os.sendfile."""

    file: object  # an open binary file; kept alive for as long as the slice is
    position: int
    size: int

    def fileno(self) -> int:
        return self.file.fileno()

    def __len__(self) -> int:
        """Its size: the protocol codec counts a slice as that many bytes sent separately."""
        return self.size

    def read(self) -> bytes:
        """The bytes themselves (for tests, tools and clients without sendfile)."""
        return os.pread(self.file.fileno(), self.size, self.position) if self.size else b""


@dataclass(frozen=True, slots=True)
class ScanResult:
    """What recovery learned from one segment (see kernels.scan_segment)."""

    status: int
    valid_end: int
    next_offset: int
    batches: int
    index_entries: int
    time_entries: int
    max_timestamp: int
    offset_of_max_ts: int
    since_index: int

    @property
    def reason(self) -> str:
        return kernels.SCAN_REASONS[self.status]


class Segment:
    """The files of one segment, opened for reading (and appending, if active)."""

    def __init__(self, directory: Path, base_offset: int, *, create: bool = False, index_bytes: int | None = None) -> None:
        """Open a segment's files; only a lock holder may create them or preallocate (index_bytes)."""
        self.directory = Path(directory)
        self.base_offset = base_offset
        self.log_path = segment_file(self.directory, base_offset, LOG_SUFFIX)
        # Header scans read into one reused buffer (a Segment serves one thread at a time), made at
        # the first scan: most segments of a partition are never read, so opening them allocates none.
        self._scratch: tuple | None = None  # (bytearray, memoryview of it, uint8 array over it)
        fd = os.open(self.log_path, os.O_RDWR | (os.O_CREAT if create else 0), 0o644)
        self.file = os.fdopen(fd, "r+b", buffering=0)
        try:
            self.offset_index = OffsetIndex(
                segment_file(self.directory, base_offset, INDEX_SUFFIX), base_offset, index_bytes, create
            )
            self.time_index = TimeIndex(
                segment_file(self.directory, base_offset, TIMEINDEX_SUFFIX), base_offset, index_bytes, create
            )
        except BaseException:
            self.file.close()
            raise

    def preallocate(self, index_bytes: int) -> None:
        """Give the (now active) segment's indexes their full preallocated size."""
        if self.offset_index.file.nbytes < index_bytes - index_bytes % 8:
            self.offset_index.preallocate(index_bytes)
        if self.time_index.file.nbytes < index_bytes - index_bytes % 16:
            self.time_index.preallocate(index_bytes)

    # ------------------------------------------------------------ sizes

    def file_size(self) -> int:
        return os.fstat(self.file.fileno()).st_size

    # ------------------------------------------------------------ writing

    def write_at(self, position: int, data) -> None:
        """Write all of data at position (pwrite; loops over short writes)."""
        view = memoryview(data)
        fd = self.file.fileno()
        while view:
            n = os.pwrite(fd, view, position)
            view = view[n:]
            position += n

    def write_all_at(self, position: int, buffers: list) -> None:
        """Write the buffers back to back at position: one pwritev (loops over short writes)."""
        views = [memoryview(b) for b in buffers]
        fd = self.file.fileno()
        while views:
            n = os.pwritev(fd, views[:1024], position)  # IOV_MAX
            position += n
            while views and n >= len(views[0]):
                n -= len(views[0])
                views.pop(0)
            if n:
                views[0] = views[0][n:]

    def truncate(self, size: int) -> None:
        os.ftruncate(self.file.fileno(), size)

    def flush(self) -> None:
        """fsync the log and msync the indexes."""
        os.fsync(self.file.fileno())
        self.offset_index.flush()
        self.time_index.flush()

    # ------------------------------------------------------------ reading

    def find_batch(self, offset: int, index_entries: int, end: int) -> tuple[int, int] | None:
        """(position, size) of the first batch in [0, end) whose last offset >= offset, or None."""
        _, pos = self.offset_index.lookup(offset, index_entries)
        fd = self.file.fileno()
        if self._scratch is None:
            buf = bytearray(SCAN_CHUNK)
            self._scratch = (buf, memoryview(buf), np.frombuffer(buf, dtype=np.uint8))
        scratch, view, array = self._scratch
        while pos < end:
            n = os.preadv(fd, [view[: min(SCAN_CHUNK, end - pos)]], pos)
            status, at = kernels.find_batch(array, 0, n, offset)
            if status == 0:
                return pos + at, 12 + int.from_bytes(scratch[at + 8 : at + 12], "big", signed=True)
            if status == 3 or (status == 2 and at == 0):
                raise CorruptSegment(f"{self.log_path}: no batch header at position {pos + at}")
            pos += at
        return None

    def find_time(self, timestamp: int, index_entries: int, time_entries: int, end: int,
                  min_offset: int = 0) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record here, at min_offset or after, with timestamp >= timestamp."""
        start = self.time_index.lookup(timestamp, time_entries)
        _, pos = self.offset_index.lookup(max(start, min_offset), index_entries)
        fd = self.file.fileno()
        want = SCAN_CHUNK
        while pos < end:
            chunk = os.pread(fd, min(want, end - pos), pos)
            buf = np.frombuffer(chunk, dtype=np.uint8)
            status, at, offset, found_ts = kernels.find_time(buf, 0, len(buf), timestamp, min_offset)
            if status == 0:
                return int(offset), int(found_ts)
            if status == 3:
                raise CorruptSegment(f"{self.log_path}: no batch header at position {pos + at}")
            if status == 2 and at == 0:
                if len(chunk) == end - pos:
                    raise CorruptSegment(f"{self.log_path}: batch at position {pos} runs past the committed end")
                want = 12 + int.from_bytes(chunk[8:12], "big", signed=True)  # the whole (large) batch
                continue
            pos += at
            want = SCAN_CHUNK
        return None

    # ------------------------------------------------------------ recovery

    def scan(self, next_offset: int, interval: int, check_crc: bool = True, gaps: bool = False) -> ScanResult:
        """Validate the whole .log and rebuild both indexes into their (preallocated) mappings (`gaps`:
        batches may start past the expected offset, as in a compacted log).

        The kernel fills private arrays, and only the entries it found are copied into the mappings,
        after their pages got blocks (`write_many` reserves them): a store into a page without a block
        on a full disk would be a SIGBUS. The pages the entries need and no more, so that recovery
        after an unclean stop finds them already allocated (the same entries were there) and a broker
        restarted on a full disk still opens its partitions. The arrays are as large as the mappings,
        but untouched pages of an np.empty cost nothing; the copy is small beside the scan."""
        size = self.file_size()
        if size == 0:
            return ScanResult(kernels.SCAN_END, 0, next_offset, 0, 0, 0, -1, -1, 0)
        index_out = np.empty_like(self.offset_index.flat)
        time_out = np.empty_like(self.time_index.flat)
        with mmap.mmap(self.file.fileno(), size, prot=mmap.PROT_READ) as mm:
            buf = np.frombuffer(mm, dtype=np.uint8)
            result = ScanResult(
                *(
                    int(v)
                    for v in kernels.scan_segment(
                        buf, 0, size, self.base_offset, next_offset, interval, check_crc,
                        kernels.CRC_TABLES, index_out, time_out, gaps,
                    )
                )
            )
            del buf
        self.offset_index.write_many(0, index_out[: 2 * result.index_entries])
        self.time_index.write_many(0, time_out[: 2 * result.time_entries])
        return result

    # ------------------------------------------------------------ lifecycle

    def make_inactive(self, index_entries: int, time_entries: int, max_timestamp: int, offset_of_max: int) -> None:
        """Seal a rolled segment: add the final time entry, trim both indexes to their entries."""
        last_ts, _ = self.time_index.last(time_entries)
        if max_timestamp > last_ts and time_entries < self.time_index.capacity:
            self.time_index.reserve(time_entries + 1)  # (an append reserved it; recovery's scan did not)
            self.time_index.write(time_entries, max_timestamp, offset_of_max - self.base_offset)
            time_entries += 1
        self.offset_index.trim(index_entries)
        self.time_index.trim(time_entries)

    def close(self) -> None:
        """Unmap the indexes. The log file closes once no FileSlice holds it."""
        self.offset_index.close()
        self.time_index.close()
        self.file = _Closed(self.file)

    def replaced(self) -> bool:
        """Whether the file at this segment's path is no longer the one open here (deleted, maybe made anew)."""
        try:
            return not os.path.samestat(os.fstat(self.file.fileno()), os.stat(self.log_path))
        except FileNotFoundError:
            return True

    def delete_files(self) -> None:
        """Unlink the three files (open descriptors keep working until closed)."""
        delete_segment_files(self.directory, self.base_offset)


class _Closed:
    """Stands in for a closed segment's file; the real one lives on inside old slices."""

    def __init__(self, real) -> None:
        self.name = getattr(real, "name", "")

    def fileno(self) -> int:
        raise ValueError(f"segment file {self.name} is closed")
