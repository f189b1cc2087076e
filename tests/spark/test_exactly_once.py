"""The exactly-once sink: a streaming query that dies in the middle of a micro-batch (one task fails after
the others committed) and is restarted from its checkpoint writes every input to the output topic once."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka import TopicPartition
from pyspark.sql.functions import col, udf
from pyspark.sql.types import BinaryType

from mmlog.client import Admin

INPUTS, PARTITIONS = 300, 3


def failing_once(flag: Path):
    """A transform that fails on one record until `flag` exists (the query dies mid-batch, once)."""

    def transform(value: bytes) -> bytes:
        if value == b"in-200" and not flag.exists():
            time.sleep(2)  # the batch's other tasks commit first
            raise RuntimeError("injected failure in the middle of a micro-batch")
        return value + b"!"

    return udf(transform, BinaryType())


def query(spark, bootstrap, source, sink, checkpoint, transform, *, available_now: bool):
    stream = (spark.readStream.format("mmlog").option("bootstrap", bootstrap).option("subscribe", source)
              .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "90").load()
              .select(transform(col("value")).alias("value"), col("partition"))
              .writeStream.format("mmlog").option("bootstrap", bootstrap).option("topic", sink)
              .option("checkpointLocation", str(checkpoint)))
    return stream.trigger(availableNow=True).start() if available_now else \
        stream.trigger(processingTime="100 milliseconds").start()


def read_committed(bootstrap: str, topic: str, expect: int, wait: float = 30) -> list[bytes]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "sink-check",
                                         "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(PARTITIONS)])
        values, deadline = [], time.monotonic() + wait
        while time.monotonic() < deadline:
            values += [m.value() for m in consumer.consume(500, timeout=0.1) if not m.error()]
            if len(values) >= expect:
                deadline = min(deadline, time.monotonic() + 1.0)
        return values
    finally:
        consumer.close()


def test_a_query_killed_mid_batch_and_restarted_writes_every_input_once(spark, broker, produce, tmp_path):
    source, sink = "eos-in", "eos-out"
    with Admin(broker.bootstrap) as admin:
        admin.create_topic(source, PARTITIONS)
        admin.create_topic(sink, PARTITIONS)
    produce(source, [(i % PARTITIONS, None, b"in-%d" % i, []) for i in range(INPUTS)])
    flag, checkpoint = tmp_path / "recovered", tmp_path / "checkpoint"
    transform = failing_once(flag)

    first = query(spark, broker.bootstrap, source, sink, checkpoint, transform, available_now=False)
    with pytest.raises(Exception, match="injected failure"):
        first.awaitTermination(120)

    # Part of the failed micro-batch (90 records, 30 per partition) was committed before the failure.
    assert len(read_committed(broker.bootstrap, sink, INPUTS, wait=3)) % 90 == 60

    flag.touch()
    second = query(spark, broker.bootstrap, source, sink, checkpoint, transform, available_now=True)
    assert second.awaitTermination(120)

    out = read_committed(broker.bootstrap, sink, INPUTS)
    copies = Counter(out)
    assert not [v for v, n in copies.items() if n > 1], "a record was written twice"
    assert set(copies) == {b"in-%d!" % i for i in range(INPUTS)}
