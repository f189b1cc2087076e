"""The bulk decoder (numba) against its reference (records.decode_records) on random fetched chunks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mmlog.client import bulk
from mmlog.client.record_arrays import RecordArrays
from mmlog.errors import CorruptMessage
from mmlog.protocol import records as rec
from tests.client.consumer_tools import control_batch, with_attributes

bulk.warm()

nullable_bytes = st.one_of(st.none(), st.binary(max_size=40), st.binary(min_size=100, max_size=300))
header = st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=20)))
record = st.builds(
    lambda key, value, headers, ts: rec.Record(value, key, headers, ts),
    st.one_of(st.none(), st.binary(max_size=20)), nullable_bytes,
    st.lists(header, max_size=3), st.one_of(st.none(), st.integers(0, 2**41)))
batch_spec = st.tuples(
    st.lists(record, min_size=1, max_size=12),
    st.sampled_from(["plain", "plain", "plain", "gzip", "control", "log_append_time"]))


def build_chunk(specs, first_offset: int) -> tuple[bytearray, list[int]]:
    """Batches back to back with dense offsets from first_offset; return the bytes and batch positions."""
    chunk = bytearray()
    positions = []
    offset = first_offset
    for records, kind in specs:
        positions.append(len(chunk))
        if kind == "control":
            batch = control_batch(offset)
            offset += 1
        else:
            batch = rec.build_batch(records, base_offset=offset, compression=1 if kind == "gzip" else 0)
            if kind == "log_append_time":
                batch = with_attributes(batch, rec.TIMESTAMP_TYPE_BIT)
            offset += len(records)
        chunk += batch
    return chunk, positions


def assert_same(arrays: RecordArrays, expected: list[rec.Record]) -> None:
    assert len(arrays) == len(expected)
    assert arrays.offsets.tolist() == [r.offset for r in expected]
    assert arrays.timestamps.tolist() == [r.timestamp for r in expected]
    assert arrays.values() == [r.value for r in expected]
    assert arrays.keys() == [r.key for r in expected]
    assert [list(arrays.headers(i)) for i in range(len(arrays))] == [r.headers for r in expected]
    assert [list(h) for h in arrays.all_headers()] == [r.headers for r in expected]
    assert headers_from_columns(arrays) == [r.headers for r in expected]
    for i, r in enumerate(expected):
        view = arrays.value_view(i)
        assert (None if view is None else bytes(view)) == r.value
    records = arrays.records()
    assert [(c.offset, c.timestamp, c.key, c.value, [tuple(h) for h in c.headers]) for c in records] == [
        (r.offset, r.timestamp, r.key, r.value, r.headers) for r in expected]
    assert list(arrays.iter_records()) == records


def headers_from_columns(arrays: RecordArrays) -> list[list[tuple]]:
    """Every record's headers rebuilt from `header_columns()`, for comparison with `decode_headers`."""
    bounds, key_starts, key_lengths, value_starts, value_lengths = arrays.header_columns()
    data = bytes(arrays.buffer)

    def field(start, n):
        return None if n < 0 else data[start:start + n]

    headers = [(field(ks, kl).decode(), field(vs, vl)) for ks, kl, vs, vl in
               zip(key_starts.tolist(), key_lengths.tolist(), value_starts.tolist(), value_lengths.tolist())]
    return [headers[a:b] for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist())]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=st.lists(batch_spec, min_size=1, max_size=6), first=st.integers(0, 2**40),
       skip=st.integers(0, 30), cut=st.integers(0, 400), data=st.data())
