"""The power-loss file system keeps exactly what was fsynced: file data by fsync of the file (mmap stores by
msync), names by fsync of their directory; the kernel's cache never serves what a loss forgot."""

from __future__ import annotations

import mmap
import os

import pytest

from mmlog.testing.lazyfs import LazyFS, available

pytestmark = pytest.mark.skipif(available() is not None, reason=str(available()))


@pytest.fixture
def fs(tmp_path):
    lazy = LazyFS(tmp_path / "mnt")
    yield lazy
    lazy.stop()


def write(path, data, sync=True, flags=os.O_CREAT | os.O_WRONLY | os.O_TRUNC):
    fd = os.open(path, flags, 0o644)
    try:
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def sync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(fd)
    os.close(fd)


def test_unsynced_data_and_names_are_lost_synced_ones_kept(fs):
    root = fs.mountpoint
    write(root / "kept", b"synced")
    os.mkdir(root / "dir")
    sync_dir(root)
    write(root / "kept", b" and not", sync=False, flags=os.O_WRONLY | os.O_APPEND)
    write(root / "dir" / "unnamed", b"data synced, name not")
    write(root / "unsynced", b"never synced", sync=False)
    fs.lose_power()
    assert sorted(os.listdir(root)) == ["dir", "kept"]
    assert (root / "kept").read_bytes() == b"synced"
    assert os.listdir(root / "dir") == []


def test_a_rename_is_durable_only_once_its_directory_is_synced(fs):
    root = fs.mountpoint
    write(root / "a", b"old")
    sync_dir(root)
    write(root / "a.tmp", b"new")
    os.replace(root / "a.tmp", root / "a")
    fs.lose_power()
    assert (root / "a").read_bytes() == b"old"
    assert not (root / "a.tmp").exists()  # neither name of the rename was synced: the old one stays
    write(root / "b.tmp", b"new")
    os.replace(root / "b.tmp", root / "b")
    sync_dir(root)
    fs.lose_power()
    assert (root / "b").read_bytes() == b"new" and not (root / "b.tmp").exists()


@pytest.mark.parametrize("data", ["empty", "zeros"])
def test_names_kept_without_data_come_back_empty_or_zero_filled(fs, data):
    """A rename whose name reached the disk before the file's data (what LazyFS and ext4 give)."""
    root = fs.mountpoint
    write(root / "checkpoint.tmp", b"0\n1\n0 0\n", sync=False)
    os.replace(root / "checkpoint.tmp", root / "checkpoint")
    fs.lose_power(names="all", data=data)
    assert (root / "checkpoint").read_bytes() == (b"" if data == "empty" else bytes(8))


def test_stores_into_a_shared_mapping_are_kept_only_once_msynced(fs):
    root = fs.mountpoint
    fd = os.open(root / "index", os.O_CREAT | os.O_RDWR, 0o644)
    os.ftruncate(fd, 2 * mmap.PAGESIZE)
    os.posix_fallocate(fd, 0, 2 * mmap.PAGESIZE)
    sync_dir(root)
    view = mmap.mmap(fd, 2 * mmap.PAGESIZE)
    view[0:4] = b"kept"
    view.flush()
    view[4:8] = b"lost"
    view[mmap.PAGESIZE:mmap.PAGESIZE + 4] = b"lost"
    assert (root / "index").read_bytes()[:8] == b"keptlost"  # one page cache for the mapping and read()
    view.close()
    os.close(fd)
    fs.lose_power()
    data = (root / "index").read_bytes()
    assert data[:8] == b"kept" + bytes(4) and data[mmap.PAGESIZE:mmap.PAGESIZE + 4] == bytes(4)
    assert fs.stats()["losses"] == 1


def test_a_file_replaced_or_unlinked_while_open_still_answers_its_descriptor_and_is_listed_nowhere(fs):
    root = fs.mountpoint
    write(root / "segment", b"old inode")
    fd = os.open(root / "segment", os.O_RDWR)
    write(root / "segment.tmp", b"new")
    os.replace(root / "segment.tmp", root / "segment")  # over a file still open, as the cleaner's swap does
    other = os.open(root / "segment", os.O_RDONLY)
    os.unlink(root / "segment")
    assert os.listdir(root) == []
    assert os.fstat(fd).st_size == 9 and os.pread(fd, 3, 0) == b"old" and os.fstat(other).st_size == 3
    os.close(fd)
    os.close(other)


def test_opening_an_existing_file_with_o_trunc_empties_it(fs):
    """libfuse 3 hands O_TRUNC to open: a file rewritten shorter must not keep its old tail (a stale
    `.tmp` of atomic_write, longer than the new content, came back as a catalogue with zeros after it)."""
    path = fs.mountpoint / "f"
    write(path, b"a longer first content")
    write(path, b"short")
    sync_dir(fs.mountpoint)
    assert path.read_bytes() == b"short"
    fs.lose_power(data="zeros")
    assert path.read_bytes() == b"short"
