"""The per-partition writer lock: an flock the kernel drops if its holder dies.

Writers in any number of processes serialise on `flock(LOCK_EX)` over the
partition's `.lock` file; a process killed while holding it (even by SIGKILL)
releases it when the kernel closes its descriptors, so a dead writer can never
wedge a partition. What the dead writer left half done is found through the
state's PENDING_OP and repaired by the next holder (`log_recovery.py`).

flock locks belong to an open file description, so two threads of one process
sharing this object would both "hold" it; a threading lock taken first makes the
object safe across threads too. Readers never take it.
"""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

LOCK_FILE = ".lock"


class PartitionLock:
    """An exclusive, crash-released lock on one partition directory."""

    def __init__(self, directory: Path) -> None:
        self._fd = os.open(Path(directory) / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        self._thread_lock = threading.Lock()

    def acquire(self, blocking: bool = True) -> bool:
        if not self._thread_lock.acquire(blocking):
            return False
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            self._thread_lock.release()
            return False
        except BaseException:
            self._thread_lock.release()
            raise
        return True

    def release(self) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        self._thread_lock.release()

    def __enter__(self) -> "PartitionLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