def test_kernel_matches_reference_on_random_chunks(specs, first, skip, cut, data):
    """Whole and partial trailing batches, records below the fetch offset, gzip, control and LogAppendTime
    batches: the kernel decodes exactly what decode_records does."""
    chunk, _ = build_chunk(specs, first)
    chunk = chunk[: max(0, len(chunk) - cut)]  # the broker may cut the last batch anywhere
    fetch_offset = first + skip
    expected, ref_scan = bulk.decode_chunk_py(chunk, fetch_offset)
    scan = bulk.scan_chunk(chunk, fetch_offset)
    assert scan == ref_scan
    readonly = data.draw(st.booleans())
    arrays = bulk.decode_chunk(bytes(chunk) if readonly else memoryview(chunk), fetch_offset, topic="t",
                               partition=3, check_crcs=data.draw(st.booleans()))
    assert_same(arrays, expected)
    assert arrays.next_offset == scan.next_offset >= fetch_offset
    assert (arrays.offsets >= fetch_offset).all()


def test_columns_and_dtypes():
    batch = rec.build_batch([(b"key", b"value", [("h1", b"x"), ("h2", None)]), (None, None), (b"", b"")],
                            base_offset=40, base_timestamp=1_000)
    arrays = bulk.decode_chunk(batch, 40, topic="t", partition=1)
    assert arrays.offsets.dtype == np.int64 and arrays.timestamps.dtype == np.int64
    assert arrays.key_lengths.dtype == np.int32 and arrays.value_lengths.dtype == np.int32
    assert arrays.value_starts.dtype == np.int64 and arrays.header_counts.dtype == np.int32
    assert arrays.offsets.tolist() == [40, 41, 42]
    assert arrays.key_lengths.tolist() == [3, -1, 0]
    assert arrays.value_lengths.tolist() == [5, -1, 0]
    assert arrays.header_counts.tolist() == [2, 0, 0]
    assert arrays.headers(0) == (("h1", b"x"), ("h2", None))
    assert arrays.value_view(1) is None and arrays.key_view(1) is None
    assert bytes(arrays.value_view(0)) == b"value" and arrays.value(0) == b"value" and arrays.key(0) == b"key"
    assert arrays.nbytes == 8
    assert arrays.next_offset == 43
    first = arrays.records()[0]
    assert first.topic_partition == ("t", 1) and first.headers == (("h1", b"x"), ("h2", None))
    assert "3 records" in repr(arrays)


def test_records_below_the_fetch_offset_are_dropped():
    batch = rec.build_batch(values_of(10), base_offset=100)
    arrays = bulk.decode_chunk(batch, 107)
    assert arrays.offsets.tolist() == [107, 108, 109]
    assert arrays.values() == [b"7", b"8", b"9"]
    assert bulk.decode_chunk(batch, 110).offsets.tolist() == []  # past the batch: nothing, next offset kept
    assert bulk.decode_chunk(batch, 110).next_offset == 110


def test_a_partial_trailing_batch_is_left_for_the_next_fetch():
    one, two = rec.build_batch(values_of(3), base_offset=0), rec.build_batch(values_of(3), base_offset=3)
    for cut in range(1, len(two)):
        arrays = bulk.decode_chunk(one + two[:cut], 0)
        assert arrays.offsets.tolist() == [0, 1, 2] and arrays.next_offset == 3


def test_a_chunk_without_a_whole_batch_says_so():
    batch = rec.build_batch(values_of(3), base_offset=5)
    scan = bulk.scan_chunk(batch[:30], 5)
    assert scan.status == bulk.TRUNCATED and scan.next_offset == 5
    arrays = bulk.decode_chunk(batch[:30], 5)
    assert len(arrays) == 0 and arrays.next_offset == 5
    assert bulk.scan_chunk(b"", 5) == bulk.Scan(bulk.OK, 0, 5, 0, 0)


def test_control_batches_are_skipped_but_move_the_next_offset():
    chunk = rec.build_batch(values_of(2), base_offset=0) + control_batch(2) + rec.build_batch(values_of(1),
                                                                                              base_offset=3)
    arrays = bulk.decode_chunk(chunk, 0)
    assert arrays.offsets.tolist() == [0, 1, 3]
    assert bulk.decode_chunk(chunk[: len(chunk) - 5], 0).next_offset == 3  # control batch counted


