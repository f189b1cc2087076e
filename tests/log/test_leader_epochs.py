"""The leader epoch cache answers OffsetsForLeaderEpoch as Kafka's LeaderEpochFileCache does."""

from __future__ import annotations


import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mmlog.log.leader_epochs import FILE_NAME, UNDEFINED, CorruptCheckpoint, LeaderEpochCache, parse


def cache_with(tmp_path, entries) -> LeaderEpochCache:
    cache = LeaderEpochCache(tmp_path)
    for epoch, start in entries:
        cache.assign(epoch, start)
    return cache


def test_the_file_is_kafkas_format(tmp_path):
    cache_with(tmp_path, [(0, 0), (3, 40), (5, 90)])
    assert (tmp_path / FILE_NAME).read_text() == "0\n3\n0 0\n3 40\n5 90\n"


def test_another_process_sees_a_replaced_file(tmp_path):
    reader = LeaderEpochCache(tmp_path)
    assert reader.latest_epoch() == UNDEFINED
    cache_with(tmp_path, [(2, 10)])
    assert reader.entries() == [(2, 10)]


def test_only_newer_epochs_are_assigned(tmp_path):
    cache = cache_with(tmp_path, [(1, 0), (4, 20)])
    assert not cache.assign(4, 30)
    assert not cache.assign(2, 30)
    assert cache.entries() == [(1, 0), (4, 20)]


def test_a_newer_epoch_starting_earlier_replaces_the_entries_past_it(tmp_path):
    cache = cache_with(tmp_path, [(1, 0), (4, 20)])
    cache.assign(6, 10)
    assert cache.entries() == [(1, 0), (6, 10)]


@pytest.mark.parametrize("asked, answer", [
    (5, (5, 120)),        # the latest epoch ends at the log end
    (3, (3, 90)),         # an older one ends where the next begins
    (4, (3, 90)),         # unknown, between two: the largest below, and where the next begins
    (0, (0, 0)),          # below every epoch: where the first begins
    (7, (UNDEFINED, UNDEFINED)),  # above every epoch
    (UNDEFINED, (UNDEFINED, UNDEFINED)),
])
def test_end_offset_for(tmp_path, asked, answer):
    cache = cache_with(tmp_path, [(1, 0), (3, 40), (5, 90)])
    assert cache.end_offset_for(asked, 120) == answer


def test_an_empty_cache_knows_no_epoch(tmp_path):
    assert LeaderEpochCache(tmp_path).end_offset_for(0, 10) == (UNDEFINED, UNDEFINED)


def test_truncate_from_end_drops_epochs_starting_at_or_after_the_new_end(tmp_path):
    cache = cache_with(tmp_path, [(1, 0), (3, 40), (5, 90)])
    cache.truncate_from_end(90)
    assert cache.entries() == [(1, 0), (3, 40)]
    cache.truncate_from_end(41)
    assert cache.entries() == [(1, 0), (3, 40)]


def test_truncate_from_start_keeps_the_spanning_epoch_starting_at_the_new_start(tmp_path):
    cache = cache_with(tmp_path, [(1, 0), (3, 40), (5, 90)])
    cache.truncate_from_start(50)
    assert cache.entries() == [(3, 50), (5, 90)]
    cache.truncate_from_start(90)
    assert cache.entries() == [(5, 90)]


def test_a_corrupt_file_is_refused(tmp_path):
    with pytest.raises(CorruptCheckpoint):
        parse("0\n2\n1 0\n")
    with pytest.raises(CorruptCheckpoint):
        parse("1\n0\n")


def reference_end_offset(entries, asked, log_end):
    """Kafka's rule written out plainly over a list of (epoch, start)."""
    if asked == UNDEFINED or not entries:
        return UNDEFINED, UNDEFINED
    if asked == entries[-1][0]:
        return asked, log_end
    higher = [e for e in entries if e[0] > asked]
    if not higher:
        return UNDEFINED, UNDEFINED
    lower = [e for e in entries if e[0] <= asked]
    return (lower[-1][0] if lower else asked), higher[0][1]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 1000)), max_size=8), st.integers(-1, 32))
def test_end_offset_for_matches_the_rule_written_out(tmp_path_factory, assigns, asked):
    cache = LeaderEpochCache(tmp_path_factory.mktemp("epochs"))
    for epoch, start in sorted(assigns):
        cache.assign(epoch, start)
    entries = cache.entries()
    assert [e for e, _ in entries] == sorted({e for e, _ in entries})
    assert [s for _, s in entries] == sorted(s for _, s in entries)
    log_end = max([s for _, s in entries], default=0) + 5
    assert cache.end_offset_for(asked, log_end) == reference_end_offset(entries, asked, log_end)
