"""The per-partition writer lock: a record lock the kernel drops if its holder dies.

Writers in any number of processes serialise on an exclusive open-file-description
record lock (fcntl F_OFD_SETLKW) over one byte of the log dir's `.partition-locks`
file: the byte at the partition directory's inode number, unique in its file system
(the log dir's). A process killed while holding it (even by SIGKILL) releases it when
the kernel closes its descriptors, so a dead writer can never wedge a partition. What
the dead writer left half done is found through the state's PENDING_OP and repaired by
the next holder (`log_recovery.py`).

Why one file per log dir rather than an flock per partition: a descriptor held per
open partition was one of the eight that kept a process to ~1,250 open partitions
under a 20,000 limit; this costs one descriptor per log dir and process, and a lock
or an unlock is one fcntl, as an flock was.

Record locks belong to an open file description, and every lock of one process goes
through the same one (`_file_of`), so two threads or two PartitionLock objects of one
process for the same partition would both "hold" it: a threading lock per partition
and process (shared by its PartitionLock objects) is taken first. A forked child opens
its own description (the inherited copy is closed in the child: a lock the parent
holds stays the parent's, and is released when the parent unlocks or dies).
"""

from __future__ import annotations

import fcntl
import os
import struct
import threading
from pathlib import Path

LOCKS_FILE = ".partition-locks"
F_OFD_SETLK = getattr(fcntl, "F_OFD_SETLK", 37)
F_OFD_SETLKW = getattr(fcntl, "F_OFD_SETLKW", 38)
_FLOCK = "hhqqixxxx"  # struct flock: l_type, l_whence, l_start, l_len, l_pid (0 for OFD locks), padding

_registry_lock = threading.Lock()
_epoch = 0  # moves in a forked child: objects made before the fork look their descriptor and lock up again
_files: dict[str, int] = {}  # locks file -> this process's descriptor of it
_threads: dict[tuple[str, int], list] = {}  # (locks file, inode) -> [threading lock, PartitionLock objects]


def _file_of(path: str) -> int:
    with _registry_lock:
        fd = _files.get(path)
        if fd is None:
            fd = _files[path] = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        return fd


def _forget_in_child() -> None:
    """A forked child takes its locks through a description of its own (see the module docstring)."""
    global _registry_lock, _epoch
    _epoch += 1
    for fd in _files.values():
        try:
            os.close(fd)
        except OSError:
            pass
    _files.clear()
    _threads.clear()
    _registry_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_in_child)


def release(log_dir: Path) -> None:
    """Close this process's descriptor of a log dir's locks file: for a process done with the dir (a
    tool, a test), holding none of its locks. Lock objects made before look their descriptor up again."""
    global _epoch
    with _registry_lock:
        path = os.path.abspath(Path(log_dir) / LOCKS_FILE)
        fd = _files.pop(path, None)
        for key in [key for key in _threads if key[0] == path]:  # registered again with the new epoch
            del _threads[key]
        _epoch += 1
    if fd is not None:
        os.close(fd)


class PartitionLock:
    """An exclusive, crash-released lock on one partition directory."""

    def __init__(self, directory: Path) -> None:
        directory = Path(directory)
        self._path = os.path.abspath(directory.parent / LOCKS_FILE)
        self._inode = os.stat(directory).st_ino
        self._key = (self._path, self._inode)
        self._lock_arg = struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, self._inode, 1, 0)
        self._unlock_arg = struct.pack(_FLOCK, fcntl.F_UNLCK, os.SEEK_SET, self._inode, 1, 0)
        self._closed = False
        self._register()

    def _register(self) -> None:
        self._fd = _file_of(self._path)
        with _registry_lock:
            entry = _threads.setdefault(self._key, [threading.Lock(), 0])
            entry[1] += 1
            self._thread_lock = entry[0]
        self._epoch = _epoch

    def acquire(self, blocking: bool = True) -> bool:
        if self._epoch != _epoch:  # made before a fork: this process's own description and lock
            self._register()
        if not self._thread_lock.acquire(blocking):
            return False
        try:
            fcntl.fcntl(self._fd, F_OFD_SETLKW if blocking else F_OFD_SETLK, self._lock_arg)
        except (BlockingIOError, PermissionError):  # EAGAIN / EACCES: held by another description
            self._thread_lock.release()
            return False
        except BaseException:
            self._thread_lock.release()
            raise
        return True

    def release(self) -> None:
        fcntl.fcntl(self._fd, F_OFD_SETLK, self._unlock_arg)
        self._thread_lock.release()

    def __enter__(self) -> "PartitionLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def close(self) -> None:
        """Forget this object (the process's descriptor of the locks file stays, for its other partitions)."""
        if self._closed:
            return
        self._closed = True
        with _registry_lock:
            entry = _threads.get(self._key)
            if entry is not None and entry[0] is self._thread_lock:
                entry[1] -= 1
                if entry[1] <= 0:
                    del _threads[self._key]
