"""A segment on its own: writing batches, finding them through the index, scanning, sealing, deleting."""

from __future__ import annotations

import os
import random
import threading

import pytest

from mmlog.log import kernels
from mmlog.log.segment import SCAN_CHUNK, CorruptSegment, FileSlice, Segment
from mmlog.protocol import records as rec
from tests.log.logtools import random_records

BASE = 100


def _fill(segment: Segment, rng: random.Random, batches: int, value_size=(0, 300), interval=256):
    """Append batches the way a partition does (offsets, index entries); return [(position, header)]."""
    pos, offset, since, slot, out = 0, BASE, 0, 0, []
    for _ in range(batches):
        recs = random_records(rng, rng.randrange(1, 4))
        for r in recs:
            r.value = rng.randbytes(rng.randrange(*value_size))
        b = rec.build_batch(recs)
        rec.set_base_offset(b, offset)
        h = rec.read_header(b)
        if since >= interval and pos > 0:
            segment.offset_index.write(slot, offset - BASE, pos)
            slot += 1
            since = 0
        segment.write_at(pos, b)
        out.append((pos, h))
        since += h.size
        pos += h.size
        offset = h.next_offset
    return out, slot


@pytest.fixture
def segment(tmp_path):
    s = Segment(tmp_path, BASE, create=True, index_bytes=4096)
    yield s
    s.close()


def test_a_new_segment_has_three_files_named_by_base_offset(segment, tmp_path):
    assert sorted(os.listdir(tmp_path)) == [
        "00000000000000000100.index", "00000000000000000100.log", "00000000000000000100.timeindex",
    ]
    assert segment.file_size() == 0 and segment.offset_index.capacity == 512 and segment.time_index.capacity == 256


def test_find_batch_finds_every_offset_through_the_index(segment):
    batches, entries = _fill(segment, random.Random(1), 60)
    end = segment.file_size()
    for pos, h in batches:
        for offset in range(h.base_offset, h.last_offset + 1):
            assert segment.find_batch(offset, entries, end) == (pos, h.size)
    assert segment.find_batch(batches[-1][1].next_offset, entries, end) is None


def test_find_batch_never_looks_past_the_committed_end(segment):
    batches, entries = _fill(segment, random.Random(2), 10)
    committed = batches[5][0]
    assert segment.find_batch(batches[5][1].base_offset, 0, committed) is None


def test_find_batch_spans_chunks_for_batches_larger_than_a_read(segment):
    batches, entries = _fill(segment, random.Random(3), 12, value_size=(SCAN_CHUNK // 3, SCAN_CHUNK), interval=10**9)
    assert entries == 0
    end = segment.file_size()
    for pos, h in batches:
        assert segment.find_batch(h.last_offset, 0, end) == (pos, h.size)


def test_find_batch_raises_on_a_committed_region_that_is_not_a_batch(segment):
    segment.write_at(0, b"\x00" * 200)
    with pytest.raises(CorruptSegment):
        segment.find_batch(BASE, 0, 200)


def test_find_time_against_decoded_records(segment):
    rng = random.Random(4)
    pos, offset, all_records = 0, BASE, []
    for _ in range(40):
        recs = random_records(rng, rng.randrange(1, 4), ts_spread=1000)
        b = rec.build_batch(recs)
        rec.set_base_offset(b, offset)
        segment.write_at(pos, b)
        all_records += rec.decode_records(b)
        pos += len(b)
        offset = rec.read_header(b).next_offset
    for target in sorted({r.timestamp + d for r in all_records for d in (-1, 0, 1)}):
        expected = next(((r.offset, r.timestamp) for r in all_records if r.timestamp >= target), None)
        assert segment.find_time(target, 0, 0, pos) == expected


def test_find_time_raises_when_the_committed_end_cuts_a_batch(segment):
    batch = rec.build_batch([rec.Record(b"x" * 100, timestamp=500)])
    segment.write_at(0, batch)
    outcome = []

    def look():
        try:
            outcome.append(segment.find_time(100, 0, 0, len(batch) - 10))
        except CorruptSegment as exc:
            outcome.append(exc)

    worker = threading.Thread(target=look, daemon=True)
    worker.start()
    worker.join(5)
    assert outcome and isinstance(outcome[0], CorruptSegment)


def test_scan_rebuilds_both_indexes_and_reports_the_valid_end(segment):
    batches, entries = _fill(segment, random.Random(5), 40)
    expected = segment.offset_index.flat[: 2 * entries].copy()
    segment.offset_index.flat[:] = 0
    result = segment.scan(BASE, 256)
    assert (result.status, result.valid_end, result.batches) == (kernels.SCAN_END, segment.file_size(), 40)
    assert result.next_offset == batches[-1][1].next_offset and result.reason == "end"
    assert result.index_entries == entries
    assert (segment.offset_index.flat[: 2 * entries] == expected).all()
    assert result.time_entries >= 1 and segment.time_index.last(result.time_entries)[0] <= result.max_timestamp


def test_scan_of_an_empty_segment(segment):
    assert segment.scan(BASE, 256).next_offset == BASE


def test_make_inactive_adds_the_final_time_entry_and_trims_the_indexes(segment, tmp_path):
    _fill(segment, random.Random(6), 30)
    r = segment.scan(BASE, 256)
    segment.make_inactive(r.index_entries, r.time_entries, r.max_timestamp, r.offset_of_max_ts)
    assert segment.offset_index.capacity == r.index_entries
    assert segment.time_index.last(segment.time_index.capacity) == (r.max_timestamp, r.offset_of_max_ts)
    assert os.path.getsize(segment.offset_index.path) == 8 * r.index_entries


def test_a_slice_outlives_the_segment_being_closed_and_deleted(segment, tmp_path):
    batches, entries = _fill(segment, random.Random(7), 5)
    pos, size = segment.find_batch(batches[2][1].base_offset, entries, segment.file_size())
    expected = os.pread(segment.file.fileno(), size, pos)
    piece = FileSlice(segment.file, pos, size)
    segment.close()
    segment.delete_files()
    assert os.listdir(tmp_path) == []
    assert piece.read() == expected
    with pytest.raises(ValueError):
        segment.file.fileno()


def test_an_empty_slice_reads_nothing(segment):
    assert FileSlice(segment.file, 0, 0).read() == b""


def test_preallocate_grows_trimmed_indexes_back(segment):
    segment.offset_index.trim(0)
    segment.time_index.trim(0)
    segment.preallocate(1024)
    assert (segment.offset_index.capacity, segment.time_index.capacity) == (128, 64)
