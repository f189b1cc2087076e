"""The system calls the compiled request path makes, callable from numba code without the interpreter.

Each is a C symbol of the C library, declared as a numba `ExternalFunction`: numba links the call
by name, so the kernels that make it stay cacheable on disk (a ctypes function pointer would be an
address baked into the code, which numba refuses to cache). Pointers cross as plain integers
(`array.ctypes.data + offset`); `errno()` reads the calling thread's errno after a call returned -1.

`fence()` orders memory stores (seqlock writers). `stack_words(n)` is the address of n int64 words on
the calling function's stack, for a call's out-parameter (a timespec, a sendfile offset): a np.empty
there would be a heap allocation, its reference counts and a free on every request. `view_i64`,
`view_i32` and `view_u8` turn an address the processor took from a mapping it holds open (a
partition's state page, an index) into an array inside compiled code. The address must outlive every
call that uses it: the partition table (log/partition_table.py) forgets a partition before its
mappings close.
"""

from __future__ import annotations

import ctypes.util

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir
from numba import carray, njit, types
from numba.core import cgutils, errors
from numba.extending import intrinsic

llvm.load_library_permanently(ctypes.util.find_library("c"))

_fd, _size, _flags = types.int32, types.intp, types.int32
recv = types.ExternalFunction("recv", types.intp(_fd, types.intp, _size, _flags))
send = types.ExternalFunction("send", types.intp(_fd, types.intp, _size, _flags))
write = types.ExternalFunction("write", types.intp(_fd, types.intp, _size))
read = types.ExternalFunction("read", types.intp(_fd, types.intp, _size))
pwrite = types.ExternalFunction("pwrite64", types.intp(_fd, types.intp, _size, types.int64))
pread = types.ExternalFunction("pread64", types.intp(_fd, types.intp, _size, types.int64))
# pwritev(fd, iov, iovcnt, offset): iov is the address of iovcnt (base address, length) int64 pairs
pwritev = types.ExternalFunction("pwritev64", types.intp(_fd, types.intp, types.int32, types.int64))
# sendfile(out_fd, in_fd, offset, count): offset is the address of an int64 the call advances
sendfile = types.ExternalFunction("sendfile64", types.intp(_fd, _fd, types.intp, _size))
epoll_wait = types.ExternalFunction("epoll_wait", types.int32(_fd, types.intp, types.int32, types.int32))
clock_gettime = types.ExternalFunction("clock_gettime", types.int32(types.int32, types.intp))
# the writer lock's robust process-shared mutex (log/lock.py), by its address
pthread_mutex_lock = types.ExternalFunction("pthread_mutex_lock", types.int32(types.intp))
pthread_mutex_unlock = types.ExternalFunction("pthread_mutex_unlock", types.int32(types.intp))
pthread_mutex_consistent = types.ExternalFunction("pthread_mutex_consistent", types.int32(types.intp))
_errno_location = types.ExternalFunction("__errno_location", types.intp())

MSG_DONTWAIT, MSG_NOSIGNAL, MSG_MORE = 0x40, 0x4000, 0x8000
EAGAIN, EINTR, EOWNERDEAD = 11, 4, 130
EPOLLIN, EPOLLOUT, EPOLLERR, EPOLLHUP = 0x001, 0x004, 0x008, 0x010
IOV_MAX = 1024
EPOLL_EVENT_SIZE = 12  # struct epoll_event is packed on x86-64: uint32 events, uint64 data
CLOCK_REALTIME, CLOCK_MONOTONIC = 0, 1


def _pointer_to(item):
    @intrinsic
    def cast(typingctx, address):
        sig = types.CPointer(item)(address)

        def codegen(context, builder, signature, args):
            return builder.inttoptr(args[0], context.get_value_type(signature.return_type))
        return sig, codegen
    return cast


_i64_at, _i32_at, _u8_at = _pointer_to(types.int64), _pointer_to(types.int32), _pointer_to(types.uint8)


@intrinsic
def fence(typingctx):
    """A full memory fence, and so a compiler barrier: no load or store moves across it, and none before
    it is dropped as overwritten after it. A seqlock writer in compiled code needs one between the odd
    sequence store and the slots, and between the slots and the even one, or the compiler may drop the
    odd store (a later store to the same slot, no load between) or move the slots past it."""
    def codegen(context, builder, signature, args):
        builder.fence("seq_cst")
        return context.get_dummy_value()
    return types.void(), codegen


@intrinsic
def stack_words(typingctx, n):
    """The address of n (a literal) int64 words in the calling function's frame, valid until it returns.
    Its alloca goes in the function's entry block, so a call in a loop reuses one slot."""
    if not isinstance(n, types.IntegerLiteral) or n.literal_value < 1:
        raise errors.TypingError("stack_words takes a literal word count of at least 1")
    words = n.literal_value

    def codegen(context, builder, signature, args):
        slot = cgutils.alloca_once(builder, ir.ArrayType(ir.IntType(64), words))
        return builder.ptrtoint(slot, context.get_value_type(types.intp))
    return types.intp(n), codegen


@njit(cache=True, nogil=True)
def view_i64(address, n):
    """The n int64 words at `address` as an array."""
    return carray(_i64_at(address), (n,))


@njit(cache=True, nogil=True)
def view_i32(address, n):
    return carray(_i32_at(address), (n,))


@njit(cache=True, nogil=True)
def view_u8(address, n):
    return carray(_u8_at(address), (n,))


@njit(cache=True, nogil=True)
def lock_mutex(address):
    """Take the partition's writer lock, the robust mutex at `address` (log/lock.py), waiting for it: 0, or the
    error pthread_mutex_lock returned. A holder that died leaves it EOWNERDEAD: it is made consistent and is
    ours (the state's PENDING_OP says what the dead writer left to repair)."""
    r = pthread_mutex_lock(address)
    if r == EOWNERDEAD:
        return pthread_mutex_consistent(address)
    return r


@njit(cache=True, nogil=True)
def unlock_mutex(address):
    """Drop the writer lock taken with `lock_mutex`: 0, or the error pthread_mutex_unlock returned."""
    return pthread_mutex_unlock(address)


@njit(cache=True, nogil=True)
def errno():
    """The calling thread's errno (after a call that returned -1)."""
    return np.int64(_i32_at(_errno_location())[0])


@njit(cache=True, nogil=True)
def _clock(clock_id):
    ts = view_i64(stack_words(2), 2)  # struct timespec: seconds, nanoseconds
    clock_gettime(clock_id, ts.ctypes.data)
    return ts[0], ts[1]


@njit(cache=True, nogil=True)
def monotonic():
    """time.monotonic(): seconds, as a float."""
    s, ns = _clock(CLOCK_MONOTONIC)
    return s + ns * 1e-9


@njit(cache=True, nogil=True)
def wall_ms():
    """int(time.time() * 1000): wall-clock milliseconds, as the log stamps them."""
    s, ns = _clock(CLOCK_REALTIME)
    return s * 1000 + ns // 1_000_000


def warm() -> None:
    """Compile (or load) the helpers before any fork."""
    a = np.zeros(4, np.int64)
    view_i64(a.ctypes.data, 4)
    view_i32(a.ctypes.data, 8)
    view_u8(a.ctypes.data, 32)
    errno()
    monotonic()
    wall_ms()
