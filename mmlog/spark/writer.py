"""Batch writes: `df.write.format("mmlog")` produces each row as a record, acknowledged before the task ends.

Columns, as Spark's Kafka sink takes them: `value` (binary or string, required),
`key` (binary or string), `topic` (string; the `topic` option, if set, overrides
it), `partition` (int; null or absent: the producer's partitioner, murmur2 of the
key) and `headers` (array<struct<key string, value binary>>); other columns are
ignored. The schema is checked on the driver, before any task starts.

Each task opens a Producer with acks=all, sends its Arrow batches and waits until
every record is acknowledged: `write()` returns (and the task commits) only then,
and raises if any record failed, which fails the task. The rows of a batch are
cut into runs that share a topic, whether the partition is set, and whether there
are headers; runs go out in row order, so records keep their order within a
partition. A run without headers goes through `send_many` straight from the Arrow
buffers (no Python code per record); rows with headers go through `send()` one by
one (send_many takes no headers).

Exactly once (`exactlyOnce`, the default). Each task writes its rows in one
transaction of a transactional producer whose id is the prefix and the task's
partition (`<prefix>-<partition>`); the prefix is `transactionalIdPrefix`, else
for a streaming query `mmlog-spark-<query id>` (stable across restarts from its
checkpoint), else one generated per batch job. With the rows, the transaction
commits a marker: offset batch id + 1 of partition 0 of the first topic written,
for the consumer group named like the transactional id (the batch id is the
micro-batch's, 0 for a batch job). A task therefore:

1. calls init_transactions(), which fences an earlier attempt of the same task
   (a zombie, a speculative copy) and lets its commit, if one was under way, finish;
2. reads the marker: if this batch is already committed (a micro-batch that Spark
   replays after a failure, a task retried after its first attempt committed), it
   writes nothing and says so;
3. else begins, sends, commits the marker with the rows, and commits.

read_committed consumers (the default of mmlog's readers and librdkafka's) then see
each task's rows once, all or none. What a log cannot do is roll back across tasks:
when Spark aborts a job, the tasks that committed stay committed (`abort()` says so
in the driver's log), and a replay does not write them again. With
`exactlyOnce=false` tasks write without transactions: at-least-once, a retried task
writes its rows again.
"""

from __future__ import annotations

import itertools
import logging
import uuid
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, LongType, ShortType, StringType, StructType)

from mmlog.client.consumer import Consumer
from mmlog.client.futures import BulkMetadata
from mmlog.client.producer import Producer
from mmlog.spark.options import WriteOptions
from mmlog.spark.schema import HEADERS
from mmlog.spark.value_encoder import ValueEncoder

log = logging.getLogger("mmlog.spark")

# A row's kind, which runs of rows share: its topic's index * _TOPIC, + _HEADERS, + _NO_PARTITION (null).
_NO_PARTITION, _HEADERS, _TOPIC = 1, 2, 4

_BYTES = (BinaryType(), StringType())
_COLUMNS = {  # column: (accepted types, what to say)
    "value": (_BYTES, "binary or string"),
    "key": (_BYTES, "binary or string"),
    "topic": ((StringType(),), "string"),
    "partition": ((IntegerType(), ShortType(), LongType()), "int"),
    "headers": ((HEADERS.dataType,), "array<struct<key: string, value: binary>>"),
}


def check_write_schema(schema: StructType, options: WriteOptions) -> None:
    """The DataFrame's columns must be those the sink knows, with their types (ValueError naming the column)."""
    types = {f.name: f.dataType for f in schema.fields}
    if "value" not in types:
        raise ValueError("mmlog write: the DataFrame needs a value column")
    if options.value_encoding is not None:
        if not isinstance(types["value"], StructType):
            raise ValueError(f"mmlog write: valueFormat {options.value_encoding[0]} encodes a struct value column, "
                             f"not {types['value'].simpleString()}")
        types = {k: v for k, v in types.items() if k != "value"}
    if "topic" not in types and options.topic is None:
        raise ValueError("mmlog write: no topic column and no topic option")
    for name, (accepted, what) in _COLUMNS.items():
        if name in types and not any(_same_type(types[name], t) for t in accepted):
            raise ValueError(f"mmlog write: column {name} must be {what}, not {types[name].simpleString()}")


def _same_type(given, wanted) -> bool:
    """Types equal but for nullability (a headers array built in SQL may say containsNull=false)."""
    if isinstance(given, ArrayType) and isinstance(wanted, ArrayType):
        return _same_type(given.elementType, wanted.elementType)
    if isinstance(given, StructType) and isinstance(wanted, StructType):
        return [f.name for f in given.fields] == [f.name for f in wanted.fields] and all(
            _same_type(a.dataType, b.dataType) for a, b in zip(given.fields, wanted.fields))
    return given == wanted


