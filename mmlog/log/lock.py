"""The per-partition writer lock: a robust, process-shared mutex in the partition's state page.

Writers in any number of processes, and threads of one process, serialise on a glibc
`pthread_mutex_t` (PTHREAD_PROCESS_SHARED, PTHREAD_MUTEX_ROBUST) at slots 105-109 of the
partition's state page (state.py), which every process maps. Taking and dropping it is a few
atomic instructions, no system call unless writers contend (a futex wait). The compiled append
path takes the same mutex (`system/libc.py`'s `lock_mutex`).

A holder that dies (a thread, or a process killed even by SIGKILL) cannot wedge the partition:
the kernel walks the dead thread's robust list and marks the mutex owner-died, the next locker
gets EOWNERDEAD, makes it consistent and goes on. What the dead writer left half done is found
through the state's PENDING_OP and repaired by that next holder (`log_recovery.py`), as always.

What the kernel cannot cover is a mutex left locked by a process of an earlier boot or an earlier
run: after a power loss the state page on disk may hold a locked mutex (a flush syncs the page
while its writer holds the lock), and no exit ever marks it. So each mutex belongs to a *lock
epoch*, a random number each log dir gets when the first process of a run opens its locks file
(`.partition-locks`, held open with a shared flock by every process using the dir, so "first"
means no living process uses the dir's locks; `.partition-locks.epoch` keeps the number and its
exclusive flock makes the check-and-set atomic). A process finding the state page's epoch (slot
104) other than its dir's initialises the mutex again and stamps the epoch, under an
open-file-description record lock (fcntl F_OFD_SETLKW, released by the kernel if its holder dies)
on the byte of the locks file at the partition directory's inode number. Every process of a run
agrees on the epoch, so a mutex in use is never initialised again; a random epoch (not a count)
is never one a state page on disk could hold from a run whose epoch file write was lost.

A forked child opens the locks file again (the inherited descriptor is closed in the child); a
mutex the parent holds stays the parent's.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import fcntl
import os
import secrets
import struct
import threading
from pathlib import Path

from mmlog.log.state import LOCK_EPOCH, LOCK_MUTEX

LOCKS_FILE = ".partition-locks"
EPOCH_FILE = LOCKS_FILE + ".epoch"
F_OFD_SETLK = getattr(fcntl, "F_OFD_SETLK", 37)
F_OFD_SETLKW = getattr(fcntl, "F_OFD_SETLKW", 38)
_FLOCK = "hhqqixxxx"  # struct flock: l_type, l_whence, l_start, l_len, l_pid (0 for OFD locks), padding
EBUSY, EOWNERDEAD = 16, 130
PTHREAD_PROCESS_SHARED, PTHREAD_MUTEX_ROBUST = 1, 1

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
for _name in ("pthread_mutex_lock", "pthread_mutex_trylock", "pthread_mutex_unlock", "pthread_mutex_consistent"):
    getattr(_libc, _name).argtypes = [ctypes.c_void_p]
_ATTR = ctypes.create_string_buffer(16)  # pthread_mutexattr_t (4 bytes on x86-64 glibc), set once
for _call in (_libc.pthread_mutexattr_init(_ATTR), _libc.pthread_mutexattr_setpshared(_ATTR, PTHREAD_PROCESS_SHARED),
              _libc.pthread_mutexattr_setrobust(_ATTR, PTHREAD_MUTEX_ROBUST)):
    assert _call == 0, "the C library has no robust process-shared mutexes"

_registry_lock = threading.Lock()
_generation = 0  # moves in a forked child and at `release`: lock objects look their log dir up again
_dirs: dict[str, tuple[int, int]] = {}  # locks file -> (this process's descriptor of it, the dir's lock epoch)


def _dir_of(path: str) -> tuple[int, int]:
    """(descriptor, lock epoch) of a log dir's locks file in this process; the first use joins the dir."""
    with _registry_lock:
        known = _dirs.get(path)
        if known is None:
            known = _dirs[path] = _join(path)
        return known