def test_log_append_time_uses_the_batch_max_timestamp():
    batch = rec.build_batch([rec.Record(b"a", timestamp=10), rec.Record(b"b", timestamp=20)])
    arrays = bulk.decode_chunk(with_attributes(batch, rec.TIMESTAMP_TYPE_BIT), 0)
    assert arrays.timestamps.tolist() == [20, 20]
    assert arrays.timestamp_types.tolist() == [1, 1]
    assert [r.timestamp_type for r in arrays.records()] == [1, 1]


def test_gzip_batches_are_decompressed():
    chunk = rec.build_batch(values_of(3), base_offset=0, compression=1) + rec.build_batch(values_of(2),
                                                                                         base_offset=3)
    arrays = bulk.decode_chunk(chunk, 1)
    assert arrays.values() == [b"1", b"2", b"0", b"1"] and arrays.offsets.tolist() == [1, 2, 3, 4]


@pytest.mark.parametrize("patch, message", [
    ((16, 1), "bad magic"),  # magic 1
    ((8, 0), "bad batch length"),  # batchLength 0..255
])
def test_malformed_batches_raise_corrupt_message(patch, message):
    batch = rec.build_batch(values_of(3))
    at, byte = patch
    batch[at] = byte
    if at == 8:
        batch[9:12] = b"\x00\x00\x10"
    with pytest.raises(CorruptMessage, match=message):
        bulk.decode_chunk(batch, 0)


def test_a_record_that_disagrees_with_its_length_is_corrupt():
    batch = rec.build_batch([(None, b"abc")])
    batch[rec.HEADER_SIZE] += 2  # the record's length varint (zigzag: +1)
    with pytest.raises(CorruptMessage, match="bad record"):
        bulk.decode_chunk(batch, 0)


def test_check_crcs_catches_a_flipped_bit():
    batch = rec.build_batch(values_of(3))
    batch[-2] ^= 1  # a byte of the last value
    bulk.decode_chunk(batch, 0)  # off by default: the broker checked it on produce
    with pytest.raises(CorruptMessage, match="CRC-32C"):
        bulk.decode_chunk(batch, 0, check_crcs=True, topic="t", partition=0)


def test_empty_arrays():
    arrays = RecordArrays.empty("t", 0, 7)
    assert len(arrays) == 0 and arrays.records() == [] and arrays.values() == [] and arrays.next_offset == 7
    assert list(arrays.iter_records()) == []


def test_clearing_the_guard_stops_a_record_iterator():
    arrays = bulk.decode_chunk(rec.build_batch(values_of(5)), 0)
    it, guard = arrays._record_iterator()
    assert next(it).offset == 0
    guard.clear()
    assert list(it) == []


def values_of(n: int) -> list[tuple]:
    return [(None, b"%d" % i) for i in range(n)]


def test_check_crcs_catches_a_flipped_bit_in_any_batch_of_a_chunk():
    one = rec.build_batch(values_of(2))
    chunk = one + rec.build_batch(values_of(3), base_offset=2)
    bulk.decode_chunk(chunk, 0, check_crcs=True)
    chunk[len(one) + rec.HEADER_SIZE + 4] ^= 1  # inside the second batch
    with pytest.raises(CorruptMessage, match=r"batch at byte %d \(offset 2\)" % len(one)):
        bulk.decode_chunk(chunk, 0, check_crcs=True, topic="t", partition=0)


def test_check_crcs_of_a_single_batch_with_a_torn_one_behind_it():
    """One whole batch then part of the next (a fetch cut at its byte limit): the whole one is checked."""
    whole = rec.build_batch(values_of(2))
    chunk = whole + rec.build_batch(values_of(3), base_offset=2)[:30]
    assert len(bulk.decode_chunk(chunk, 0, check_crcs=True)) == 2
    chunk[rec.CRC_OFFSET] ^= 1  # the stored CRC itself
    with pytest.raises(CorruptMessage, match="CRC-32C"):
        bulk.decode_chunk(chunk, 0, check_crcs=True)
