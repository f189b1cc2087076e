"""File mechanics shared by the log's on-disk structures: names, mmaps, atomic writes.

`MappedFile` is the one place that preallocates, mmaps, resizes and trims a file,
so the offset index, time index and partition state only describe their layouts.
Mappings are MAP_SHARED: every process that maps a file sees the others' stores at
once, with no syscall.

Disk blocks. Preallocation is sparse (ftruncate): a 10 MiB index costs nothing
until written. But a store into a page with no block behind it, on a full file
system, is a SIGBUS that kills the process, not an error. So nothing is stored into
a mapping before its blocks are reserved with posix_fallocate (`reserve`): the
partition state page at creation, index pages in chunks just before entries go into
them. A full disk then shows up as an OSError (ENOSPC) in the writer, before it has
changed anything, which the partition answers as KAFKA_STORAGE_ERROR.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import numpy as np

from mmlog.log import mapping

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIMEINDEX_SUFFIX = ".timeindex"
TXNINDEX_SUFFIX = ".txnindex"  # only segments with an aborted transaction have one (txn_index.py)
DELETED_SUFFIX = ".deleted"
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX, TXNINDEX_SUFFIX)


def segment_file(directory: Path, base_offset: int, suffix: str) -> Path:
    """`<dir>/<20-digit base offset><suffix>`, Kafka's segment file naming."""
    return directory / f"{base_offset:020d}{suffix}"


def segment_bases(directory: Path, names=None) -> list[int]:
    """Base offsets of the `.log` files in a partition directory, ascending (from `names` if the
    caller listed the directory already)."""
    bases = []
    for name in os.listdir(directory) if names is None else names:
        stem, dot, suffix = name.partition(".")
        if dot and "." + suffix == LOG_SUFFIX and len(stem) == 20 and stem.isdigit():
            bases.append(int(stem))
    return sorted(bases)


def log_size(directory: Path, base_offset: int) -> int:
    """Bytes of a segment's .log file, without opening it (FileNotFoundError if it is gone)."""
    return os.stat(segment_file(directory, base_offset, LOG_SUFFIX)).st_size


def delete_segment_files(directory: Path, base_offset: int) -> None:
    """Unlink a segment's files; descriptors already open keep reading the unlinked inode."""
    for suffix in SEGMENT_SUFFIXES:
        try:
            os.unlink(segment_file(directory, base_offset, suffix))
        except FileNotFoundError:
            pass


class MappedFile:
    """A file mmap-ed shared and read and written through a numpy view, holding no descriptor.

    `size` bytes are preallocated (as a sparse file: no disk is used until written)
    when the file is shorter; `size=None` maps the file as it is (what a process
    that does not hold the partition lock must do: it may never resize a file).
    An empty file has an empty view and no mapping.

    Descriptors: a mapping needs none once made, but Python's mmap keeps a duplicate
    of the file's; here the file is mapped through libc (`mapping.py`) and closed at
    once, so an open partition's state page and indexes cost mappings only. The rare
    calls that need the file again (reserve, resize: the lock holder's, on the active
    segment or at creation) open it by path and check it is still the inode mapped
    (`_reopen`): a file replaced meanwhile is an error, never silently another one.
    """

    def __init__(self, path: Path, dtype: np.dtype, size: int | None = None, create: bool = True) -> None:
        self.path = Path(path)
        self.dtype = np.dtype(dtype)
        self._map = None
        self._inode: tuple[int, int] | None = None
        fd = os.open(self.path, os.O_RDWR | (os.O_CREAT if create else 0), 0o644)
        try:
            self._map_fd(fd, size)
        finally:
            os.close(fd)

    def _map_fd(self, fd: int, size: int | None) -> None:
        st = os.fstat(fd)
        self._inode = (st.st_dev, st.st_ino)
        current = st.st_size
        if size is not None and current < size:
            os.ftruncate(fd, size)
            current = size
        usable = current - current % self.dtype.itemsize
        # No read-around on faults (MADV_RANDOM): a fault would otherwise read the device's whole readahead
        # window (read_ahead_kb, 8 MiB on some disks) into the page cache, mostly sparse holes that the kernel
        # zeroes, and with thousands of partitions those pages are evicted and zeroed again on the next
        # reopen. Indexes are read by binary search and written at their end: one page is enough.
        self._map = mapping.Mapping(fd, usable) if usable else None
        self.view = self._map.array(self.dtype) if self._map is not None else np.zeros(0, self.dtype)

    def _reopen(self) -> int:
        """A descriptor of the mapped file again (the caller closes it); ESTALE if the path names another."""
        fd = os.open(self.path, os.O_RDWR)
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != self._inode:
            os.close(fd)
            raise OSError(errno.ESTALE, f"{self.path} was replaced since it was mapped")
        return fd

    @property
    def nbytes(self) -> int:
        return self.view.nbytes

    def reserve(self, nbytes: int) -> None:
        """Give bytes [0, nbytes) of the file disk blocks (ENOSPC raises here rather than SIGBUS
        on a store). File systems without fallocate keep the sparse file, as before."""
        fd = self._reopen()
        try:
            os.posix_fallocate(fd, 0, min(nbytes, self.view.nbytes))
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                raise
        finally:
            os.close(fd)

    def resize(self, size: int) -> None:
        """Set the file to exactly `size` bytes and map it again (trim or preallocate)."""
        fd = self._reopen()
        try:
            self._unmap()
            os.ftruncate(fd, size)
            self._map_fd(fd, None)
        finally:
            os.close(fd)

    def flush(self) -> None:
        """msync the mapping: its pages reach the disk before this returns."""
        if self._map is not None:
            self._map.flush()

    def _unmap(self) -> None:
        # A numpy view someone still holds pins the mapping (mapping.py): it is unmapped when the last
        # view is collected, and the new mapping is used from now on.
        self.view = np.zeros(0, self.dtype)
        self._map = None

    def close(self) -> None:
        self._unmap()
        self._inode = None
