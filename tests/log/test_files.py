"""File mechanics: segment naming, directory listing, atomic writes and the shared MappedFile."""

from __future__ import annotations

import os

import numpy as np

from mmlog.log.files import MappedFile, delete_segment_files, segment_bases, segment_file
from mmlog.system.files import atomic_write


def test_segment_files_are_named_by_their_20_digit_base_offset(tmp_path):
    assert segment_file(tmp_path, 1234, ".log").name == "00000000000000001234.log"
    assert segment_file(tmp_path, 2**63 - 1, ".index").name == "09223372036854775807.index"


def test_segment_bases_lists_only_log_files_ascending(tmp_path):
    for name in ["00000000000000000200.log", "00000000000000000000.log", "00000000000000000100.log",
                 "00000000000000000300.index", "00000000000000000400.log.deleted", "1.log",
                 "0000000000000000000x.log", "partition.state", "00000000000000000500.log.tmp"]:
        (tmp_path / name).touch()
    assert segment_bases(tmp_path) == [0, 100, 200]


def test_delete_segment_files_removes_all_three_and_tolerates_missing_ones(tmp_path):
    for suffix in (".log", ".index"):
        segment_file(tmp_path, 5, suffix).touch()
    delete_segment_files(tmp_path, 5)
    assert os.listdir(tmp_path) == []


def test_atomic_write_replaces_the_whole_content_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "x.json"
    atomic_write(path, b"first version, quite long")
    atomic_write(path, b"second")
    assert path.read_bytes() == b"second"
    assert os.listdir(tmp_path) == ["x.json"]


def test_mapped_file_preallocates_sparsely(tmp_path):
    m = MappedFile(tmp_path / "f", np.int64, 1 << 20)
    st = os.stat(m.path)
    assert st.st_size == 1 << 20 and st.st_blocks * 512 < 1 << 20
    assert m.view.shape == (1 << 17,) and not m.view.any()
    m.close()


def test_two_mappings_of_one_file_see_each_others_stores_at_once(tmp_path):
    a = MappedFile(tmp_path / "f", np.int64, 4096)
    b = MappedFile(tmp_path / "f", np.int64)
    a.view[7] = 42
    assert b.view[7] == 42
    a.close()
    b.close()


def test_mapping_without_a_size_never_grows_the_file(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"\x01" * 20)  # 2.5 int64s: the partial one is not mapped
    m = MappedFile(path, np.int64)
    assert m.view.shape == (2,) and os.path.getsize(path) == 20
    m.close()


def test_an_empty_file_maps_to_an_empty_view(tmp_path):
    m = MappedFile(tmp_path / "f", np.int32)
    assert m.view.shape == (0,) and m.nbytes == 0
    m.flush()
    m.close()


def test_resize_trims_and_regrows_keeping_the_prefix(tmp_path):
    m = MappedFile(tmp_path / "f", np.int32, 4096)
    m.view[:4] = [1, 2, 3, 4]
    m.resize(8)
    assert m.view.tolist() == [1, 2] and os.path.getsize(m.path) == 8
    m.resize(64)
    assert m.view[:4].tolist() == [1, 2, 0, 0] and m.nbytes == 64
    m.close()


def test_resize_while_someone_holds_the_old_view(tmp_path):
    m = MappedFile(tmp_path / "f", np.int32, 64)
    held = m.view
    held[0] = 9
    m.resize(128)
    assert m.view[0] == 9 and m.nbytes == 128
    del held
    m.close()


def test_close_is_idempotent(tmp_path):
    m = MappedFile(tmp_path / "f", np.int32, 64)
    m.close()
    m.close()


def _pages_in_page_cache(view: np.ndarray) -> int:
    """How many of the pages under a file mapping are in the page cache (mincore(2))."""
    import ctypes
    import mmap

    libc = ctypes.CDLL(None, use_errno=True)
    pages = -(-view.nbytes // mmap.PAGESIZE)
    vec = (ctypes.c_ubyte * pages)()
    addr = ctypes.c_void_p(view.__array_interface__["data"][0])
    if libc.mincore(addr, ctypes.c_size_t(view.nbytes), vec) != 0:
        raise OSError(ctypes.get_errno(), "mincore")
    return sum(b & 1 for b in vec)


def test_a_fault_reads_one_page_not_the_devices_readahead_window(tmp_path):
    # With thousands of partitions reopened in turn, read-around on every index fault filled the page
    # cache with the zeroed holes of sparse indexes (8 MiB a fault where read_ahead_kb is 8192).
    m = MappedFile(tmp_path / "f", np.int64, 10 << 20)
    assert _pages_in_page_cache(m.view) == 0
    assert m.view[1000] == 0
    assert _pages_in_page_cache(m.view) <= 16
    m.close()


def test_atomic_write_syncs_the_data_before_the_rename_and_the_directory_after(tmp_path, monkeypatch):
    """Renamed first, a power loss can bring the name back on an empty or zero-filled file."""
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append("fsync dir" if os.path.isdir(f"/proc/self/fd/{fd}") else "fsync file")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", lambda *a: (events.append("rename"), real_replace(*a))[1])
    atomic_write(tmp_path / "checkpoint", b"data")
    assert events == ["fsync file", "rename", "fsync dir"]