def _join(path: str) -> tuple[int, int]:
    """Open the locks file and hold it shared; the dir's epoch, made anew if no living process held it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    guard = os.open(path + ".epoch", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(guard, fcntl.LOCK_EX)  # one joiner at a time: the check and the conversion below
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.pwrite(guard, struct.pack("=q", secrets.randbits(62) + 1), 0)  # the first: a new run's epoch
        except BlockingIOError:
            pass  # other processes use the dir: theirs
        fcntl.flock(fd, fcntl.LOCK_SH)
        epoch = struct.unpack("=q", os.pread(guard, 8, 0).ljust(8, b"\0"))[0]
    except BaseException:
        os.close(fd)
        raise
    finally:
        os.close(guard)  # (its flock goes with it)
    return fd, epoch


def _forget_in_child() -> None:
    """A forked child joins each log dir through a description of its own (see the module docstring)."""
    global _registry_lock, _generation
    _generation += 1
    for fd, _ in _dirs.values():
        try:
            os.close(fd)
        except OSError:
            pass
    _dirs.clear()
    _registry_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_in_child)


def release(log_dir: Path) -> None:
    """Close this process's descriptor of a log dir's locks file: for a process done with the dir (a
    tool, a test), holding none of its locks. Lock objects made before look the dir up again."""
    global _generation
    with _registry_lock:
        known = _dirs.pop(os.path.abspath(Path(log_dir) / LOCKS_FILE), None)
        _generation += 1
    if known is not None:
        os.close(known[0])


class PartitionLock:
    """An exclusive, crash-released lock on one partition: the mutex in its state page."""

    def __init__(self, directory: Path, state) -> None:
        directory = Path(directory)
        self._path = os.path.abspath(directory.parent / LOCKS_FILE)
        self._inode = os.stat(directory).st_ino
        self._slots = state.slots_view()
        self.mutex_address = self._slots.ctypes.data + LOCK_MUTEX * 8
        self._mutex = ctypes.c_void_p(self.mutex_address)
        self._generation = -1
        self.ready()

    def ready(self) -> None:
        """Make sure the mutex belongs to this run's epoch (initialised again if not); the compiled path
        calls this before it takes the mutex by its address."""
        if self._slots is None:
            raise ValueError(f"the lock of a closed partition ({self._path}, inode {self._inode})")
        if self._generation != _generation:
            self._fd, self._epoch = _dir_of(self._path)
            self._generation = _generation
        if self._slots[LOCK_EPOCH] == self._epoch:
            return
        byte = struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, self._inode, 1, 0)
        fcntl.fcntl(self._fd, F_OFD_SETLKW, byte)
        try:
            if self._slots[LOCK_EPOCH] != self._epoch:
                if _libc.pthread_mutex_init(self._mutex, _ATTR) != 0:
                    raise OSError(ctypes.get_errno(), "pthread_mutex_init failed")
                self._slots[LOCK_EPOCH] = self._epoch  # after the mutex (x86-64 keeps stores in order)
        finally:
            fcntl.fcntl(self._fd, F_OFD_SETLK, struct.pack(_FLOCK, fcntl.F_UNLCK, os.SEEK_SET, self._inode, 1, 0))

    def acquire(self, blocking: bool = True) -> bool:
        self.ready()
        result = (_libc.pthread_mutex_lock if blocking else _libc.pthread_mutex_trylock)(self._mutex)
        if result == EOWNERDEAD:  # its holder died: ours now; the state's PENDING_OP says what to repair
            _libc.pthread_mutex_consistent(self._mutex)
            return True
        if result == EBUSY and not blocking:
            return False
        if result != 0:
            raise OSError(result, f"pthread_mutex_lock: {os.strerror(result)}")
        return True

    def release(self) -> None:
        result = _libc.pthread_mutex_unlock(self._mutex)
        if result != 0:
            raise OSError(result, f"pthread_mutex_unlock: {os.strerror(result)}")

    def __enter__(self) -> "PartitionLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def close(self) -> None:
        """Forget the state page (the process's descriptor of the locks file stays, for its other partitions)."""
        self._slots = None
