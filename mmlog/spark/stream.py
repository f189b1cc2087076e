"""Streaming reads: micro-batches over per-partition offsets, which Spark keeps in its checkpoint.

An offset is Spark's Kafka JSON, `{"topic": {"0": 42, "1": 17}}`: for each
partition, the first offset not yet read. Spark writes a micro-batch's end offset
to its checkpoint's offset log *before* running it and marks the batch done after
the sink commits; a restarted query replans the unfinished batch with the same
`partitions(start, end)` and goes on from the last end. Since `partitions` depends
only on those two offsets (and the log), a restart neither loses nor repeats input
with a sink that commits per batch (the file sink does).

`latestOffset(start, limit)` looks up every subscribed partition's latest offset
(topics a pattern newly matches and new partitions start from their earliest), then
honours the limit: `ReadMaxRows` (from maxOffsetsPerTrigger) shares the budget
among partitions by backlog (`offsets.rate_limit`). With Trigger.AvailableNow,
`prepareForTriggerAvailableNow` fixes the latest offsets of that moment as the
target, and no batch reads past it. This reader object lives in one long-lived
driver-side Python process; `read()` runs in executors and shares nothing with it.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from mmlog.client.records import TopicPartition
from mmlog.spark.lookup import BrokerLookup
from mmlog.spark.offsets import OffsetRange, Offsets, from_json, pick, rate_limit, split_ranges, to_json
from mmlog.spark.reader import RangePartition, RangeReader, range_partitions


class StreamReader(RangeReader, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """`spark.readStream.format("mmlog")`."""

    _lookup: BrokerLookup | None = None
    _target: Offsets | None = None  # Trigger.AvailableNow: read no further than these

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_lookup"}  # a live client does not pickle

    @property
    def lookup(self) -> BrokerLookup:
        if self._lookup is None:
            self._lookup = BrokerLookup(self.options.bootstrap, read_committed=self.options.read_committed,
                                        security=self.options.security)
        return self._lookup

    def _bounds(self) -> dict[TopicPartition, tuple[int, int]]:
        """(earliest, latest) of every partition the subscription has now."""
        o = self.options
        return self.lookup.bounds(self.lookup.topics(o.topics, o.pattern, missing_ok=True))

    def initialOffset(self) -> dict:
        spec = self.options.starting
        return to_json({tp: pick(spec, "latest", tp, earliest, latest)
                        for tp, (earliest, latest) in self._bounds().items()})

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.options.max_offsets_per_trigger
        return ReadAllAvailable() if n is None else ReadMaxRows(n)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {tp: latest for tp, (_, latest) in self._bounds().items()}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_json(start)
        bounds = self._bounds()
        for tp, (earliest, _) in bounds.items():
            begin.setdefault(tp, earliest)  # a new partition (or newly matched topic) starts at its earliest
        latest = {tp: max(begin[tp], end) for tp, (_, end) in bounds.items()}
        if self._target is not None:  # nothing that arrived after the AvailableNow trigger started
            latest = {tp: max(begin[tp], min(end, self._target.get(tp, begin[tp]))) for tp, end in latest.items()}
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(begin, latest, limit.max_rows)
        return to_json({**begin, **latest})

    def partitions(self, start: dict, end: dict) -> list[RangePartition]:
        begin, until = from_json(start), from_json(end)
        new = [tp for tp in until if tp not in begin]
        if new:
            bounds = self._bounds()
            begin.update({tp: bounds[tp][0] if tp in bounds else until[tp] for tp in new})
        ranges = [OffsetRange(tp.topic, tp.partition, begin[tp], until[tp]) for tp in sorted(until)]
        ranges = split_ranges(ranges, self.options.max_records_per_partition)
        return range_partitions(self.lookup, ranges)

    def commit(self, end: dict) -> None:
        """Nothing to do: the offsets live in Spark's checkpoint, not in the broker."""

    def stop(self) -> None:
        if self._lookup is not None:
            self._lookup.close()
            self._lookup = None
