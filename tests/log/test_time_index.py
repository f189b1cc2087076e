"""Time index: lookups, the last entry, sanity checks."""

from __future__ import annotations

import bisect

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mmlog.log.offset_index import CorruptIndex
from mmlog.log.time_index import TimeIndex

BASE = 1_000


def _index(tmp_path, pairs, capacity=64):
    idx = TimeIndex(tmp_path / "x.timeindex", BASE, preallocate=capacity * 16)
    for slot, (ts, rel) in enumerate(pairs):
        idx.write(slot, ts, rel)
    return idx


def test_entries_are_16_bytes_of_native_int64_pairs(tmp_path):
    idx = _index(tmp_path, [(1_700_000_000_000, 3)], capacity=2)
    assert idx.entry_size == 16 and idx.capacity == 2
    idx.flush()
    assert idx.path.read_bytes()[:16] == (1_700_000_000_000).to_bytes(8, "little") + (3).to_bytes(8, "little")
    idx.close()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 1000), st.integers(0, 20)), max_size=30), st.data())
def test_lookup_returns_the_offset_after_which_the_target_can_first_appear(tmp_path_factory, steps, data):
    tmp_path = tmp_path_factory.mktemp("tix")
    ts, rel, pairs = 10_000, 0, []
    for d_ts, d_rel in steps:
        ts += d_ts
        rel += d_rel
        pairs.append((ts, rel))
    idx = _index(tmp_path, pairs, capacity=len(pairs) + 1)
    stamps = [t for t, _ in pairs]
    for _ in range(20):
        target = data.draw(st.integers(9_990, ts + 10))
        i = bisect.bisect_left(stamps, target) - 1  # the last entry strictly below the target
        assert idx.lookup(target, len(pairs)) == (BASE + pairs[i][1] if i >= 0 else BASE)
    idx.close()


def test_last_is_the_largest_timestamp_and_its_absolute_offset(tmp_path):
    idx = _index(tmp_path, [(100, 0), (250, 7)])
    assert idx.last(2) == (250, BASE + 7)
    assert idx.last(1) == (100, BASE)
    assert idx.last(0) == (-1, -1)
    idx.close()


def test_check_accepts_growing_timestamps_with_offsets_that_may_stay(tmp_path):
    idx = _index(tmp_path, [(100, 4), (200, 4), (300, 9)])
    idx.check(3)
    idx.close()


@pytest.mark.parametrize("pairs", [[(100, 4), (100, 9)], [(200, 4), (100, 9)], [(100, 9), (200, 4)]])
def test_check_rejects_timestamps_that_do_not_grow_or_offsets_that_go_back(tmp_path, pairs):
    idx = _index(tmp_path, pairs)
    with pytest.raises(CorruptIndex):
        idx.check(2)
    idx.close()
