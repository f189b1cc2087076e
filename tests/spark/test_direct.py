"""The one-pass decoder into Arrow buffers (direct.batches) against the general path (bulk.decode_chunk, then
arrow.record_batch) on the same generated chunks: identical batches, and the same errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql.pandas.types import to_arrow_schema

from mmlog.client import bulk
from mmlog.errors import CorruptMessage
from mmlog.protocol import records as rec
from mmlog.spark import arrow, direct
from mmlog.spark.fetch import Scanned, head
from mmlog.spark.schema import record_schema
from tests.client.test_decode_kernel import PIDS, batch, build

SCHEMAS = [to_arrow_schema(record_schema(headers), timezone="UTC") for headers in (False, True)]


def general(chunk, fetch_offset: int, end: int, aborted, schema) -> list:
    """What the source made of a chunk before the one-pass decoder: the decoder's columns, cut at end."""
    arrays = bulk.decode_chunk(chunk, fetch_offset, topic="t", partition=4, check_crcs=True, aborted=aborted)
    keep = int(np.searchsorted(arrays.offsets, end))
    return [arrow.record_batch(head(arrays, keep), schema)] if keep else []


def one_pass(chunk, fetch_offset: int, end: int, aborted, schema) -> list:
    scanned = Scanned(chunk, fetch_offset, bulk.scan_chunk(chunk, fetch_offset), aborted)
    return list(direct.batches(iter([scanned]), end, "t", 4, schema))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=st.lists(batch, min_size=1, max_size=8), first=st.integers(0, 2**40), skip=st.integers(0, 20),
       aborted=st.lists(st.tuples(st.sampled_from(PIDS), st.integers(0, 60)), max_size=3, unique_by=lambda a: a[0]),
       cut=st.integers(0, 200), stop=st.integers(0, 90), headers=st.booleans(), readonly=st.booleans())
def test_one_pass_batches_equal_the_general_paths(specs, first, skip, aborted, cut, stop, headers, readonly):
    """Null, empty and long keys and values, headers, control batches, LogAppendTime, aborted transactions,
    records below the fetch offset and past the range's end, gzip batches (which take the general path)."""
    chunk, _ = build(specs, first)
    chunk = chunk[: max(0, len(chunk) - cut)]
    fetch_offset, end = first + skip, first + stop
    if bulk.scan_chunk(chunk, fetch_offset).status != bulk.OK:
        return  # the fetcher hands over scanned chunks only
    aborted = [(pid, first + at) for pid, at in aborted] or None
    schema = SCHEMAS[headers]
    data = bytes(chunk) if readonly else memoryview(chunk)
    expected = general(data, fetch_offset, end, aborted, schema)
    got = one_pass(data, fetch_offset, end, aborted, schema)
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        a.validate(full=True)
        assert a.schema.equals(schema) and a.equals(b)
        assert a.to_pylist() == b.to_pylist()


def test_plain_chunks_take_the_one_pass_path_and_compressed_ones_do_not():
    plain = rec.build_batch([(None, b"v%d" % i) for i in range(5)], base_offset=0, base_timestamp=7)
    scan = bulk.scan_chunk(plain, 0)
    columns = direct.decode_columns(plain, 0, 3, scan)
    assert columns.n == 3 and columns.offsets.tolist() == [0, 1, 2] and columns.timestamps.tolist() == [7000] * 3
    assert columns.key_nulls == 3 and columns.value_nulls == 0 and columns.value_data.tobytes() == b"v0v1v2"
    gzip = rec.build_batch([(None, b"v")], base_offset=0, compression=1)
    assert direct.decode_columns(gzip, 0, 1, bulk.scan_chunk(gzip, 0)) is None
    assert one_pass(gzip, 0, 1, None, SCHEMAS[0])[0].column("value").to_pylist() == [b"v"]


@pytest.mark.parametrize("damage, message", [
    (lambda b: b.__setitem__(-2, b[-2] ^ 1), "CRC-32C"),  # a byte of the last value
    (lambda b: b.__setitem__(rec.HEADER_SIZE, b[rec.HEADER_SIZE] + 2), "bad record"),  # the record's length
])
def test_a_damaged_chunk_raises_what_the_general_path_raises(damage, message):
    chunk = rec.build_batch([(None, b"abc"), (b"k", b"defg")], base_offset=0)
    damage(chunk)
    if message == "bad record":  # a record that disagrees with its length, behind a CRC that agrees
        chunk[rec.CRC_OFFSET:rec.CRC_OFFSET + 4] = rec.crc32c(bytes(chunk[rec.CRC_START:])).to_bytes(4, "big")
    for path in (general, one_pass):
        with pytest.raises(CorruptMessage, match=message):
            path(chunk, 0, 2, None, SCHEMAS[0])


def test_kept_buffers_are_reused_once_free_and_never_while_a_batch_holds_them():
    chunks = [rec.build_batch([(b"k%d" % i, bytes([i]) * 300) for i in range(50)], base_offset=50 * c)
              for c in range(12)]
    kept = direct.Kept.new(keep=3)
    held = {}
    for c, chunk in enumerate(chunks):
        scan = bulk.scan_chunk(chunk, 50 * c)
        columns = direct.decode_columns(chunk, 50 * c, 50 * c + 50, scan, None, kept)
        batch = direct.record_batch(columns, chunk, "t", 4, SCHEMAS[0])
        if c % 3 == 0:
            held[c] = batch  # alive across the later decodes: its buffers must not be taken
        del columns, batch
    assert len(kept.values._buffers) <= 3
    for c, batch in held.items():
        expected = general(chunks[c], 50 * c, 50 * c + 50, None, SCHEMAS[0])[0]
        assert batch.equals(expected)
