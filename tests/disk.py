"""File systems a test can break (root only): a small tmpfs it can fill (with a filler file), and a
loop-mounted ext4 it can make fail (FS_IOC_SHUTDOWN: every later operation returns EIO, as on a dying disk)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import struct
import subprocess
import traceback
import uuid
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_fs(where: Path, size: str = "2m"):
    """A tmpfs of `size` mounted at where/fs for the block; the test is skipped (with why) where it cannot be."""
    mount = Path(where) / "fs"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], capture_output=True)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


FS_IOC_SHUTDOWN = 0x8004587D  # _IOR('X', 125, __u32)
FS_GOING_DOWN_NOLOGFLUSH = 2  # shut down now, without flushing the journal: a disk gone at once


@contextlib.contextmanager
def failing_fs(where: Path, size: str = "64M"):
    """An ext4 image loop-mounted at where/ext4 for the block; `shut_down(mount)` makes it fail. Skipped
    (with why) where it cannot be made: not root, no loop device, no mkfs.ext4."""
    mount = Path(where) / "ext4"
    mount.mkdir()
    image = Path(where) / "ext4.img"
    if os.geteuid() != 0:
        pytest.skip("loop-mounting an ext4 image needs root")
    subprocess.run(["truncate", "-s", size, str(image)], check=True)
    made = subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], capture_output=True)
    if made.returncode:
        pytest.skip(f"cannot make an ext4 image here: {made.stderr.decode().strip()}")
    done = subprocess.run(["mount", "-o", "loop", str(image), str(mount)], capture_output=True)
    if done.returncode:
        pytest.skip(f"cannot loop-mount an ext4 image here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
        image.unlink(missing_ok=True)


def shut_down(mount: Path) -> None:
    """Make the file system at mount fail: every later read, write, fsync or open on it returns EIO."""
    fd = os.open(mount, os.O_RDONLY)
    try:
        fcntl.ioctl(fd, FS_IOC_SHUTDOWN, struct.pack("I", FS_GOING_DOWN_NOLOGFLUSH))
    finally:
        os.close(fd)


def fill(directory: Path, keep_free: int = 0) -> Path:
    """Fill the file system with a filler file, leaving about keep_free bytes; returns its path."""
    path = Path(directory) / f"filler-{uuid.uuid4().hex}"
    with open(path, "wb") as f:
        try:
            while True:
                st = os.statvfs(directory)
                free = st.f_bavail * st.f_frsize - keep_free
                if free <= 0:
                    break
                f.write(b"\0" * min(free, 1 << 16))
                f.flush()
        except OSError:
            pass
    return path


def fill_with_pages(directory: Path, page: int = 4096) -> list[Path]:
    """Fill the file system with files of one page each, until it is full; returns them in the order
    made, so that a test can give space back a page at a time (unlink one)."""
    directory = Path(directory)
    directory.mkdir(exist_ok=True)
    made = []
    while True:
        path = directory / f"page-{len(made):06d}"
        try:
            with open(path, "wb") as f:
                f.write(b"\0" * page)
        except OSError:
            path.unlink(missing_ok=True)
            return made
        made.append(path)


def in_child(body) -> None:
    """Run body() in a forked child and fail the test unless it returns: a store into a mapping with no
    block behind it on a full disk is a SIGBUS, which would kill pytest itself; here it fails the test.
    The body's exceptions and assertion failures fail it too (their traceback goes to stderr)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            body()
            code = 0
        except BaseException:  # noqa: BLE001 - reported by the exit code, shown on stderr
            traceback.print_exc()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        pytest.fail(f"the child died of {signal.Signals(os.WTERMSIG(status)).name}")
    assert os.WEXITSTATUS(status) == 0, "the child failed (its traceback is on stderr)"
