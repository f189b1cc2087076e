"""A partition read straight from the broker's segment files, for `tools/bench_spark.py`: the ceiling of any fetch.

Spark's mmlog source fetches each range from the partition's leader over TCP. What it would cost with no
fetch at all, as if the executor could read the log on the broker's own disk (HDFS's short-circuit reads),
is measured here: each segment file of the partition mapped (`mmap`), cut into chunks of whole batches, and
handed to the same CRC check and one-pass decode (`direct.batches`) as fetched chunks. Benchmarks only:
it bypasses the broker (no ACL, no high watermark, no isolation level), so it reads a topic nobody is
writing to, whose data directory this process can read.
"""

from __future__ import annotations

import json
import mmap
import os
from pathlib import Path
from typing import Iterator

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from mmlog.spark.schema import arrow_record_schema, record_schema

CHUNK_BYTES = 4 << 20  # what one fetch of the mmlog source holds by default


def segment_files(data_dir: str | os.PathLike, topic: str, partitions) -> dict[int, list[str]]:
    """Each partition's segment files (`*.log`) under a broker's data directory, in offset order."""
    out = {}
    for p in partitions:
        [folder] = [d for d in Path(data_dir).rglob(f"{topic}-{p}") if d.is_dir()]
        out[p] = [str(f) for f in sorted(folder.glob("*.log"))]  # names are zero-padded base offsets
    return out


def mapped_chunks(files: list[str], end: int, chunk_bytes: int = CHUNK_BYTES) -> Iterator:
    """The records below offset `end` of a partition's segment files, as `fetch.Scanned` chunks of whole
    batches (a chunk grows to hold a bigger batch), each a view of the file's mapping (no copy). Stops at
    a file's end, or where its bytes stop being batches (a segment's unwritten tail)."""
    from mmlog.client import bulk
    from mmlog.spark.fetch import Scanned

    offset = 0
    for name in files:
        with open(name, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if not size:
                continue
            view = memoryview(mmap.mmap(f.fileno(), size, prot=mmap.PROT_READ))
        position, window = 0, chunk_bytes
        while position < size and offset < end:
            scan = bulk.scan_chunk(view[position:position + window], offset)
            if scan.status == bulk.TRUNCATED and position + window < size:
                window *= 2  # a batch bigger than a chunk: take more, as the fetcher asks for more
                continue
            if scan.end == 0:
                break
            yield Scanned(view[position:position + scan.end], offset, scan, None)
            position, window = position + scan.end, chunk_bytes
            offset = scan.next_offset


class SegmentFilesReader(DataSourceReader):
    """One task per partition: [partition, end offset, its segment files]."""

    def __init__(self, topic: str, partitions: list) -> None:
        self.topic, self.parts = topic, partitions

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(tuple(p)) for p in self.parts]

    def read(self, partition: InputPartition):
        from mmlog.spark import direct

        p, end, files = partition.value
        yield from direct.batches(mapped_chunks(files, end), end, self.topic, p, arrow_record_schema(False))


class SegmentFilesSource(DataSource):
    """`spark.read.format("mmlog-segment-files")`, options `topic` and `partitions` (JSON: what
    `options()` makes)."""

    @classmethod
    def name(cls) -> str:
        return "mmlog-segment-files"

    def schema(self):
        return record_schema(False)

    def reader(self, schema) -> SegmentFilesReader:
        return SegmentFilesReader(self.options["topic"], json.loads(self.options["partitions"]))


def options(data_dir: str | os.PathLike, topic: str, ends: dict[int, int]) -> dict[str, str]:
    """The source's options for reading `topic` up to `ends` ({partition: end offset}) from a data directory."""
    files = segment_files(data_dir, topic, sorted(ends))
    return {"topic": topic, "partitions": json.dumps([[p, ends[p], files[p]] for p in sorted(ends)])}
