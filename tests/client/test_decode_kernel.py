"""The decode kernel (bulk._decode, its columns made by bulk.columns) against the Python reference
(bulk.decode_chunk_py, on records.decode_records) on generated chunks: null and empty keys and values,
headers, gzip batches, control batches, LogAppendTime, and read_committed's aborted transactions."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mmlog.client import bulk
from mmlog.protocol import records as rec
from tests.client.consumer_tools import with_attributes
from tests.client.test_bulk import assert_same

bulk.warm()

PIDS = (11, 12, 13)
value = st.one_of(st.none(), st.just(b""), st.binary(max_size=30), st.binary(min_size=120, max_size=260))
key = st.one_of(st.none(), st.just(b""), st.binary(max_size=12))
headers = st.lists(st.tuples(st.text(max_size=6), st.one_of(st.none(), st.just(b""), st.binary(max_size=10))),
                   max_size=3)
record = st.builds(lambda k, v, h, ts: rec.Record(v, k, h, ts), key, value, headers,
                   st.one_of(st.none(), st.integers(0, 2**41)))
# (records, kind, producer id): a plain batch, gzip, LogAppendTime, a transactional batch of a producer,
# or that producer's abort marker (a control batch)
batch = st.tuples(st.lists(record, min_size=1, max_size=10),
                  st.sampled_from(["plain", "gzip", "log_append_time", "txn", "txn", "txn_gzip", "marker"]),
                  st.sampled_from(PIDS))


def build(specs, first: int) -> tuple[bytearray, set[int]]:
    """The batches back to back from offset `first`; and the offsets of the LogAppendTime batches' records."""
    chunk = bytearray()
    log_append: set[int] = set()
    offset = first
    for records, kind, pid in specs:
        if kind == "marker":
            one = rec.build_batch([(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00")], base_offset=offset,
                                  producer_id=pid, producer_epoch=0)
            chunk += with_attributes(one, rec.CONTROL_BIT | rec.TRANSACTIONAL_BIT)
            offset += 1
            continue
        txn = kind.startswith("txn")
        one = rec.build_batch(records, base_offset=offset, compression=1 if kind.endswith("gzip") else 0,
                              producer_id=pid if txn else -1, producer_epoch=0 if txn else -1,
                              base_sequence=0 if txn else -1, transactional=txn)
        if kind == "log_append_time":
            one = with_attributes(one, rec.TIMESTAMP_TYPE_BIT)
            log_append.update(range(offset, offset + len(records)))
        chunk += one
        offset += len(records)
    return chunk, log_append


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=st.lists(batch, min_size=1, max_size=8), first=st.integers(0, 2**40), skip=st.integers(0, 20),
       aborted=st.lists(st.tuples(st.sampled_from(PIDS), st.integers(0, 60)), max_size=3, unique_by=lambda a: a[0]),
       cut=st.integers(0, 200), crcs=st.booleans(), readonly=st.booleans())
def test_kernel_matches_the_reference_with_aborted_transactions(specs, first, skip, aborted, cut, crcs, readonly):
    chunk, log_append = build(specs, first)
    chunk = chunk[: max(0, len(chunk) - cut)]
    fetch_offset = first + skip
    aborted = [(pid, first + at) for pid, at in aborted]
    expected, scan = bulk.decode_chunk_py(chunk, fetch_offset, aborted)
    arrays = bulk.decode_chunk(bytes(chunk) if readonly else memoryview(chunk), fetch_offset, check_crcs=crcs,
                               aborted=aborted)
    assert_same(arrays, expected)
    assert arrays.timestamp_types.tolist() == [int(r.offset in log_append) for r in expected]
    assert arrays.next_offset == scan.next_offset
    assert arrays.value_lengths.tolist() == [-1 if r.value is None else len(r.value) for r in expected]
    assert arrays.key_lengths.tolist() == [-1 if r.key is None else len(r.key) for r in expected]
    assert arrays.header_counts.tolist() == [len(r.headers) for r in expected]


def test_columns_are_typed_aligned_views_of_one_block():
    cols = bulk.columns(1000)
    assert [c.dtype for c in cols] == [np.dtype(t) for t in (np.int64, np.int64, np.int8, np.int64, np.int32,
                                                             np.int64, np.int32, np.int64, np.int32)]
    assert all(len(c) == 1000 and c.flags.c_contiguous and c.ctypes.data % c.itemsize == 0 for c in cols)
    base = cols[0].base
    assert all(c.base is base for c in cols)
    ends = sorted((c.ctypes.data, c.ctypes.data + c.nbytes) for c in cols)
    assert all(a[1] <= b[0] for a, b in zip(ends, ends[1:]))  # no two columns overlap
    assert [len(c) for c in bulk.columns(0)] == [0] * 9


def test_a_chunk_decoded_twice_gives_equal_columns_that_do_not_share_memory():
    chunk = rec.build_batch([(b"k", b"v" * 50, [("h", b"x")]), (None, b"")], base_offset=5)
    one, two = bulk.decode_chunk(chunk, 0), bulk.decode_chunk(chunk, 0)
    assert one.offsets.tolist() == two.offsets.tolist() == [5, 6]
    assert not np.shares_memory(one.offsets, two.offsets)
