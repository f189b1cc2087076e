"""Batch reads: the driver plans one Spark partition per offset range, each executor fetches its own.

`BatchReader.partitions()` runs on the driver: it finds the subscribed topics,
resolves startingOffsets/endingOffsets against each partition's earliest and
latest offsets, cuts long ranges (`split_ranges`) and puts each range's leader
address in its `RangePartition`. `read()` runs in an executor's Python worker:
`read_range` fetches the range from that leader (`fetch.RangeFetcher`) and yields
one Arrow batch per fetched chunk (`direct.batches`: decoded straight into Arrow's
buffers, or `arrow.record_batch` on the decoder's columns). The streaming reader
shares `read()` through `RangeReader`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from mmlog.client.records import TopicPartition
from mmlog.spark.direct import batches
from mmlog.spark.fetch import DataLoss, RangeFetcher
from mmlog.spark.lookup import BrokerLookup
from mmlog.spark.offsets import OffsetRange, pick, spec_partitions, split_ranges
from mmlog.spark.options import ReadOptions
from mmlog.spark.schema import arrow_record_schema
from mmlog.spark.values import ValueDecoder, spark_type


@dataclass
class RangePartition(InputPartition):
    """One Spark task's input: offsets [start, end) of a partition and its leader's address (host:port)."""

    topic: str
    partition: int
    start: int
    end: int
    leader: str


def read_range(part: RangePartition, options: ReadOptions) -> Iterator[pa.RecordBatch]:
    """The range's records as Arrow batches of the source's schema, one per fetched chunk."""
    value_type = None if options.value_format is None else spark_type(options.value_format)
    schema = arrow_record_schema(options.include_headers, value_type)
    values = None if value_type is None else ValueDecoder(options.value_format, schema.field("value").type)
    fetcher = RangeFetcher(part.topic, part.partition, part.leader, options.bootstrap,
                           max_bytes=options.fetch_max_bytes, fail_on_data_loss=options.fail_on_data_loss,
                           timeout=options.poll_timeout_ms / 1000, read_committed=options.read_committed,
                           security=options.security)
    yield from batches(fetcher.scanned(part.start, part.end), part.end, part.topic, part.partition, schema, values)


def range_partitions(lookup: BrokerLookup, ranges: list[OffsetRange]) -> list[RangePartition]:
    """Each range with the address of its partition's leader."""
    leaders = lookup.leaders({TopicPartition(r.topic, r.partition) for r in ranges})
    return [RangePartition(r.topic, r.partition, r.start, r.end, leaders[TopicPartition(r.topic, r.partition)])
            for r in ranges]


class RangeReader:
    """What the batch and streaming readers share: their options, and `read()` (executors, stateless)."""

    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def read(self, partition: RangePartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, RangePartition):  # Spark's stand-in when there is no range to read
            return iter(())
        return read_range(partition, self.options)


class BatchReader(RangeReader, DataSourceReader):
    """`spark.read.format("mmlog")`: the offsets between startingOffsets and endingOffsets, planned once."""

    def partitions(self) -> list[RangePartition]:
        o = self.options
        with BrokerLookup(o.bootstrap, read_committed=o.read_committed, security=o.security) as lookup:
            topics = lookup.topics(o.topics, o.pattern, missing_ok=False)
            bounds = lookup.bounds(topics)
            for tp in sorted(spec_partitions(o.starting) | spec_partitions(o.ending)):
                if tp not in bounds:
                    raise ValueError(f"mmlog: the offsets options name {tp.topic}-{tp.partition}, "
                                     f"which the subscription does not have")
            ranges = [self._range(tp, earliest, latest) for tp, (earliest, latest) in sorted(bounds.items())]
            return range_partitions(lookup, split_ranges(ranges, o.max_records_per_partition, o.min_partitions))

    def _range(self, tp: TopicPartition, earliest: int, latest: int) -> OffsetRange:
        o = self.options
        start = pick(o.starting, "earliest", tp, earliest, latest)
        end = pick(o.ending, "latest", tp, earliest, latest)
        where = f"{tp.topic}-{tp.partition}"
        if end > latest:
            raise ValueError(f"mmlog: endingOffsets {end} of {where} is past its latest offset {latest}")
        if start > end:
            raise ValueError(f"mmlog: startingOffsets {start} of {where} is after its end {end}")
        if start < earliest:
            if o.fail_on_data_loss:
                raise DataLoss(f"mmlog: startingOffsets {start} of {where} is below its earliest offset "
                               f"{earliest}: records are gone (failOnDataLoss=false starts at {earliest})")
            start = min(earliest, end)
        return OffsetRange(tp.topic, tp.partition, start, end)
