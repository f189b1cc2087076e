"""Flushes a segment that rolled, off the append path, so that only the active segment is ever at risk.

Kafka fsyncs the old segment (log, offset index, time index, transaction index), the producer
snapshot taken at the roll and the partition directory when it rolls, on its scheduler rather
than in the produce request that rolled. mmlog does the same: `Partition._roll` hands the sealed
segment and its snapshot to `submit`, and one thread of the appending process fsyncs their files
and the directory. Each fsync there commits the file system's journal, which on a busy disk takes
tens of milliseconds: in the roll, every connection of the processor that rolled waited for three.

Why a thread of the appending process, not the request or the control thread: the fsync of a
sealed segment writes whatever of its `segment.bytes` the kernel has not written back yet
(seconds for a 1 GiB segment on a busy disk), so doing it in the request that rolled would put
that on one produce's latency, which Kafka does not; the control thread's flush timer would
have to look at every partition's state each tick to learn of a roll made by a processor,
work for idle partitions too. The thread costs nothing until a roll and takes no lock: a sealed
segment's files no longer change (the cleaner replaces them under new inodes, retention unlinks
them, and an fsync of a descriptor opened before either is harmless).

Crash points: the recovery point is not moved here (it moves at the next flush, under the lock,
which fsyncs the directory first when a segment was created since the last one: the new segment's
name is durable before any of its records is claimed to be), so a sealed segment always lies at or
after it until then, and any recovery rescans it: after a process crash that came before the thread
ran, that recovery fsyncs it (recovery.py); after a power loss, a rescan of a segment this thread did
sync is only slower, and the new segment, if its name was lost, held nothing flushed. A snapshot this
thread had not synced may come back torn or empty: its loader then takes an older one or the log
(producer_state.load), as Kafka's does.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from pathlib import Path

from mmlog.log.files import SEGMENT_SUFFIXES, segment_file
from mmlog.log.producer_state import snapshot_path
from mmlog.system.files import fsync_dir, fsync_file

log = logging.getLogger(__name__)

_lock = threading.Lock()
_queue: queue.Queue | None = None  # (directory, base, snapshot); started at the first roll of this process


def submit(directory: Path, base: int, snapshot: int | None = None) -> None:
    """Have the sealed segment at `base`, the producer snapshot at offset `snapshot` (if given) and their
    directory fsynced soon, by this process's flusher thread."""
    global _queue
    with _lock:
        if _queue is None:
            _queue = queue.Queue()
            threading.Thread(target=_run, args=(_queue,), name="rolled-segment-flush", daemon=True).start()
        _queue.put((Path(directory), base, snapshot))


def wait_idle() -> None:
    """Block until every segment submitted so far is synced (for tests: nothing in the broker waits on it)."""
    q = _queue
    if q is not None:
        q.join()


def flush_segment(directory: Path, base: int, snapshot: int | None = None) -> None:
    """fsync a sealed segment's files that exist (and the producer snapshot at `snapshot`), then the
    directory that names them."""
    sync_files(directory, base)
    if snapshot is not None:
        fsync_file(snapshot_path(directory, snapshot))
    fsync_dir(directory)


def sync_files(directory: Path, base: int) -> None:
    """fsync the segment's files that exist, opened by path (on Linux an fsync also writes the pages
    dirtied through a shared mapping of the file: the indexes). A file already gone is skipped."""
    for suffix in SEGMENT_SUFFIXES:
        fsync_file(segment_file(directory, base, suffix))


def _run(q: queue.Queue) -> None:
    while True:
        directory, base, snapshot = q.get()
        try:
            flush_segment(directory, base, snapshot)
        except FileNotFoundError:
            pass  # the partition was deleted meanwhile
        except OSError:
            # A failing disk: the next flush (timer, clean close) or write meets it and takes the log dir
            # offline through the partition; here it only costs this segment's early sync.
            log.warning("flushing rolled segment %s/%020d failed", directory.name, base, exc_info=True)
        finally:
            q.task_done()


def _forget_in_child() -> None:
    """A forked child has no flusher thread: it starts its own at its first roll."""
    global _queue, _lock
    _queue, _lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_in_child)
