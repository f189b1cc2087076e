"""File systems a test can break (root only): a small tmpfs it can fill (with a filler file), and a
loop-mounted ext4 it can make fail (FS_IOC_SHUTDOWN: every later operation returns EIO, as on a dying disk)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct
import subprocess
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
