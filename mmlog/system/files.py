"""Small files replaced durably: a crash, a power loss included, leaves the old content or the new."""

from __future__ import annotations

import os
from pathlib import Path


def fsync_dir(directory: Path) -> None:
    """fsync a directory so that a create, rename or unlink in it is durable."""
    _fsync_opened(os.open(directory, os.O_RDONLY | os.O_DIRECTORY))


def fsync_file(path: Path) -> None:
    """fsync the file at `path`, opened by path, if it is there (one already gone is skipped). On Linux this
    also writes the pages dirtied through a shared mapping of it."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    _fsync_opened(fd)


def _fsync_opened(fd: int) -> None:
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, mode: int = 0o666, tmp: Path | None = None, sync: bool = True) -> None:
    """Write a small file so that any crash, a power loss included, leaves either the old or the new
    content, and the new content once this returns.

    Order matters on a power loss: the data is fsynced before the rename, or the rename can reach the
    disk first and the name come back on an empty or zero-filled file; the directory is fsynced after,
    or the rename itself can be lost. Every checkpoint of the log is written here, so none needs a
    reader that tolerates a half-written file (they tolerate one anyway: files from older versions).
    `mode`: the new file's permissions (before the umask); `tmp`: the name written first (default
    `<name>.tmp`; files several processes replace take one per process). `sync=False` leaves both
    fsyncs to a syncfs of the whole file system that the caller makes before relying on the file
    (mmlog/system/syncfs.py).
    """
    path = Path(path)
    tmp = tmp or path.with_name(path.name + ".tmp")
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "wb") as f:
        f.write(data)
        f.flush()
        if sync:
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if sync:
        fsync_dir(path.parent)


def file_stamp(path: Path) -> tuple[int, int, int] | None:
    """What an `atomic_write` changes: (inode, mtime, size) of the file now there; None if there is none.

    Readers compare stamps to re-read a small shared file only when it was replaced. Two writes
    can only look alike if the second reuses the freed inode within one clock tick at the same size.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size
