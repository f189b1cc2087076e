"""Log dir failures: which of a broker's data directories are offline, shared by all its processes.

Kafka's rule (LogDirFailureChannel, ReplicaManager.handleLogDirFailure): an I/O error
on any file of a log dir takes the WHOLE directory offline. From then on every
partition in it answers KAFKA_STORAGE_ERROR to produce and fetch, without trying the
disk again; Metadata reports them offline; the broker goes on serving the partitions
of its other dirs, and stops only when no log dir is left.

Which errors: a failing disk or file system (EIO, EROFS after an ext4 error remount,
EUCLEAN for a corrupt file system, ENXIO/ENODEV for a vanished device). Not ENOSPC or
EDQUOT: space may come back, so a full disk stays a per-write KAFKA_STORAGE_ERROR
(partition.py); not ENOENT and the like, which races with retention and deletion
explain.

Sharing (the design constraint): processors, the main process, the replica fetcher and
the cleaner all touch the same partitions, and each must stop touching a failed dir's
files, above all its mmaps (a page of a failed disk that is not in the page cache
raises SIGBUS when touched). The owner's `LogManager` makes one `LogDirHealth` before
the supervisor forks: a shared anonymous page (MAP_SHARED | MAP_ANONYMOUS), so every
child, a restarted one included, sees the same bytes, and the check on the hot path is
a read of one int32 (`any_offline`), no system call. Layout, int32 words:

    [0]              offline dirs so far (0: every dir is online; the hot-path check)
    [4 + 4*i + 0]    dir i: 0 online, 1 offline
    [4 + 4*i + 1]    dir i: the errno that took it offline
    [4 + 4*i + 2]    dir i: pid of the process that saw it (0: the supervisor's probe)

A dir is marked by whoever meets the error first (`report`); marking twice is
harmless (the count is recomputed from the flags). The supervisor notices the
change on its next loop turn (at most a second later), logs it once with the number
of partitions that went offline, drops the main process's open partitions there and,
when every dir is offline, stops the broker. A processor that dies of SIGBUS is
replaced only after the supervisor probed each online dir (create, write, fsync a
small file) and marked the failed ones offline, so its replacement never touches them.
The flags live as long as the broker: a restart tries every dir again (one that still
fails is marked offline at load).
"""

from __future__ import annotations

import errno
import mmap
import os
from pathlib import Path

DIR_FAILURES = frozenset({errno.EIO, errno.EROFS, errno.EUCLEAN, errno.ENXIO, errno.ENODEV})
DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})  # a reason to wait for space, not a failed dir
MAX_DIRS = (4096 - 16) // 16
PROBE = ".mmlog-probe"

_shared: dict[tuple[str, ...], "LogDirHealth"] = {}  # made in this process or inherited through fork


def is_disk_full(exc: BaseException) -> bool:
    """Whether an error means the file system (or the quota) is full: space may come back."""
    return isinstance(exc, OSError) and exc.errno in DISK_FULL


def is_dir_failure(exc: BaseException) -> bool:
    """Whether an error means the disk under a log dir failed (not a full disk, not a missing file)."""
    return isinstance(exc, OSError) and exc.errno in DIR_FAILURES


class LogDirHealth:
    """Online/offline flags of a broker's log dirs, in a page shared across fork."""

    def __init__(self, log_dirs: list[Path]) -> None:
        if len(log_dirs) > MAX_DIRS:
            raise ValueError(f"at most {MAX_DIRS} log dirs")
        self.log_dirs = [Path(d) for d in log_dirs]
        self._resolved = [os.path.abspath(d) for d in self.log_dirs]
        self._page = mmap.mmap(-1, 4096)  # shared anonymous: children see our writes and we theirs
        self.words = memoryview(self._page).cast("i")
        self.any_offline = self.words[:1]  # hot path: `if health.any_offline[0]`

    @classmethod
    def create(cls, log_dirs: list[Path]) -> "LogDirHealth":
        """A fresh one for an owner (the broker's main process, before it forks): registered, so the
        attached managers of its children find it."""
        health = cls(log_dirs)
        _shared[tuple(health._resolved)] = health
        return health

    @classmethod
    def shared(cls, log_dirs: list[Path]) -> "LogDirHealth":
        """The one the owner made (inherited through fork), or a private one for a lone process."""
        key = tuple(os.path.abspath(d) for d in log_dirs)
        if key not in _shared:
            _shared[key] = cls(log_dirs)
        return _shared[key]

    # ------------------------------------------------------------ reading

    def offline(self, slot: int | None) -> bool:
        return bool(self.any_offline[0]) and slot is not None and slot >= 0 and self.words[4 + 4 * slot] == 1

    def offline_slots(self) -> list[int]:
        if not self.any_offline[0]:
            return []
        return [i for i in range(len(self.log_dirs)) if self.words[4 + 4 * i] == 1]

    def online_slots(self) -> list[int]:
        return [i for i in range(len(self.log_dirs)) if not self.offline(i)]

    def cause(self, slot: int) -> tuple[int, int]:
        """(errno, pid) of what took dir `slot` offline (pid 0: the supervisor's probe)."""
        return self.words[4 + 4 * slot + 1], self.words[4 + 4 * slot + 2]

    def slot_of(self, path: Path | str) -> int | None:
        """The log dir a path is in (a partition directory or one of its files), or None."""
        path = os.path.abspath(path)
        for i, d in enumerate(self._resolved):
            if path == d or path.startswith(d + os.sep):
                return i
        return None

    # ------------------------------------------------------------ marking

    def mark_offline(self, slot: int, err: int, pid: int | None = None) -> bool:
        """Take dir `slot` offline; True if this call did (it was online)."""
        base = 4 + 4 * slot
        if self.words[base] == 1:
            return False
        self.words[base + 1] = err
        self.words[base + 2] = os.getpid() if pid is None else pid
        self.words[base] = 1
        self.words[0] = sum(1 for i in range(len(self.log_dirs)) if self.words[4 + 4 * i] == 1)
        return True

    def report(self, path: Path | str, exc: BaseException) -> bool:
        """An I/O error on `path`: take its log dir offline if the error is a disk failure.
        True if the dir is (now) offline."""
        if not is_dir_failure(exc):
            return False
        slot = self.slot_of(path)
        if slot is None:
            return False
        self.mark_offline(slot, exc.errno)
        return True

    def probe(self) -> list[int]:
        """Write, fsync and remove a small file in each online dir; take those that fail offline (a
        process died of SIGBUS: a disk may be failing under an mmap). Returns the slots it marked."""
        marked = []
        for slot in self.online_slots():
            path = self.log_dirs[slot] / PROBE
            try:
                fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
                try:
                    os.write(fd, b"probe")
                    os.fsync(fd)
                finally:
                    os.close(fd)
                os.unlink(path)
            except OSError as exc:
                if is_dir_failure(exc) and self.mark_offline(slot, exc.errno, pid=0):
                    marked.append(slot)
        return marked


def report(path: Path | str, exc: BaseException) -> bool:
    """Report an I/O error on a file of some broker's log dir to the health page covering it (the
    channel partition code and the processors' sendfile use: they know the path, not the manager)."""
    if not is_dir_failure(exc):
        return False
    return any(health.report(path, exc) for health in _shared.values() if health.slot_of(path) is not None)


def report_fd(fd: int, exc: BaseException) -> bool:
    """`report` for an open file known only by its descriptor (a fetch's sendfile)."""
    if not is_dir_failure(exc):
        return False
    try:
        path = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return False
    return report(path, exc)
