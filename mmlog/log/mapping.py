"""A shared file mapping that holds no descriptor: mmap(2) through libc, unmapped when its last view dies.

Python's `mmap.mmap` keeps a duplicate of the file's descriptor for as long as the
mapping lives (for `size()` and `resize()`), so every mapped index and state page
cost a descriptor on top of the one it was opened with: eight per open partition.
The kernel needs none once the mapping is made. This maps with libc's mmap, so the
caller closes the file right after, and the mapping lives on its own.

Lifetime: the mapping is unmapped by a finalizer of the ctypes buffer over it, which
every numpy array and memoryview made from it keeps alive; so it is unmapped only once
nothing can reach it any more (no access after munmap is possible), which is what
`mmap.close()` refusing with BufferError gave before, without the descriptor.

Layout and crash points: none of its own (MAP_SHARED: stores are the file's pages).
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import weakref

import numpy as np

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.restype = ctypes.c_int
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.msync.restype = ctypes.c_int
_libc.msync.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.madvise.restype = ctypes.c_int
_libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]

MAP_FAILED = ctypes.c_void_p(-1).value
MS_SYNC = 4  # Linux's value (asm-generic/mman-common.h)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


class Mapping:
    """`length` bytes of the file open as `fd`, mapped shared read-write (the caller may close `fd` after)."""

    def __init__(self, fd: int, length: int) -> None:
        address = _libc.mmap(None, length, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
        if address is None or address == MAP_FAILED:
            err = ctypes.get_errno() or errno.ENOMEM
            raise OSError(err, f"mmap: {os.strerror(err)}")
        self.address, self.length = address, length
        self._buffer = (ctypes.c_char * length).from_address(address)
        weakref.finalize(self._buffer, _libc.munmap, address, length)
        _libc.madvise(address, length, mmap.MADV_RANDOM)  # advice only: a failure changes nothing

    def array(self, dtype) -> np.ndarray:
        """The whole mapping as a writable numpy array of `dtype` (keeping the mapping alive)."""
        return np.frombuffer(self._buffer, dtype=dtype)

    def flush(self) -> None:
        """msync(MS_SYNC): the mapping's dirty pages reach the disk before this returns."""
        _check(_libc.msync(self.address, self.length, MS_SYNC), "msync")