@dataclass
class WriteReport(WriterCommitMessage):
    """What one task (or, merged, a job) wrote: per (topic, partition), [records, first offset, last offset]."""

    written: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # tasks whose batch was committed before (replays)

    def note(self, topic: str, partition: int, count: int, first: int, last: int) -> None:
        old = self.written.get((topic, partition))
        self.written[(topic, partition)] = [count, first, last] if old is None else [
            old[0] + count, min(old[1], first), max(old[2], last)]

    def add(self, topic: str, partitions: np.ndarray, offsets: np.ndarray) -> None:
        """Records sent to `topic`: their partitions and offsets (one per record)."""
        for p in np.unique(partitions).tolist():
            mine = offsets[partitions == p]
            self.note(topic, p, len(mine), int(mine.min()), int(mine.max()))

    def merge(self, other: "WriteReport") -> None:
        for (topic, p), entry in other.written.items():
            self.note(topic, p, *entry)
        self.skipped += other.skipped

    def __str__(self) -> str:
        text = ", ".join(f"{t}-{p}: {c} records at {a}..{b}" for (t, p), (c, a, b) in sorted(self.written.items()))
        if self.skipped:
            text += ("; " if text else "") + "already committed, not written again: " + ", ".join(self.skipped)
        return text or "no records"


