"""A small file system that a test can fill: a tmpfs mounted for it (root only), and a filler file."""

from __future__ import annotations

import contextlib
import os
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
