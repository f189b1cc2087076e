"""Offset index: lookups against a sorted-dict oracle, sanity checks, trimming and sharing."""

from __future__ import annotations

import bisect
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mmlog.log.offset_index import CorruptIndex, OffsetIndex

BASE = 5_000


def _index(tmp_path, pairs, capacity=64):
    idx = OffsetIndex(tmp_path / "x.index", BASE, preallocate=capacity * 8)
    for slot, (rel, pos) in enumerate(pairs):
        idx.write(slot, rel, pos)
    return idx


def test_entries_are_8_bytes_of_native_int32_pairs(tmp_path):
    idx = _index(tmp_path, [(3, 4096), (9, 8200)], capacity=4)
    assert idx.entry_size == 8 and idx.capacity == 4 and os.path.getsize(idx.path) == 32
    idx.flush()
    raw = idx.path.read_bytes()
    assert raw[:16] == (3).to_bytes(4, "little") + (4096).to_bytes(4, "little") + (9).to_bytes(4, "little") + (
        8200
    ).to_bytes(4, "little")
    idx.close()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 50), st.integers(1, 500)), max_size=40), st.data())
def test_lookup_agrees_with_a_sorted_dict(tmp_path_factory, steps, data):
    tmp_path = tmp_path_factory.mktemp("idx")
    rel = pos = 0
    pairs = []
    for d_rel, d_pos in steps:
        rel += d_rel
        pos += d_pos
        pairs.append((rel, pos))
    idx = _index(tmp_path, pairs, capacity=len(pairs) + 3)
    idx.write(len(pairs), 1, 1)  # garbage past the valid count is ignored
    oracle = dict(pairs)
    keys = sorted(oracle)
    for _ in range(20):
        offset = BASE + data.draw(st.integers(-5, rel + 5))
        i = bisect.bisect_right(keys, offset - BASE) - 1
        expected = (BASE + keys[i], oracle[keys[i]]) if i >= 0 else (BASE, 0)
        assert idx.lookup(offset, len(pairs)) == expected
    idx.close()


def test_lookup_before_the_first_entry_starts_at_the_segment_start(tmp_path):
    idx = _index(tmp_path, [(10, 1000)])
    assert idx.lookup(BASE + 9, 1) == (BASE, 0)
    assert idx.lookup(BASE + 10, 1) == (BASE + 10, 1000)
    assert idx.lookup(BASE + 10, 0) == (BASE, 0)
    idx.close()


def test_check_accepts_increasing_entries_inside_the_log(tmp_path):
    idx = _index(tmp_path, [(2, 100), (5, 300), (9, 700)])
    idx.check(3, 800)
    idx.check(0, 0)
    idx.close()


@pytest.mark.parametrize(
    ("pairs", "log_size"),
    [
        ([(2, 100), (2, 300)], 800),  # offsets repeat
        ([(2, 300), (5, 300)], 800),  # positions repeat
        ([(5, 100), (2, 300)], 800),  # offsets go back
        ([(0, 100), (5, 300)], 800),  # the first batch is never indexed
        ([(2, 0), (5, 300)], 800),  # ... nor position 0
        ([(2, 100), (5, 800)], 800),  # past the end of the log
        ([(0, 0), (0, 0)], 800),  # a zeroed file
    ],
)
def test_check_rejects_a_corrupt_index(tmp_path, pairs, log_size):
    idx = _index(tmp_path, pairs)
    with pytest.raises(CorruptIndex):
        idx.check(len(pairs), log_size)
    idx.close()


def test_trim_cuts_the_file_to_its_entries_and_preallocate_grows_it_back(tmp_path):
    idx = _index(tmp_path, [(2, 100), (5, 300)], capacity=128)
    idx.trim(2)
    assert os.path.getsize(idx.path) == 16 and idx.capacity == 2
    reopened = OffsetIndex(idx.path, BASE, create=False)  # an inactive index: its size is its count
    assert reopened.capacity == 2 and reopened.lookup(BASE + 6, reopened.capacity) == (BASE + 5, 300)
    idx.preallocate(1020)  # rounded down to whole entries
    assert idx.capacity == 127 and idx.entry(1) == (5, 300)
    reopened.close()
    idx.close()


def test_write_many_copies_flat_pairs(tmp_path):
    import numpy as np

    idx = _index(tmp_path, [(1, 10)])
    idx.write_many(1, np.array([2, 20, 3, 30], dtype=np.int32))
    assert [idx.entry(i) for i in range(3)] == [(1, 10), (2, 20), (3, 30)]
    idx.close()


def test_an_entry_written_by_one_mapping_is_seen_by_another(tmp_path):
    a = _index(tmp_path, [])
    b = OffsetIndex(a.path, BASE, create=False)
    a.write(0, 7, 700)
    assert b.lookup(BASE + 8, 1) == (BASE + 7, 700)
    a.close()
    b.close()


def test_opening_a_missing_index_without_create_fails(tmp_path):
    with pytest.raises(FileNotFoundError):
        OffsetIndex(tmp_path / "missing.index", 0, create=False)