class BatchWriter(DataSourceArrowWriter):
    """Produces the DataFrame's rows; see the module docstring."""

    def __init__(self, options: WriteOptions, schema: StructType) -> None:
        check_write_schema(schema, options)
        self.options = options
        # The job's tasks share this prefix (Spark pickles this object to them); another job, another prefix.
        self.prefix = options.transactional_id_prefix or f"mmlog-spark-{uuid.uuid4().hex[:16]}"
        self.encoder: ValueEncoder | None = None  # a task's, made in _write (it holds a registry connection)

    def write(self, batches: Iterator[pa.RecordBatch]) -> WriteReport:
        return self._write(batches, self.prefix, 0)

    def commit(self, messages: list) -> None:
        log_outcome(messages, aborted=False)

    def abort(self, messages: list) -> None:
        log_outcome(messages, aborted=True)

    def _write(self, batches: Iterator[pa.RecordBatch], prefix: str, batch_id: int) -> WriteReport:
        batches = iter(batches)
        first = next((b for b in batches if b.num_rows), None)
        if first is None:
            return WriteReport()
        batches = itertools.chain([first], batches)
        timeout = self.options.request_timeout_ms / 1000
        txn_id = None
        if self.options.exactly_once:
            task = TaskContext.get()
            txn_id = f"{prefix}-{task.partitionId() if task is not None else 0}"
        # The producer fails a batch after its delivery timeout, so flush() ends, and so does the task.
        producer = Producer(self.options.bootstrap, acks="all", linger_ms=5, client_id="mmlog-spark",
                            request_timeout_ms=self.options.request_timeout_ms,
                            delivery_timeout_ms=max(120.0, 4 * timeout) * 1000, transactional_id=txn_id,
                            **dict(self.options.security))
        report = WriteReport()
        self.encoder = None if self.options.value_encoding is None else ValueEncoder(*self.options.value_encoding)
        try:
            if txn_id is None:
                self._send_all(producer, batches, report, timeout)
                return report
            marker = (self.options.topic or first.column("topic")[0].as_py(), 0)
            producer.init_transactions(timeout)  # fences an earlier attempt; its commit, if under way, ends
            if _committed_batch(self.options.bootstrap, txn_id, marker, timeout, self.options.security) > batch_id:
                report.skipped.append(f"{txn_id} batch {batch_id}")
                return report
            producer.begin_transaction()
            self._send_all(producer, batches, report, timeout)
            producer.send_offsets_to_transaction({marker: batch_id + 1}, txn_id, timeout)
            producer.commit_transaction(timeout)
            return report
        finally:
            producer.close(timeout)
            if self.encoder is not None:
                self.encoder.close()

    def _send_all(self, producer: Producer, batches, report: WriteReport, timeout: float) -> None:
        """Send every batch, flush, and note each record's partition and offset (raises a record's error)."""
        futures = []
        for batch in batches:
            futures += self._send(producer, batch)
        producer.flush()
        for topic, future in futures:
            md = future.get(timeout)  # raises the record's error: the task fails
            if isinstance(md, BulkMetadata):
                report.add(topic, md.partitions, md.offsets)
            else:
                report.note(topic, md.partition, 1, md.offset, md.offset)

    def _send(self, producer: Producer, batch: pa.RecordBatch) -> list:
        """Send one Arrow batch, run by run (see the module docstring); return (topic, future) pairs."""
        n = batch.num_rows
        if not n:
            return []
        names = batch.schema.names
        topic_option = self.options.topic
        if topic_option is None:
            topic_col = batch.column("topic")
            if topic_col.null_count:
                raise ValueError("mmlog write: a row has a null topic, and no topic option is set")
            encoded = pc.dictionary_encode(topic_col)
            topics, kind = encoded.dictionary.to_pylist(), encoded.indices.to_numpy().astype(np.int64) * _TOPIC
        else:
            topics, kind = [topic_option], np.zeros(n, np.int64)
        if "headers" in names:
            kind += _HEADERS * (pc.fill_null(pc.list_value_length(batch.column("headers")), 0).to_numpy() > 0)
        if "partition" in names:
            kind += _NO_PARTITION * batch.column("partition").is_null().to_numpy(zero_copy_only=False)
        cuts = [0, *(np.flatnonzero(np.diff(kind)) + 1).tolist(), n]
        out = []
        for a, b in zip(cuts, cuts[1:]):
            run = batch.slice(a, b - a)
            code = int(kind[a])
            topic = topics[code // _TOPIC]
            if self.encoder is not None:
                run = run.set_column(run.schema.get_field_index("value"), "value",
                                     self.encoder.encode(topic, run.column("value")))
            partition = None if code & _NO_PARTITION or "partition" not in names else \
                run.column("partition").to_numpy().astype(np.int32)
            if code & _HEADERS:
                out += [(topic, f) for f in _send_each(producer, topic, run, partition)]
            else:
                keys = _column(run.column("key")) if "key" in names else None
                out.append((topic, producer.send_many(topic, _column(run.column("value"), nulls=True), keys=keys,
                                                      partition=partition)))
        return out


class StreamWriter(BatchWriter, DataSourceStreamArrowWriter):
    """A streaming query's sink: each micro-batch's tasks write as a batch job's do, under a prefix that
    survives restarts (the query's id) and with the micro-batch id as the committed marker."""

    def write(self, batches: Iterator[pa.RecordBatch]) -> WriteReport:
        task = TaskContext.get()
        query = task.getLocalProperty(QUERY_ID) if task is not None else None
        batch = task.getLocalProperty(BATCH_ID) if task is not None else None
        prefix = self.options.transactional_id_prefix or (f"mmlog-spark-{query}" if query else self.prefix)
        return self._write(batches, prefix, int(batch) if batch else 0)

    def commit(self, messages: list, batchId: int) -> None:  # noqa: N803 - Spark's name
        log_outcome(messages, aborted=False, batch=batchId)

    def abort(self, messages: list, batchId: int) -> None:  # noqa: N803
        log_outcome(messages, aborted=True, batch=batchId)


# What Spark's micro-batch execution tells each task (StreamExecution.QUERY_ID_KEY, MicroBatchExecution.BATCH_ID_KEY).
QUERY_ID, BATCH_ID = "sql.streaming.queryId", "streaming.sql.batchId"


def _committed_batch(bootstrap: str, group: str, marker: tuple[str, int], timeout: float, security: tuple = ()) -> int:
    """The next batch id the group's marker says is due (0: none committed yet)."""
    with Consumer(bootstrap, group_id=group, enable_auto_commit=False, **dict(security)) as consumer:
        [offset] = consumer.committed([marker], timeout).values()
    return offset or 0


def _column(arr: pa.Array, nulls: bool = False):
    """A binary or string column as send_many takes it: (data, offsets) over the Arrow buffers, no copy;
    None if every item is null (keys: unless `nulls`); a list where some are null."""
    if arr.null_count == len(arr) and not nulls:
        return None
    if arr.null_count:
        return arr.cast(pa.binary()).to_pylist()
    arr = arr.cast(pa.binary())  # string and binary share one layout: no copy
    _, offsets, data = arr.buffers()
    offsets = np.frombuffer(offsets, np.int32)[arr.offset: arr.offset + len(arr) + 1]
    return (np.frombuffer(data, np.uint8) if data is not None else np.empty(0, np.uint8)), offsets


def _send_each(producer: Producer, topic: str, run: pa.RecordBatch, partitions) -> list:
    """Rows with headers, one send() each (send_many takes no headers)."""
    n = run.num_rows
    values = run.column("value").cast(pa.binary()).to_pylist()
    keys = run.column("key").cast(pa.binary()).to_pylist() if "key" in run.schema.names else [None] * n
    parts = partitions.tolist() if partitions is not None else [None] * n
    headers = run.column("headers").to_pylist()
    return [producer.send(topic, value, key=key, partition=p,
                          headers=[(h["key"], h["value"]) for h in hs if h is not None])
            for value, key, p, hs in zip(values, keys, parts, headers)]


def log_outcome(messages: list, aborted: bool, batch: int | None = None) -> WriteReport:
    """The driver's record of a write: what the finished tasks wrote, and on abort that it stays written."""
    total = WriteReport()
    for message in messages:
        if isinstance(message, WriteReport):  # None for a task that failed
            total.merge(message)
    what = "mmlog write" if batch is None else f"mmlog stream write of batch {batch}"
    if aborted:
        log.warning("%s aborted; what finished tasks committed stays committed (a log has no rollback), and a "
                    "replay does not write it again: %s", what, total)
    else:
        log.info("%s committed: %s", what, total)
    return total
