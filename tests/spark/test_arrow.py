"""Arrow batches from decoded chunks: the gather kernel against its numpy reference, and whole batches
against the record-at-a-time decoder."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql.pandas.types import to_arrow_schema

from mmlog.client import bulk
from mmlog.protocol import records as rec
from mmlog.spark import arrow
from mmlog.spark.schema import record_schema

SCHEMA = to_arrow_schema(record_schema(True), timezone="UTC")

item = st.one_of(st.none(), st.binary(max_size=30))
record = st.tuples(item, item, st.lists(st.tuples(st.text(max_size=5), item), max_size=3))


@settings(max_examples=200, deadline=None)
@given(data=st.binary(min_size=1, max_size=300), picks=st.lists(st.tuples(st.integers(0, 299), st.integers(-1, 40)),
                                                                max_size=30))
def test_gather_matches_its_reference(data, picks):
    buf = np.frombuffer(data, np.uint8)
    starts = np.array([min(s, len(data)) for s, _ in picks], np.int64)
    lengths = np.array([max(-1, min(n, len(data) - s)) for s, (_, n) in zip(starts.tolist(), picks)], np.int32)
    offsets, out = arrow.gather(buf, starts, lengths)
    ref_offsets, ref_out = arrow.gather_py(buf, starts, lengths)
    assert offsets.tolist() == ref_offsets.tolist() and out.tobytes() == ref_out.tobytes()


@settings(max_examples=100, deadline=None)
@given(records=st.lists(record, min_size=1, max_size=40), first=st.integers(0, 2**40), data=st.data())
def test_a_batch_holds_exactly_what_the_record_decoder_reads(records, first, data):
    chunk = rec.build_batch(records, base_offset=first, base_timestamp=1_600_000_000_000)
    skip = data.draw(st.integers(0, len(records) - 1))  # records below the fetch offset are left out
    expected, _ = bulk.decode_chunk_py(chunk, first + skip)
    arrays = bulk.decode_chunk(bytes(chunk), first + skip, topic="t", partition=4)
    batch = arrow.record_batch(arrays, SCHEMA)
    batch.validate(full=True)
    assert batch.schema.equals(SCHEMA)
    rows = batch.to_pylist()
    assert [(r["offset"], r["key"], r["value"], [(h["key"], h["value"]) for h in r["headers"] or ()])
            for r in rows] == [(r.offset, r.key, r.value, r.headers) for r in expected]
    assert [r["headers"] is None for r in rows] == [not r.headers for r in expected]  # null, as Spark has it
    assert all(r["topic"] == "t" and r["partition"] == 4 and r["timestampType"] == 0 for r in rows)
    assert batch.column("timestamp").cast("int64").to_pylist() == [r.timestamp * 1000 for r in expected]
