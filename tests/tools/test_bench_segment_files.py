"""tools/bench/segment_files.py: the mapped segment files give the very batches the fetch gives."""

import pyarrow as pa
import pytest

from mmlog.client import Admin
from mmlog.spark import direct
from mmlog.spark.fetch import RangeFetcher
from mmlog.spark.schema import arrow_record_schema
from mmlog.testing import EmbeddedBroker
from tools import bench_spark
from tools.bench import segment_files


@pytest.mark.parametrize("chunk_bytes", [1 << 20, 1 << 14], ids=["chunks of batches", "batches over a chunk"])
def test_the_mapped_segment_files_decode_to_the_rows_the_fetch_decodes_to(tmp_path, chunk_bytes):
    schema = arrow_record_schema(False)
    with EmbeddedBroker(tmp_path / "broker", processors=1) as broker:
        bench_spark.fill(broker.bootstrap, "bench", 30_000, 200, 2)
        with Admin(broker.bootstrap) as admin:
            ends = admin.latest_offsets("bench")
        files = segment_files.segment_files(broker.data_dir, "bench", sorted(ends))
        for p, end in ends.items():
            fetched = RangeFetcher("bench", p, broker.bootstrap, broker.bootstrap, max_bytes=1 << 20).scanned(0, end)
            want = pa.Table.from_batches(list(direct.batches(fetched, end, "bench", p, schema)), schema)
            mapped = segment_files.mapped_chunks(files[p], end, chunk_bytes=chunk_bytes)
            got = pa.Table.from_batches(list(direct.batches(mapped, end, "bench", p, schema)), schema)
            assert got.num_rows == end == 15_000
            assert got.equals(want)


def test_the_options_name_every_partition_with_its_end_and_files(tmp_path):
    with EmbeddedBroker(tmp_path / "broker", processors=1) as broker:
        bench_spark.fill(broker.bootstrap, "bench", 100, 200, 3)
        with Admin(broker.bootstrap) as admin:
            ends = admin.latest_offsets("bench")
        reader = segment_files.SegmentFilesSource(segment_files.options(broker.data_dir, "bench", ends)).reader(None)
    parts = [p.value for p in reader.partitions()]
    assert [(p, end) for p, end, _ in parts] == sorted(ends.items())
    assert all(files and all(f.endswith(".log") for f in files) for _, _, files in parts)
